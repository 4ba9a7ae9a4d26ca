"""Hugging Face ``Trainer``: watch a window of ``trainer.train()``'s steps.

    from gpusight.integrations.huggingface import GpusightCallback
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[GpusightCallback(steps=20)])
    trainer.train()    # a notebook shows the report; a script writes it to args.output_dir

Importing this module imports ``transformers``; ``gpusight`` itself never does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ..report import Report
from .window import StepWindow

REPORT_NAME = "gpusight-report.html"


class GpusightCallback(TrainerCallback):  # type: ignore[misc]
    """Watch ``steps`` optimizer steps of ``Trainer.train()`` from ``start_step`` on.

    In a notebook the report shows as the cell's output; in a script it is written to
    ``output`` (``.html`` or ``.json``), by default ``<args.output_dir>/gpusight-report.html``.
    ``report`` holds it afterwards. If training raises inside the window, call ``close()``
    (``watch_train`` does), so that every hook the watch installed comes off.
    """

    def __init__(
        self,
        steps: int = 20,
        warmup: int = 3,
        profile_steps: int = 3,
        start_step: int = 0,
        output: str | Path | None = None,
        display: bool | None = None,
    ) -> None:
        self.window = StepWindow(
            steps, warmup, profile_steps, start_step, output, display, label="Trainer.train()"
        )

    @property
    def report(self) -> Report | None:
        return self.window.report

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        output_dir = getattr(args, "output_dir", None)
        if output_dir:
            self.window.default_output = Path(output_dir) / REPORT_NAME

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.window.step_begin(int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.window.step_end()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()

    def close(self) -> Report | None:
        return self.window.close()


def watch_train(trainer: Any, steps: int = 20, **kwargs: Any) -> Report | None:
    """``trainer.train()`` with a :class:`GpusightCallback`, closed also when training raises.

    Returns the report (None if training ended before the window started).
    """
    callback = GpusightCallback(steps=steps, **kwargs)
    trainer.add_callback(callback)
    try:
        trainer.train()
    finally:
        trainer.remove_callback(callback)
        callback.close()
    return callback.report
