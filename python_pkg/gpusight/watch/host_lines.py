"""Where the host's time goes, by line of the user's code (issue #49).

After the measured steps (without ``steps``, whose measured steps may run to the code's end:
after the profiled ones), ``STEPS`` steps run with a line clock: ``sys.settrace`` on the
main thread, whose local tracer is attached to the user's frames only (torch's, gpusight's and
the standard library's run untraced, their time counted to the user's line that called them).
Each line's time is exclusive of the user's frames it called (a loop's ``model(x)`` keeps the
framework's own overhead; the lines of the user's ``forward`` their own work). A C call that
holds the GIL (``gc.collect()``) is on its line, where a sampling thread could not see it.

The traced steps are not measured steps: tracing costs about a microsecond a Python call, which
the timed steps never pay. A process already traced (a debugger, coverage) is left alone.
"""

from __future__ import annotations

import os
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from time import perf_counter_ns
from types import CodeType, FrameType
from typing import Any

from .source_lines import SourceMap


def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.join(d, "") for d in dirs if d)


_LIBRARY_DIRS = _library_dirs()

_COMPREHENSION = re.compile(r"(\.<locals>)?\.<(listcomp|dictcomp|setcomp|genexpr)>")

STEPS = 2
"""Steps the line clock runs over, after the measured ones."""
KEPT = 12
"""Lines kept in the result, the costliest first."""
LINES_CUT_SHORT = "the run ended before the steps timed by line"


@dataclass
class TimedLine:
    file: str
    line: int
    code: str | None
    function: str
    ns: int
    hits: int
    path: str = ""
    """The file as the code names it (``file`` is as the user is shown it)."""


@dataclass
class LineTimes:
    lines: list[TimedLine] = field(default_factory=list)
    steps: int = 0
    total_ns: int = 0
    """The traced steps' wall time, end to end."""
    unavailable: str | None = None


@dataclass
class _Open:
    frame: FrameType
    line: int
    start: int
    child: int = 0
    entered: int = 0


class LineClock:
    """Idle, tracing some steps, or done (``result``)."""

    def __init__(self, sources: SourceMap, enabled: bool = True) -> None:
        self.enabled = enabled
        self.sources = sources
        self.result: LineTimes | None = None
        self._stack: list[_Open] = []
        self._times: dict[tuple[CodeType, int], list[int]] = {}
        self._traced: list[FrameType] = []
        self._t0 = 0
        self.steps_left = 0
        self._user_code: dict[int, tuple[CodeType, bool]] = {}

    @property
    def tracing(self) -> bool:
        return self.steps_left > 0

    def begin(self) -> bool:
        """Trace from here (a step boundary, inside a hook) for ``STEPS`` steps."""
        if not self.enabled or self.result is not None:
            return False
        if sys.gettrace() is not None:
            self.result = LineTimes(unavailable="another tracer (a debugger, coverage) runs")
            return False
        now = perf_counter_ns()
        # The user's frames already running (the loop) get their line events from here on.
        outer = [f for f in _stack_frames(sys._getframe(1)) if self._user(f.f_code)]
        for frame in reversed(outer):
            frame.f_trace = self._local
            self._traced.append(frame)
            self._stack.append(_Open(frame, frame.f_lineno or 0, now, entered=now))
        self._t0 = now
        self.steps_left = STEPS
        sys.settrace(self._global)
        return True

    def step_ended(self) -> None:
        self.steps_left -= 1
        if self.steps_left <= 0:
            self._finish(STEPS)

    def abort(self, why: str) -> None:
        if self.tracing:
            self.steps_left = 0
            self._stop()
            self.result = LineTimes(unavailable=why)

    def _user(self, code: CodeType) -> bool:
        # Libraries' and the standard library's frames count to the user's line that called
        # them (a tokenizer's, logging's): the line is what the user can change.
        known = self._user_code.get(id(code))
        if known is None:
            fn = code.co_filename
            mine = not (
                self.sources.is_internal(code)
                or fn.startswith(_LIBRARY_DIRS)
                # Code compiled from a string (frozen modules, exec): not a file of the user's,
                # but for an IPython cell.
                or (fn.startswith("<") and not fn.startswith("<ipython-input"))
            )
            self._user_code[id(code)] = known = (code, mine)
        return known[1]

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event != "call" or not self._user(frame.f_code):
            return None
        now = perf_counter_ns()
        self._stack.append(_Open(frame, frame.f_lineno or 0, now, entered=now))
        self._traced.append(frame)
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" or event == "return":
            now = perf_counter_ns()
            top = self._find(frame)
            if top is not None:
                self._close(top, now)
                if event == "line":
                    top.line, top.start, top.child = frame.f_lineno or 0, now, 0
                else:
                    self._pop(top, now)
        return self._local

    def _find(self, frame: FrameType) -> _Open | None:
        # Nearly always the top; a frame left by an exception may sit above it.
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i].frame is frame:
                del self._stack[i + 1 :]
                return self._stack[i]
        return None

    def _close(self, top: _Open, now: int) -> None:
        key = (top.frame.f_code, top.line)
        slot = self._times.setdefault(key, [0, 0])
        slot[0] += max(0, now - top.start - top.child)
        slot[1] += 1

    def _pop(self, top: _Open, now: int) -> None:
        self._stack.pop()
        if self._stack:
            self._stack[-1].child += now - top.entered

    def _stop(self) -> None:
        sys.settrace(None)
        for frame in self._traced:
            frame.f_trace = None
        self._traced.clear()

    def _finish(self, steps: int) -> None:
        now = perf_counter_ns()
        # The lines still running (the loop's, and the frames that called it) close here,
        # innermost first, each caller's line less the time of the one it called.
        while self._stack:
            self._close(self._stack[-1], now)
            self._pop(self._stack[-1], now)
        self._stop()
        self._stack.clear()
        # One row a line: a comprehension's own frame (Python < 3.12) shares its line.
        by_line: dict[tuple[str, int], TimedLine] = {}
        for (code, lineno), (ns, hits) in self._times.items():
            site = self.sources.site_at(code, lineno)
            row = by_line.get((site.file, site.line))
            if row is None:
                name = _COMPREHENSION.sub("", getattr(code, "co_qualname", code.co_name))
                row = by_line[(site.file, site.line)] = TimedLine(
                    site.file, site.line, site.code, name, 0, 0, code.co_filename
                )
            row.ns += ns
            row.hits += hits
        lines = sorted((r for r in by_line.values() if r.ns > 0), key=lambda r: -r.ns)[:KEPT]
        self._times.clear()
        self.result = LineTimes(lines=lines, steps=steps, total_ns=now - self._t0)


def _stack_frames(frame: FrameType | None) -> list[FrameType]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out
