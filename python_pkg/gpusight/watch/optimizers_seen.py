"""The optimizers a watched run stepped: their class, how many parameter tensors they update and
how (a loop over the tensors, ``foreach``, ``fused``), and the user's line that built each.

Read once per optimizer, at its first step; the line comes from a wrapper of
``torch.optim.Optimizer.__init__`` (every optimizer's constructor ends there) while the watch
runs, so an optimizer built before the watch began has none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from threading import get_ident
from typing import TYPE_CHECKING, Any

from .call_sites import CallSite, constructor_site

if TYPE_CHECKING:
    from .session import Watch

FUSED_OPTIMIZERS = ("Adam", "AdamW", "SGD", "Adagrad")
"""torch.optim classes that take ``fused=True`` (CUDA since torch 2.0 for Adam/AdamW, 2.4 for
SGD and Adagrad, which is CPU-only there): the whole update as a few kernels."""


@dataclass
class OptimizerSeen:
    name: str
    tensors: int
    """Parameter tensors it updates, over all its groups."""
    foreach: bool | None
    """As built: None is torch's default (foreach on CUDA, a loop on the CPU)."""
    fused: bool | None
    cuda: bool
    """Its parameters are on a CUDA device."""
    steps: int = 0
    site: CallSite | None = None
    params: int = 0
    """Parameter elements it updates."""
    cpu_params: int = 0
    """Of ``params``, those on the CPU: an update there is CPU math, which no fused kernel on
    the GPU shortens (a model left partly on the CPU, ``rules/split_placement.py``)."""


def describe(opt: Any) -> OptimizerSeen:
    params = [p for g in getattr(opt, "param_groups", []) for p in g.get("params", [])]
    defaults = getattr(opt, "defaults", {}) or {}
    sizes = [(int(p.numel()), bool(p.is_cpu)) for p in params]
    return OptimizerSeen(
        name=type(opt).__name__,
        tensors=len(params),
        foreach=defaults.get("foreach"),
        fused=defaults.get("fused"),
        cuda=any(getattr(p, "is_cuda", False) for p in params[:8]),
        params=sum(n for n, _ in sizes),
        cpu_params=sum(n for n, cpu in sizes if cpu),
    )


def wrap_init(w: Watch, orig: Callable[..., Any]) -> Callable[..., Any]:
    """``Optimizer.__init__`` that remembers the user's line that built each optimizer."""

    @functools.wraps(orig)
    def __init__(opt: Any, *args: Any, **kwargs: Any) -> None:
        orig(opt, *args, **kwargs)
        if get_ident() != w._tid:
            return
        if w._rec is not None:
            w._rec.optimizer_built = True
        site = constructor_site(w.sources)
        if site is not None:
            w.collected.optimizer_sites.setdefault(id(opt), site)

    return __init__
