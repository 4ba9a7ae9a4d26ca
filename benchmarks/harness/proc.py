"""A command run with a timeout, its output captured."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_RC = 124  # as timeout(1) exits
NOT_STARTED_RC = 127


@dataclass
class Ran:
    """What a command did: its exit status, its output, and how long it took."""

    rc: int
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False

    @property
    def out(self) -> str:
        """stdout, then stderr."""
        return self.stdout + self.stderr


def run(
    cmd: Sequence[str],
    timeout: float | None,
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    session: bool = False,
) -> Ran:
    """Run ``cmd`` to its end or ``timeout`` seconds, whichever is first. Past the timeout the
    process is killed (with ``session``, it runs in a session of its own and its whole process
    group is: torchrun's workers, a what-if's runs); its output so far is kept, with a last line
    ``(timed out after N s)`` in stderr and ``rc`` 124. A command that cannot start has ``rc``
    127 and the reason in stderr. Output that is not UTF-8 is decoded with replacement marks.
    ``wall_s``: from the start to the end of its output."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            env=env,
            cwd=cwd,
            start_new_session=session,
        )
    except OSError as exc:
        return Ran(NOT_STARTED_RC, "", f"{type(exc).__name__}: {exc}", time.perf_counter() - t0)
    with proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            if session:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            stdout, stderr = proc.communicate()
            note = f"\n(timed out after {timeout:.0f} s)"
            return Ran(TIMEOUT_RC, stdout, stderr + note, time.perf_counter() - t0, True)
        except BaseException:  # Ctrl-C: the child goes too
            proc.kill()
            raise
    return Ran(proc.returncode, stdout, stderr, time.perf_counter() - t0)
