"""In a re-run's process: its writes stay in its scratch copy (``sandbox``).

An audit hook (``sys.addaudithook``) sees each file the script opens or removes from Python. A
file opened for writing through one of the copy's links to the user's files is first made the
copy's own (a copy, or nothing where it is truncated anyway); a write that would still reach the
user's folder is refused with an error that says why; writes outside both (caches, /tmp) are
recorded, for the report to name. Writes from native code (``torch.save`` to a path writes from
C++) are not seen: the copy holds real files for everything it could copy, so they land there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

ENV = "GPUSIGHT_SANDBOX"
"""What the driver passes: ``{"copy": folder, "protect": [folders], "outside": "record" or
"refuse"}`` as JSON."""
ALLOW_FLAG = "--allow-writes-outside"
MAX_RECORDED = 20
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Where a run writes as a matter of course: caches and scratch, never the user's work
# (Triton builds its launchers under ~/.triton, the CUDA driver its JIT cache under ~/.nv).
_ROUTINE_DIRS = (
    "/tmp", "/dev", "/proc", "/sys", "/var/tmp",
    *(os.path.expanduser(d) for d in ("~/.cache", "~/.triton", "~/.nv")),
)  # fmt: skip
_CACHE_VARS = (
    "TMPDIR", "XDG_CACHE_HOME", "HF_HOME", "HF_DATASETS_CACHE", "HF_HUB_CACHE",
    "TRANSFORMERS_CACHE", "TORCH_HOME", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "CUDA_CACHE_PATH", "MPLCONFIGDIR", "PYTHONPYCACHEPREFIX",
)  # fmt: skip


def routine_dirs() -> list[str]:
    """Scratch and the caches the environment names (their writes are no one's work)."""
    named = [os.environ.get(v) for v in _CACHE_VARS]
    return [os.path.realpath(p) for p in (*_ROUTINE_DIRS, *named) if p]


class Guard:
    def __init__(self, copy: str, protect: list[str], refuse_outside: bool = False) -> None:
        self.copy = os.path.realpath(copy)
        self.copy_abs = os.path.abspath(copy)
        self.protect = [os.path.realpath(p) for p in protect]
        self.refuse_outside = refuse_outside
        self.routine = routine_dirs()
        # Scratch the environment names inside the user's folder (TMPDIR=./tmp): gpusight's own
        # work and the script's temporary files go there, and they are no one's files.
        self.scratch_inside = [
            r for r in self.routine if any(_below(r, p) and r != p for p in self.protect)
        ]
        self.outside: list[str] = []
        self.busy = False

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.busy:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(path, (str, bytes, os.PathLike)) and _writes(mode, flags):
                self._writing(os.fsdecode(path), truncates=_truncates(mode, flags))
        elif event in ("os.remove", "os.rmdir", "shutil.rmtree", "os.truncate"):
            path = args[0]
            if isinstance(path, (str, bytes, os.PathLike)):
                self._changing(os.fsdecode(path), event)
        elif event == "os.rename":
            src, dst = args[0], args[1]
            for p in (src, dst):
                if isinstance(p, (str, bytes, os.PathLike)):
                    self._changing(os.fsdecode(p), event)

    def _writing(self, path: str, truncates: bool) -> None:
        full = os.path.abspath(path)
        if _below(full, self.copy_abs) and os.path.islink(full):
            self._own(full, truncates)
        self._check(full, "write")

    def _changing(self, path: str, event: str) -> None:
        full = os.path.abspath(path)
        if os.path.islink(full) and _below(full, self.copy_abs):
            return  # the copy's own link goes, not the file it names
        self._check(full, event)

    def _check(self, full: str, what: str) -> None:
        real = os.path.realpath(full)
        if _below(real, self.copy) or any(_below(real, r) for r in self.scratch_inside):
            return
        for p in self.protect:
            if _below(real, p):
                raise PermissionError(
                    f"gpusight: a re-run works in a scratch copy of your folder and does not "
                    f"change your files ({what}: {real})"
                )
        if any(_below(real, r) for r in self.routine):
            return
        if self.refuse_outside:
            raise PermissionError(
                f"gpusight: the script writes outside its folder ({what}: {real}); a what-if "
                f"re-runs it several times and would repeat that each time: pass {ALLOW_FLAG} "
                "to let it"
            )
        if len(self.outside) < MAX_RECORDED and real not in self.outside:
            self.outside.append(real)

    def _own(self, link: str, truncates: bool) -> None:
        """The link becomes a file of the copy's: empty where the open truncates it."""
        self.busy = True
        try:
            target = os.path.realpath(link)
            os.unlink(link)
            if not truncates and os.path.isfile(target):
                shutil.copy2(target, link)
        finally:
            self.busy = False


def _writes(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _truncates(mode: Any, flags: Any) -> bool:
    if isinstance(mode, str):
        return "w" in mode
    return isinstance(flags, int) and bool(flags & os.O_TRUNC)


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


_ACTIVE: Guard | None = None


class SandboxSpecError(ValueError):
    """The re-run's environment variable holds something gpusight did not write."""


def install_from_env() -> Guard | None:
    """The guard the driver asked for in the environment (None: this is not a re-run)."""
    global _ACTIVE
    spec = os.environ.get(ENV)
    if not spec or _ACTIVE is not None:
        return _ACTIVE
    try:
        data = json.loads(spec)
        protect = [str(p) for p in data.get("protect") or []]
        copy = str(data["copy"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SandboxSpecError(
            f"{ENV} is set, but not as gpusight sets it for the re-runs of --what-if and "
            f"--verify ({type(exc).__name__}); unset it and run again"
        ) from None
    _ACTIVE = guard = Guard(copy, protect, data.get("outside") == "refuse")
    sys.addaudithook(guard.hook)
    from ..after_import import after_import

    after_import({"torch.serialization": lambda mod: _guard_torch_save(mod, guard)})
    return guard


def _guard_torch_save(mod: Any, guard: Guard) -> None:
    """``torch.save`` to a path writes from C++, unseen by the audit hook: the path is checked
    (and a link of the copy's made its own) before."""
    import functools

    orig = mod.save

    @functools.wraps(orig)
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(f, (str, bytes, os.PathLike)):
            guard.hook("open", (f, "wb", os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
        return orig(obj, f, *args, **kwargs)

    mod.save = save
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "save", None) is orig:
        torch.save = save  # type: ignore[attr-defined]


_IN_KERNEL: Guard | None = None
_DISPATCHING = False


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    guard = _IN_KERNEL
    if guard is not None:
        guard.hook(event, args)


@contextlib.contextmanager
def guarded(copy: str, protect: list[str]) -> Iterator[Guard]:
    """In a long-lived process (the notebook's kernel): the guard while the block runs (an
    audit hook cannot be removed: one hook, idle outside such a block)."""
    global _IN_KERNEL, _DISPATCHING
    if not _DISPATCHING:
        sys.addaudithook(_dispatch)
        _DISPATCHING = True
    before, _IN_KERNEL = _IN_KERNEL, Guard(copy, protect)
    try:
        yield _IN_KERNEL
    finally:
        _IN_KERNEL = before
