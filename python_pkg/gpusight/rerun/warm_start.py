"""Re-runs forked from one process that imported the script's libraries once (``warm_server``).

Each re-run of a what-if is the script started afresh, and a script on Lightning or transformers
spends seconds importing before its first step: ``import lightning`` alone took 4.2 s on this
project's 2-core CPU, in each of a what-if's runs. The first run (the baseline) starts fresh as
always while the server imports beside it; every later run is a fork of the server: the imports
are done, and the run goes on from there as a fresh process would (its own session, overlay,
folder, environment, seeds). Only the start-up is shared: the steps a run measures, its CUDA
context, its DataLoader workers and its compiled code are its own.

A run is started fresh instead where the server would not give it what a fresh process gets:
another interpreter, environment or folder than the server's, or a server that refused (an
import started threads, started the CUDA driver or took a name the script's folder defines), a
first forked run that failed, or a server that ended. Where one of the script's imports started
threads or the driver (pyg_lib, under torch_geometric, starts the driver), a second server
imports the names before it only, and each run imports it and the rest itself.

A run of edited files runs in another copy of the folder, and forks too where the edits leave
what may be imported ahead as it was: the server imports nothing from the folder, so it
imported what a fresh process in that copy would, unless ``PYTHONPATH`` names a folder relative
to the working one (another folder there).
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from typing import Any

from .script_imports import own_names, script_imports
from .write_guard import ENV as GUARD_ENV

SERVER = (
    "import os, sys; sys.path[0] = os.devnull; "
    "from gpusight.rerun.warm_server import serve; serve()"
)
"""As ``driver.LAUNCH``, without the working folder first on ``sys.path``; the server imports
gpusight's run command itself, so nothing here imports it."""

_NOT_SHOWN = {"gpusight", *sys.stdlib_module_names}
OFF_ENV = "GPUSIGHT_NO_WARM_START"
"""Set (to anything) to start every re-run fresh."""
OFF_NOTE = f"{OFF_ENV} is set"
READY_TIMEOUT_S = 120.0
"""How long a run waits for the server's imports before it starts fresh instead."""


class WarmStart:
    """The server process and what it said; ``run`` forks a run from it."""

    def __init__(self, proc: subprocess.Popen[bytes], python: str, env: dict[str, str],
                 cwd: str, modules: list[str]) -> None:  # fmt: skip
        self.proc = proc
        self.python, self.env, self.cwd = python, env, cwd
        self.said: dict[str, Any] | None = None
        self.why: str | None = None
        """Why runs start fresh (None: they fork, once the server is ready)."""
        self._buf = b""
        self.asked = 0
        self.proven = False
        """Whether a forked run has come back ok."""
        self.modules = modules
        """What the script imports ahead (``script_imports``): what a run's own must match."""
        self.local: list[str] = []
        self.left: tuple[str, str] | None = None
        """The script's import that left a server unfit to fork from, and why: a second server
        imported only the names before it, and each run imports that one and the rest itself."""

    @classmethod
    def start(cls, python: str, script: str, env: dict[str, str], cwd: str) -> WarmStart:
        """A server for ``script``'s runs, importing in the background."""
        env = _unguarded(env)
        local = sorted(own_names(os.path.dirname(os.path.abspath(script))))
        modules = script_imports(script)
        warm = cls(_spawn(python, env, cwd, modules, local), python, env, cwd, modules)
        warm.local = local
        return warm

    def ready(self, timeout_s: float = READY_TIMEOUT_S) -> bool:
        """Whether runs fork from the server (waiting for its imports up to ``timeout_s``)."""
        if self.why is None and self.said is None:
            try:
                self.said = self._read(timeout_s)
            except subprocess.TimeoutExpired:
                self.why = f"its libraries took over {timeout_s:.0f} s to import"
                self.close()
                return False
            if not self.said.get("ready") and not self._without(str(self.said.get("at") or "")):
                self.why = self.said.get("why") or "the process to fork them from did not start"
                self.close()
        return self.why is None

    def _without(self, at: str) -> bool:
        """Once: a server that imports the script's names before ``at`` only, where importing
        ``at`` (a library that starts the CUDA driver or threads as it loads: pyg_lib under
        torch_geometric) left the first unfit to fork from; whether it is ready."""
        # With nothing before ``at``, the second server still imports gpusight and torch ahead.
        if self.left is not None or at not in self.modules:
            return False
        why = str((self.said or {}).get("why") or "")
        self.close()
        self.left = (at.split(":")[0], why)
        before = self.modules[: self.modules.index(at)]
        self.proc = _spawn(self.python, self.env, self.cwd, before, self.local)
        self._buf, self.said = b"", None
        return self.ready()

    def takes(self, python: str, cwd: str, env: dict[str, str], script: str | None = None) -> bool:
        """Whether a run of ``python`` in ``cwd`` with ``env`` may fork from the server;
        ``script``: the script of a run in another copy of the server's folder (edited files)."""
        if cwd == self.cwd:
            return python == self.python and _unguarded(env) == self.env
        return (
            script is not None
            and self.copies_fork(python, env)
            and script_imports(script) == self.modules
        )

    def copies_fork(self, python: str, env: dict[str, str]) -> bool:
        """Whether a run of ``python`` with ``env`` in another copy of the folder forks, its
        edits leaving what it imports as it was."""
        return python == self.python and _unguarded(env) == self.env and not _relative_paths(env)

    def run(self, python: str, argv: list[str], cwd: str, env: dict[str, str], log: str,
            layer: tuple[str, str, str] | None,
            script: str | None = None) -> Served | None:  # fmt: skip
        """``gpusight <argv>`` forked from the server; None where the run must start fresh
        (``script`` as in ``takes``)."""
        if not self.takes(python, cwd, env, script):
            return None
        # The first run starts fresh beside the server's imports rather than wait for them.
        first, self.asked = self.asked == 0, self.asked + 1
        if first and self.said is None and not self._pending():
            return None
        if not self.ready():
            return None
        req = {"argv": argv, "cwd": cwd, "env": env, "log": log, "layer": layer}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            pid = int(self._read(60.0)["pid"])
        except (OSError, KeyError, ValueError, subprocess.TimeoutExpired) as exc:
            self.why = f"the process the runs fork from stopped answering ({exc})"
            self.close()
            return None
        return Served(self, pid)

    def vouch(self, ok: bool, error: str | None) -> bool:
        """Whether a forked run's result stands. One that failed before any forked run came
        back ok turns the warm start off: the driver makes it again, fresh, as all later runs
        (a library that a fork breaks is not the script's failure)."""
        if ok or self.proven:
            self.proven = self.proven or ok
            return True
        self.why = f"the first run forked from it failed ({error}); the runs started fresh"
        self.close()
        return False

    def note(self) -> str | None:
        """What the report says of how the re-runs started (None: no server was asked)."""
        if self.why is not None:
            return f"each re-run imported its libraries afresh: {self.why}"
        if self.said is None:
            return None
        left = (
            f" ({re.split(r', which|: a fork', self.left[1])[0]}: each run imported "
            f"{self.left[0]} and what follows it itself)"
            if self.left is not None
            else ""
        )
        return (
            f"each re-run after the first started from one process that had imported "
            f"{self.imported()}{left}: its start-up was its own setup, its steps as in a fresh "
            "process"
        )

    def imported(self) -> str:
        """The libraries the server imported and how long that took, in words."""
        said = self.said or {}
        tops = (n.split(":")[0].split(".")[0] for n in said.get("imported", []))
        names = list(dict.fromkeys(t for t in tops if t not in _NOT_SHOWN))
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return f"{shown} once ({said.get('import_s', 0):.1f} s)"

    def close(self) -> None:
        """End the server (a run in flight is the driver's to end)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def _pending(self) -> bool:
        """Whether a reply is there to read now."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        return b"\n" in self._buf or bool(select.select([fd], [], [], 0)[0])

    def _read(self, timeout_s: float | None) -> dict[str, Any]:
        """The server's next reply; {} once it has ended."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], left)[0]:
                raise subprocess.TimeoutExpired("gpusight warm start", timeout_s or 0.0)
            chunk = os.read(fd, 65536)
            if not chunk:
                return {}
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        got: dict[str, Any] = json.loads(line)
        return got


class Served:
    """A run forked by the server: what the driver asks of a ``Popen`` (its pid, which leads
    its process group, and ``wait``)."""

    def __init__(self, owner: WarmStart, pid: int) -> None:
        self.owner = owner
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            got = self.owner._read(timeout)
            if "rc" not in got:
                self.owner.why = "the process the runs fork from ended"
                self.owner.close()
            self.returncode = int(got.get("rc", 1))
        return self.returncode


def _spawn(
    python: str, env: dict[str, str], cwd: str, modules: list[str], local: list[str]
) -> subprocess.Popen[bytes]:
    """The server process, asked to import ``modules`` (``local``: the names the script's
    folder defines)."""
    proc = subprocess.Popen(
        [python, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write((json.dumps({"modules": modules, "local": local}) + "\n").encode())
    proc.stdin.flush()
    return proc


def _relative_paths(env: dict[str, str]) -> bool:
    """Whether ``PYTHONPATH`` names a folder relative to the working one."""
    return any(p and not os.path.isabs(p) for p in env.get("PYTHONPATH", "").split(os.pathsep))


def _unguarded(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the write guard's setting, which differs between runs' copies."""
    return {k: v for k, v in env.items() if k != GUARD_ENV}
