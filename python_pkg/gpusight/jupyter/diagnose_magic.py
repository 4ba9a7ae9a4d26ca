"""``%gpusight diagnose MODEL LOADER [--optimizer OPT] [--loss FN] [--step FN] [--steps N]
[--budget S] [--only a,b]``: :func:`gpusight.diagnose` on objects of the user's namespace.

Names are looked up in the notebook's namespace, dotted attributes allowed (``trainer.model``);
nothing is evaluated.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from typing import Any

from ..report import Report

USAGE = (
    "%gpusight diagnose MODEL LOADER [--optimizer OPT] [--loss LOSS_FN] [--step STEP_FN] "
    "[--steps N] [--budget SECONDS] [--only EXPERIMENT,...]"
)


def _usage_error(message: str) -> Exception:
    try:
        from IPython.core.error import UsageError

        return UsageError(message)  # shown without a traceback
    except ImportError:  # pragma: no cover - the magic only runs inside IPython
        return ValueError(message)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would exit the kernel
        raise _usage_error(f"{message}\nusage: {USAGE}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%gpusight diagnose", add_help=False)
    p.add_argument("model")
    p.add_argument("loader")
    p.add_argument("--optimizer", "--opt", dest="optimizer")
    p.add_argument("--loss", "--loss-fn", dest="loss_fn")
    p.add_argument("--step", "--step-fn", dest="step_fn")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--only", default=None, help="comma-separated experiment keys")
    return p


def resolve(name: str, namespace: dict[str, Any]) -> Any:
    """``name`` or ``name.attr.attr`` from the namespace, with an error that says which part."""
    head, *rest = name.split(".")
    if not head.isidentifier() or head not in namespace:
        raise _usage_error(f"{head!r} is not defined in the notebook (usage: {USAGE})")
    obj = namespace[head]
    path = head
    for attr in rest:
        if not attr.isidentifier() or not hasattr(obj, attr):
            raise _usage_error(f"{path} has no attribute {attr!r}")
        obj = getattr(obj, attr)
        path += f".{attr}"
    return obj


def run_diagnose(
    line: str, shell: Any, progress: Callable[[str, float], None] | None = None
) -> Report:
    """Parse the magic's line (with or without the leading ``diagnose``), run, return the report.

    Without ``progress``, a progress bar shows in a Jupyter kernel (nothing elsewhere) and gives
    way to the returned report, which the cell displays.
    """
    args = shlex.split(line)
    if args and args[0] == "diagnose":
        args = args[1:]
    opts = _parser().parse_args(args)
    ns: dict[str, Any] = shell.user_ns
    only = [k.strip() for k in opts.only.split(",") if k.strip()] if opts.only else None
    objects = {
        "model": resolve(opts.model, ns),
        "loader": resolve(opts.loader, ns),
        "loss_fn": resolve(opts.loss_fn, ns) if opts.loss_fn else None,
        "optimizer": resolve(opts.optimizer, ns) if opts.optimizer else None,
        "step_fn": resolve(opts.step_fn, ns) if opts.step_fn else None,
    }
    from ..whatif import diagnose
    from .progress import progress_for_shell

    try:
        if progress is not None:
            return diagnose(
                **objects,
                steps=opts.steps,
                budget_s=opts.budget,
                progress=progress,
                experiments=only,
                namespace=ns,
            )
        with progress_for_shell("gpusight diagnose: starting") as bar:
            return diagnose(
                **objects,
                steps=opts.steps,
                budget_s=opts.budget,
                progress=bar,
                experiments=only,
                namespace=ns,
            )
    except (TypeError, ValueError) as exc:
        if "must be" in str(exc) or "unknown experiments" in str(exc) or "one-shot" in str(exc):
            raise _usage_error(str(exc)) from exc
        raise
