"""Errors ``gpusight.diagnose`` raises: each says what failed, where, and what to do."""

from __future__ import annotations


class DiagnoseError(RuntimeError):
    """``gpusight.diagnose`` could not finish (model, optimizer, RNG and flags restored)."""


class LoaderError(DiagnoseError):
    """The user's DataLoader (or dataset) raised; the original exception is the ``__cause__``."""

    def __init__(self, message: str, *, experiment: str, batch_index: int) -> None:
        super().__init__(message)
        self.experiment = experiment
        self.batch_index = batch_index


class StepError(DiagnoseError):
    """The training step (forward, loss, backward or optimizer) raised on the unchanged baseline."""

    def __init__(self, message: str, *, experiment: str, step: int) -> None:
        super().__init__(message)
        self.experiment = experiment
        self.step = step


class OutOfMemoryDuringDiagnosis(DiagnoseError):
    """The baseline itself ran out of device memory (it needs room for a model copy)."""
