"""A window of a framework's training steps, watched: start at a step, stop after N, deliver.

The framework callbacks (``huggingface.py``, ``lightning.py``) only translate their hooks into
``step_begin`` / ``step_end`` / ``close``; this holds what they share.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..jupyter.display import in_kernel
from ..report import Report
from ..watch import Watch


class StepWindow:
    """Watch ``steps`` training steps from the first step at or after ``start_step``.

    ``output``: where to write the report (``.html``: one self-contained page, else JSON).
    ``display``: show the report as a notebook output; by default in a Jupyter kernel only.
    Without either (a script), the report goes to ``default_output``, which the framework's
    callback sets from the trainer (its output directory).
    """

    def __init__(
        self,
        steps: int = 20,
        warmup: int = 3,
        profile_steps: int = 3,
        start_step: int = 0,
        output: str | Path | None = None,
        display: bool | None = None,
        label: str | None = None,
    ) -> None:
        if steps < 1:
            raise ValueError(f"steps must be at least 1, got {steps}")
        if warmup < 0 or profile_steps < 0 or start_step < 0:
            raise ValueError("warmup, profile_steps and start_step must not be negative")
        self.steps = steps
        self.warmup = warmup
        self.profile_steps = profile_steps
        self.start_step = start_step
        self.output = Path(output) if output is not None else None
        self.display = display
        self.label = label
        self.report: Report | None = None
        self.written: Path | None = None
        self.default_output: Path | None = None
        self._watch: Watch | None = None
        self._closed = False

    @property
    def watching(self) -> bool:
        return self._watch is not None and self.report is None

    def step_begin(self, step: int) -> None:
        """Before the framework's step ``step`` (0-based): start watching once it is reached."""
        if self._closed or self._watch is not None or step < self.start_step:
            return
        watch = Watch(
            steps=self.steps,
            warmup=self.warmup,
            profile_steps=self.profile_steps,
            stop_after_steps=False,  # the framework's loop goes on; the watch only stops counting
            label=self.label,
        )
        try:
            watch.start()
        except RuntimeError as err:  # another watch runs (e.g. under `gpusight run`): leave it
            print(f"gpusight: not watching this window: {err}", file=sys.stderr)
            self._closed = True
            return
        self._watch = watch

    def step_end(self) -> None:
        """After a step: once the window's steps are measured, stop and deliver the report."""
        rec = self._watch.recorder if self._watch is not None else None
        # Once they are, the watch counts the next step's FLOPs (``watch/flop_step.py``).
        counting = self._watch is not None and self._watch.flops.counting
        if self.watching and rec is not None and rec.done() and not counting:
            self.close()

    def close(self) -> Report | None:
        """Stop watching (training ended, raised, or the window is complete) and deliver."""
        if self._watch is None or self.report is not None:
            self._closed = True
            return self.report
        self._closed = True
        self.report = self._watch.stop()
        self._deliver(self.report)
        return self.report

    def _deliver(self, report: Report) -> None:
        show = in_kernel() if self.display is None else self.display
        target = self.output
        if target is None and not show:
            target = self.default_output
        if target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.suffix.lower() in (".html", ".htm"):
                self.written = report.save_html(target)
            else:
                self.written = report.save(target)
        if show:
            from IPython.display import display

            display(report)  # type: ignore[no-untyped-call]
        else:
            where = f" (written to {self.written})" if self.written else ""
            print(f"gpusight: {report.verdict.summary}{where}", file=sys.stderr)
