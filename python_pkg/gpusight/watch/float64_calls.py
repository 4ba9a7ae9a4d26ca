"""The user's lines that made a model or its data float64, seen while the watch runs.

Wrappers of ``nn.Module.double`` and ``nn.Module.to`` (where it asks for float64) remember the
user's line that called them, by the module's id; a wrapper of ``torch.set_default_dtype``
remembers a float64 default; wrappers of ``torch.from_numpy``, ``torch.tensor`` and
``torch.as_tensor`` remember the user's lines that made a float64 tensor (a numpy array is
float64 unless asked otherwise). ``gpusight run`` starts the watch before the script, so a
script's lines are seen; a notebook's model is usually made in a cell before the watched one,
and its line is not (``float64_source.py`` reads the watched code's text instead).

A tensor made by a library (torch's own collate, a framework) is not the user's line: only a
call made directly from the user's code counts. The tensor wrappers are on every call of those
functions, so their common path is one thread test and a dtype test (a lean watch, which only
times steps, installs none of them).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import get_ident
from time import perf_counter_ns
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from .call_sites import CallSite, call_site, in_library

if TYPE_CHECKING:
    from .session import Watch

MAX_SITES = 32
"""Distinct calling instructions of the tensor makers remembered (a bound on the memory)."""
TENSOR_MAKERS = ("from_numpy", "tensor", "as_tensor")


def _never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = _never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``;
not imported from there: ``collected.py`` holds this module's records, and ``watch_state``
imports it)."""


@dataclass
class Float64Call:
    what: str
    """As the user wrote it: ``.double()``, ``.to(torch.float64)``, ``torch.from_numpy``."""
    site: CallSite
    module_id: int | None = None
    """``id`` of the module made float64 (a model's call)."""
    count: int = 1


@dataclass
class Float64Calls:
    """What the wrappers saw, in the order first seen."""

    model: list[Float64Call] = field(default_factory=list)
    default: Float64Call | None = None
    data: list[Float64Call] = field(default_factory=list)
    _at: dict[tuple[int, int], tuple[CodeType, Float64Call | None]] = field(default_factory=dict)
    """Per calling instruction of a tensor maker: its call (None: not the user's line)."""

    def note_data(self, what: str, frame: FrameType, sources: Any) -> None:
        """A float64 tensor made by the code of ``frame`` (the maker's caller)."""
        key = (id(frame.f_code), frame.f_lasti)
        known = self._at.get(key)
        if known is not None:
            if known[1] is not None:
                known[1].count += 1
            return
        if len(self._at) >= MAX_SITES:
            return
        code = frame.f_code
        mine = not (sources.is_internal(code) or in_library(code.co_filename))
        site = call_site(sources, frame) if mine else None
        call = Float64Call(what, site) if site is not None else None
        self._at[key] = (code, call)  # the code object kept alive: its id stays its own
        if call is not None:
            self.data.append(call)


def _site(w: Watch) -> CallSite | None:
    """The user's line that called the wrapped method (two frames up: wrapper, its caller)."""
    try:
        return call_site(w.sources, sys._getframe(2))
    except Exception:  # a line for the report is a nicety, never the user's problem
        return None


def _float64_to(torch: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``Module.to``'s arguments ask for float64 (torch's own parse of them)."""
    try:
        return torch._C._nn._parse_to(*args, **kwargs)[1] is torch.float64
    except Exception:
        return False


def wrap_module(w: Watch, torch: Any, name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
    """``Module.double`` or ``Module.to`` that remembers the user's line where it made the
    module float64."""

    @functools.wraps(orig)
    def method(module: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(module, *args, **kwargs)
        if _is_compiling() or get_ident() != w._tid:
            return out
        if name == "double" or _float64_to(torch, args, kwargs):
            site = _site(w)
            if site is not None:
                what = ".double()" if name == "double" else ".to(torch.float64)"
                w.collected.float64.model.append(Float64Call(what, site, id(module)))
        return out

    return method


def wrap_default_dtype(w: Watch, torch: Any, orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def set_default_dtype(dtype: Any) -> Any:
        out = orig(dtype)
        if dtype is torch.float64 and get_ident() == w._tid:
            site = _site(w)
            if site is not None:
                calls = w.collected.float64
                calls.default = Float64Call("torch.set_default_dtype(torch.float64)", site)
        return out

    return set_default_dtype


def wrap_maker(w: Watch, torch: Any, name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.from_numpy`` (``tensor``, ``as_tensor``) that remembers the user's lines that
    made a float64 tensor with it."""
    f64 = torch.float64
    what = f"torch.{name}"
    calls = w.collected.float64
    getframe = sys._getframe

    @functools.wraps(orig)
    def maker(*args: Any, **kwargs: Any) -> Any:
        # is_compiling before the thread: under torch.compile this wrapper is traced.
        if _is_compiling() or get_ident() != w._tid:
            return orig(*args, **kwargs)
        out = orig(*args, **kwargs)
        t = perf_counter_ns()
        if getattr(out, "dtype", None) is f64:
            calls.note_data(what, getframe(1), w.sources)
        rec = w._rec
        if rec is not None:  # what watching costs the step: this wrapper's layer too
            rec.current.overhead_ns += perf_counter_ns() - t + w.calibration.wrapper_ns
        return out

    return maker


def install(w: Watch, torch: Any) -> None:
    """The wrappers, each undone by the watch's ``restore``."""
    p = w._patches
    module_cls = torch.nn.Module
    for name in ("double", "to"):
        p.set_attr(module_cls, name, wrap_module(w, torch, name, getattr(module_cls, name)))
    p.set_attr(torch, "set_default_dtype", wrap_default_dtype(w, torch, torch.set_default_dtype))
    for name in TENSOR_MAKERS:
        p.set_attr(torch, name, wrap_maker(w, torch, name, getattr(torch, name)))
