"""What a watched run measured, as the workload rules read it, and the step statistics taken from
it: which steps are steady, the mean and the typical step, the stalls. Pure; never imports torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..fixes.cell_patch import CellSource
from ..script_command import BatchCommand
from .between_steps import PhaseSeen
from .framework_hook_fix import HookTime
from .host_line_fix import HostLine
from .stalls import Stall, find_stalls


@dataclass
class SyncSite:
    kind: str
    count: int
    file: str | None = None
    line: int | None = None
    code: str | None = None
    idle_ms: float | None = None
    """GPU idle time this site's syncs left behind: measured in the profiler window, scaled to
    the measured steps (ms in total; ``run.syncs[].total_ms``)."""
    source: CodeSource | None = None
    """The user's file around the line, where it is a file of theirs: a fix patches it."""


@dataclass
class CopySite:
    kind: str
    """``pageable_async`` (non_blocking from pageable: hidden sync), ``pageable_sync``,
    ``pinned_sync`` (could be non_blocking) or ``pinned_async``."""
    count: int
    bytes: int
    host_ms: float
    file: str | None = None
    line: int | None = None
    code: str | None = None
    source: CodeSource | None = None
    """The user's file around the line, where it is a file of theirs: a fix pins the copy's
    source where it is made."""


@dataclass
class LoaderInfo:
    num_workers: int | None = None
    pin_memory: bool | None = None
    batch_size: int | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    dataset_set_epoch: bool = False
    """The dataset has a ``set_epoch``: workers kept across epochs would not see its changes."""


@dataclass
class CodeSource:
    """A line of the user's file that a fix changes, with the file's text to patch."""

    path: str
    """The file as the patch names it (relative to where the run started)."""
    text: str
    """The file's text when the run saw it."""
    line: int
    """A line of the call or statement (the ``DataLoader(...)`` call, the model's call, ...)."""
    cell: CellSource | None = None
    """The notebook cell that holds the call, as the kernel ran it (in a notebook)."""
    col: int | None = None
    """The first column of the call on ``line`` (``ast``'s ``col_offset``), where the watch told
    which of the line's calls it saw (a model's call: ``head(backbone(x).cpu())``)."""


LoaderSource = CodeSource


@dataclass
class OptimizerInfo:
    """The optimizer whose steps the run took (the one over the most parameter tensors)."""

    name: str
    """Its class: ``AdamW``, ``SGD``, ..."""
    tensors: int
    foreach: bool | None
    """As built; None is torch's default (foreach on CUDA)."""
    fused: bool | None
    cuda: bool
    source: CodeSource | None = None
    """The user's line that built it, where the watch saw that."""
    params: int = 0
    """Parameter elements it updates (0: not known)."""
    cpu_params: int = 0
    """Of ``params``, those on the CPU."""


@dataclass
class ModuleOnCpu:
    """A part of the model whose parameters and buffers all stay on the CPU while others are on
    an accelerator (``rules/split_placement.py``)."""

    path: str
    """Its name inside the outermost module the step calls (``""``: that module itself)."""
    cls: str
    params: int
    """Parameter elements in it."""
    outer: str
    """The class of the outermost module the step calls that holds it (itself, for ``""``)."""
    call: CodeSource | None = None
    """The user's line that calls that outermost module, with its file's text."""
    forward_ms: float | None = None
    """Host time in its forward per step, where it is an outermost module (None: not timed)."""


@dataclass
class Float64Line:
    """A line of the user's that made the model or its data float64."""

    what: str
    """The call as written: ``.double()``, ``.to(torch.float64)``, ``torch.from_numpy``, ..."""
    target: str
    """``model``, ``data`` or ``default`` (``torch.set_default_dtype``)."""
    file: str
    line: int
    """As shown (a notebook cell's line counts its magic line)."""
    code: str | None = None
    seen: bool = True
    """The watch saw the call run; False: found in the source's text, not seen running."""
    source: CodeSource | None = None
    """The file (or cell) around the line, where a fix can patch it."""
    count: int | None = None


@dataclass
class Float64Use:
    """What of the watched model and its inputs is float64, and where it was made so."""

    params: int
    """The main model's parameter elements, and of them float64: ``params_float64``."""
    params_float64: int
    parts: list[str] = field(default_factory=list)
    """The model's attributes (children, own parameters) holding float64 parameters."""
    input_dtypes: list[str] = field(default_factory=list)
    """Floating dtypes of the tensors the model was called with."""
    lines: list[Float64Line] = field(default_factory=list)
    device_name: str | None = None
    """The GPU the steps ran on, as torch names it (its datasheet rates); None on the CPU."""
    unseen: str | None = None
    """Why no line was found, where none was."""


@dataclass
class Placement:
    module: str | None = None
    param_devices: list[str] = field(default_factory=list)
    input_devices: list[str] = field(default_factory=list)
    dataparallel: bool = False
    dataparallel_devices: int | None = None
    has_conv: bool = False
    input_channels_last: bool | None = None
    model_channels_last: bool | None = None
    autocast: bool = False
    autocast_dtype: str | None = None
    batch_size: int | None = None
    grad_enabled: bool | None = None
    batch_first: bool | None = None
    """The model's positional tensor inputs share one leading size (None: not known). A graph's
    node features beside its edge index, or ``[seq, batch]`` inputs, do not: their leading
    size is not the items the script counts."""
    cpu_modules: list[ModuleOnCpu] = field(default_factory=list)
    """The parts of the modules the step calls that stay on the CPU while others are on
    ``accelerator``: empty where no module is on an accelerator, or none is on the CPU."""
    accelerator: str | None = None
    """The device type of the modules' tensors that are not on the CPU, where some are."""
    accelerator_params: int = 0
    """Parameter elements on ``accelerator``."""
    accelerator_calls: list[CodeSource] = field(default_factory=list)
    """The user's lines that call the modules on ``accelerator``: where the script moved them
    is where it names its device."""


@dataclass
class GpuWindow:
    """What the profiler window measured, per step (ms) unless said otherwise."""

    steps: int
    gpu: bool
    split_ms: dict[str, float]
    data_wait_host_ms: float = 0.0
    busy_pct: float | None = None
    kernels_per_step: float = 0.0
    launches_per_step: float = 0.0
    median_kernel_us: float | None = None
    matmul_ms: float = 0.0
    matmul_fp32_ms: float = 0.0
    matmul_tensor_core_ms: float = 0.0
    conv_ms: float = 0.0
    conv_lowp_ms: float = 0.0
    layout_transform_ms: float = 0.0
    memcpy_h2d_pageable: int = 0
    memcpy_h2d_pageable_bytes: int = 0
    cpu_op_loop_ms: float = 0.0
    top_cpu_ops: list[tuple[str, float]] = field(default_factory=list)
    issued_gpu_ms: float | None = None
    """GPU time of the work each step launched, wherever it ran (None: not known)."""
    device_paced: bool = False
    """The window saw the host run ahead of the GPU; its split is the GPU's own."""
    launch_by_phase_ms: dict[str, float] = field(default_factory=dict)
    """The launch overhead by the framework call it fell in (``forward``, ``backward``,
    ``optimizer``), per step."""
    matmul_fp64_ms: float = 0.0
    """float64 matmul/conv kernel time, per step."""


@dataclass
class WorkloadEvidence:
    step_mode: str
    """How steps were found: ``optimizer``, ``backward``, ``forward`` or ``block`` (none found)."""
    step_times_ms: list[float]
    data_wait_ms: list[float] = field(default_factory=list)
    host_copy_ms: list[float] = field(default_factory=list)
    framework_ms: list[float] = field(default_factory=list)
    """Host time inside forward, backward and optimizer.step, per step."""
    cuda_available: bool = False
    cuda_devices: int = 0
    window: GpuWindow | None = None
    syncs: list[SyncSite] = field(default_factory=list)
    copies: list[CopySite] = field(default_factory=list)
    loader: LoaderInfo | None = None
    placement: Placement | None = None
    tf32_matmul: bool | None = None
    peak_memory_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    memory_capacity_bytes: int | None = None
    cpu_count: int | None = None
    gpu_used: bool = False
    """The run put work on a GPU (CUDA started, memory allocated)."""
    nvml_util_pct: float | None = None
    """NVML's mean utilisation over the measured steps: GPU busy when no trace says better."""
    epoch_starts: list[int] = field(default_factory=list)
    """Indices of the steps in which a new DataLoader iterator (an epoch) began."""
    loader_source: LoaderSource | None = None
    """Where the user's code built the DataLoader: a fix to it is a patch of that call."""
    forward_source: CodeSource | None = None
    """Where the user's code calls the model (the main module's top-level forward): autocast
    wraps that statement."""
    model_calls: frozenset[tuple[str, int]] = frozenset()
    """The user's lines seen calling an outermost module other than the main model, as (file
    name, line): a second model's call (a GAN's discriminator, a teacher) is the step's
    computation, not host work of the user's."""
    main_model_calls: frozenset[tuple[str, int]] = frozenset()
    """The user's lines seen calling the main model: besides the step's own call, one that runs
    it again every step (a validation batch) is host work of the user's with a fix of its
    own."""
    h2d_link_gbps: float | None = None
    """One direction of the GPU's PCIe link at its best, after encoding (NVML; GB/s)."""
    phases: list[PhaseSeen] = field(default_factory=list)
    """Evaluation and checkpoint saving between the training steps; ``step_times_ms`` and
    the other per-step figures leave their time out (``between_steps.py``)."""
    optimizer: OptimizerInfo | None = None
    optimizer_ms: float | None = None
    """The host's mean time inside ``optimizer.step()`` per step, over the steps that timed it."""
    float64: Float64Use | None = None
    """A model or inputs in float64, where the watched model has them (``float64_math.py``)."""
    host_lines: list[HostLine] = field(default_factory=list)
    """The host's time by line of the user's code, costliest first (``host_line_fix.py``)."""
    framework_hooks: list[HookTime] = field(default_factory=list)
    """A framework's named hooks (Lightning's, Hugging Face's Trainer's parts), own time per
    measured step, costliest first
    (``framework_hook_fix.py``)."""
    batch_shapes: int = 0
    """The shapes the DataLoader's batches came in over the run (``MAX_BATCH_SHAPES`` at
    most): many where text is padded to each batch's longest sequence."""
    batch_command: BatchCommand | None = None
    """The script's batch option and command line (``gpusight run``): a larger batch is fixed
    by the command that passes it."""


def mean(xs: list[float]) -> float:
    return statistics.fmean(xs) if xs else 0.0


# A leading step this many times shorter than the later steps' median is a transient (the
# last queue-filling step is often partly filled: 46 ms among 63 ms steps).
TRANSIENT_RATIO = 1.2
# The leading steps, by their median, are at least this many times shorter than the later ones
# where the host ran ahead of the GPU (12.6 ms against 63 on the H200's fp32_transformer).
QUEUE_RATIO = 2.0


def steady_start(times: list[float], on_gpu: bool = True) -> int:
    """Index of the first steady step: leading steps much shorter than the later ones dropped.

    After a device sync (CUDA start-up, the profiler window's end) the launch queue is empty
    and the host runs ahead of a busy GPU: its steps look short until the queue fills, then
    every step takes the GPU's time. Those leading steps say how fast the host enqueues, not
    how long a step takes. At most the first half of the steps is dropped; the reference is
    the median of the second half. Only where the steps ran on a GPU (``on_gpu``), and only
    where the steps dropped are, by their median, under half the reference: a step that slows
    down over the run (a CPU's pace, a model whose numbers drift into slow ranges) is no queue
    filling, and its early steps are the user's too.
    """
    n = len(times)
    if n < 4 or not on_gpu:
        return 0
    ref = statistics.median(times[n // 2 :])
    k = 0
    while k < n // 2 and times[k] * TRANSIENT_RATIO < ref:
        k += 1
    if k and statistics.median(times[:k]) * QUEUE_RATIO > ref:
        return 0
    return k


def steady_from(ev: WorkloadEvidence) -> int:
    """``steady_start`` of the evidence's steps."""
    return steady_start(ev.step_times_ms, ran_on_gpu(ev))


def step_time(ev: WorkloadEvidence) -> float:
    """The mean steady step: the window's time over its steps, every stall included."""
    times = ev.step_times_ms[steady_from(ev) :]
    return statistics.fmean(times) if times else 0.0


def median_step(ev: WorkloadEvidence) -> float:
    """The typical steady step (the median): what a step takes when nothing stalls it."""
    times = ev.step_times_ms[steady_from(ev) :]
    return statistics.median(times) if times else 0.0


def stall_of(ev: WorkloadEvidence) -> Stall | None:
    start = steady_from(ev)
    times = ev.step_times_ms[start:]
    waits = ev.data_wait_ms[start:] if len(ev.data_wait_ms) == len(ev.step_times_ms) else None
    ld = ev.loader or LoaderInfo()
    found = find_stalls(
        times,
        waits,
        [i - start for i in ev.epoch_starts if i >= start],
        ld.num_workers,
        ld.prefetch_factor,
    )
    if found is not None and start:
        found.steps = [i + start for i in found.steps]
    return found


def ran_on_gpu(ev: WorkloadEvidence) -> bool:
    return (ev.window is not None and ev.window.gpu) or (
        ev.gpu_used and ev.nvml_util_pct is not None
    )


def steady_steps(ev: WorkloadEvidence) -> list[int]:
    """Indices of the steady steps: every step after the leading transients, stalls included."""
    return list(range(steady_from(ev), len(ev.step_times_ms)))


def mean_at(xs: list[float], idx: list[int]) -> float:
    picked = [xs[i] for i in idx if i < len(xs)]
    return statistics.fmean(picked) if picked else 0.0
