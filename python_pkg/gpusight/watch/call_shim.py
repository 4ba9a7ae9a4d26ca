"""A module's call with a function run after it, without torch's hook path.

A forward hook sends every call of its module down torch's slow path (``Module._call_impl``
builds a closure, walks the hook dicts, tracks always-called hooks): on this repository's CPU
machine the watch's post-hook cost about 0.8 us a call more than this wrapper does
(``benchmarks/results/cpu-hook-cost/infer-light/``).
``Module.__call__`` runs ``_compiled_call_impl`` instead of ``_call_impl`` when that attribute is
set (``Module.compile()`` puts the compiled call there), so a wrapper placed there sees every
call of the module, and the module's own call takes its fast path when it has no hooks.
``Module.__getstate__`` leaves that attribute out, so pickling or deep-copying the model
mid-run carries no trace of the wrapper.

Only where that is how the module is called (its class keeps ``Module.__call__``) and nothing
is there already (not compiled in place); under torch.compile's tracing the wrapper is the
bare call, as the hooks are. ``remove`` puts the attribute back as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ATTR = "_compiled_call_impl"


@dataclass(frozen=True)
class Shim:
    module: Any
    wrapper: Callable[..., Any]
    had_attr: bool
    """The attribute was in the module's own ``__dict__`` (as None) before."""


def install(
    module: Any, after: Callable[[Any], None], is_compiling: Callable[[], bool]
) -> Shim | None:
    """Wrap ``module``'s call so that ``after(module)`` runs when each call ends (raising or
    not); None where the module's call cannot take the wrapper."""
    from torch import nn

    cls = type(module)
    if (
        cls.__call__ is not nn.Module.__call__
        or getattr(cls, "_wrapped_call_impl", None) is not nn.Module._wrapped_call_impl
        or getattr(module, ATTR, None) is not None
    ):
        return None
    call = module._call_impl

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_compiling():
            return call(*args, **kwargs)
        try:
            return call(*args, **kwargs)
        finally:
            after(module)

    had = ATTR in vars(module)
    vars(module)[ATTR] = wrapper
    return Shim(module, wrapper, had)


def remove(shim: Shim) -> None:
    """Take the wrapper out, unless something else (``Module.compile()``) replaced it."""
    attrs = vars(shim.module)
    if attrs.get(ATTR) is not shim.wrapper:
        return
    if shim.had_attr:
        attrs[ATTR] = None
    else:
        del attrs[ATTR]
