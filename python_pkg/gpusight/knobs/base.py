"""What a knob is: a change a what-if measures, with everything it needs in one place.

A knob plans its arms from the baseline run's facts (``groups``), checks the values it is given
(``validate``), takes effect in a re-run of the unmodified script (``install`` once at the
start, ``prepare`` once at the model's first changed call, ``before`` around each of its
outermost calls, ``script_args`` on the command line), says how a re-run shows that it took
effect (``applied_as``), and turns a measured arm into the fix a user applies (``fix``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..report import Fix

Scope = Literal["end_to_end", "compute_only"]

MIN_WINDOW_S = 2.0
"""A re-run's shortest measured window, in seconds (``rerun/driver.py``), with at least 20 steps:
what a knob's arm can count on seeing."""


SCRIPTED_MODEL = (
    "the model is a TorchScript module (torch.jit.script or torch.jit.load), which takes no "
    "hooks: a re-run cannot change its calls; make the change in the script itself"
)
"""Why a change made around the model's calls did not reach a TorchScript model."""


class Record(Protocol):
    """Where a knob tells its driver what took effect and how to undo what it patched."""

    @property
    def notes(self) -> list[str]: ...

    def hit(self, what: str) -> None:
        """``what`` took effect once more (a loader changed, a model call wrapped)."""

    def on_undo(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the run ends, after what was registered later (last in, first out)."""


class Target(Protocol):
    """What a knob applies its change through: the driver's hold on the user's model calls.

    ``rerun/inject.py``'s model hooks are one: the unmodified script's model, found at its first
    call. A knob reads the change it was given (``changes``), walks a call's tensors with the
    driver's own helpers (``knobs/tensors.py``), and leaves where it moved the model
    (``device``), whether its weights changed layout (``relaid``) and the script's own batch
    (``batch``) for the knobs after it.
    """

    changes: dict[str, Any]
    device: Any
    relaid: bool
    batch: int | None
    capturing: bool
    """The calls are captured into a CUDA graph and replayed: nothing may be cached across
    them (autocast's casts of the weights)."""

    @property
    def torch(self) -> Any: ...

    @property
    def inj(self) -> Record: ...

    @property
    def map_tensors(self) -> Callable[[Any, Callable[[Any], Any]], Any]: ...

    @property
    def tensors_of(self) -> Callable[[Any], list[Any]]: ...

    @property
    def batch_len(self) -> Callable[[Any], int | None]: ...


class Local(Protocol):
    """What the in-process driver (``whatif/``: copies of the user's objects in the kernel) tells
    a knob about them; ``whatif/context.Context`` is one."""

    @property
    def cuda(self) -> bool: ...

    @property
    def device(self) -> Any:
        """Where the user's model is."""

    @property
    def torch(self) -> Any: ...

    @property
    def model(self) -> Any:
        """The user's model (never changed: the driver measures on copies)."""

    @property
    def step_fn(self) -> Any: ...

    @property
    def optimizer(self) -> Any: ...

    @property
    def half_model(self) -> bool:
        """Every weight of the model is float16 or bfloat16."""

    @property
    def flags(self) -> dict[str, Any]:
        """torch's global settings now (``whatif/restore.read_flags``)."""

    def has_module(self, *types: Any) -> bool: ...

    def affordable(self, seconds: float, reserve: float = 0.0) -> bool: ...

    def seconds_left(self) -> float: ...

    @property
    def loader(self) -> Any:
        """The user's loader: a DataLoader, or another iterable of batches (never changed)."""

    @property
    def dataloader(self) -> bool:
        """The loader is a torch.utils.data.DataLoader (its settings can be changed)."""

    @property
    def cpu_count(self) -> int: ...

    @property
    def fetch_cpu_pct(self) -> float | None:
        """How busy the user's loader kept the thread that fetched from it, in % of the
        fetches' wall time, where it loads in the main process (None: unknown)."""

    @property
    def batches(self) -> list[Any]:
        """Batches taken from the user's loader, as it gave them."""

    def loader_workers(self) -> int:
        """The workers a DataLoader setting is measured with: those the num_workers sweep's
        winner stacks on (``Knob.stack_base``), else the user's own."""


Procedure = Literal["cached", "loader", "sweep", "epoch_start", "batch_sweep"]


@dataclass(frozen=True)
class LocalRow:
    """A row the in-process driver measures for a knob, and how (``whatif/procedures.py``):

    ``cached``: the arm against the unchanged step, both on batches cached from the loader;
    ``loader``: the arm with a clone of the user's DataLoader (on the num_workers winner where
    it sets the winner's workers) against the loader without it; ``sweep``: the knob's points
    in turn to the knee; ``epoch_start``: a new epoch's start-up, spread over its batches;
    ``batch_sweep``: the batch grown to the knee on cached batches, then checked with the loader.
    """

    key: str
    """The report row's key (API: ``WhatIf`` rows and ``diagnose(experiments=...)``)."""
    label: str
    finding_id: str
    procedure: Procedure = "cached"
    min_s: float = 0.0
    """Seconds it takes at least, however short the step (compiling): measured last."""
    input_bound: bool = False
    """Measured only where the measured step with loading is slower than on cached batches."""


@dataclass
class Arm:
    group: str
    label: str
    changes: dict[str, Any]
    finding_id: str | None = None
    skipped: str | None = None
    slowdown: float = 1.0
    """How much longer than the baseline one step may take (the batch grows): for forecasts."""
    items_factor: float = 1.0
    """How many times the baseline's items a step of this arm processes (a larger batch)."""
    scope: Scope = "end_to_end"
    """``compute_only``: the arm times the model on the same inputs repeated, not the user's
    loop at a larger batch; its gain is not the script's end to end."""
    extra_s: float = 0.0
    """Seconds a run of this arm takes beyond the control's besides its steps (compiling)."""
    stacked_on: str | None = None
    """The winning batch arm's label where this arm ran on top of it (its changes merged in):
    its gain is then over that arm's run, not over the control."""


@dataclass
class Group:
    name: str
    priority: float
    arms: list[Arm] = field(default_factory=list)
    sweep: bool = False
    bound: float | None = None
    """The most any of its arms can gain, from the share of the step they act on (Amdahl): a
    group whose bound the noise band would hide is not run (None: no bound known)."""
    measured: list[tuple[Arm, float]] = field(default_factory=list)
    """Its arms that ran, each with its gain (the driver fills it): ``Knob.stack_base`` reads
    it."""


@dataclass
class Situation:
    """The baseline's facts as the knobs plan from them."""

    facts: dict[str, Any]
    cuda: bool
    loader: dict[str, Any] | None
    model: dict[str, Any] | None
    flags: dict[str, Any]
    cores: int
    ids: set[str]
    mode: str | None
    data_share: float
    host_share: float
    compute_share: float

    @classmethod
    def of(cls, facts: dict[str, Any]) -> Situation:
        return cls(
            facts=facts,
            cuda=bool(facts.get("cuda")),
            loader=facts.get("loader") or None,
            model=facts.get("model") or None,
            flags=facts.get("flags") or {},
            cores=int(facts.get("cpu_count") or 1),
            ids=set(facts.get("finding_ids") or []),
            mode=facts.get("step_mode"),
            data_share=share(facts, "data_wait"),
            host_share=share(facts, "launch_overhead", "other_cpu", "sync_stall"),
            compute_share=share(facts, "compute"),
        )

    @property
    def kernels_bound(self) -> float | None:
        """The most a change of the GPU's kernels alone (their precision, layout, algorithms)
        can gain: the step's time in kernels removed. None where no kernel time was seen (no
        trace, no NVML): unknown, not zero. On the H100 tv_transforms_loader's channels_last
        run (a step waiting 87 % for its loader) took the 23 s its batch arm then lacked."""
        return amdahl(self.compute_share) if self.compute_share > 0 else None


def amdahl(share_pct: float) -> float:
    """The most a change can gain that removes ``share_pct`` % of the step and nothing else."""
    return 100.0 / max(1e-9, 100.0 - share_pct)


def share(facts: dict[str, Any], *keys: str) -> float:
    """The share of the baseline's step, in %, that the breakdown's ``keys`` took."""
    split = facts.get("breakdown_ms") or {}
    total = sum(float(v or 0.0) for v in split.values())
    if total <= 0:
        return 0.0
    return 100.0 * sum(float(split.get(k) or 0.0) for k in keys) / total


After = Callable[[Any], Any]
"""Given the model call's output, the output the script gets (the change undone around it)."""


class Knob:
    """A change a what-if measures. Subclasses set the names and override what they use."""

    name: str = ""
    """The what-if group its arms are in (a report row's ``params.group``)."""
    keys: tuple[str, ...] = ()
    """The change keys it owns (``gpusight run --inject`` takes them)."""
    findings: tuple[str, ...] = ()
    """The findings its arms are evidence of (docs/whatif.md lists them; a test holds its kernel
    rows' findings to them)."""
    applied_as: str = ""
    """The re-run's injection count that says the change took effect."""
    unapplied: str = ""
    """Why a change of this knob might not take effect, for a row that says it did not."""
    rerun: bool = True
    """Measured by re-running the script (``gpusight run --what-if``; ``--try`` lists it);
    False: only in the kernel, where ``not_planned`` says why."""
    order: int = 50
    """Around the model's call: a lower order's ``before`` runs first, its ``after`` last."""
    moves_parameters: bool = False
    """Its ``prepare`` moves or relays the model's parameters (an optimizer's state follows)."""
    extra_warmup: int = 0
    """Warm-up steps a re-run with this change needs beyond the control's (compiling)."""
    grows_batch: bool = False
    """Its arms make more items per step: a winner of it is what ``stacks_on_batch`` arms are
    tried again on top of."""
    stacks_on: str = ""
    """The knob whose winner this one's arms run on top of, planned again from the winner's
    settings (``groups_on``) and judged against its run: the DataLoader's other settings on the
    winning workers (pinning pays off in the pin thread of a loader with workers; in the main
    process of one without, it only adds a copy)."""
    model_facts: tuple[tuple[str, str], ...] = ()
    """What a watched run records of its model for this knob to plan by: (the facts key under
    ``model``, the watch's attribute of the model's record it reads)."""
    stacks_on_batch: bool = False
    """An arm of it that loses on the baseline's batch is tried once more on the winning batch:
    its cost is per launch (casts, layout conversions), which a larger batch amortises (on the
    H200 a launch-bound Trainer's bf16 read 0.74x at batch 8, the fix is batch 64 with bf16)."""

    def groups(self, s: Situation) -> list[Group]:
        return []

    def groups_on(self, s: Situation, winner: Arm) -> list[Group]:
        """The groups to run on top of ``winner`` (an arm of ``stacks_on``)."""
        return self.groups(s)

    def stack_base(self, group: Group, noise_pct: float | None, cores: int) -> Arm | None:
        """The arm of ``group`` (this knob's, won) that the knobs stacking on it run on top of:
        the best measured (None: none). ``cores``: the machine's CPU cores."""
        return max(group.measured, key=lambda m: m[1])[0] if group.measured else None

    def not_planned(self, s: Situation) -> str:
        """Why ``groups`` planned nothing for this run: said where the user asked for this
        change by name (``--try``)."""
        return "nothing in the unchanged run calls for it"

    def validate(self, changes: dict[str, Any]) -> str | None:
        """What is wrong with this knob's values in ``changes`` (None: nothing)."""
        return None

    def owns(self, changes: dict[str, Any]) -> bool:
        return any(changes.get(k) for k in self.keys)

    def needs_model(self, changes: dict[str, Any]) -> bool:
        """Whether the change acts on the model's calls (the re-run then hooks them)."""
        return False

    def applied_name(self, key: str) -> str:
        return self.applied_as or key

    def took_effect(self, facts: dict[str, Any] | None, changes: dict[str, Any]) -> str | None:
        """Why a re-run with ``changes`` does not show this knob's change (None: it does)."""
        applied = (facts or {}).get("injected") or {}
        if any(k in changes and not applied.get(self.applied_name(k)) for k in self.keys):
            notes = (facts or {}).get("inject_notes") or []
            return next((n for n in notes if n == SCRIPTED_MODEL), self.unapplied or self.name)
        return None

    def install(self, hooks: Target) -> None:
        """At the re-run's start (``hooks``: the driver's hold on the model's calls)."""

    def prepare(self, hooks: Target, module: Any) -> None:
        """Once, before the model's first changed call."""

    def before(self, hooks: Target, module: Any, call: Any) -> tuple[Any, After | None]:
        """Around each outermost model call: ``call`` is ``(args, kwargs)``; returns the call to
        make and what to do with its output (None: nothing)."""
        return call, None

    def items(self, changes: dict[str, Any], counted: int | None, base: int | None) -> int | None:
        """Items per step of a re-run with ``changes``, from the watch's count in it and the
        baseline's: the watch's count unless the change makes the step's items differ from it."""
        return counted

    def extend(self, group: Group, gains: list[float | None], s: Situation) -> Arm | None:
        """One more point for a sweep that has run all its arms (None: it ends there); ``s``:
        the unchanged run's situation."""
        return None

    def source_edits(self, changes: dict[str, Any]) -> dict[str, str] | str:
        """The user's files a re-run with ``changes`` runs changed (path in the run's copy ->
        its new text), or why the change cannot be made; ``{}``: none."""
        return {}

    def script_args(self, args: list[str], changes: dict[str, Any]) -> list[str]:
        """The script's command line for a re-run with ``changes``."""
        return args

    def row_params(self, changes: dict[str, Any]) -> dict[str, Any]:
        """How the change was set, for its row's params, where a value is more than a number
        or a name (those the row takes as ``set_<key>`` itself)."""
        return {}

    def cost(
        self, arm_facts: dict[str, Any] | None, ref_facts: dict[str, Any] | None,
        step_ms: float | None, ref_step_ms: float | None,
    ) -> dict[str, float]:  # fmt: skip
        """What the change costs once, apart from its steady steps (``compile_s``), from the
        arm's and the control's facts and their steps: a measured row's params."""
        return {}

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        from ..report import Fix

        return Fix(text=arm.label)

    # The in-process driver: one arm measured on copies of the user's objects.

    local_finding: str = ""
    """The finding the in-process arm is evidence of."""
    local_label: str = ""
    """The in-process what-if row's change where it does not measure this knob."""
    local_min_s: float = 0.0
    """Seconds the in-process arm takes at least, however short the step (compiling): such a
    knob is measured last."""
    local_hooks: bool = False
    """The kernel applies it to its copy of the model by this knob's own ``prepare`` and
    ``before`` (``whatif/knob_hooks.py``), as a re-run applies it to the script's."""
    infer_label: str = ""
    """``diagnose_inference``'s row for it, where it measures this knob on the user's forward
    (its ``before`` alone, around each call: ``infer_arm``)."""

    def infer_arm(self, cuda: bool) -> Arm | str:
        """The change ``diagnose_inference`` times on the user's forward, or why not here."""
        return "not measured on a forward alone"

    def infer_params(self, arm: Arm) -> dict[str, Any]:
        """What ``diagnose_inference``'s row says of ``arm`` besides its times."""
        return {}

    local_warmup: int = 0
    """Warm-up steps an in-process block with this change needs beyond one (autotuning)."""
    setup_code: tuple[str, ...] = ()
    """The lines that turn the change on before a training loop, in the user's names (``model``,
    ``torch``): the measured winners' loop written out together."""

    def step_context(self, torch: Any, changes: dict[str, Any], device_type: str) -> Any:
        """What the kernel's step runs under with this change, the loss included as the fix's
        snippet computes it (None: nothing; a re-run changes only the model's calls)."""
        return None

    def input_layout(self, torch: Any) -> Any:
        """The memory format the kernel keeps its batches on the device in, under this change
        (None: as they come), so that the step does not convert them each time."""
        return None

    def scales_loss(self, changes: dict[str, Any]) -> bool:
        """The kernel's own step scales its loss (a GradScaler) under this change."""
        return False

    def local_notes(self, hits: dict[str, int]) -> list[str]:
        """Notes for the user from what took effect on the arm's copy (``Record.hit`` counts)."""
        return []

    def local_first_step(self, seconds: float) -> dict[str, Any]:
        """A row's params from its arm's first step, where that step is a one-off (compiling)."""
        return {}

    def flags_on(self, torch: Any) -> None:
        """Set torch's global flags this change is (none: it changes no flag). Both drivers call
        it: a re-run from ``prepare``, the kernel while an arm's steps run (then restored)."""

    def local_rows(self) -> tuple[LocalRow, ...]:
        """The rows the in-process driver measures for this knob (one on cached batches where
        it has a ``local_finding``)."""
        if not self.local_finding:
            return ()
        row = LocalRow(self.name, self.local_label, self.local_finding, "cached", self.local_min_s)
        return (row,)

    def local_arm(self, ctx: Local) -> Arm | str:
        """The change the in-process driver measures (its label the row's change), or why not."""
        return "measured only by re-running the script (gpusight run --what-if)"

    def local_arm_of(self, row: LocalRow, ctx: Local) -> Arm | str:
        """``row``'s change (a sweep: its first point), or why it is not measured here."""
        return self.local_arm(ctx)

    def local_points(self, ctx: Local) -> list[Arm]:
        """A ``sweep`` row's points, in the order they are tried."""
        return []

    def local_next(self, ctx: Local, ran: list[tuple[Arm, float]]) -> Arm | None:
        """One more point for a sweep that ran all of ``local_points`` (each with its gain),
        as ``extend`` gives a re-run's (None: it ends there)."""
        return None

    def local_params(self, arm: Arm, ctx: Local) -> dict[str, Any]:
        """What the in-process row says of ``arm`` besides its times."""
        return {}

    def local_snippet(self, key: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The measured snippet of this knob's row ``key`` (``fixes/measured_snippets.py``)
        and what fills it besides the row's params (``loader_changes``: the DataLoader
        arguments its call shows, where not every loader winner's)."""
        return f"whatif.{key}", {}

    def local_outcome(self, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """From a measured row's params: what fills the fix's snippet, and notes for the user."""
        return {}, []
