"""A what-if's re-runs after the first fork from one process that imported the script's
libraries once (``rerun/warm_start.py``, ``rerun/warm_server.py``): the imports are not paid
again, and the run is otherwise the fresh process it was (its module search order, overlay,
time limit); where forking would change that, the runs start fresh and the report says why."""

from __future__ import annotations

import contextlib
import mmap
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from gpusight.rerun import overlay, sandbox
from gpusight.rerun.driver import RunResult, ScriptRunner
from gpusight.rerun.warm_server import own_pages
from gpusight.rerun.warm_start import OFF_ENV, WarmStart, own_names, script_imports

LOOP = """import torch
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    loss = model(torch.randn(16, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

TRAIN = """import sys
PRE = {{name: name in sys.modules for name in ("xml.dom.minidom", "shadowed")}}
import xml.dom.minidom
{extra}
import shadowed
print("preloaded:", PRE, "shadowed from:", shadowed.WHO, flush=True)
""" + LOOP.replace("{", "{{").replace("}", "}}")


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A script folder with its own ``shadowed.py``, and an installed ``shadowed`` and
    ``threaded`` on the run's ``PYTHONPATH`` outside it."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "shadowed.py").write_text("WHO = 'installed'\n")
    (lib / "threaded.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(600,), daemon=True, name='poller').start()\n"
    )
    root = tmp_path / "project"
    root.mkdir()
    (root / "shadowed.py").write_text("WHO = 'the script folder'\n")
    paths = [str(lib), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return root, env


@contextlib.contextmanager
def _warm(
    root: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, source: str
) -> Iterator[ScriptRunner]:
    """A what-if's runner over a scratch copy of ``root`` holding ``source`` as train.py, with
    the warm start asked for; its server, copy and layers gone afterwards."""
    (root / "train.py").write_text(source)
    monkeypatch.chdir(root)
    box = sandbox.make(str(root))
    runner = ScriptRunner("train.py", [], steps=6, warmup=2, lean=True, sandbox=box, env=env,
                          warm=True)  # fmt: skip
    try:
        yield runner
    finally:
        runner.close()
        box.remove()
        overlay.remove(str(runner.tmp))


def _ok(runner: ScriptRunner, *labels: str) -> list[RunResult]:
    got = [runner(label, {}, False, 120.0) for label in labels]
    for res in got:
        assert res.ok, res.error
    return got


def _log(runner: ScriptRunner, n: int) -> str:
    return (runner.tmp / f"log{n}.txt").read_text("utf-8", "replace").rstrip("\0")


def test_runs_after_the_first_start_with_the_scripts_imports_done_and_its_own_modules_first(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    with _warm(root, env, monkeypatch, TRAIN.format(extra="")) as runner:
        first, second = _ok(runner, "baseline", "control")
        assert "'xml.dom.minidom': False" in _log(runner, 1)
        # Imported once, in the process the second run was forked from...
        assert "'xml.dom.minidom': True" in _log(runner, 2)
        # ...but never a module the script's own folder defines: its own comes first, as in
        # a fresh process.
        for n in (1, 2):
            assert "'shadowed': False" in _log(runner, n)
            assert "shadowed from: the script folder" in _log(runner, n)
        assert second.items == first.items and second.steps >= 3
        note = runner.warm.note() if runner.warm else None
        assert note is not None and "after the first started from one process" in note
        assert "torch" in note and "xml" not in note  # the libraries, not the standard ones


def _statement(runner: ScriptRunner, source: str, line: str) -> dict[str, object]:
    """The statement knob's change that skips ``line`` of ``source`` (train.py in the copy)."""
    lines = source.splitlines()
    at, loop = lines.index(line) + 1, next(i for i, ln in enumerate(lines) if ln.startswith("for"))
    assert runner.sandbox is not None
    path = os.path.join(runner.sandbox.path, "train.py")
    return {"statement": {"file": path, "first": at, "last": at, "mode": "skip", "every": 2,
                          "code": line.strip(), "loop_line": loop + 1}}  # fmt: skip


SAYS = "    print('each step', flush=True)"


def test_a_run_of_edited_files_forks_in_its_own_copy_and_runs_the_edit(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    source = TRAIN.format(extra="") + SAYS + "\n"
    with _warm(root, env, monkeypatch, source) as runner:
        edits = _statement(runner, source, SAYS)
        assert runner.start_extra_s(edits) == 0.0  # its forecast: a forked start
        _ok(runner, "baseline")
        assert "each step" in _log(runner, 1)
        res = runner("statement", edits, False, 120.0)
        assert res.ok, res.error
        log = _log(runner, 2)
        assert "each step" not in log and "'xml.dom.minidom': True" in log
        assert "shadowed from: the script folder" in log  # the copy's own, first
        assert runner.warm is not None and runner.warm.proven
    assert (root / "train.py").read_text() == source  # the user's file as it was


def test_an_edited_run_starts_fresh_where_the_path_names_a_folder_relative_to_the_working_one(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    env = {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], "vendored"])}
    source = TRAIN.format(extra="") + SAYS + "\n"
    with _warm(root, env, monkeypatch, source) as runner:
        edits = _statement(runner, source, SAYS)
        _ok(runner, "baseline", "control")
        assert "'xml.dom.minidom': True" in _log(runner, 2)  # unedited runs still fork
        assert runner.warm is not None and runner.warm.said is not None
        # In its own copy "vendored" is another folder: it starts fresh, the imports forecast.
        assert runner.start_extra_s(edits) == runner.warm.said["import_s"] > 0
        assert runner.start_extra_s({}) == 0.0
        res = runner("statement", edits, False, 120.0)
        assert res.ok, res.error
        log = _log(runner, 3)
        assert "each step" not in log and "'xml.dom.minidom': False" in log


def test_an_import_that_starts_a_thread_is_left_to_each_run_and_the_note_says_why(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library that starts a thread as it loads (pyg_lib starts the CUDA driver under
    torch_geometric: ``run43``) leaves the server unfit to fork from: a second one imports the
    script's imports before it, and each run imports it and the rest itself."""
    root, env = project
    with _warm(root, env, monkeypatch, TRAIN.format(extra="import threaded")) as runner:
        _ok(runner, "baseline", "control")
        log = _log(runner, 2)
        assert "'xml.dom.minidom': True" in log  # imported ahead, before `import threaded`
        assert "shadowed from: the script folder" in log
        note = runner.warm_note()
        assert note is not None and "after the first started from one process" in note
        assert "(an import started Python threads (poller): each run imported threaded" in note
        # The server it forks from never imported the library that started the thread.
        assert runner.warm is not None and runner.warm.said is not None
        assert "threaded" not in runner.warm.said["imported"]


def test_a_forked_run_past_its_time_limit_is_stopped_with_all_it_started(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    hang = (
        "import os, subprocess, sys, time\n"
        "print('hang:', PRE, flush=True)\n"
        "if os.environ.get('HANG_FROM') and os.path.exists(os.environ['HANG_FROM']):\n"
        "    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "    open(os.environ['HANG_FROM'] + '.pid', 'w').write(str(child.pid))\n"
        "    time.sleep(600)\n"
    )
    flag = root.parent / "hang"
    with _warm(
        root, {**env, "HANG_FROM": str(flag)}, monkeypatch, TRAIN.format(extra=hang)
    ) as runner:
        _ok(runner, "baseline", "control")  # the control forked, and ok: forking works here
        flag.write_text("now")
        t = time.monotonic()
        res = runner("hangs", {}, False, 8.0)
        assert not res.ok and res.error is not None and res.error.startswith("stopped after")
        assert time.monotonic() - t < 60
        assert "'xml.dom.minidom': True" in _log(runner, 3)  # it was a forked run
        grandchild = int(Path(str(flag) + ".pid").read_text())
        deadline = time.monotonic() + 10
        while psutil.pid_exists(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        gone = not psutil.pid_exists(grandchild)
        assert gone or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_a_run_in_another_folder_or_environment_is_not_forked(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import json\n")
    env = dict(os.environ)
    warm = WarmStart.start(sys.executable, str(script), env, str(tmp_path))
    try:
        log = str(tmp_path / "log.txt")
        assert warm.run(sys.executable, ["--help"], str(tmp_path / "elsewhere"), env, log,
                        None) is None  # fmt: skip
        other = {**env, "CUDA_VISIBLE_DEVICES": "1"}
        assert warm.run(sys.executable, ["--help"], str(tmp_path), other, log, None) is None
        assert warm.run("/usr/bin/python-other", ["--help"], str(tmp_path), env, log,
                        None) is None  # fmt: skip
    finally:
        warm.close()
    assert warm.proc.poll() is not None


def test_a_copy_forks_only_where_its_edits_leave_what_is_imported_ahead_as_it_was(
    tmp_path: Path,
) -> None:
    home, copy = tmp_path / "home", tmp_path / "copy"
    source = "import os\nos.environ['RUN'] = os.getcwd()\nimport json\nprint('step')\n"
    for folder, text in ((home, source), (copy, source.replace("print('step')", "pass"))):
        folder.mkdir()
        (folder / "train.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    warm = WarmStart.start(sys.executable, str(home / "train.py"), env, str(home))
    try:
        assert warm.takes(sys.executable, str(copy), env, str(copy / "train.py"))
        assert not warm.takes(sys.executable, str(copy), env)  # not a copy of its folder
        # An edit that drops the setting imports json ahead of the script: not what the
        # server did, so that run starts fresh.
        (copy / "train.py").write_text(source.replace("os.environ['RUN'] = os.getcwd()\n", ""))
        assert not warm.takes(sys.executable, str(copy), env, str(copy / "train.py"))
        relative = {**env, "PYTHONPATH": "vendored"}
        assert not warm.copies_fork(sys.executable, relative)
    finally:
        warm.close()


def test_what_a_script_imports_is_taken_up_to_what_could_change_an_imports_outcome(
    tmp_path: Path,
) -> None:
    (tmp_path / "helpers.py").write_text("")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    # A run's output folder shadows no installed module of its name (no code in it).
    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb" / "debug.log").write_text("")
    script = tmp_path / "train.py"
    plain = (
        "from __future__ import annotations\n"
        "import os, lightning.pytorch as pl\n"
        "from transformers import Trainer, TrainingArguments\n"
        "from torch.utils.data import *\n"
        "try:\n"
        "    import wandb\n"
        "except ImportError:\n"
        "    wandb = None\n"
        "def main():\n"
        "    import timm\n"
    )
    script.write_text(plain)
    assert own_names(str(tmp_path)) >= {"helpers", "models", "train"}
    assert "wandb" not in own_names(str(tmp_path))
    assert script_imports(str(script)) == [
        "os", "lightning.pytorch", "transformers:Trainer", "transformers:TrainingArguments",
        "torch.utils.data", "wandb", "timm",
    ]  # fmt: skip
    # A library may read the environment, the search path or the script's own modules'
    # doings as it imports: what follows them is imported by the run, as a fresh one would.
    stops = [
        "os.environ['HF_HOME'] = os.path.expanduser('~/hf')",
        "os.environ.pop('HF_HOME')",
        "del os.environ['HF_HOME']",
        "print(os.environ['HF_HOME'])",
        "from os import environ",
        'sys.path.insert(0, "vendor")',
        "from dotenv import load_dotenv",
        "from setup_env import thing",
        "import models.resnet",
        "from . import sibling",
    ]
    # The script's own module runs where it is imported: read as the script is read.
    (tmp_path / "setup_env.py").write_text("import os\nos.environ['HF_HOME'] = os.getcwd()\n")
    for stop in stops:
        script.write_text(f"import os, sys\n{stop}\nimport transformers\ndef f():\n import timm\n")
        assert script_imports(str(script)) == ["os", "sys"], stop
    assert script_imports(str(tmp_path / "missing.py")) == []
    (tmp_path / "helpers.py").write_text(
        "import json\nimport os\nos.environ.setdefault('A', '1')\nimport helpers\n"
        "def f():\n    import timm\n"
    )
    script.write_text("import helpers\nfrom helpers import f\nimport transformers\n")
    assert script_imports(str(script)) == ["json", "os", "?A=1", "transformers", "timm"]
    # Settings of the environment to constants are made where the script makes them.
    script.write_text(
        "import os\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "os.environ.setdefault('TOKENIZERS_PARALLELISM', 'false')\n"
        "os.environ.update({'WANDB_MODE': 'disabled'}, CUDA_VISIBLE_DEVICES='0')\n"
        "os.environ['HF_HUB_OFFLINE'] = '0'\n"
        "import transformers\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
    )
    assert script_imports(str(script)) == [
        "os", "=HF_HUB_OFFLINE=1", "?TOKENIZERS_PARALLELISM=false", "=WANDB_MODE=disabled",
        "=CUDA_VISIBLE_DEVICES=0", "=HF_HUB_OFFLINE=0", "transformers", "=HF_HUB_OFFLINE=1",
    ]  # fmt: skip


def test_a_library_that_reads_the_environment_as_it_imports_sees_what_the_script_set(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    (root.parent / "lib" / "reads_env.py").write_text(
        "import os\nSEEN = os.environ.get('GPUSIGHT_TEST_FLAG')\n"
    )
    head = (
        "import os, sys\n"
        "os.environ['GPUSIGHT_TEST_FLAG'] = 'set by the script'\n"
        "PRE = 'reads_env' in sys.modules\n"
        "import reads_env\n"
        "print('preloaded:', PRE, 'seen:', reads_env.SEEN, flush=True)\n"
    )
    with _warm(root, env, monkeypatch, head + LOOP) as runner:
        _ok(runner, "baseline", "control")
        assert "preloaded: False seen: set by the script" in _log(runner, 1)
        assert "preloaded: True seen: set by the script" in _log(runner, 2)
        assert "GPUSIGHT_TEST_FLAG" not in os.environ  # nor left in this process


def test_a_forked_run_copies_the_pages_it_shares_before_its_steps_not_during_them() -> None:
    """Writing one byte a page of 64 MiB this process wrote before forking: in the child, one
    stop to copy a page each write, unless ``own_pages`` copied them all first (as the server's
    children do before the script starts), which leaves the steps none to pay."""
    blob = bytearray(b"\x01") * (64 << 20)
    pages = len(blob) // 4096
    # A reservation never touched (a thread's stack, an allocator's arena) is not copied in.
    reserved = mmap.mmap(-1, 512 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    faults: dict[bool, tuple[int, int]] = {}
    for copy_first in (False, True):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: reports (faults, bytes copied ahead), never returns
            try:
                rss = psutil.Process().memory_info().rss
                copied = own_pages() if copy_first else 0
                if psutil.Process().memory_info().rss - rss > 128 << 20:
                    copied = -1  # the reservation was made resident
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                for i in range(0, len(blob), 4096):
                    blob[i] = 2
                after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                os.write(w, f"{after - before} {copied}".encode())
            finally:
                os._exit(0)
        os.close(w)
        got = os.read(r, 64).decode().split()
        os.close(r)
        os.waitpid(pid, 0)
        faults[copy_first] = (int(got[0]), int(got[1]))
    reserved.close()
    if faults[True][1] == 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)")
    assert faults[True][1] >= len(blob), faults  # and the reservation not made resident
    assert faults[False][0] > pages // 4, faults  # the copies a run would have paid
    assert faults[True][0] < faults[False][0] // 10, faults


def test_a_library_kept_inside_the_users_folder_is_imported_ahead_as_a_fresh_run_would(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpusight itself run from a checkout in the folder, or a vendored library on
    ``PYTHONPATH``: a fresh run imports the same file by the same path."""
    root, env = project
    (root / "vendor").mkdir()
    (root / "vendor" / "vendored.py").write_text("WHO = 'vendored'\n")
    env = {**env, "PYTHONPATH": os.pathsep.join([str(root / "vendor"), env["PYTHONPATH"]])}
    with _warm(root, env, monkeypatch, TRAIN.format(extra="import vendored")) as runner:
        _ok(runner, "baseline", "control")
        assert "'xml.dom.minidom': True" in _log(runner, 2)
        assert runner.warm is not None and runner.warm.why is None


def test_a_first_forked_run_that_fails_is_made_again_fresh_and_so_are_the_rest(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library that a fork breaks (a driver's state, a lock held at the fork) is not the
    script's failure: the run counts as a fresh process makes it."""
    root, env = project
    broken = "if PRE['xml.dom.minidom']:\n    raise RuntimeError('a library the fork broke')"
    with _warm(root, env, monkeypatch, TRAIN.format(extra=broken)) as runner:
        _ok(runner, "baseline", "control", "again")
        for n in (1, 2, 3):  # the control made again, fresh, in the same files
            assert "'xml.dom.minidom': False" in _log(runner, n)
        note = runner.warm_note()
        assert note is not None and "afresh" in note and "RuntimeError" in note, note


def test_the_warm_start_can_be_turned_off(
    project: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, env = project
    monkeypatch.setenv(OFF_ENV, "1")
    with _warm(root, env, monkeypatch, TRAIN.format(extra="")) as runner:
        assert runner.warm is None
        _ok(runner, "baseline", "control")
        assert "'xml.dom.minidom': False" in _log(runner, 2)
        assert runner.warm_note() == f"each re-run imported its libraries afresh: {OFF_ENV} is set"
