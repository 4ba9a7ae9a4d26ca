"""A module's call with functions run around it, without torch's hook path.

A forward hook sends every call of its module down torch's slow path (``Module._call_impl``
builds a closure, walks the hook dicts, tracks always-called hooks): on this repository's CPU
machine the watch's post-hook cost about 0.8 us a call more than this wrapper does
(``benchmarks/results/cpu-hook-cost/infer-light/``). ``Module.__call__`` runs
``_compiled_call_impl`` instead of ``_call_impl`` when that attribute is set
(``Module.compile()`` puts the compiled call there), so a wrapper placed there sees every call of
the module, and the module's own call takes its fast path when it has no hooks.
``Module.__getstate__`` leaves that attribute out, so pickling or deep-copying the model mid-run
carries no trace of the wrapper.

On a module compiled in place the wrapper goes around its compiled call: there the module's
hooks run inside the compiled graph, traced, where they stand aside (``around``), so the
wrapper is the only place its calls can be seen from.

Only where that is how the module is called (its class keeps ``Module.__call__``); under
torch.compile's tracing the wrapper is the bare call, as the hooks are. ``remove`` puts the
attribute back as it was.
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
    """The attribute was in the module's own ``__dict__`` before."""
    previous: Any = None
    """What was there: None, or the compiled call the wrapper went around."""


def called_by_module_call(module: Any) -> bool:
    """Whether ``module(...)`` goes through ``Module.__call__`` (and so ``_compiled_call_impl``)."""
    from torch import nn

    cls = type(module)
    return (
        cls.__call__ is nn.Module.__call__
        and getattr(cls, "_wrapped_call_impl", None) is nn.Module._wrapped_call_impl
    )


def install(
    module: Any,
    after: Callable[[Any], None],
    is_compiling: Callable[[], bool],
    before: Callable[[Any, tuple[Any, ...]], None] | None = None,
    around: bool = False,
) -> Shim | None:
    """Wrap ``module``'s call so that ``after(module)`` runs when each call ends (raising or
    not), and ``before(module, args)`` when it begins; None where the module's call cannot take
    the wrapper. ``around``: the module is compiled in place, and the wrapper goes around its
    compiled call (else a module compiled in place is left alone)."""
    if not called_by_module_call(module):
        return None
    previous = getattr(module, ATTR, None)
    if (previous is not None) is not around:
        return None
    call = previous if previous is not None else module._call_impl

    if before is None:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return call(*args, **kwargs)
            try:
                return call(*args, **kwargs)
            finally:
                after(module)

    else:
        start = before

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if is_compiling():
                return call(*args, **kwargs)
            start(module, args)
            try:
                return call(*args, **kwargs)
            finally:
                after(module)

    had = ATTR in vars(module)
    vars(module)[ATTR] = wrapper
    return Shim(module, wrapper, had, previous)


def stand_in(shim: Shim, fn: Callable[..., Any]) -> None:
    """``fn`` in place of ``shim``'s wrapper for a while (a run of steps that need less: the
    watch's ``_start_run``), until ``end_run`` or ``remove``; ``fn`` calls the module as the
    wrapper would (``target``) and may put the wrapper back itself (``vars(module)[ATTR]``)."""
    fn.shim = shim  # type: ignore[attr-defined]
    vars(shim.module)[ATTR] = fn


def target(shim: Shim) -> Callable[..., Any]:
    """What the shim's wrapper calls: the module's call, or the compiled call it went around."""
    call: Callable[..., Any] = (
        shim.previous if shim.previous is not None else shim.module._call_impl
    )
    return call


def end_run(shim: Shim) -> None:
    """The shim's own wrapper back, where a stand-in is in place."""
    attrs = vars(shim.module)
    if getattr(attrs.get(ATTR), "shim", None) is shim:
        attrs[ATTR] = shim.wrapper


def remove(shim: Shim) -> None:
    """Take the wrapper out, unless something else (``Module.compile()``) replaced it."""
    end_run(shim)
    attrs = vars(shim.module)
    if attrs.get(ATTR) is not shim.wrapper:
        return
    if shim.had_attr:
        attrs[ATTR] = shim.previous
    else:
        del attrs[ATTR]
