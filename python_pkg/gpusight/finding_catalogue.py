"""The finding catalogue in words: for each finding id, what it means and how gpusight measures it.

The ids themselves are API and live in the report schema (``FindingId``); this table says what
each one is for. ``scripts/gen_findings_doc.py`` writes ``docs/findings.md`` from it together
with what the code raises (modules, severities, evidence labels, fix snippets), and a test fails
when an id is in one and not the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatalogueEntry:
    meaning: str
    """What is wrong, in one or two sentences, and why it leaves the GPU idle or slow."""
    measured_by: str
    """Where the evidence comes from: a probe, a benchmark, a watched run, a what-if."""
    title: str = ""
    """The finding's title where a measured change raises it and no rule of the watch did
    (``diagnose``, ``gpusight run --what-if``): what is wrong, in a few words."""
    host_title: str = ""
    """The title where the model runs on the CPU, where ``title`` speaks of a GPU."""
    bottleneck: str = ""
    """The verdict's bottleneck where this finding leads a measured what-if."""


#: The layers, by id prefix, in the order the catalogue lists them.
LAYERS: dict[str, str] = {
    "env": "Environment: the machine, driver and torch build",
    "cfg": "Settings: torch flags that cost speed",
    "code": "Code: how the training loop uses the GPU",
    "load": "Workload: what the step spends its time on",
    "dist": "Multi-GPU: several GPUs or ranks",
    "infer": "Inference",
    "hw": "Hardware: measured ceilings below what the part should reach",
}

_PROBE = "Environment probe (`gpusight check`): no GPU work needed."
_NVML = "NVML query of the GPU (`gpusight check`), no GPU work needed."
_FLAGS = "The torch flags as found (`gpusight check`, and at the start of a watched run)."
_SWITCH = (
    "The torch flags as found (`gpusight check`), and as a watched run's measured steps ran "
    "with them, where the script turns it on itself"
)
_LEADS = "; there it leads the report, whose every figure carries its cost."
_WATCH = "Watched run (`%%gpusight`, `gpusight.watch`, `gpusight run`)"

CATALOGUE: dict[str, CatalogueEntry] = {
    "env.no_torch": CatalogueEntry(
        "`import torch` fails in the Python that runs the kernel or command, often because torch "
        "lives in another environment.",
        _PROBE,
    ),
    "env.cpu_only_build": CatalogueEntry(
        "The installed torch is a CPU-only build (`torch.version.cuda` is None): it can never "
        "use a GPU, whatever the machine has. A watched run's report leads with it where the "
        "machine has an NVIDIA GPU; on one without, it says so in a note and leads with the "
        "run's own fix.",
        _PROBE,
    ),
    "env.cuda_unavailable": CatalogueEntry(
        "A CUDA build of torch finds no usable GPU (`torch.cuda.is_available()` is False); the "
        "finding names the reason torch and NVML give.",
        _PROBE,
    ),
    "env.driver_too_old": CatalogueEntry(
        "The NVIDIA driver supports an older CUDA than the one torch was built with, so CUDA "
        "cannot start.",
        "Driver version from NVML against `torch.version.cuda` (`gpusight check`).",
    ),
    "env.toolkit_mismatch": CatalogueEntry(
        "The system CUDA toolkit (nvcc) differs from torch's CUDA. torch ships its own runtime, "
        "so this matters only when compiling CUDA extensions.",
        "nvcc and libcudart found on the system against `torch.version.cuda` (`gpusight check`).",
    ),
    "env.arch_unsupported": CatalogueEntry(
        "The torch build carries no kernels (native or PTX) for this GPU's compute capability: "
        "kernels fail to launch.",
        "`torch.cuda.get_arch_list()` against each GPU's compute capability (`gpusight check`).",
    ),
    "env.visible_devices": CatalogueEntry(
        "`CUDA_VISIBLE_DEVICES` hides every GPU from CUDA (empty, -1, or an index past the last "
        "GPU), though nvidia-smi still shows them.",
        "The environment variable against the GPUs NVML sees (`gpusight check`).",
    ),
    "env.other_processes": CatalogueEntry(
        "Other processes hold memory on the GPU and share its SMs (or, in exclusive mode, keep "
        "this one from creating a context).",
        _NVML,
    ),
    "env.power_capped": CatalogueEntry(
        "The GPU's power limit is below its default, or it is held back by its power brake: "
        "its clocks and throughput drop.",
        _NVML + " Confirmed by the matmul ceiling in `gpusight bench`.",
    ),
    "env.thermal_throttle": CatalogueEntry(
        "The GPU slows its clocks for heat (thermal slowdown clock-event reasons).",
        _NVML,
    ),
    "env.pcie_degraded": CatalogueEntry(
        "The GPU's PCIe link runs below its maximum generation or width (or the slot caps it), "
        "so host-device copies are slower than they should be.",
        _NVML + " The copy benchmark in `gpusight bench` measures the effect.",
    ),
    "env.mig_enabled": CatalogueEntry(
        "The GPU is split by MIG: each process gets one instance, a fixed slice of the SMs and "
        "memory.",
        _NVML,
    ),
    "env.shm_small": CatalogueEntry(
        "`/dev/shm` is too small (Docker's default 64 MB) for DataLoader workers, which pass "
        "batches through it and die with a bus error.",
        "Size of the shared-memory filesystem against the machine (`gpusight check`).",
    ),
    "env.launch_blocking": CatalogueEntry(
        "`CUDA_LAUNCH_BLOCKING=1` makes every kernel launch wait for the GPU: a debugging aid "
        "that serialises host and device.",
        "The environment variable (`gpusight check`, and a watched run on a GPU, where it "
        "leads the report, whose every figure carries its cost).",
    ),
    "cfg.tf32_disabled": CatalogueEntry(
        "On compute capability 8.0 and newer, float32 matmuls or convolutions could run on "
        "Tensor Cores in TF32, but the flag is off.",
        _FLAGS + " `gpusight.diagnose` measures turning it on as a what-if.",
        title="TF32 is off for float32 matmuls",
        bottleneck="precision",
    ),
    "cfg.cudnn_benchmark_off": CatalogueEntry(
        "`cudnn.benchmark` is off: convolutions use cuDNN's heuristic choice rather than the "
        "fastest algorithm it could time once.",
        _FLAGS + " `gpusight.diagnose` measures turning it on as a what-if.",
        title="cudnn.benchmark is off",
        bottleneck="compute",
    ),
    "cfg.deterministic": CatalogueEntry(
        "Deterministic algorithms are forced on, swapping fast kernels for slower reproducible "
        "ones.",
        _SWITCH + ".",
    ),
    "cfg.anomaly_detection": CatalogueEntry(
        "Autograd anomaly detection is on: a traceback for every op and a NaN check on every "
        "backward result, many times slower.",
        _SWITCH + _LEADS,
    ),
    "code.cpu_model": CatalogueEntry(
        "The model's parameters stay on the CPU although a GPU is available: all of them (a "
        "model partly on the GPU is `code.device_mismatch`).",
        _WATCH + ": where parameters and inputs live, and the host time of the step.",
        title="The model runs on the CPU although a GPU is available",
    ),
    "code.device_mismatch": CatalogueEntry(
        "Parameters and inputs live on different devices, so tensors move between them every "
        "step. Where some of the modules the step calls (or parts of one) hold all their "
        "parameters and buffers on the CPU while the rest is on a GPU (a `head` built and never "
        "moved, fed by `.cpu()`), the finding names each of those parts as the user's file "
        "does, with its class, its parameters, the statement that builds it and the copies to "
        "the CPU that feed it, and its fix moves them to the device the script moves the rest "
        "to, before the optimizer is built; `code.cpu_model` is then not raised.",
        _WATCH + ": the devices of parameters and inputs at each forward; the device of every "
        "parameter and buffer of each module the step calls, and the host time of each such "
        "module's forward. A module a Dataset or collate function calls while the loader "
        "fetches a batch (a torchaudio or torchvision transform) is the input pipeline's, not "
        "a part of the model. The statement that builds a part and the copies that feed it are "
        "found in the source of the line that calls it (`ast`), a copy counted where the watch "
        "saw its sync. The gain is estimated from the parts' forward, a backward of twice it and "
        "their optimizer update on the CPU: from that math 5x faster on the GPU to free.",
    ),
    "code.framework_callback": CatalogueEntry(
        "A callback that ships with the training framework takes a share of every step: "
        "Lightning's progress bar redraws at every batch and reads the values logged with "
        "`prog_bar=True` (on the GPU, a wait for it), `DeviceStatsMonitor` reads the device's "
        "statistics, `LearningRateMonitor` logs at every step. The fix is the callback's own "
        "option, patched into the script: the progress bar it makes redrawn every 50 batches "
        "(`refresh_rate=50`), or, where it makes none, `enable_progress_bar=False` in its "
        "`Trainer(...)` call. The user's own callbacks are not this "
        "finding: their lines are timed as theirs.",
        _WATCH + ": Lightning names each hook it calls for its profiler; while the watch runs, "
        "the default profiler's spans are timed on the measured steps that record copies and "
        "syncs (each span's time less the named spans inside it, `run.framework_hooks`). "
        "Raised from 3 % of the step. For a progress bar, `gpusight run --what-if` measures "
        "the change the patch makes (the script's own bar at `refresh_rate=50`, else the "
        "Trainer's switch off).",
    ),
    "code.host_sync": CatalogueEntry(
        "The host waits for the GPU inside the loop (`.item()`, `.cpu()`, `print(tensor)`, "
        "`nonzero`, ...), so it cannot queue the next work while the GPU computes. The "
        "evidence names the source line of each sync. Where the first is a library's line, "
        "the fix is that library's option where one is known (Hugging Face's Trainer checks "
        "every step's loss for nan and inf: `logging_nan_inf_filter=False`), written as a "
        "patch of the script's own call (its one `TrainingArguments(...)`, its Lightning "
        "progress bar), else the line is named as the library's, not as a loop of the user's "
        "to change.",
        _WATCH + ": the sync calls intercepted with their source lines, and the stall they "
        "cause in the step-time breakdown. Where the line that waits only reports (a print or "
        "a logger of the value), `gpusight run --what-if` and `%%gpusight --what-if` measure it "
        "run every 10 steps.",
    ),
    "code.pageable_copy": CatalogueEntry(
        "Host-to-device copies come from pageable memory: a `non_blocking=True` copy then "
        "blocks the host for the whole copy.",
        _WATCH + ": copy calls with their source lines and host time, and the profiler's "
        "`Memcpy HtoD (Pageable -> Device)` events. `gpusight.diagnose` measures `pin_memory`. "
        "Unmeasured, the gain is estimated as the step becoming the longer of the host's other "
        "work and the GPU's kernels plus the copy at 85 % of the PCIe link's speed (NVML), with "
        "a range from the copy as long as today to the copy free.",
        title="Copies to the GPU come from pageable memory",
        bottleneck="memory_transfer",
    ),
    "code.dataparallel": CatalogueEntry(
        "`torch.nn.DataParallel` wraps the model: one Python thread drives every GPU, and it "
        "adds scatter/gather even on one.",
        _WATCH + ": the model's wrapper.",
    ),
    "code.eval_phase": CatalogueEntry(
        "An evaluation between the training steps takes a large share of the run: the GPU "
        "utilisation that drops every N steps, often from a value read back every batch.",
        _WATCH + ": the time from `model.eval()` until the model goes back to training, or of a "
        "`torch.no_grad()` / `inference_mode()` block that takes batches from a DataLoader, with "
        "its period, the line that starts it and the syncs inside it.",
    ),
    "code.checkpoint_phase": CatalogueEntry(
        "Saving checkpoints between the training steps takes a large share of the run.",
        _WATCH + ": the time in `torch.save` or a library's save (`save_pretrained`, a trainer's "
        "checkpoint), with its period and line.",
    ),
    "code.raised": CatalogueEntry(
        "The watched code raised before its first measured step, so nothing was measured: the "
        "report is the exception, its line (inside `forward` where it was) and the loop's call "
        "that led there, and no finding claims a gain from the start-up step.",
        _WATCH + ": the traceback the watch saw end the run (`run.error`).",
    ),
    "load.input_bound": CatalogueEntry(
        "The step waits for the next batch: the input pipeline (DataLoader) is slower than the "
        "GPU.",
        _WATCH + ": the data-wait share of the step. `gpusight.diagnose` measures more "
        "workers, pinning, prefetch and persistent workers.",
        title="The input pipeline holds the step back",
        bottleneck="input_pipeline",
    ),
    "load.cpu_preprocessing": CatalogueEntry(
        "Host work in the loop body (transforms, Python bookkeeping) outside the model keeps "
        "the GPU waiting.",
        _WATCH + ": host time in the loop body outside data loading and the model, by line of the "
        "user's code (two steps timed by line, not measured ones); the loss's own lines (a "
        "loss function's call, a function named for the loss) and the gradients' clipping are "
        "the step's computation and left out, and a batch made on the device by a torch "
        "factory (`torch.randn(..., device=dev)`) is its input; a training framework's loop "
        "called from the "
        "user's file (`trainer.train()`, `trainer.fit(...)`, `model.generate(...)`) is named "
        "as the library's own per-step code, whose lines are not timed (under Lightning's "
        "`trainer.fit(...)` and Hugging Face's `trainer.train()` the fix gives the time of "
        "each named part, `run.framework_hooks`, "
        "and the change for the part that leads: the loader's workers, pinned memory, else a "
        "larger batch), unless a line of the "
        "user's own (a metric in Lightning's `training_step`) holds 20% beside it: that line "
        "leads, and the estimate counts the user's lines only; the lines of a loop "
        "over a model's tensors (an EMA update over `zip(ema.parameters(), "
        "model.parameters())`) are one piece of work, its header not the wait for data; so "
        "are a loop over the batch's items (a loss summed one sample at a time, a flip per "
        "image), fixed over the whole batch, and a run of lines that work on the model's "
        "output (a metric and the logger's line that reads it), computed on the device and "
        "read every N steps; a line of a generator the loop draws its batches from is the input "
        "pipeline's, run by a DataLoader's workers; a line seen calling another model (a "
        "GAN's other half, a "
        "teacher) is the step's computation. Where the lines were timed and the user's own "
        "outside the model hold under 5% of the host time, the finding is information: no "
        "line of theirs holds it. `gpusight run --what-if` and `%%gpusight --what-if` "
        "measure the costliest statements that only report or clean up (`gc.collect()`, "
        "`torch.cuda.empty_cache()`, a logger, a histogram of every parameter, a metric with "
        "its logger's line) skipped or run "
        "every 10 steps (in Lightning's `training_step` by its `batch_idx`, in a `Trainer` "
        "subclass's `compute_loss` by `self.state.global_step`, in a callback's "
        "`on_train_batch_end` by its `batch_idx`), and hand over that edit; one "
        "whose value the loop reads, that a `monitor=` reads, or that updates the model, the "
        "optimizer, the data or the random numbers, is not tried and its row says why.",
        title="A statement of the loop costs the step host time",
    ),
    "load.small_batch": CatalogueEntry(
        "The batch is too small to keep the GPU busy: per-step host and launch costs dominate.",
        _WATCH + ": batch size, GPU busy share and launch costs. `gpusight.diagnose` measures "
        "a larger batch.",
        title="The batch is too small to keep the GPU busy",
        host_title="The batch is too small: fixed costs per step dominate",
        bottleneck="launch_overhead",
    ),
    "load.launch_bound": CatalogueEntry(
        "Kernel launches, not the GPU, set the pace: many short kernels, the GPU idle between "
        "them inside forward/backward/optimizer.",
        _WATCH + ": the profiler trace's launches per step and GPU gaps; a line of the "
        "user's `forward` that builds a tensor on the host at every call (a mask from Python "
        "lists, a factory then `.to(device)`) and holds a fifth of the host time is named, "
        "with its fix (a buffer built once). `gpusight run "
        '--what-if` measures `torch.compile` of the model (plain and `mode="reduce-overhead"`, '
        "its CUDA graphs only where no sync inside the model or changing input shape rules them "
        "out) with its compile time; `gpusight.diagnose` and `diagnose_inference` measure "
        "`torch.compile` / CUDA graphs in the kernel.",
        title="Eager mode launches many small kernels",
        host_title="Eager mode runs many small operators",
        bottleneck="launch_overhead",
    ),
    "load.amp_unused": CatalogueEntry(
        "Matmuls run in float32 without Tensor Cores, where bf16 autocast would run them "
        "several times faster.",
        _WATCH + ": the profiler trace's float32 matmul kernels; where the loader's batches "
        "came in eight shapes or more (text padded to each batch's longest), the fix pads them "
        "to a multiple of 64, as bf16 attention builds a cuDNN plan for each new length. "
        "`gpusight.diagnose` and `diagnose_inference` measure bf16 autocast.",
        title="The model computes in float32, without mixed precision",
        bottleneck="precision",
    ),
    "load.channels_last": CatalogueEntry(
        "Half-precision convolutions run in NCHW layout, paying for NCHW<->NHWC transposes "
        "around Tensor Core kernels.",
        _WATCH + ": the profiler trace's layout-transform kernels. `gpusight.diagnose` "
        "measures `channels_last`.",
        title="Convolutions run in the NCHW memory format",
        bottleneck="compute",
    ),
    "load.memory_headroom": CatalogueEntry(
        "Most of the GPU memory is unused: room for a larger batch (or, from `diagnose`, for "
        "keeping the whole dataset on the GPU).",
        _WATCH + ": peak memory against capacity. `gpusight.diagnose` measures the dataset "
        "on the GPU.",
        title="The dataset fits on the GPU but is loaded from the host every step",
        bottleneck="input_pipeline",
    ),
    "load.oom_risk": CatalogueEntry(
        "The run's peak memory is close to the GPU's capacity: a longer sequence or a bigger "
        "batch will run out of memory.",
        _WATCH + ": peak memory against capacity.",
    ),
    "load.optimizer_unfused": CatalogueEntry(
        "The optimizer updates its parameters one tensor at a time (or in foreach groups): "
        "thousands of small kernels a step, each launched by the host, where `fused=True` "
        "runs the update as a few. Where 10 % or more of its parameters are on the CPU while "
        "the rest are on the GPU, their CPU update explains its time: the finding is then "
        "information only, with no gain, and defers to `code.device_mismatch`.",
        _WATCH + ": the optimizer's class and settings, its parameter tensors, and the host's "
        "time inside `optimizer.step()` against the step; `gpusight run --what-if` measures "
        "`fused=True`.",
        title="The optimizer updates each parameter with its own kernels",
    ),
    "load.epoch_start": CatalogueEntry(
        "A DataLoader that does not keep its worker processes (`persistent_workers=False`) "
        "starts them anew at every epoch: each runs its `worker_init_fn` and receives the "
        "dataset again before the first batch. Short epochs make that a large share of the run.",
        _WATCH + ": the time from `iter(loader)` until its first batch, as a phase between the "
        "steps, with its period (the epoch's batches), the loop's line and the loader's "
        "`worker_init_fn`.",
        title="The DataLoader's workers start anew at every epoch",
    ),
    "load.float64": CatalogueEntry(
        "The model (its parameters, or the inputs of a model without any) runs in float64, most "
        "often by accident: made `.double()` to match numpy's float64 arrays. float64 never "
        "runs on the TF32 or bf16 Tensor Cores, autocast leaves it alone, and outside "
        "data-center GPUs its rate is 1/32 to 1/64 of float32's.",
        _WATCH + ": the dtypes of the model's parameters and inputs at its first calls; the "
        "user's line that made them float64, seen run (`Module.double`/`to`, "
        "`torch.set_default_dtype`, `torch.from_numpy`/`tensor`/`as_tensor` wrapped while the "
        "watch runs) or else found in the text of the code that calls the model; on a GPU the "
        "profiler trace's float64 matmul/conv kernels, set against this GPU's datasheet float64 "
        "and float32 rates.",
    ),
    "dist.idle_gpus": CatalogueEntry(
        "Some GPUs on the machine stay idle while the job runs on others.",
        _WATCH + " and `gpusight run` under torchrun: the GPUs used against those visible.",
    ),
    "dist.imbalance": CatalogueEntry(
        "One rank is a straggler: the others wait for it at every gradient all-reduce.",
        "`gpusight run` under torchrun, or `gpusight merge`: each rank's own work per step.",
    ),
    "dist.comm_bound": CatalogueEntry(
        "Collectives not hidden under compute take a large share of the step.",
        "`gpusight run` under torchrun: NCCL kernel time not overlapped with compute on the "
        "slowest rank.",
    ),
    "dist.nccl_slow": CatalogueEntry(
        "NCCL all-reduce bus bandwidth falls well below what the links between the GPUs allow.",
        "`gpusight bench --allreduce`: measured bus bandwidth against the link's ceiling.",
    ),
    "infer.unbatched": CatalogueEntry(
        "Inference runs one (or a few) requests per forward, paying a whole forward's launches "
        "and host work for each.",
        _WATCH + ", and `gpusight.diagnose_inference`, which measures throughput per batch size.",
        title="Requests are served one small batch at a time",
    ),
    "infer.grad_enabled": CatalogueEntry(
        "Inference records autograd history for a backward that never comes.",
        _WATCH + ", and `gpusight.diagnose_inference`, which measures `torch.inference_mode`.",
    ),
    "hw.matmul_below_expected": CatalogueEntry(
        "A matmul benchmark reaches well below the datasheet peak for this GPU and dtype: a "
        "power cap, heat, another process, or a slower part than its name.",
        "`gpusight bench`: timed matmuls per dtype against the datasheet ceiling.",
    ),
    "hw.h2d_below_link": CatalogueEntry(
        "Pinned host-to-device copies reach well below what the PCIe link allows.",
        "`gpusight bench`: timed pinned copies against the link's ceiling.",
    ),
}


def title(finding_id: str, cuda: bool = True) -> str | None:
    """A measured finding's title (``CatalogueEntry.title``), its host one off a GPU."""
    entry = CATALOGUE.get(finding_id)
    if entry is None or not entry.title:
        return None
    return entry.title if cuda else (entry.host_title or entry.title)


def bottleneck(finding_id: str) -> str | None:
    entry = CATALOGUE.get(finding_id)
    return entry.bottleneck or None if entry is not None else None
