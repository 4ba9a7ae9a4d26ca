"""What the parts of a watch share: its settings, and what its hooks keep between calls.

``session.Watch`` is this state with its parts as mixins, a module each: the step boundaries
(``step_boundaries.py``), the end of the measuring (``measuring_end.py``), the hooks by kind
(``training_step_hooks.py``, ``module_hooks.py``, ``loader_hooks.py``, ``copy_sync_hooks.py``),
the light steps (``light_steps.py``) and the models compiled in place (``compiled_models.py``).
Mixins rather than objects the watch delegates to: a hook's path reads the watch's own
attributes, with no lookup through another object on every step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from threading import get_ident
from typing import TYPE_CHECKING, Any

from ..report import Report
from . import call_shim
from .calibration import Calibration
from .call_cycle import Cycle
from .collected import Collected, CopySiteSeen, SyncAgg
from .detail import DetailPlan
from .flop_step import FlopStep
from .framework_hooks import FrameworkHookClock
from .host_lines import LineClock
from .no_grad_evals import NoGradBlocks
from .optimizer_clock import OptimizerClock
from .patches import Patches
from .phases import PhaseHooks
from .placement import ModuleInfo
from .profiler_window import ProfilerWindow
from .raised import Raised
from .recorder import StepRecorder
from .sampler_process import WatchSampler
from .source_lines import SourceMap

if TYPE_CHECKING:
    from ..script_command import BatchCommand

DEFAULT_DEVICE_TYPES = ("cuda", "xpu", "mps", "hpu", "privateuseone")


def _never_mind() -> None:
    """Nothing to undo."""


def never_compiling() -> bool:
    return False


_is_compiling: Callable[[], bool] = never_compiling
"""``torch.compiler.is_compiling`` once a watch has started. Every hook that compiled code may
call asks it first: torch.compile traces a module's hooks, an optimizer's and a wrapped
``backward`` into its graph, where the thread test and the clocks would break the graph (the
watched program would not be the user's). Traced, it is the constant True, so the hook vanishes
from the graph; run eagerly it costs about 0.1 us.

Each module whose hooks ask it holds it as a global of its own, set when a watch starts
(``session._use_is_compiling``): a hook reads it with one lookup."""


class WatchState:
    """The watch's settings and its hooks' state; the parts of ``session.Watch`` share it."""

    _closure_spans: list[tuple[int, int]]
    """The runs of the closure the timed optimizer step ran (Lightning's training step,
    LBFGS's re-evaluations), not the optimizer's own time: set at each timed step's start
    (``closure_timing.py``)."""

    _module_calls: list[int]
    """Module calls the global hooks saw in the warm-up: ``[nested, outermost]``; their ratio
    is the modules one outermost call runs (``step_boundaries``: the profiler window's size).
    Set at the start."""

    _unrecorded: bool = False
    """The steps after the measured ones run (the FLOP count's, the line clock's): no record
    of theirs counts, nor do the loader's batches in them (``loader_hooks``)."""

    _fetching: bool = False
    """The loader's ``__next__`` is fetching a batch in this thread (no workers): a module the
    dataset or collate function calls there is the input pipeline's work, not the model's
    (``loader_hooks.py``; the module hooks pass it by)."""

    framework_hooks: FrameworkHookClock | None = None
    """A framework's named hooks (Lightning's, Hugging Face's Trainer's parts), timed on the
    detailed steps (``framework_hooks.py``): set as the hooks go in."""

    def __init__(
        self,
        steps: int | None = None,
        warmup: int = 3,
        profile_steps: int = 3,
        stop_after_steps: bool | None = None,
        sample_interval_s: float = 0.1,
        label: str | None = None,
        source_names: dict[str, tuple[str, int]] | None = None,
        device_types: tuple[str, ...] = DEFAULT_DEVICE_TYPES,
        min_window_s: float = 0.0,
        max_window_s: float = 0.0,
        lean: bool = False,
        namespaces: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        if steps is not None and steps < 1:
            raise ValueError("steps must be at least 1")
        if warmup < 0 or profile_steps < 0:
            raise ValueError("warmup and profile_steps must not be negative")
        self.steps = steps
        self.min_window_s = max(0.0, float(min_window_s))
        self.max_window_s = max(0.0, float(max_window_s))
        self.lean = lean
        """Steps, items, modules and the loader only: no sync-debug mode, no copy hooks, no
        NVML readings (a what-if's timed runs: they compare step times, and on a step of a
        millisecond those parts cost a few percent that the user's own run does not pay)."""
        self.warmup = warmup
        self.profile_steps = profile_steps
        self.stop_after_steps = steps is not None if stop_after_steps is None else stop_after_steps
        self.sample_interval_s = sample_interval_s
        self.label = label
        self.batch_hint: Callable[[], BatchCommand | None] | None = None
        """The batch option the script was given on its command line (``gpusight run``), asked
        when the report is built: the items of a step whose model input is not batch-first,
        and the command a larger batch's fix runs."""
        self.device_types = device_types
        self.sources = SourceMap(names=dict(source_names or {}))
        self._namespaces = namespaces
        """Where the watched code's models may be (a notebook's user namespace), looked through
        at start for models compiled in place before it (``_adopt_compiled``); None: the
        globals and locals of the code that started the watch."""
        self.report: Report | None = None
        self.notes: list[str] = []
        self.outcome: str = "completed"
        self.raised: Raised | None = None
        self.collected = Collected()
        self._patches = Patches()
        self._tid: int | None = None
        self._native_tid: int | None = None
        self._pid = 0
        self._torch: Any = None
        self._rec: StepRecorder | None = None
        self._window: ProfilerWindow | None = None
        self._sampler: WatchSampler | None = None
        self._cuda = False
        self._t0_ns = 0
        self._t0 = 0.0
        self._end_ns = 0
        self._opt_clock: int | None = None
        """``id`` of the optimizer whose step ends the step (``self._clock.key``, kept here for
        the hooks' one comparison)."""
        self._clock = OptimizerClock()
        self._calls: list[int] = []
        """The outermost modules' keys, call by call, until the round is known."""
        self._cycle: Cycle | None = None
        """The round of outermost model calls that a step is (``call_cycle.py``), once known."""
        self._closer: int | None = None
        """The module whose call ends a step, where the loop calls several in turn."""
        self._cycle_extra = 0
        """Warm-up steps added while the round was looked for."""
        self._opt_open: list[int] = []
        """``id``s of the optimizers whose step is under way, outermost first."""
        self._opt_frames: list[Any] = []
        """The frames of torch's wrappers of those steps (the stale one of a step that raised
        is held until the next step, so its id is not another frame's)."""
        self._opt_t0 = 0
        self._fwd_depth = 0
        self._fwd_t0 = 0
        self._fwd_top: Any = None
        self._fwd_top_info: ModuleInfo | None = None
        self._bwd_depth = 0
        self._switched = False
        self._global_handles: list[Any] = []
        self._drop_compile_filter: Callable[[], None] = _never_mind
        self._pre_handles: dict[int, Any] = {}
        self._post_handles: dict[int, Any] = {}
        """The outermost modules' hooks, by module id. A light step that a model call ends
        takes the pre-hook off and ends the step from a call shim (``call_shim.py``) instead of
        the post-hook, or, where the module's call cannot take one, from the post-hook."""
        self._shims: dict[int, call_shim.Shim] = {}
        self._around: dict[int, call_shim.Shim] = {}
        """Call shims around the compiled call of outermost modules compiled in place: their
        step boundary and clock on every step (their hooks would run traced, unseen)."""
        self._top_nested = False
        """A hooked outermost module ran inside another's call: a step that a model call ends
        then keeps its pre-hook, which tells the outermost call apart."""
        self._top_modules: dict[int, Any] = {}
        self._sync_mode_before: int | None = None
        self._sync_mode_set = False
        self._flags_before: dict[str, Any] = {}
        self._started = False
        self._done = False
        self._flags_window: dict[str, Any] | None = None
        self.window_start_ms = 0.0
        self.window_stop_ms = 0.0
        self._measure_drained = False
        self.lines_early = False  # the line clock runs before the measured steps (no steps)
        self.end_drain_ms: float | None = None
        """The GPU's work still queued when the last measured step ended on the host (its
        timestamps run ahead of a GPU-bound step by the launch queue's depth)."""
        self._extra_warmup = 0
        self._iter_made_ns: dict[int, int] = {}
        """Time ``iter(loader)`` took, by ``id`` of the iterator, until its first batch."""
        # Nothing left to do between steps but the bookkeeping (see ``_between_steps``).
        self._settled = False
        # (id(code), instruction offset) of a copy's or a sync's calling frame, when that frame
        # is the user's own -> what it resolved to: a hot loop copies and syncs from the same
        # lines every step. The code object is held so that its id stays its own.
        self._copy_sites: dict[tuple[int, int], CopySiteSeen] = {}
        self._sync_sites: dict[tuple[int, int], tuple[Any, SyncAgg]] = {}
        # Frames between a sync warning and the line that caused it that are always ours or
        # the warnings module's: skipped before looking for the user's frame.
        self._relay_codes: set[int] = set()
        # What the hooks' own clocks cannot see (torch's hook dispatch, the wrapper layer,
        # Python's warning path), measured at start and added per event: see calibration.py.
        self.calibration = Calibration()
        # Whether the current step records copies and syncs; every step unless they would
        # cost a short step more than their budget (detail.py).
        self.detail = DetailPlan()
        self._detail = True
        # Whether the current step runs the module hooks and framework clocks (detail.py).
        self._full = True
        self._light_ok: bool | None = None
        self._in_run = False
        """A run of light steps is under way (``_start_run``, ``_opt_post``)."""
        self._run_shim: call_shim.Shim | None = None
        """The shim whose stand-in ends the run's steps, where a model call ends them."""
        self._run: list[int] = []
        """The ends of the light steps in the run under way."""
        self._run_data: list[int] = []  # each of those steps' wait for its loader
        self._run_left = 0
        """How many more steps the run may take, where an optimizer step ends them."""
        self._graphs_at_start = self._graphs_seen = 0  # _seen: at the last step's end
        self._batch_shapes: set[tuple[tuple[int, ...], ...]] = set()  # loader_hooks._note_shape's
        self.phases = PhaseHooks(self, lambda: _is_compiling())
        self.no_grad = NoGradBlocks(self.phases)  # evaluations without model.eval()
        self.flops = FlopStep(enabled=not lean)
        """The FLOPs of the step after the measured ones (``flop_step.py``)."""
        self.lines = LineClock(self.sources, enabled=not lean)
        """The host's time by line of the user's code, after the measured steps (``host_lines``)."""

    @property
    def calibration(self) -> Calibration:
        return self._calibration

    @calibration.setter
    def calibration(self, value: Calibration) -> None:
        self._calibration = value
        self._hooks_ns = value.module_hooks_ns  # read on every module call: one lookup less

    def _flags_now(self) -> dict[str, Any]:
        from .machine import torch_flags

        return torch_flags(self._torch) if self._torch is not None else {}

    def _mine(self) -> bool:
        # Once the requested steps are in (``_tid`` is then None), every hook passes straight
        # through. The hooks inline this test: it runs several times a step.
        return get_ident() == self._tid

    if TYPE_CHECKING:
        # What one part calls in another, defined in that part's mixin (``session.Watch``).
        def _boundary(self, kind: str, t: int) -> bool: ...
        def _measuring_done(self) -> None: ...
        def _drain_before_measure(self) -> None: ...
        def _end_flop_step(self, kind: str, rec: StepRecorder) -> bool: ...
        def _end_line_step(self, kind: str, rec: StepRecorder) -> bool: ...
        def _close_run(self) -> None: ...
        def _run_length(self, rec: StepRecorder) -> int: ...
        def _light_allowed(self) -> bool: ...
        def _set_full(self, on: bool) -> None: ...
        def _light_end(self, module: Any, t: int, dispatch_ns: int) -> None: ...
        def _shim_begin(self, module: Any, args: Any) -> None: ...
        def _shim_end(self, module: Any) -> None: ...
        def _set_detail(self, on: bool) -> None: ...
        def _maybe_enable_sync_mode(self) -> None: ...
        def _restore_sync_mode(self) -> None: ...
        def _switch_hooks(self) -> None: ...
        def _hooked_modules(self) -> list[Any]: ...
        def _hook_top_modules(self, keep_shims: bool = False) -> None: ...
        def _unhook_top_modules(self) -> None: ...
        def _fwd_pre(self, module: Any, args: Any, dispatch_ns: int | None = None) -> None: ...
        def _fwd_post(self, module: Any, args: Any, output: Any) -> None: ...
