"""``gpusight.diagnose_inference``: latency and throughput of a model's forward, measured.

What is measured, within one wall-clock budget:

1. the forward as the user calls it (their grad mode, their model mode, their batch): p50/p99
   latency per call, host clock around each call with a device sync (what a request waits);
2. measured what-ifs, each interleaved with that baseline: ``torch.inference_mode()``, bf16
   autocast (GPU), and the forward replayed as a CUDA graph (GPU);
3. a batch-size sweep with the best eager setting: latency and throughput (samples/s) per size,
   which says what grouping requests (dynamic batching) would buy.

Findings: ``infer.grad_enabled`` (the call runs with autograd recording), ``infer.unbatched``
(a larger batch multiplies throughput; with a micro-batcher snippet), and the autocast and
graph winners as ``load.amp_unused`` / ``load.launch_bound`` with their measured speedups.

The user's model runs as it is (a forward does not train it), never switched to ``eval()``
(that would change its outputs); weights, buffers (batch-norm statistics in training mode),
modes, torch flags and RNG states are snapshotted and restored afterwards, also on error or
Ctrl-C (``restore.Snapshot``), and every graph and batch made here is released.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..bench.device import finite
from ..fixes import fix
from ..fixes import scaling as _scaling_snippets  # noqa: F401  (registers the snippets)
from ..fixes import workload as _workload_snippets  # noqa: F401  (infer.inference_mode)
from ..knobs import REGISTRY, gain_rule
from ..knobs.base import Arm as Plan
from ..knobs.base import Knob
from ..report import Benchmark, Evidence, Finding, Impact, Report, Verdict, WhatIf
from ..rules.severity import settle
from .arms import model_device
from .context import Progress, Skip
from .errors import DiagnoseError
from .knob_hooks import KnobHooks
from .latency import Latency, Pair, interleaved, measure
from .machine import machine_facts
from .restore import Snapshot

# The knobs timed on the forward (``Knob.infer_arm``) in the registry's order, inference_mode
# and then bf16 autocast on top of it; the graph replay is this module's own.
INFER = tuple(k for k in REGISTRY if k.infer_label)
GRAD_MODE, AUTOCAST = INFER
GRAPH = "CUDA graph replay"
CPU_BATCHES = (1, 2, 4, 8, 16, 32)
GPU_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# A larger batch must multiply throughput at least this much to call the serving unbatched
# (a warning from the second).
UNBATCHED_GAIN = 1.5
UNBATCHED_WARN_GAIN = 2.0
# The micro-batcher's wait for more requests: about one batch's p50, within these seconds.
BATCHER_WAIT_S = (0.001, 0.02)
# A measured speedup from here is a warning, below it information: inference_mode, graph replay.
GRAD_WARN_SPEEDUP = 1.1
GRAPH_WARN_SPEEDUP = 1.3
# Shares of the budget: the what-if pairs first, the sweep gets the rest.
SHARE_GRAD = 0.2
SHARE_AUTOCAST = 0.15
SHARE_GRAPH = 0.2


@dataclass
class _Setup:
    model: nn.Module
    inputs: Any
    device: torch.device
    batch: int
    user_grad: bool
    budget_s: float
    deadline: float
    progress: Progress | None
    notes: list[str] = field(default_factory=list)
    fraction: float = 0.0

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def tell(self, stage: str, fraction: float) -> None:
        self.fraction = max(self.fraction, min(1.0, fraction))
        if self.progress is not None:
            self.progress(stage, self.fraction)


# --- inputs ----------------------------------------------------------------------------------


def _tensors(x: Any) -> Iterator[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _map(x: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, tuple):
        return tuple(_map(v, fn) for v in x)
    if isinstance(x, list):
        return [_map(v, fn) for v in x]
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    return x


def batch_size_of(example: Any) -> int:
    """The batch dimension (dim 0) of the first tensor in ``example``."""
    for t in _tensors(example):
        if t.dim() >= 1 and t.shape[0] >= 1:
            return int(t.shape[0])
    raise TypeError(
        "example_input must hold a tensor with a batch dimension (dim 0): a tensor, a tuple "
        "of positional arguments, or a dict of keyword arguments"
    )


def make_batch(example: Any, size: int) -> Any:
    """``example`` with every batched tensor (dim 0 = the example's batch) grown or cut to
    ``size`` rows, cycling through the example's own rows."""
    b0 = batch_size_of(example)

    def grow(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 0 or t.shape[0] != b0:
            return t
        idx = torch.arange(size, device=t.device) % b0
        return t.index_select(0, idx)

    return _map(example, grow)


# --- the calls measured (their timing: latency.py) -------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _grad(enabled: bool) -> Iterator[None]:
    with torch.set_grad_enabled(enabled):
        yield


Changes = dict[str, Any]
"""Knobs' changes (``knobs/``) a forward runs with, each made by its knob's ``before``."""


def _args(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(inputs, dict):
        return (), inputs
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def _eager(s: _Setup, inputs: Any, changes: Changes) -> Callable[[], object]:
    """The forward on ``inputs`` in the user's grad mode, with ``changes`` (none: as called)."""
    hooks, (args, kwargs), model = KnobHooks(changes), _args(inputs), s.model

    def run() -> object:
        with _grad(s.user_grad):
            return hooks.call(model, args, kwargs)

    return run


def _graph(s: _Setup, inputs: Any, changes: Changes) -> tuple[Callable[[], object], Any]:
    """The forward with ``changes`` captured as a CUDA graph over static copies of ``inputs``:
    (replay, what the replay needs alive: the graph and those copies)."""
    static = _map(inputs, lambda t: t.clone())
    hooks, (args, kwargs), model = KnobHooks(changes), _args(static), s.model
    hooks.capturing = True  # nothing cached across replays (autocast's casts)
    stream = torch.cuda.Stream(s.device)  # type: ignore[no-untyped-call]
    stream.wait_stream(torch.cuda.current_stream(s.device))
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            hooks.call(model, args, kwargs)
    torch.cuda.current_stream(s.device).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # Captured on the warm-up's stream: each new stream gets its own cuBLAS workspace.
    with torch.no_grad(), torch.cuda.graph(graph, stream=stream):
        hooks.call(model, args, kwargs)
    # The graph reads `static` at its captured addresses: whoever holds the graph holds them.
    return graph.replay, (graph, static)


def _restore_buffers(saved: list[tuple[torch.Tensor, torch.Tensor]]) -> bool:
    """Write back every buffer whose value changed; True if any had."""
    changed = False
    with torch.no_grad():
        for buf, value in saved:
            if not torch.equal(buf, value):
                buf.copy_(value)
                changed = True
    return changed


def _oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _free(device: torch.device, workspaces: bool = False) -> None:
    """Release what the diagnosis held; with ``workspaces``, also torch's cuBLAS workspaces.

    torch keeps one cuBLAS workspace (32 MiB on Hopper) per stream that ran a product, for the
    process's life; the graph's capture stream gets one, and a stream comes from a pool of 32,
    so repeated diagnoses would pile them up. All are released (torch has no per-stream call):
    the user's own stream gets its workspace back at its next product.
    """
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if workspaces and clear is not None:
            clear()
        torch.cuda.empty_cache()


# --- the diagnosis ---------------------------------------------------------------------------


def _noise_pct(pair: Pair) -> float | None:
    """The baseline's calls' noise band, by the rule of every what-if."""
    return gain_rule.noise_pct(pair.base.samples_ms)


def _what_if(change: str, pair: Pair, finding_id: str | None = None, **params: Any) -> WhatIf:
    noise = _noise_pct(pair)
    return WhatIf(
        change=change,
        before_ms=round(pair.base.p50, 4),
        after_ms=round(pair.variant.p50, 4),
        speedup=round(pair.speedup, 3),
        finding_id=finding_id,
        params={
            "batch": pair.base.batch,
            "p99_before_ms": round(pair.base.p99, 4),
            "p99_after_ms": round(pair.variant.p99, 4),
            "repeats": len(pair.variant.samples_ms),
            **params,
        },
        noise_pct=None if noise is None else round(noise, 1),
    )


def _skipped(change: str, reason: str, finding_id: str | None = None) -> WhatIf:
    return WhatIf(change, None, None, None, finding_id=finding_id, skipped=reason)


def _wins(pair: Pair | None) -> bool:
    if pair is None:
        return False
    return gain_rule.wins(pair.speedup, _noise_pct(pair))


def _sweep_sizes(batch_sizes: Sequence[int] | None, b0: int, gpu: bool) -> list[int]:
    sizes = (
        list(batch_sizes) if batch_sizes is not None else list(GPU_BATCHES if gpu else CPU_BATCHES)
    )
    if any(int(b) < 1 for b in sizes):
        raise ValueError(f"batch sizes must be at least 1, got {sizes}")
    return sorted({int(b) for b in sizes} | {b0})


def _sweep(s: _Setup, sizes: list[int], best: Changes) -> list[Latency]:
    """Latency per batch size with the best eager setting; stops at OOM, the budget, or when
    throughput has stopped growing."""
    out: list[Latency] = []
    flat = 0
    for i, b in enumerate(sizes):
        left = s.left()
        if left <= 0.05:
            s.notes.append(f"batch sweep stopped at {b} (budget spent): raise budget_s for more")
            break
        each = left / max(1, min(len(sizes) - i, 4))
        s.tell(f"batch sweep: batch {b}", 1.0 - left / s.budget_s)
        inputs = make_batch(s.inputs, b)
        try:
            lat = measure(_eager(s, inputs, best), b, s.device, each)
        except Exception as exc:
            del inputs
            _free(s.device)
            if _oom(exc):
                s.notes.append(f"batch {b} ran out of device memory: the sweep stops there")
                break
            s.notes.append(
                f"batch {b} skipped: the forward raised {type(exc).__name__}: {exc}"[:300]
            )
            continue
        del inputs
        if out and lat.throughput < out[-1].throughput * gain_rule.KNEE_GAIN and b > s.batch:
            flat += 1
        else:
            flat = 0
        out.append(lat)
        if flat >= 2:
            break
    return out


def diagnose_inference(
    model: nn.Module,
    example_input: Any,
    budget_s: float = 30.0,
    batch_sizes: Sequence[int] | None = None,
    *,
    grad_enabled: bool | None = None,
    progress: Progress | None = None,
) -> Report:
    """Measure ``model``'s forward on ``example_input`` and what would serve it faster.

    ``example_input`` is one batch as your code passes it: a tensor, a tuple of positional
    arguments, or a dict of keyword arguments; dim 0 of its tensors is the batch (other batch
    sizes repeat its rows). ``grad_enabled``: whether your serving code calls the model with
    autograd on (default: as it is where you call this, so call it the way you serve).
    ``batch_sizes`` to sweep (default 1..32 on the CPU, 1..256 on a GPU, plus yours).
    ``progress(stage, fraction)`` is called as it goes.

    Returns a ``kind="inference"`` report: latency p50/p99 and throughput per batch size, the
    measured what-ifs and findings. Your model's weights, buffers and modes, torch's flags and
    the RNG states are as before afterwards, also when this raises.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if budget_s <= 0:
        raise ValueError(f"budget_s must be positive, got {budget_s}")
    b0 = batch_size_of(example_input)
    user_grad = (
        grad_enabled
        if grad_enabled is not None
        else torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    )
    device = model_device(model)
    sizes = _sweep_sizes(batch_sizes, b0, device.type == "cuda")
    snap = Snapshot.capture(model)
    # Version counters miss what native kernels write in place (batch-norm running statistics
    # in training mode): compare buffers by value as well.
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    notes: list[str] = []
    moved = [t for t in _tensors(example_input) if t.device != device]
    inputs = _map(example_input, lambda t: t.to(device) if t.device != device else t)
    if moved:
        notes.append(
            f"the example input was on {moved[0].device}: it was moved to {device} before "
            "timing (the copy is not in the latencies)"
        )
    s = _Setup(
        model=model,
        inputs=inputs,
        device=device,
        batch=b0,
        user_grad=user_grad,
        budget_s=budget_s,
        deadline=time.perf_counter() + budget_s,
        progress=progress,
        notes=notes,
    )
    report: Report | None = None
    try:
        report = _diagnose(s, sizes, budget_s)
    finally:
        s.inputs = None
        _free(device, workspaces=True)
        changed = snap.restore()
        if _restore_buffers(buffers) and "model buffers" not in changed:
            changed.append("model buffers")
        del buffers
        if report is not None and changed:
            report.notes.append(
                "Restored after the diagnosis, which had changed them: " + ", ".join(changed) + "."
            )
    s.tell("done", 1.0)
    return report


def _diagnose(s: _Setup, sizes: list[int], budget_s: float) -> Report:
    rows: list[WhatIf] = []
    base = _eager(s, s.inputs, {})
    try:
        base()
        _sync(s.device)
    except Exception as exc:
        raise DiagnoseError(
            f"the model raised on example_input, called as you call it: {type(exc).__name__}: {exc}"
        ) from exc
    # 1. inference_mode against the call as it is (also the baseline's figure).
    s.tell("your forward, and under inference_mode", 0.0)
    grad = _arm(GRAD_MODE, s)
    best: Changes = dict(grad.changes)  # under inference_mode from here: it drops bookkeeping
    grad_pair = interleaved(base, _eager(s, s.inputs, best), s.batch, s.device,
                            budget_s * SHARE_GRAD)  # fmt: skip
    finding = grad.finding_id if s.user_grad else None
    rows.append(_what_if(grad.label, grad_pair, finding, grad_enabled_before=s.user_grad))
    # 2. bf16 autocast (GPU), on top of inference_mode.
    amp_pair = _amp_pair(s, rows, best, budget_s * SHARE_AUTOCAST)
    amp = _wins(amp_pair)
    if amp:
        best.update(_arm(AUTOCAST, s).changes)
    # 3. CUDA graph replay of the best eager setting (GPU).
    graph_pair = _graph_pair(s, rows, best, budget_s * SHARE_GRAPH, amp)
    # 4. the batch sweep with the best eager setting.
    s.tell("batch sweep", SHARE_GRAD + SHARE_AUTOCAST + SHARE_GRAPH)
    sweep = _sweep(s, sizes, best)
    return _report(s, rows, grad_pair.base, grad_pair, amp_pair, graph_pair, sweep, best)


def _arm(knob: Knob, s: _Setup) -> Plan:
    got = knob.infer_arm(s.gpu)
    if isinstance(got, str):
        raise Skip(got)
    return got


def _amp_pair(s: _Setup, rows: list[WhatIf], best: Changes, budget_s: float) -> Pair | None:
    """The forward under ``best`` and under ``best`` with bf16 autocast (its row added)."""
    label = AUTOCAST.infer_label
    try:
        arm = _arm(AUTOCAST, s)
    except Skip as why:
        rows.append(_skipped(label, str(why)))
        return None
    s.tell(label, SHARE_GRAD)
    try:
        pair = interleaved(_eager(s, s.inputs, best),
                           _eager(s, s.inputs, {**best, **arm.changes}),
                           s.batch, s.device, budget_s)  # fmt: skip
    except Exception as exc:
        _free(s.device)
        rows.append(_skipped(label, f"failed: {type(exc).__name__}: {exc}"[:300]))
        return None
    rows.append(_what_if(label, pair, None, **AUTOCAST.infer_params(arm)))
    return pair


def _graph_pair(
    s: _Setup, rows: list[WhatIf], best: Changes, budget_s: float, amp: bool
) -> Pair | None:
    """The forward under ``best``, eager and replayed as a CUDA graph (its row added)."""
    if not s.gpu:
        rows.append(_skipped(GRAPH, "GPU only: CUDA graphs need a CUDA device"))
        return None
    s.tell(GRAPH, SHARE_GRAD + SHARE_AUTOCAST)
    graph: Any = None
    replay: Any = None
    try:
        replay, graph = _graph(s, s.inputs, best)
        pair = interleaved(_eager(s, s.inputs, best), replay, s.batch, s.device, budget_s)
        # Which of the forward's knobs the replay ran under, by the knob's name.
        rows.append(_what_if(GRAPH, pair, None, **{AUTOCAST.name: amp}))
        return pair
    except Exception as exc:
        rows.append(_skipped(GRAPH, f"capture failed: {type(exc).__name__}: {exc}"[:300]))
        return None
    finally:
        del graph, replay  # the graph's memory pool goes with the last reference
        _free(s.device)


def _grad_enabled(s: _Setup, grad_pair: Pair) -> Finding | None:
    """``infer.grad_enabled``: the forward runs with autograd recording, as called."""
    n_grad = sum(p.numel() for p in s.model.parameters() if p.requires_grad)
    if not (s.user_grad and n_grad):
        return None
    sp = grad_pair.speedup
    return Finding(
        id="infer.grad_enabled",
        severity="warn" if sp >= GRAD_WARN_SPEEDUP else "info",
        title="Inference runs with autograd recording"
        + (f": inference_mode measured {sp:.2f}x faster" if _wins(grad_pair) else ""),
        detail="Every forward records the graph for a backward that never comes: "
        "host time per op and activation memory kept alive until the output dies.",
        evidence=[
            Evidence("grad enabled at the call", True),
            Evidence("parameters requiring grad", n_grad),
            Evidence("p50 as called", round(grad_pair.base.p50, 4), "ms"),
            Evidence("p50 under inference_mode", round(grad_pair.variant.p50, 4), "ms"),
            Evidence("model in training mode", s.model.training),
        ],
        impact=Impact(
            basis="measured",
            text=f"{sp:.2f}x per forward at batch {s.batch}, measured interleaved.",
            speedup=round(sp, 3),
        ),
        fix=fix("Run inference under torch.inference_mode().", "infer.inference_mode"),
    )


def _unbatched(
    s: _Setup, mine: Latency | None, best: Latency | None, sweep: list[Latency], setting: str
) -> tuple[Finding, WhatIf] | None:
    """``infer.unbatched`` and its what-if row: a larger batch of the sweep serves at least
    ``UNBATCHED_GAIN`` times the samples per second of the batch as called."""
    if mine is None or best is None or best.batch <= s.batch:
        return None
    gain = best.throughput / mine.throughput if mine.throughput > 0 else 0.0
    if gain < UNBATCHED_GAIN:
        return None
    lo, hi = BATCHER_WAIT_S
    wait_s = round(min(hi, max(lo, best.p50 / 1000.0)), 4)
    finding = Finding(
        id="infer.unbatched",
        severity="warn" if gain >= UNBATCHED_WARN_GAIN else "info",
        title=f"Batches of {best.batch} serve {gain:.1f}x the samples per second "
        f"of batch {s.batch}",
        detail="A forward of many samples costs about as many launches and host "
        "work as one of a single sample; grouping waiting requests trades a few "
        "milliseconds of latency for throughput.",
        evidence=[
            Evidence(f"throughput at batch {s.batch}", round(mine.throughput, 1), "samples/s"),
            Evidence(
                f"throughput at batch {best.batch}",
                round(best.throughput, 1),
                "samples/s",
            ),
            Evidence(f"p50 latency at batch {s.batch}", round(mine.p50, 4), "ms"),
            Evidence(f"p99 latency at batch {s.batch}", round(mine.p99, 4), "ms"),
            Evidence(f"p50 latency at batch {best.batch}", round(best.p50, 4), "ms"),
            Evidence(f"p99 latency at batch {best.batch}", round(best.p99, 4), "ms"),
            Evidence("measured with", setting),
        ],
        impact=Impact(
            basis="measured",
            text=f"{gain:.1f}x samples per second at batch {best.batch} "
            f"(p50 {best.p50:.2f} ms per batch).",
            speedup=round(gain, 3),
        ),
        fix=fix(
            f"Group requests: a micro-batcher of up to {best.batch} that waits at "
            f"most {wait_s * 1000:g} ms.",
            "infer.dynamic_batching",
            single=round(mine.throughput, 1),
            batch=best.batch,
            batched=round(best.throughput, 1),
            wait_s=wait_s,
        ),
    )
    row = WhatIf(
        change=f"batch {best.batch} instead of {s.batch} (time per sample)",
        before_ms=round(mine.p50 / mine.batch, 5),
        after_ms=round(best.p50 / best.batch, 5),
        speedup=round(gain, 3),
        finding_id="infer.unbatched",
        params={"setting": setting},
        series=[{"x": x.batch, "y": round(x.throughput, 2), "label": "samples/s"} for x in sweep],
    )
    return finding, row


def _amp_unused(s: _Setup, amp_pair: Pair) -> Finding:
    """``load.amp_unused``: bf16 autocast measured faster than the float32 forward."""
    return Finding(
        id="load.amp_unused",
        severity="warn",
        title=f"The forward runs in float32: bf16 autocast measured {amp_pair.speedup:.2f}x",
        evidence=[
            Evidence("p50 float32", round(amp_pair.base.p50, 4), "ms"),
            Evidence("p50 bf16 autocast", round(amp_pair.variant.p50, 4), "ms"),
            Evidence("batch", s.batch),
        ],
        impact=Impact(
            basis="measured",
            text="Measured interleaved; check the outputs against your tolerance.",
            speedup=round(amp_pair.speedup, 3),
        ),
        fix=fix(
            "Serve under bf16 autocast.",
            "infer.autocast",
            speedup=round(amp_pair.speedup, 2),
        ),
    )


def _launch_bound(s: _Setup, graph_pair: Pair) -> Finding:
    """``load.launch_bound``: the forward replayed as a CUDA graph measured faster."""
    shape = next((tuple(t.shape) for t in _tensors(s.inputs)), (s.batch,))
    return Finding(
        id="load.launch_bound",
        severity="warn" if graph_pair.speedup >= GRAPH_WARN_SPEEDUP else "info",
        title=f"Kernel launches set the pace: a CUDA graph replay measured "
        f"{graph_pair.speedup:.2f}x",
        evidence=[
            Evidence("p50 eager", round(graph_pair.base.p50, 4), "ms"),
            Evidence("p50 graph replay", round(graph_pair.variant.p50, 4), "ms"),
            Evidence("batch", s.batch),
        ],
        impact=Impact(
            basis="measured",
            text="One graph launch instead of one launch per kernel.",
            speedup=round(graph_pair.speedup, 3),
        ),
        fix=fix(
            "Capture the forward once per batch size and replay it.",
            "infer.cuda_graphs",
            speedup=round(graph_pair.speedup, 2),
            shape=str(shape),
        ),
    )


def _tag_row(rows: list[WhatIf], change: str, finding_id: str) -> None:
    for w in rows:
        if w.change == change:
            w.finding_id = finding_id


def _report(
    s: _Setup,
    rows: list[WhatIf],
    baseline: Latency,
    grad_pair: Pair,
    amp_pair: Pair | None,
    graph_pair: Pair | None,
    sweep: list[Latency],
    changes: Changes,
) -> Report:
    findings: list[Finding] = []
    mine = next((x for x in sweep if x.batch == s.batch), None)
    best = max(sweep, key=lambda x: x.throughput) if sweep else None
    setting = " + ".join(k.infer_label for k in INFER if k.owns(changes))
    grad = _grad_enabled(s, grad_pair)
    if grad is not None:
        findings.append(grad)
    unbatched = _unbatched(s, mine, best, sweep, setting)
    if unbatched is not None:
        findings.append(unbatched[0])
        rows.append(unbatched[1])
    if amp_pair is not None and _wins(amp_pair):
        findings.append(_amp_unused(s, amp_pair))
        _tag_row(rows, AUTOCAST.infer_label, _arm(AUTOCAST, s).finding_id or "")
    if graph_pair is not None and _wins(graph_pair):
        findings.append(_launch_bound(s, graph_pair))
        _tag_row(rows, GRAPH, "load.launch_bound")
    if s.model.training:
        s.notes.append(
            "the model is in training mode (dropout, batch-norm statistics): call model.eval() "
            "for inference; not measured here, since it changes the outputs"
        )
    benches = _benchmarks(s, sweep, setting)
    settle(findings)
    verdict = _verdict(s, baseline, findings, mine, best)
    run = {
        "label": f"forward as called, batch {s.batch}",
        "steps": len(baseline.samples_ms),
        "step_time_ms": round(baseline.p50, 4),
        "step_time_spread_ms": [round(baseline.p10, 4), round(baseline.p90, 4)],
        "step_times_ms": [round(x, 4) for x in baseline.samples_ms[:500]],
    }
    return Report(
        kind="inference",
        machine=machine_facts(),
        run=run,
        benchmarks=benches,
        verdict=verdict,
        findings=findings,
        what_if=rows,
        notes=list(s.notes),
        title=f"Inference: {type(s.model).__name__} on {s.device}",
    )


def _benchmarks(s: _Setup, sweep: list[Latency], setting: str) -> list[Benchmark]:
    if not sweep:
        return []
    mine = next((x for x in sweep if x.batch == s.batch), sweep[0])

    def row(bid: str, label: str, unit: str, get: Callable[[Latency], float]) -> Benchmark:
        return Benchmark(
            id=bid,
            label=f"{label} ({setting})",
            value=finite(get(mine), 5),
            unit=unit,
            repeats=len(mine.samples_ms),
            params={"batch": mine.batch, "device": str(s.device)},
            series=[{"x": x.batch, "y": finite(get(x), 5), "label": unit} for x in sweep],
        )

    return [
        row("infer.latency_p50", "Latency p50 per batch", "ms", lambda x: x.p50),
        row("infer.latency_p99", "Latency p99 per batch", "ms", lambda x: x.p99),
        row("infer.throughput", "Throughput", "samples/s", lambda x: x.throughput),
    ]


def _verdict(
    s: _Setup,
    baseline: Latency,
    findings: list[Finding],
    mine: Latency | None,
    best: Latency | None,
) -> Verdict:
    head = (
        f"Batch {s.batch} as called: p50 {baseline.p50:.3g} ms, p99 {baseline.p99:.3g} ms, "
        f"{1000.0 * s.batch / baseline.p50:.4g} samples/s"
        if baseline.p50 > 0
        else "No timing"
    )
    if best is not None and mine is not None and best.batch != s.batch:
        head += f"; batch {best.batch}: {best.throughput:.4g} samples/s"
    gains = {f.id: f.impact.speedup or 1.0 for f in findings}
    category = {
        "infer.unbatched": "launch_overhead",
        "load.launch_bound": "launch_overhead",
        "load.amp_unused": "precision",
        "infer.grad_enabled": "host_cpu",
    }
    measured = {k: v for k, v in gains.items() if k in category and v >= gain_rule.MIN_GAIN}
    if measured:
        top = max(measured, key=lambda k: measured[k])
        bottleneck = category[top]
        title = next(f.title for f in findings if f.id == top)
        summary = f"{head}. {title}."
    else:
        bottleneck = "compute"
        summary = f"{head}. No change measured faster than the noise."
    return Verdict(bottleneck=bottleneck, gpu_busy_pct=None, summary=summary)


__all__ = [
    "Latency",
    "Pair",
    "batch_size_of",
    "diagnose_inference",
    "interleaved",
    "make_batch",
    "measure",
]
