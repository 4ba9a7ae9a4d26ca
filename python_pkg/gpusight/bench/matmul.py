"""Matrix-multiply throughput per precision: fp32 (TF32 off), TF32, bf16, fp16 and fp8, each set
against the GPU's datasheet peak and against the fastest precision measured in the same run.

What is measured: ``2 n^3 / t`` for an n x n x n product (n = 8192 on large GPUs), t the mean of
CUDA-event times of products enqueued back to back (the throughput; ``median_rate`` in the params
is the rate at the median time, higher when the clock swings). In the full run that is the
**sustained** rate: the products run for ``SUSTAINED_WARMUP_S`` before timing starts, so that the
GPU's power controller has settled, and ``SUSTAINED_TIMED_S`` of them are timed. A big GPU at its
power limit runs tensor-core products at a lower clock after a fraction of a second than in the
first milliseconds (an H200 at 700 W: boost 1,980 MHz at first, less once power-capped). A
training job runs its products for hours, so its ceiling is the sustained rate; a burst of a few
products from an idle GPU overstates it. The quick run (``quick=True``) cannot afford the warm-up
and says so: its rows are labelled "short burst".
While the timed products run, NVML is read (SM clock, power, clock-event reasons, temperature) and
the row's params keep what it said, so that a rate below the datasheet comes with the GPU's own
account ("power-capped at 700 W: SM clock 1,755 of 1,980 MHz").

Inputs are random (zeros run faster than real data), drawn from a private generator so the user's
RNG is untouched, and rotated among enough sets to exceed the L2 cache. TF32 settings are changed
through :mod:`gpusight.bench.flags` and restored exactly, on error and Ctrl-C too. The tensor-core
precisions run first and fp32 (the longest) last, so that the headline rates are not measured on
a GPU heated by a second of fp32 products; the rows keep the order of ``precisions``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

from ..report import Benchmark
from .device import (
    band,
    cuda_unavailable_reason,
    failed,
    finite,
    release_device_memory,
    resolve_device,
    skipped,
)
from .flags import matmul_fp32_precision
from .nvml import GpuNvml
from .peaks import GpuPeaks, lookup
from .progress import Progress, Span
from .sizing import device_limits, matmul_size
from .timer import time_fn

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
# Execution order: tensor-core precisions first, the long fp32 products last.
RUN_ORDER = ("bf16", "fp16", "fp8", "tf32", "fp32")
# Seconds of back-to-back products before timing in the full run: enough for the power
# controller of a GPU at its limit to settle (it reacts within tens to hundreds of ms).
SUSTAINED_WARMUP_S = 1.0
QUICK_WARMUP_S = 0.05
# Seconds of timed products in the full run (at least SUSTAINED_MIN_REPEATS of them): the power
# controller swings the clock over tens of ms, so a window of 50 sub-ms fp8 products (40 ms)
# lands on one swing, and two runs of it differ by several per cent.
SUSTAINED_TIMED_S = 0.25
SUSTAINED_MIN_REPEATS = 50
SUSTAINED_MAX_REPEATS = 2000
REGIME_LABELS = {"sustained": "sustained", "burst": "short burst"}
LABELS = {
    "fp32": "matmul fp32 (TF32 off)",
    "tf32": "matmul fp32 with TF32",
    "bf16": "matmul bf16",
    "fp16": "matmul fp16",
    "fp8": "matmul fp8 e4m3 (torch._scaled_mm)",
}
UNIT = "TFLOP/s"
_IN_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
_OUT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 2}


def unsupported_reason(precision: str, capability: tuple[int, int], torch: Any) -> str | None:
    """Why this GPU/torch cannot run the precision on its matrix units, or None."""
    cc = f"{capability[0]}.{capability[1]}"
    if precision in ("tf32", "bf16") and capability < (8, 0):
        return f"{precision} needs compute capability 8.0 or newer; this GPU is {cc}"
    if precision == "fp8":
        if capability < (8, 9):
            return f"fp8 needs compute capability 8.9 or newer; this GPU is {cc}"
        if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            return f"fp8 needs torch._scaled_mm, which torch {torch.__version__} lacks"
    return None


@contextlib.contextmanager
def _precision_flags(precision: str) -> Iterator[None]:
    if precision == "fp32":
        with matmul_fp32_precision("ieee"):
            yield
    elif precision == "tf32":
        with matmul_fp32_precision("tf32"):
            yield
    else:
        yield


def ceiling_for(
    peaks: GpuPeaks | None, precision: str, device_name: str
) -> tuple[float | None, str]:
    if peaks is None:
        return None, f"no datasheet row for {device_name!r} in gpusight.bench.peaks"
    value = peaks.tflops(precision)
    if value is None:
        return None, f"{peaks.source}: {peaks.name} has no {precision} matrix rate"
    return value, f"{peaks.source}: {peaks.name}, dense {precision}"


def run(
    *,
    budget_s: float = 10.0,
    quick: bool = False,
    device: Any = None,
    progress: Progress | None = None,
    precisions: tuple[str, ...] = PRECISIONS,
) -> list[Benchmark]:
    """One Benchmark per precision (TFLOP/s); skipped rows say why."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        return [skipped(f"matmul.{p}", LABELS[p], UNIT, reason) for p in precisions]
    import torch

    index = resolve_device(device)
    span = Span(progress)
    by_precision: dict[str, Benchmark] = {}
    order = [p for p in RUN_ORDER if p in precisions]
    order += [p for p in precisions if p not in order]
    per = budget_s / max(len(order), 1)
    nvml: GpuNvml | None = None
    try:
        with torch.cuda.device(index):
            name = torch.cuda.get_device_name(index)
            capability = tuple(torch.cuda.get_device_capability(index))
            peaks = lookup(name)
            nvml = GpuNvml(index)
            for k, precision in enumerate(order):
                sub = span.sub(k / len(order), (k + 1) / len(order))
                sub(f"matmul {precision}", 0.0)
                why = unsupported_reason(precision, (capability[0], capability[1]), torch)
                if why is not None:
                    by_precision[precision] = skipped(
                        f"matmul.{precision}", LABELS[precision], UNIT, why
                    )
                    continue
                try:
                    by_precision[precision] = _measure(
                        torch, precision, index, name, peaks, per, quick, sub, nvml
                    )
                except Exception as exc:  # OOM, a cuBLAS error: this row fails, the rest run
                    by_precision[precision] = failed(
                        f"matmul.{precision}", LABELS[precision], UNIT, exc
                    )
                    release_device_memory()
    finally:
        if nvml is not None:
            nvml.close()
        release_device_memory()
    rows = [by_precision[p] for p in precisions if p in by_precision]
    compare_to_best(rows)
    return rows


def _measure(
    torch: Any,
    precision: str,
    index: int,
    name: str,
    peaks: GpuPeaks | None,
    budget_s: float,
    quick: bool,
    span: Span,
    nvml: GpuNvml | None = None,
) -> Benchmark:
    bench_id = f"matmul.{precision}"
    limits = device_limits(index)
    size = matmul_size(limits, _IN_BYTES[precision], _OUT_BYTES[precision])
    if size is None:
        free_mib = limits.free_bytes // 2**20
        return skipped(
            bench_id, LABELS[precision], UNIT, f"not enough free GPU memory ({free_mib} MiB free)"
        )
    n = size.n
    # Every tensor lives in `box`, so that clearing it frees them all even while an exception
    # (whose traceback holds this frame) propagates.
    box: dict[str, Any] = {}
    try:
        gen = torch.Generator(device=f"cuda:{index}")
        gen.manual_seed(1234 + size.sets)
        for s in range(size.sets):
            box[f"a{s}"], box[f"b{s}"] = _inputs(torch, precision, n, index, gen)
        if precision == "fp8":
            box["scale"] = torch.ones((), device=f"cuda:{index}", dtype=torch.float32)
        fn = _matmul_fn(torch, precision, box, size.sets)
        with _precision_flags(precision):
            # One product first: cuBLAS picks and loads its kernel here (up to a second for a
            # new precision), which must not count as time under load.
            fn(0)
            torch.cuda.synchronize(index)
            repeats = 10 if quick else _sustained_repeats(torch, fn, index)
        if nvml is not None:
            nvml.reset()
        with _precision_flags(precision):
            timing = time_fn(
                fn,
                clock="cuda_event",
                warmup=2 if quick else 3,
                warmup_s=QUICK_WARMUP_S if quick else SUSTAINED_WARMUP_S,
                repeats=repeats,
                min_repeats=3,
                budget_s=budget_s,
                device=index,
                progress=span.inner(f"matmul {precision}"),
                monitor=nvml.sample if nvml is not None and nvml.handle is not None else None,
            )
    finally:
        box.clear()
    # Throughput (mean time), not the median: a power-capped GPU swings its clock from product
    # to product, and the slow products are part of its sustained rate.
    value, (lo, hi) = timing.throughput(2.0 * n**3 / 1e12)
    median_rate, _ = timing.rate(2.0 * n**3 / 1e12)
    ceiling, source = ceiling_for(peaks, precision, name)
    regime = "sustained" if not quick and timing.warmup_s >= SUSTAINED_WARMUP_S else "burst"
    params: dict[str, Any] = {
        "n": n,
        "device": name,
        "sets": size.sets,
        "fills_chip": size.fills_chip,
        "clock": timing.clock,
        "noise_pct": finite(timing.stats.noise_pct, 3),
        "median_rate": finite(median_rate, 1),
        "regime": regime,
        "warmup_s": round(timing.warmup_s, 3),
        "definition": (
            f"2*n^3 / mean CUDA-event time of back-to-back products (throughput), timed after "
            f"{timing.warmup_s:.2f} s of them"
            + (" (steady state)" if regime == "sustained" else " (short burst)")
        ),
    }
    if nvml is not None and nvml.handle is not None:
        params.update(nvml.summary().params())
    elif nvml is not None and nvml.why:
        params["gpu_state"] = nvml.why
    if precision == "fp8":
        params["use_fast_accum"] = True
        params["out_dtype"] = "bfloat16"
    return Benchmark(
        id=bench_id,
        label=f"{LABELS[precision]}, {REGIME_LABELS[regime]}",
        value=finite(value),
        unit=UNIT,
        ceiling=ceiling,
        ceiling_source=source,
        spread=band(lo, hi),
        repeats=timing.stats.n,
        params=params,
    )


def sustained_repeats(per_call_s: float) -> int:
    """Timed products for the full run: ``SUSTAINED_TIMED_S`` of them, within the bounds."""
    if per_call_s <= 0:
        return SUSTAINED_MAX_REPEATS
    wanted = math.ceil(SUSTAINED_TIMED_S / per_call_s)
    return max(SUSTAINED_MIN_REPEATS, min(SUSTAINED_MAX_REPEATS, wanted))


def _sustained_repeats(torch: Any, fn: Any, index: int) -> int:
    # One more product, host-timed (the first one above paid for cuBLAS's kernel choice).
    t0 = time.perf_counter()
    fn(1)
    torch.cuda.synchronize(index)
    return sustained_repeats(time.perf_counter() - t0)


def _inputs(torch: Any, precision: str, n: int, index: int, gen: Any) -> tuple[Any, Any]:
    dev = f"cuda:{index}"
    if precision == "fp8":
        a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
        # _scaled_mm wants A row-major and B column-major: B is the transpose of a row-major one.
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}.get(
        precision, torch.float16
    )
    a = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=dtype, generator=gen)
    return a, b


def _matmul_fn(torch: Any, precision: str, box: dict[str, Any], sets: int) -> Any:
    keys = [(f"a{s}", f"b{s}") for s in range(sets)]
    if precision == "fp8":

        def fp8(i: int) -> object:
            ka, kb = keys[i % sets]
            scale = box["scale"]
            return torch._scaled_mm(
                box[ka],
                box[kb],
                scale_a=scale,
                scale_b=scale,
                out_dtype=torch.bfloat16,
                use_fast_accum=True,
            )

        return fp8

    def mm(i: int) -> object:
        ka, kb = keys[i % sets]
        return torch.mm(box[ka], box[kb])

    return mm


def compare_to_best(rows: list[Benchmark]) -> None:
    """Add to each measured row how far it is below the fastest precision measured, and below
    each faster one (``x_below_tf32`` on the fp32 row: what turning TF32 on would give)."""
    measured = [r for r in rows if r.value is not None and r.value > 0]
    if not measured:
        return
    best = max(measured, key=lambda r: r.value or 0.0)
    for row in measured:
        assert row.value is not None
        params = dict(row.params or {})
        params["best"] = best.id
        params["x_below_best"] = finite(best.value / row.value if best.value else None, 3)
        for other in measured:
            if other is not row and other.value is not None and other.value > row.value:
                params[f"x_below_{other.id.split('.', 1)[1]}"] = finite(other.value / row.value, 3)
        row.params = params
