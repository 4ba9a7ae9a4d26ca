"""Models compiled in place (``model.compile()``), while watched or before the watch began:
their hooks would run traced inside the compiled call, so a call shim around that call sees
their calls instead. Also the count of what torch.compile has compiled so far."""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from . import call_shim
from .watch_state import WatchState, never_compiling

ADOPT_INNER = 64
"""Of a list, tuple or dict in the watched code's namespace, the items looked at for models
compiled in place (``Watch._adopt_compiled``)."""

_NOT_HOLDERS = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
)

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


def _compiled_graphs() -> int:
    """Graphs and frames torch.compile has compiled in this process so far (0 before dynamo is
    imported): a count that changes whenever it compiles anything. Frames too: a module
    compiled in place (``model.compile()``) can compile its frames without a graph counted."""
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is None:
        return 0
    try:
        # .get: a Counter's missing key goes through Python (__missing__); this runs each step.
        counters = dynamo.counters
        return int(counters["stats"].get("unique_graphs", 0)) + int(counters["frames"].get("ok", 0))
    except Exception:  # a torch without these counters: nothing to compare
        return 0


def _one_level(value: Any, nn_module: type) -> Iterator[Any]:
    """``value``, then what it holds one level down (``Watch._adopt_compiled``): a dict's
    values, a list's or tuple's items, a plain object's attributes; never a module's own
    submodules (the module's hooks see their calls), a module object's or a class's names."""
    yield value
    if isinstance(value, dict):
        yield from islice(value.values(), ADOPT_INNER)
    elif isinstance(value, (list, tuple)):
        yield from islice(value, ADOPT_INNER)
    elif not isinstance(value, (nn_module, *_NOT_HOLDERS)):
        try:  # not getattr: a class's __getattr__ (a lazy proxy's import) stays unasked
            attrs = object.__getattribute__(value, "__dict__")
        except AttributeError:
            return
        if isinstance(attrs, dict):
            yield from islice(attrs.values(), ADOPT_INNER)


def _callers_namespaces() -> list[Mapping[str, Any]]:
    """The locals and globals of the first frame outside gpusight: the code that started the
    watch (``with gpusight.watch():``)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("gpusight"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return []
    return [frame.f_locals, frame.f_globals]


class CompiledModels(WatchState):
    """Shims around the compiled calls of models compiled in place."""

    def _adopt_compiled(self, spaces: Sequence[Mapping[str, Any]]) -> None:
        """Models compiled in place before the watch began (``model.compile()`` in an earlier
        notebook cell): their hooks run inside the compiled call, where they stand aside, so
        each gets the shim around its compiled call that a model compiled while watched gets.
        Looked for among the namespaces' values and one level into them: the items of their
        lists, tuples and dicts, and the attributes of their plain objects (a pipeline's
        ``.model``); a model held deeper is not found (the report's note says what then)."""
        nn_module = self._torch.nn.Module
        seen: set[int] = set()
        for space in spaces:
            try:
                values = list(space.values())
            except Exception:
                continue
            for value in values:
                try:  # whatever the user's names hold (a proxy may raise on isinstance)
                    for v in _one_level(value, nn_module):
                        if (
                            isinstance(v, nn_module)
                            and id(v) not in seen
                            and vars(v).get(call_shim.ATTR) is not None
                        ):
                            seen.add(id(v))
                            self._compiled_in_place(v)
                except Exception:
                    continue

    def _compiled_in_place(self, module: Any) -> None:
        """``module.compile()`` ran while watched, or before (``_adopt_compiled``): its hooks
        will run inside its compiled call, traced, where they stand aside, so its calls are
        seen from a shim around that call."""
        key = id(module)
        old = self._around.pop(key, None)
        if old is not None:  # compiled again: wrap the new compiled call
            call_shim.remove(old)
        if self._tid is None or self._rec is None:
            return
        shim = call_shim.install(
            module, self._around_end, _is_compiling, before=self._fwd_pre, around=True
        )
        if shim is not None:
            self._around[key] = shim

    def _around_end(self, module: Any) -> None:
        """An around shim's: the call of an outermost module compiled in place ended."""
        self._fwd_post(module, (), None)

    def _wrap_module_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self

        def compile(module: Any, *args: Any, **kwargs: Any) -> Any:
            # ``model.compile()`` puts its compiled call where a call shim sits: the hooks go
            # back on first (the step under way still ends), and light steps end for good.
            w._light_ok = False
            if w._shims:
                w._hook_top_modules()
            out = orig(module, *args, **kwargs)
            w._compiled_in_place(module)
            return out

        return functools.wraps(orig)(compile)
