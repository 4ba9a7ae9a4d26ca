"""gpusight: why is my GPU idle, and what exactly do I change?

Entry points (each returns a :class:`~gpusight.report.Report`):

- ``gpusight.check()``: the environment doctor (no GPU needed).
- ``gpusight.diagnose(model, loader, ...)``: each fix measured on copies of the model.
- ``gpusight.diagnose_inference(model, example_input, ...)``: latency/throughput, what-ifs.
- ``with gpusight.watch(steps=20) as w: train()`` then ``w.report``: watch a real run.
- ``%load_ext gpusight`` then ``%gpusight`` / ``%%gpusight`` in IPython and Jupyter.
"""

from __future__ import annotations

from typing import Any

from . import html_export, text_report
from ._version import __version__
from .jupyter import display as _display
from .report import Report, load_report
from .report_schema import ReportValidationError

# The renderers fill the report's display slots (report.RENDERERS) when they load: loaded here,
# with the package, so that every Report can show itself; the report never imports them.
_RENDERER_MODULES = (html_export, text_report, _display)

__all__ = [
    "Report",
    "ReportValidationError",
    "__version__",
    "check",
    "diagnose",
    "diagnose_inference",
    "load_ipython_extension",
    "load_report",
    "unload_ipython_extension",
    "watch",
]


def check() -> Report:
    """Walk the environment checklist and return a report (never raises for a broken setup)."""
    from .doctor import check as _check

    return _check()


def diagnose(model: Any, loader: Any, **kwargs: Any) -> Report:
    """Measure each fix on copies of ``model`` (:func:`gpusight.whatif.diagnose`); needs torch."""
    from .whatif import diagnose as _diagnose

    return _diagnose(model, loader, **kwargs)


def diagnose_inference(
    model: Any,
    example_input: Any,
    budget_s: float = 30.0,
    batch_sizes: Any = None,
    **kwargs: Any,
) -> Report:
    """Latency p50/p99 and throughput per batch size, with measured what-ifs (inference_mode,
    bf16 autocast, CUDA graphs): :func:`gpusight.whatif.inference.diagnose_inference`."""
    from .whatif.inference import diagnose_inference as _diagnose_inference

    return _diagnose_inference(
        model, example_input, budget_s=budget_s, batch_sizes=batch_sizes, **kwargs
    )


def watch(steps: int | None = None, warmup: int = 3, profile_steps: int = 3, **kwargs: Any) -> Any:
    """Instrument the code in a ``with`` block; ``.report`` afterwards (:mod:`gpusight.watch`).

    With ``steps`` the block ends after that many measured steps. Needs torch.
    """
    from .watch import watch as _watch

    return _watch(steps=steps, warmup=warmup, profile_steps=profile_steps, **kwargs)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gpusight``: registers the ``%gpusight`` and ``%%gpusight`` magics."""
    from .jupyter.magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .jupyter.magics import unregister

    unregister(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "gpusight"}]
