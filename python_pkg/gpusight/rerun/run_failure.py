"""Why a re-run failed, from its exit status and its log: memory, a full disk, a signal, or the
script's own error (its exception's line, never what the script printed)."""

from __future__ import annotations

import re
import signal
import tempfile
from pathlib import Path

from . import disk_full

# The lines of a log that say why a run failed: an exception's line, or gpusight's own. What the
# script printed is its own (a token, a path) and goes into no reason: a reason is shown, and
# kept in the report that a page shared with others is made from.
_SAYS_WHY = re.compile(r"(gpusight\b|[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b)")


def _text(path: Path) -> str:
    """A run's log, without the room kept for it that it did not use (``LOG_ROOM``)."""
    try:
        return path.read_text("utf-8", "replace").rstrip("\0")
    except OSError:
        return ""


def _tail(path: Path, n: int = 2) -> str:
    """The log's last lines that say why it failed (see ``_SAYS_WHY``)."""
    lines = [ln.strip() for ln in _text(path).splitlines() if _SAYS_WHY.match(ln.strip())]
    return " | ".join(lines[-n:])[-300:]


# What a script that ran out of host memory leaves in its log (torch's CPU allocator, Python).
_CPU_OOM = ("DefaultCPUAllocator: can't allocate memory", "MemoryError", "Cannot allocate memory")


OOM = "out of memory"
CPU_OOM = "out of host memory (RAM)"


def reason(rc: int, log: Path, tmpdir: str | None = None) -> str:
    """Why a run that ended with ``rc``, its output in ``log``, failed (shown in the report)."""
    tail = _tail(log)
    if (full := disk_full.why(_text(log), tmpdir or tempfile.gettempdir())) is not None:
        return full
    if "out of memory" in tail.lower() or "OutOfMemoryError" in tail:
        return OOM
    if any(m in tail for m in _CPU_OOM):
        return CPU_OOM
    if rc == -signal.SIGKILL:
        return "stopped by signal 9 (SIGKILL: the kernel's out-of-memory killer, as a rule)"
    if rc < 0:
        return f"stopped by signal {-rc}"
    return f"crashed: the script exited with {rc}" + (f": {tail}" if tail else "")
