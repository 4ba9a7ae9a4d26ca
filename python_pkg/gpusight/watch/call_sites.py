"""Where the user's code built its DataLoader: the call a fix changes.

Recorded while the watch runs (``Watch`` wraps ``DataLoader.__init__``): the user's frame that
made the call, skipping torch's and gpusight's own, and nothing when that frame lies inside an
installed library (a framework's trainer builds its loader from the user's arguments: that line is
not the user's to edit).
"""

from __future__ import annotations

import linecache
import os
import sysconfig
from dataclasses import dataclass
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

    def source(self) -> str | None:
        text = "".join(linecache.getlines(self.filename))
        return text or None


def _in_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    return "site-packages" in path or "dist-packages" in path or path.startswith(_LIBRARY_DIRS)


def call_site(sources: SourceMap, frame: FrameType | None) -> CallSite | None:
    user = sources.user_frame(frame)
    if user is None:
        return None
    filename = user.f_code.co_filename
    if _in_library(filename) or filename.startswith("<frozen"):
        return None
    shown, offset = sources.names.get(filename, (None, 0))
    return CallSite(filename, shown or display_path(filename), int(user.f_lineno or 0), offset)
