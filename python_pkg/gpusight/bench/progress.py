"""Progress reporting: ``progress(stage, fraction)`` with fraction in [0, 1] over the whole run.

A callback may raise (KeyboardInterrupt from a UI's stop button, say): the benchmark then stops,
frees what it holds and restores torch's flags on the way out.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, float], None]


def no_progress(stage: str, fraction: float) -> None:
    return None


class Span:
    """Maps a part of the work, [start, end] of the whole, onto the caller's callback."""

    def __init__(self, progress: Progress | None, start: float = 0.0, end: float = 1.0) -> None:
        self.progress = progress or no_progress
        self.start = start
        self.end = end

    def __call__(self, stage: str, fraction: float) -> None:
        f = min(max(fraction, 0.0), 1.0)
        self.progress(stage, self.start + (self.end - self.start) * f)

    def sub(self, start: float, end: float) -> Span:
        """The part [start, end] of this span (fractions of this span)."""
        width = self.end - self.start
        return Span(self.progress, self.start + width * start, self.start + width * end)

    def inner(self, stage: str) -> Callable[[float], None]:
        """A one-argument callback for :func:`gpusight.bench.timer.time_fn`."""

        def report(fraction: float) -> None:
            self(stage, fraction)

        return report
