"""Where the user's code built its DataLoader and called its model: the lines a fix changes.

Recorded while the watch runs (``Watch`` wraps ``DataLoader.__init__``): the user's frame that
made the call, skipping torch's and gpusight's own, and nothing when that frame lies inside an
installed library (a framework's trainer builds its loader from the user's arguments: that line is
not the user's to edit). A constructor a library only wraps on its way (Lightning wraps
``DataLoader.__init__`` while it calls the user's ``train_dataloader``, to re-make the loader
later) is the user's call where the line past the library's frames makes it.
"""

from __future__ import annotations

import itertools
import linecache
import os
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from types import FrameType

from .source_lines import SourceMap, display_path

_LIBRARY_DIRS = tuple(
    os.path.abspath(p) + os.sep
    for p in {sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib")}
    if p
)


@dataclass
class CallSite:
    filename: str
    """As compiled: a script's path, or a notebook cell's cached name."""
    shown: str
    """As shown: ``train.py`` (relative to the working directory), or ``cell``."""
    line: int
    """The line the call was made from, in ``filename``."""
    offset: int = 0
    """Lines of the shown file above ``filename``'s first (a watched cell's magic line)."""
    col: int | None = None
    """The first column of the call expression on ``line`` (UTF-8 bytes, as ``ast`` counts):
    which of the line's calls it was (``head(backbone(x).cpu())`` calls two modules); None
    where Python does not tell (before 3.11)."""

    def source(self) -> str | None:
        """The file's text as it is on disk now (the patch and its hash are made from it);
        a notebook cell's from linecache, where IPython registers it."""
        if not self.filename.startswith("<"):
            try:
                # Not linecache: it keeps a file's lines by name, and a second run in one process
                # of another "train.py" would be given the first one's.
                with open(self.filename, encoding="utf-8") as f:
                    return f.read() or None
            except (OSError, UnicodeDecodeError):
                pass
        text = "".join(linecache.getlines(self.filename))
        return text or None


def in_library(filename: str) -> bool:
    """Inside an installed package (site-packages): not the user's file to edit."""
    path = os.path.abspath(filename)
    return "site-packages" in path or "dist-packages" in path or path.startswith(_LIBRARY_DIRS)


def call_site(sources: SourceMap, frame: FrameType | None) -> CallSite | None:
    user = sources.user_frame(frame)
    if user is None:
        return None
    filename = user.f_code.co_filename
    if in_library(filename) or filename.startswith("<frozen"):
        return None
    shown, offset = sources.names.get(filename, (None, 0))
    line = int(user.f_lineno or 0)
    return CallSite(filename, shown or display_path(filename), line, offset, call_col(user, line))


def call_col(frame: FrameType, line: int) -> int | None:
    """The first column of the expression the frame's current instruction (a call) runs, where
    it starts on ``line``: Python 3.11's positions of each instruction."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return None
    try:
        at = next(itertools.islice(positions(), frame.f_lasti // 2, None), None)
    except (TypeError, ValueError):
        return None
    if at is None or at[0] != line or at[2] is None:
        return None
    return int(at[2])


def constructor_site(sources: SourceMap, names: tuple[str, ...] = ()) -> CallSite | None:
    """In a wrapper of a constructor: the user's line that called it (None where it cannot be
    told: a fix's call site is a nicety, never the user's problem). Where a library's frame
    came first, the user's line past it when that line calls one of ``names`` (the class, by
    the names its users write)."""
    try:
        frame = sys._getframe(2)
        return call_site(sources, frame) or _past_library(sources, frame, names)
    except Exception:
        return None


def _past_library(sources: SourceMap, frame: FrameType, names: tuple[str, ...]) -> CallSite | None:
    """The first user's frame above the libraries' frames over ``frame``, where its line calls
    one of ``names`` (Lightning's wrapper around the user's ``DataLoader(...)``); None where it
    does not (Hugging Face's Trainer makes its own DataLoader: ``trainer.train()`` is no call of
    it to edit)."""
    if not names:
        return None
    user = sources.user_frame(frame)
    while user is not None and in_library(user.f_code.co_filename):
        user = sources.user_frame(user.f_back)
    if user is None:
        return None
    text = linecache.getline(user.f_code.co_filename, user.f_lineno or 0)
    called = "|".join(map(re.escape, names))
    if not re.search(rf"\b(?:{called})\s*\(", text):
        return None
    return call_site(sources, user)


@dataclass
class SiteCounts:
    """The user's lines that called one thing (a model), with how often each did: a dummy call
    before the loop is outnumbered by the loop's own."""

    seen: dict[tuple[str, int], tuple[CallSite, int]] = field(default_factory=dict)
    training: set[tuple[str, int]] = field(default_factory=set)
    """The lines that called it with autograd on: a training step's, not an evaluation's."""

    def add(self, site: CallSite, grad: bool = False) -> None:
        key = (site.filename, site.line)
        known = self.seen.get(key)
        self.seen[key] = (site, (known[1] if known else 0) + 1)
        if grad:
            self.training.add(key)

    def top(self) -> CallSite | None:
        """The line that called it most often, among those that did with autograd on where
        any did: an evaluation of 50 batches under ``no_grad`` at step 0 outnumbers the
        training step's call in the first calls the watch looks at."""
        keys = [k for k in self.seen if k in self.training] or list(self.seen)
        best = max((self.seen[k] for k in keys), key=lambda v: v[1], default=None)
        return best[0] if best is not None else None
