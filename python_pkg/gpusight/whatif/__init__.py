"""Measured what-ifs: re-run the user's training step on copies with one change at a time.

``diagnose(model, loader, ...)`` returns a Report whose findings carry a *measured* speedup and
the code of the fix, filled with the winning settings. Needs torch (the user's).
"""

from __future__ import annotations

from .diagnose import diagnose
from .errors import DiagnoseError, LoaderError, OutOfMemoryDuringDiagnosis, StepError

__all__ = ["DiagnoseError", "LoaderError", "OutOfMemoryDuringDiagnosis", "StepError", "diagnose"]
