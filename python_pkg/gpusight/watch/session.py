"""Watch a real run without changing its code: ``with gpusight.watch(steps=20) as w: train()``.

What is installed for the duration of the watch (and removed again, also on error or Ctrl-C):

* global optimizer step pre/post hooks: the end of a training step, and host time in ``step``;
* wrappers of ``Tensor.backward`` / ``torch.autograd.backward``: step ends without an optimizer;
* global module forward hooks while warming up, then hooks on the outermost modules only (so
  that the measured steps keep torch's fast path for every inner module): forward time,
  inference steps, and where parameters and inputs live;
* a wrapper of ``_BaseDataLoaderIter.__next__``: time blocked waiting for the next batch;
* wrappers of ``Tensor.to`` / ``Tensor.cuda``: host-to-device copies, pinned or pageable, with
  the user's source line (a ``non_blocking=True`` copy from pageable memory is a hidden sync);
* wrappers of ``nn.Module.double`` / ``nn.Module.to``, ``torch.set_default_dtype`` and the
  tensor makers ``torch.from_numpy`` / ``tensor`` / ``as_tensor``: the user's lines that made a
  model or its data float64 (``float64_calls.py``);
* CUDA sync-debug mode ``warn`` and a ``warnings.showwarning`` hook that turns each sync warning
  into a count at the user's source line; a wrapper of ``torch.cuda.synchronize``;
* a ``torch.profiler`` window of a few steps right after warm-up; an NVML sampler process.

The hooks cost a few microseconds each; the watch measures its own time in them, adds per
event what their clocks cannot see (torch's dispatch to a module hook, the wrapper layer,
Python's warning path: measured on stand-ins when the watch starts, see ``calibration.py``) and
reports it as ``run.overhead_pct`` over the clean (unprofiled) steps. ``cost/overhead.py``
checks it from outside: on this project's CPU machine the micro-benchmark's added 15.9 µs per
step against 12-14 µs reported (5 µs before the calibration). Still not counted: torch's C++
side of a sync warning (CUDA only; the whole warning path measured 3.5-5.5 µs per sync on an
H200, Python's part included).

The hooks run on every step, so their common path is kept short: one thread check,
then cached answers (the user's line per calling instruction, the step's phase), and none of the
between-steps work (profiler window, hook switch, sync-debug mode) once that is all settled.

Here: the watch's start, stop and restore. Its hooks and step logic are its mixins, a module
each (``watch_state.py`` names them).
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

from .. import hook_copies
from ..report import Report
from . import (
    compiled_models,
    copy_sync_hooks,
    float64_calls,
    light_steps,
    loader_hooks,
    module_hooks,
    training_step_hooks,
    watch_state,
)
from .calibration import calibrate
from .compiled_models import CompiledModels, _callers_namespaces, _compiled_graphs
from .copy_sync_hooks import SYNC_MESSAGE, CopySyncHooks, classify_copy, non_blocking_arg, sync_kind
from .flop_step import FLOPS_CUT_SHORT
from .framework_hooks import FrameworkHookClock
from .host_lines import LINES_CUT_SHORT
from .host_lines import STEPS as LINE_STEPS
from .light_steps import MAX_RUN, LightSteps
from .loader_hooks import LoaderHooks
from .measuring_end import MeasuringEnd, StopWatch
from .module_hooks import ModuleHooks
from .nvml_sampler import NvmlSampler
from .optimizers_seen import wrap_init
from .profiler_window import ProfilerWindow
from .raised import raised_from
from .recorder import StepRecorder
from .sampler_process import WatchSampler, gpu_sampler
from .step_boundaries import StepBoundaries, warmup_settled
from .training_step_hooks import TrainingStepHooks
from .watch_state import never_compiling

# Besides the watch, what the package, the tests and the benchmarks import from here.
__all__ = [
    "MAX_RUN",
    "SYNC_MESSAGE",
    "NvmlSampler",
    "StopWatch",
    "Watch",
    "classify_copy",
    "gpu_sampler",
    "non_blocking_arg",
    "sync_kind",
    "warmup_settled",
]

COMPILE_HOOKS_MESSAGE = re.escape("Using `torch.compile(module)` when there are global hooks")

_ACTIVE: Watch | None = None
_FORK_HOOK = False


def _after_fork_in_child() -> None:
    # DataLoader workers are forks of the watched process: hooks there must pass through.
    w = _ACTIVE
    if w is not None:
        w._tid = None


def _use_is_compiling(is_compiling: Callable[[], bool]) -> None:
    """``torch.compiler.is_compiling`` into each module whose hooks ask it (``watch_state.py``)."""
    watch_state._is_compiling = is_compiling
    training_step_hooks._is_compiling = is_compiling
    module_hooks._is_compiling = is_compiling
    light_steps._is_compiling = is_compiling
    compiled_models._is_compiling = is_compiling
    loader_hooks._is_compiling = is_compiling
    copy_sync_hooks._is_compiling = is_compiling
    float64_calls._is_compiling = is_compiling


def _filter_warning(action: Any, message: str) -> Callable[[], None]:
    """Put a warnings filter first; returns what takes that one entry out again (once)."""
    warnings.filterwarnings(action, message=message)
    entry = warnings.filters[0]

    def drop() -> None:
        filters: list[Any] = warnings.filters  # type: ignore[assignment]
        if entry in filters:
            filters.remove(entry)
            mutated = getattr(warnings, "_filters_mutated", None)
            if mutated is not None:
                mutated()

    return drop


class Watch(
    StepBoundaries,
    MeasuringEnd,
    TrainingStepHooks,
    ModuleHooks,
    LightSteps,
    CompiledModels,
    LoaderHooks,
    CopySyncHooks,
):
    """Instrument the code run inside it; ``report`` holds the diagnosis afterwards.

    ``steps``: measured steps wanted; with ``stop_after_steps`` (default: when ``steps`` is
    given) the watched code is ended after them by raising :class:`StopWatch` from the step
    hook, which the watch catches. ``warmup`` steps come first and are not measured; then,
    when ``profile_steps`` > 0, one profiler start-up step and ``profile_steps`` profiled steps.
    """

    def __enter__(self) -> Watch:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if self.in_forked_child:
            # A fork of the watched process leaving the watched code (a child that calls
            # sys.exit): the watch is the parent's; stopping its profiler here never returned.
            return False
        if exc_type is not None and issubclass(exc_type, StopWatch):
            self.outcome = "stopped"
        elif exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self.outcome = "interrupted"
        elif exc_type is not None and issubclass(exc_type, SystemExit):
            self.outcome = f"exited ({exc.code!r})" if exc is not None else "exited"
        elif exc_type is not None:
            self.outcome = f"raised {exc_type.__name__}"
            try:
                self.raised = raised_from(exc_type, exc, tb, self.sources)
            except Exception:  # where it raised is a detail: the user's exception goes on
                self.raised = None
        self.stop()
        return exc_type is not None and issubclass(exc_type, StopWatch)

    @property
    def in_forked_child(self) -> bool:
        return bool(self._pid) and os.getpid() != self._pid

    def start(self) -> Watch:
        global _ACTIVE, _FORK_HOOK
        if self._started:
            raise RuntimeError("this watch was already started")
        if _ACTIVE is not None:
            raise RuntimeError("a gpusight watch is already running in this process")
        import torch

        from .machine import torch_flags, visible_gpus

        # torch.compiler.is_compiling came with torch 2.3; before it nothing traces our hooks.
        _use_is_compiling(
            getattr(getattr(torch, "compiler", None), "is_compiling", None) or never_compiling
        )
        self._torch = torch
        self._started = True
        self._graphs_at_start = self._graphs_seen = _compiled_graphs()
        self._tid = threading.get_ident()
        self._native_tid = threading.get_native_id()
        self._module_calls = [0, 0]
        self._pid = os.getpid()
        self._cuda = bool(torch.cuda.is_available())
        self._flags_before = torch_flags(torch)
        self._t0 = time.perf_counter()
        self._t0_ns = perf_counter_ns()
        profile = self.profile_steps if self.profile_steps > 0 else 0
        self._rec = StepRecorder(self.warmup, profile, self.steps, self._t0_ns)
        self._rec.min_window_ns = int(self.min_window_s * 1e9)
        self._rec.max_window_ns = int(self.max_window_s * 1e9)
        if (self.steps is None or self.min_window_s > 0) and self.lines.enabled and profile > 0:
            # Measured to the code's end (no steps, or a minimum window that may outlast the
            # code): the steps timed by line come after the profiled ones, before the measured
            # ones, or a run that ends first would have none (a what-if's baseline of a 500-step
            # script). A watch asked for no profiled steps takes no other unmeasured ones either.
            self._rec.line_steps = LINE_STEPS
        _ACTIVE = self
        if not _FORK_HOOK and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _FORK_HOOK = True
        spaces = self._namespaces if self._namespaces is not None else _callers_namespaces()
        try:
            self.calibration = calibrate(torch)
            self._install(torch)
            self._adopt_compiled(spaces)
            self._maybe_enable_sync_mode()
            if profile and self.warmup == 0:
                self._start_window()
        except BaseException:
            self._restore()
            raise
        if self._cuda and not self.lean:
            ids = visible_gpus()
            self._sampler = gpu_sampler(
                ids, self.sample_interval_s, self._t0, labels=range(len(ids))
            )
        else:
            # The host's CPU % alone: no GPU to watch, or a lean run that times the user's steps.
            self._sampler = NvmlSampler((), interval_s=self.sample_interval_s, t0=self._t0)
            self._sampler.start()
        self._rec.current.start_ns = perf_counter_ns()
        return self

    def stop(self) -> Report:
        """Restore everything, then build the report (also after an error in the watched code)."""
        if self.report is not None:
            return self.report
        self._end_ns = perf_counter_ns()
        try:
            if self._rec is not None:
                self._close_run()  # before the hooks come off: ``_restore`` takes the shims
                if self.phases.tracker.active is not None:
                    self.phases.tracker.end(self._rec, self._end_ns)
                self._rec.finish(self._end_ns)
        finally:
            self._restore()
        from .report_builder import build_report

        try:
            self.report = build_report(self)
        except Exception as exc:  # a diagnosis bug must not hide the user's own outcome
            from .report_builder import failed_report

            self.report = failed_report(self, exc)
        return self.report

    def _restore(self) -> None:
        """Undo everything; each part on its own, so one failure leaves no other in place."""
        global _ACTIVE
        # From here on every hook passes through: stopping the profiler syncs the device, and
        # that sync is ours, not the user's.
        self._tid = None
        parts: list[tuple[str, Callable[[], object]]] = [
            ("FLOP counter", lambda: self.flops.abort(FLOPS_CUT_SHORT)),
            ("line clock", lambda: self.lines.abort(LINES_CUT_SHORT)),
            ("profiler window", self._end_window),
            ("hooks and wrappers", self._patches.restore),
            ("sync-debug mode", self._restore_sync_mode),
            ("NVML sampler", lambda: self._sampler.stop() if self._sampler is not None else None),
        ]
        try:
            for what, undo in parts:
                try:
                    undo()
                except Exception as exc:
                    self.notes.append(f"could not restore the {what}: {type(exc).__name__}: {exc}")
        finally:
            self._tid = None
            # Hold no reference to the user's modules (or frames) once the watch is over.
            self._opt_open, self._opt_frames = [], []
            self._top_modules = {}
            self._fwd_top = None
            self._fwd_top_info = None
            if _ACTIVE is self:
                _ACTIVE = None
        self.notes.extend(self._patches.errors)
        after = self._flags_now()
        changed = [k for k, v in self._flags_before.items() if after.get(k) != v]
        if changed:
            self.notes.append(
                "torch settings changed by the watched code: " + ", ".join(sorted(changed))
            )

    def _install(self, torch: Any) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_mod
        from torch.utils.data import dataloader

        p = self._patches
        has_global = getattr(nn_module, "_has_any_global_hook", None)
        if callable(has_global) and not has_global():
            # torch warns on every call of a torch.compile'd module while any global module
            # hook is on: ours are, through the warm-up, and the extra call they see is
            # handled (the compiled wrapper becomes the outermost module). Not hidden when the
            # user has global hooks of their own: then the warning is theirs.
            self._drop_compile_filter = _filter_warning("ignore", COMPILE_HOOKS_MESSAGE)
            p.add("torch.compile warnings filter", self._drop_compile_filter)
        p.handle("optimizer pre-hook", optim_mod.register_optimizer_step_pre_hook(self._opt_pre))
        opt_cls = optim_mod.Optimizer
        p.set_attr(opt_cls, "__init__", wrap_init(self, opt_cls.__init__))
        p.handle("optimizer post-hook", optim_mod.register_optimizer_step_post_hook(self._opt_post))
        h_pre = nn_module.register_module_forward_pre_hook(self._fwd_pre)
        h_post = nn_module.register_module_forward_hook(self._fwd_post, always_call=True)
        self._global_handles = [h_pre, h_post]
        p.handle("module forward pre-hook", h_pre)
        p.handle("module forward hook", h_post)
        module_cls = nn_module.Module
        p.set_attr(module_cls, "compile", self._wrap_module_compile(module_cls.compile))
        p.set_attr(torch.jit, "script", hook_copies.scripting(torch.jit.script))

        p.set_attr(torch.Tensor, "backward", self._wrap_backward(torch.Tensor.backward))
        p.set_attr(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))
        it_cls = dataloader._BaseDataLoaderIter
        p.set_attr(it_cls, "__next__", self._wrap_next(it_cls.__next__))
        loader_cls = dataloader.DataLoader
        p.set_attr(loader_cls, "__init__", self._wrap_loader_init(loader_cls.__init__))
        p.set_attr(loader_cls, "__iter__", self._wrap_iter(loader_cls.__iter__))
        if not self.lean:
            p.set_attr(torch.Tensor, "to", self._wrap_copy(torch.Tensor.to))
            p.set_attr(torch.Tensor, "cuda", self._wrap_copy(torch.Tensor.cuda))
            float64_calls.install(self, torch)
        p.set_attr(torch.cuda, "synchronize", self._wrap_synchronize(torch.cuda.synchronize))
        # Sync warnings: every occurrence (not once per line), shown to us instead of printed.
        p.add("warnings filter", _filter_warning("always", SYNC_MESSAGE))
        p.set_attr(warnings, "showwarning", self._wrap_showwarning(warnings.showwarning))
        self.phases.install(torch)
        self.no_grad.install(torch)
        if not self.lean:  # a what-if's timed re-runs compare step times alone
            self.framework_hooks = FrameworkHookClock(
                lambda: self._detail and threading.get_ident() == self._tid
            )
            self.framework_hooks.install(p)

    @property
    def recorder(self) -> StepRecorder | None:
        return self._rec

    @property
    def window(self) -> ProfilerWindow | None:
        return self._window

    @property
    def sampler(self) -> WatchSampler | None:
        return self._sampler

    @property
    def compiled_graphs(self) -> int:
        """Graphs torch.compile has compiled in this process so far."""
        return _compiled_graphs()

    @property
    def cuda_available(self) -> bool:
        return self._cuda

    @property
    def native_tid(self) -> int | None:
        """The watched thread's OS id: the ``tid`` of its events in profiler traces."""
        return self._native_tid

    @property
    def t0_ns(self) -> int:
        return self._t0_ns

    @property
    def end_ns(self) -> int:
        return self._end_ns

    @property
    def batch_shapes(self) -> int:
        return len(self._batch_shapes)

    @property
    def torch(self) -> Any:
        return self._torch

    def flags(self) -> dict[str, Any]:
        """torch flags as the measured steps saw them (at the profiler window, else at start)."""
        return dict(self._flags_window or self._flags_before)
