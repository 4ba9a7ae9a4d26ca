"""Which line of the user's code did it: the first stack frame outside torch and gpusight.

A sync or a copy is detected deep inside torch; the line worth showing is the user's
(``train.py:42``, or ``cell`` line 7 for a ``%%gpusight`` cell). Frames of torch, of gpusight and
of the few stdlib modules that sit between them (warnings, contextlib, ...) are skipped.
"""

from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass, field
from types import CodeType, FrameType

_STDLIB_SKIP = ("warnings.py", "contextlib.py", "functools.py", "threading.py")


def _package_dir(module_name: str) -> str | None:
    mod = sys.modules.get(module_name)
    path = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else None


@dataclass
class Site:
    """A display file name and a line number, plus the code text when known."""

    file: str
    line: int
    code: str | None = None
    origin: tuple[str, int] | None = None
    """The compiled file name and the line in it (``file``/``line`` are as shown)."""


@dataclass
class SourceMap:
    """Maps code objects to the user's frames; remembers answers per code object.

    The caches are keyed by ``id(code)`` and hold the code object itself, which keeps it alive
    (so its id cannot be reused while cached): hashing a code object walks all of its
    instructions, and a sync in a hot loop asks for the same few frames every step. A site is
    also remembered per instruction offset (``f_lasti``, read in constant time), since
    ``f_lineno`` scans the code's line table.
    """

    # Filenames to show differently (a cell's compiled name -> "cell") and a line offset each.
    names: dict[str, tuple[str, int]] = field(default_factory=dict)
    _internal: dict[int, tuple[CodeType, bool]] = field(default_factory=dict)
    _sites: dict[tuple[int, int], tuple[CodeType, Site]] = field(default_factory=dict)
    _at: dict[tuple[int, int], tuple[CodeType, Site]] = field(default_factory=dict)
    _skip_dirs: tuple[str, ...] = ()
    _torch_known: bool = False

    def __post_init__(self) -> None:
        self._find_skip_dirs()

    def _find_skip_dirs(self) -> None:
        torch_dir = _package_dir("torch")
        self._skip_dirs = tuple(d for d in (torch_dir, _package_dir("gpusight")) if d)
        self._torch_known = torch_dir is not None

    def is_internal(self, code: CodeType) -> bool:
        known = self._internal.get(id(code))
        if known is not None:
            return known[1]
        if not self._torch_known and "torch" in sys.modules:
            # ``gpusight run`` maps sources before the script imports torch: torch's frames
            # are internal from then on (else the model's call site was torch's own line).
            self._find_skip_dirs()
            self._internal.clear()
            self._sites.clear()
            self._at.clear()
        fn = code.co_filename
        internal = (
            fn.startswith(self._skip_dirs)
            or fn.endswith(_STDLIB_SKIP)
            or (fn.startswith("<frozen ") and "importlib" in fn)
        )
        self._internal[id(code)] = (code, internal)
        return internal

    def user_frame(self, frame: FrameType | None) -> FrameType | None:
        internal = self._internal
        while frame is not None:
            known = internal.get(id(frame.f_code))
            if known is None:
                if not self.is_internal(frame.f_code):
                    return frame
            elif not known[1]:
                return frame
            frame = frame.f_back
        return None

    def site(self, frame: FrameType) -> Site:
        """The frame's line as shown to the user; cached, as a hot loop hits the same lines."""
        code = frame.f_code
        at = (id(code), frame.f_lasti)
        hit = self._at.get(at)
        if hit is not None:
            return hit[1]
        known = self._site_entry(code, frame.f_lineno or 0)
        self._at[at] = known
        return known[1]

    def site_at(self, code: CodeType, lineno: int) -> Site:
        """The line ``lineno`` of ``code`` as shown to the user (a traceback's ``tb_lineno``)."""
        return self._site_entry(code, lineno)[1]

    def _site_entry(self, code: CodeType, lineno: int) -> tuple[CodeType, Site]:
        key = (id(code), lineno)
        known = self._sites.get(key)
        if known is None:
            filename = code.co_filename
            text = linecache.getline(filename, lineno).strip() or None
            shown, offset = self.names.get(filename, (None, 0))
            if shown is None:
                shown = display_path(filename)
            known = self._sites[key] = (
                code,
                Site(shown, lineno + offset, text, (filename, lineno)),
            )
        return known

    def caller_site(self, depth: int = 1) -> Site | None:
        """The user's line that called into the current torch/gpusight code."""
        try:
            frame: FrameType | None = sys._getframe(depth + 1)
        except ValueError:
            return None
        user = self.user_frame(frame)
        return self.site(user) if user is not None else None


def display_path(filename: str) -> str:
    """A script path relative to the working directory when it lies below it."""
    if filename.startswith("<"):
        return filename
    try:
        rel = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel
