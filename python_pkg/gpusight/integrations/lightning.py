"""PyTorch Lightning: watch a window of ``trainer.fit()``'s training steps.

    from gpusight.integrations.lightning import GpusightCallback
    trainer = L.Trainer(max_epochs=1, callbacks=[GpusightCallback(steps=20)])
    trainer.fit(model, loader)   # a notebook shows the report; a script writes it

Importing this module imports ``lightning`` (or, without it, ``pytorch_lightning``);
``gpusight`` itself never does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef,assignment]

from ..report import Report
from .window import StepWindow

REPORT_NAME = "gpusight-report.html"


class GpusightCallback(Callback):  # type: ignore[misc]
    """Watch ``steps`` training batches of ``Trainer.fit()`` from batch ``start_step`` on.

    In a notebook the report shows as the cell's output; in a script it is written to
    ``output`` (``.html`` or ``.json``), by default ``<trainer.default_root_dir>/
    gpusight-report.html``. ``report`` holds it afterwards. Also closed when training raises.
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
        super().__init__()
        self.window = StepWindow(
            steps, warmup, profile_steps, start_step, output, display, label="Trainer.fit()"
        )

    @property
    def report(self) -> Report | None:
        return self.window.report

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        root = getattr(trainer, "default_root_dir", None)
        if root:
            self.window.default_output = Path(root) / REPORT_NAME

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        self.window.step_begin(int(trainer.global_step))

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.window.step_end()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.close()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.close()

    def close(self) -> Report | None:
        return self.window.close()
