"""The hooks on module calls: global forward hooks through the warm-up, then hooks on the
outermost modules only; forward time, where parameters and inputs live, the user's line that
called the model, and the round of model calls a step is where a forward ends the steps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from types import FrameType
from typing import Any

from ..hook_copies import WatchHook
from . import call_shim
from .call_cycle import Cycle, find_cycle
from .call_sites import SiteCounts, call_site
from .placement import INSPECT_CALLS, ModuleInfo, inspect_module, observe_call
from .watch_state import WatchState, never_compiling

# Step kinds that outrank a forward's end (recorder.KINDS): under them a forward ends no step.
_DRIVE_PAST_FORWARD = frozenset({"optimizer", "backward"})
MAX_TOP_MODULES = 8

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


class ModuleHooks(WatchState):
    """Forward hooks, and which modules carry them."""

    def _switch_hooks(self) -> None:
        """After warm-up: hook the outermost modules only, so inner modules run hook-free."""
        self._switched = True
        for h in self._global_handles:
            h.remove()
        self._global_handles = []
        self._drop_compile_filter()  # no global hook of ours left to warn about
        self._patches.add("module hooks", self._unhook_top_modules)
        self._hook_top_modules()

    def _hooked_modules(self) -> list[Any]:
        return list(self._top_modules.values())[:MAX_TOP_MODULES]

    def _hook_top_modules(self, keep_shims: bool = False) -> None:
        """Both hooks on every outermost module (a full step); a light one's shim comes out
        (unless ``keep_shims``: a full step of inference, where the shim times the call
        itself), and so does the shim around a module compiled in place that turned out not to
        be outermost (a block of a model: it would time every call of every block)."""
        self._fwd_depth = 0
        self._fwd_top = None
        hooked = self._hooked_modules()
        outermost = {id(m) for m in hooked}
        for key in [k for k in self._around if k not in outermost]:
            call_shim.remove(self._around.pop(key))
        for module in hooked:
            key = id(module)
            if keep_shims and key in self._shims:
                continue
            shim = self._shims.pop(key, None)
            if shim is not None:
                call_shim.remove(shim)
            if key in self._around:  # compiled in place: its hooks would run traced
                continue
            if scripted(module):
                # TorchScript takes no hooks: its calls are seen from a call shim, the one a
                # light step uses (its full-step work is the hooks').
                shim = call_shim.install(module, self._shim_end, _is_compiling,
                                         before=self._shim_begin)  # fmt: skip
                if shim is not None:
                    self._shims[key] = shim
                continue
            if key not in self._pre_handles:
                # First of the module's pre-hooks: the clock starts before theirs, and the call
                # is seen as the script made it (a what-if's hook that repeats the batch comes
                # after).
                self._pre_handles[key] = module.register_forward_pre_hook(
                    WatchHook(self._fwd_pre), prepend=True
                )
            if key not in self._post_handles:
                self._post_handles[key] = module.register_forward_hook(
                    WatchHook(self._fwd_post), always_call=True
                )

    def _unhook_top_modules(self) -> None:
        handles = [*self._pre_handles.values(), *self._post_handles.values()]
        shims = [*self._shims.values(), *self._around.values()]
        self._pre_handles, self._post_handles, self._shims, self._around = {}, {}, {}, {}
        for h in handles:
            h.remove()
        for shim in shims:
            call_shim.remove(shim)
        self._fwd_depth = 0
        self._fwd_top = None

    def _fwd_pre(self, module: Any, args: Any, dispatch_ns: int | None = None) -> None:
        if _is_compiling() or self._bwd_depth or self._fetching or get_ident() != self._tid:
            return None
        depth = self._fwd_depth
        self._fwd_depth = depth + 1
        rec = self._rec
        if not self._switched:  # the global hooks: every module's call, nested ones too
            self._module_calls[depth == 0] += 1
        # torch's dispatch through this hook and its post-hook (before either's clock), or a
        # call shim's (``dispatch_ns``); in warm-up the global hooks fire on every module, and
        # warm-up is not reported.
        dispatch = (self._hooks_ns if dispatch_ns is None else dispatch_ns) if self._switched else 0
        if depth:
            if self._switched:
                self._top_nested = True
            if rec is not None:
                rec.current.overhead_ns += dispatch
            return None
        t = perf_counter_ns()
        self._fwd_top = module
        if rec is not None:
            rec.current.forwards += 1
        info = self.collected.modules.get(id(module))
        if info is None:
            info = self._first_call(module)
        if info is not None and info.calls < INSPECT_CALLS:
            try:
                kwargs = call_kwargs(sys._getframe(1))
                observe_call(info, args if isinstance(args, tuple) else (args,), kwargs)
            except Exception:
                info.calls = INSPECT_CALLS
            self._note_forward_site(module)
        self._fwd_top_info = info
        now = perf_counter_ns()
        if rec is not None:
            rec.current.overhead_ns += now - t + dispatch
        self._fwd_t0 = now
        return None

    def _note_forward_site(self, module: Any) -> None:
        """The user's line that called the model (autocast wraps it); the first calls only."""
        try:
            site = call_site(self.sources, sys._getframe(2))
        except Exception:  # a fix's call site is a nicety: never the user's problem
            return
        if site is not None:
            grad = bool(self._torch is not None and self._torch.is_grad_enabled())
            self.collected.forward_sites.setdefault(id(module), SiteCounts()).add(site, grad)

    def _first_call(self, module: Any) -> ModuleInfo | None:
        try:
            info = inspect_module(module)
        except Exception:
            return None
        self.collected.modules[id(module)] = info
        if len(self._top_modules) < MAX_TOP_MODULES:
            self._top_modules[id(module)] = module
        return info

    def _fwd_post(self, module: Any, args: Any, output: Any) -> None:
        if _is_compiling() or self._bwd_depth or self._fetching or get_ident() != self._tid:
            return None
        t = perf_counter_ns()
        if not self._full:
            # torch's dispatch through this one hook, before t (the figure is for two).
            self._light_end(module, t, self._hooks_ns // 2)
            return None
        depth = self._fwd_depth - 1
        if depth > 0:
            self._fwd_depth = depth
            return None
        self._fwd_depth = 0
        rec = self._rec
        if module is not self._fwd_top or rec is None:
            return None
        self._fwd_top = None
        cur = rec.current
        cur.framework_ns += t - self._fwd_t0
        if rec.recording_window:
            rec.window.framework.append((self._fwd_t0, t))
            rec.window.framework_phases.append("forward")
        info = self._fwd_top_info
        if info is not None and cur.phase == "measure":
            # By module: the part of a model left on the CPU is named with its own time.
            info.forward_ns += t - self._fwd_t0
        # Once an optimizer or backward ends the steps, a forward never does: no boundary call.
        if info is None or info.n_params == 0 or rec.kind in _DRIVE_PAST_FORWARD:
            cur.overhead_ns += perf_counter_ns() - t
            return None
        key = id(module)
        if self._cycle is None:
            self._note_call(key)
        closer = self._closer
        if (closer is not None and key != closer) or not self._boundary("forward", t):
            cur.overhead_ns += perf_counter_ns() - t
        return None

    def _note_call(self, key: int) -> None:
        """An outermost model call ended, before the round of calls is known (``call_cycle``)."""
        calls = self._calls
        calls.append(key)
        cycle = find_cycle(calls)
        if cycle is None and self._switched:
            # The warm-up ended first (a warm-up of one step): each call ends a step.
            cycle = Cycle(1, None)
        if cycle is None:
            return
        if cycle.closer is not None and cycle.closer not in self._top_modules:
            # Past the outermost modules the watch hooks (``MAX_TOP_MODULES``): its calls
            # would not be seen after the warm-up.
            cycle = Cycle(1, None)
        self._cycle, self._calls = cycle, []
        self._closer = cycle.closer
        if cycle.closer is not None:
            top = self._top_modules
            names = [type(top[k]).__name__ if k in top else "?" for k in calls[: cycle.period]]
            self.notes.append(
                f"the loop calls {cycle.period} models in turn ({', '.join(names)}): a step is "
                f"one round of them, ended by the last one's call"
            )


def scripted(module: Any) -> bool:
    """A TorchScript module (``torch.jit.script``, ``torch.jit.load``): registering a hook on it
    raises, and its ``forward`` runs in TorchScript."""
    from torch.jit import ScriptModule

    return isinstance(module, ScriptModule)


def call_kwargs(frame: FrameType | None) -> dict[str, Any] | None:
    """The keyword arguments of the module call this hook runs in: torch gives a global
    pre-hook the positional ones only, and a Hugging Face model is called with ``**batch``
    (its batch seen nowhere else). Read from torch's ``Module._call_impl`` or the call shim's
    wrapper, a frame or two up."""
    for _ in range(3):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "_call_impl" or code.co_filename == call_shim.__file__:
            kw = frame.f_locals.get("kwargs")
            return kw if isinstance(kw, dict) else None
        frame = frame.f_back
    return None
