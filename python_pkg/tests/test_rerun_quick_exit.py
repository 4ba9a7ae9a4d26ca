"""A what-if's re-run ends as soon as its files are written (``rerun/quick_exit.py``), unless
it started processes of its own, which the usual exit shuts down."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil

ENDS_AT_ONCE = """
import atexit, sys
from gpusight.rerun.quick_exit import end, has_children
atexit.register(lambda: print("teardown ran"))
print("report written", has_children())
sys.stdout.write("unflushed tail")
end(3)
"""

HAS_A_WORKER = """
import multiprocessing as mp, time, sys
from gpusight.rerun.quick_exit import end, has_children

def sleep(up):
    up.set()
    time.sleep(60)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    up = ctx.Event()
    p = ctx.Process(target=sleep, args=(up,), daemon=True)
    p.start()
    assert up.wait(30)  # the worker runs: an os._exit now would leave it behind
    print(p.pid, has_children(), flush=True)
    end(5)
"""


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "rerun.py"  # a file: a spawned worker imports its functions from it
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def test_a_run_without_children_ends_at_once_with_its_code_and_its_output(tmp_path: Path) -> None:
    done = _run(ENDS_AT_ONCE, tmp_path)
    assert done.returncode == 3, done.stderr
    # What it printed reaches the log, the last unflushed write too; the teardown is skipped.
    assert done.stdout == "report written False\nunflushed tail"


def test_a_run_with_a_worker_ends_as_usual_and_the_worker_goes_with_it(tmp_path: Path) -> None:
    done = _run(HAS_A_WORKER, tmp_path)
    assert done.returncode == 5, done.stderr
    pid, seen = done.stdout.split()
    assert seen == "True"
    # The usual exit ends a daemon child: nothing is left behind, as os._exit would have left it.
    deadline = time.monotonic() + 10.0
    while psutil.pid_exists(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = psutil.pid_exists(int(pid)) and psutil.Process(int(pid)).status() != "zombie"
    assert not alive
