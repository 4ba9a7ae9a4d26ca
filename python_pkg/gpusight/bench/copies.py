"""Host<->device copies (pageable vs pinned, over a size sweep) against the PCIe link's theoretical
rate, and device-to-device copies against the memory's datasheet bandwidth.

What is timed (CUDA events around each ``dst.copy_(src)``, the largest size is the row's value):

- pinned: ``copy_(non_blocking=True)`` from/to page-locked memory: a DMA at the link's rate.
- pageable: the steady state of ``copy_()`` from/to ordinary memory (torch's CPU allocator): one
  host buffer, its pages faulted in (written) before timing and reused across repetitions, as a
  training loop reuses its batch buffers. The driver stages such copies through pinned bounce
  buffers with a CPU memcpy, so the rate is bounded by that memcpy (CPU, memory, NUMA node), and
  the copy blocks the host for its whole length. A first touch of fresh pages costs more again
  (page faults): that is not what this row measures.

The link rate comes from NVML: generation and width read while a copy loads the link, because idle
GPUs lower the link generation to save power. All buffers (pinned ones included) are freed on
every exit, Ctrl-C too: torch keeps freed pinned memory cached, so the cache is emptied as well.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..report import Benchmark
from .device import (
    band,
    cuda_unavailable_reason,
    failed,
    finite,
    release_device_memory,
    release_pinned_memory,
    resolve_device,
    skipped,
)
from .nvml import GpuNvml
from .peaks import PCIE_GT_PER_LANE, lookup, pcie_encoding, pcie_gbps
from .progress import Progress, Span
from .sizing import GiB, MiB, copy_sweep, d2d_bytes, device_limits
from .timer import time_fn

UNIT = "GB/s"
DIRECTIONS = (("h2d", "pinned"), ("h2d", "pageable"), ("d2h", "pinned"), ("d2h", "pageable"))
LABELS = {
    ("h2d", "pinned"): "host to device, pinned",
    ("h2d", "pageable"): "host to device, pageable",
    ("d2h", "pinned"): "device to host, pinned",
    ("d2h", "pageable"): "device to host, pageable",
}
D2D_LABEL = "device to device (read + write)"
QUICK_SIZES = (1 * MiB, 64 * MiB)
DEFINITIONS = {
    "pinned": "dst.copy_(src, non_blocking=True), page-locked host buffer; CUDA events",
    "pageable": (
        "steady state: dst.copy_(src) with one pageable host buffer (torch CPU allocator), "
        "pages faulted in before timing and reused across repetitions; CUDA events"
    ),
}


@dataclass(frozen=True)
class PcieLink:
    """The link a rate is judged against: generation and width used, and why."""

    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None
    used_gen: int | None
    used_width: int | None
    theoretical_gbps: float | None
    note: str | None

    def describe(self) -> str:
        if self.used_gen is None or self.used_width is None or self.theoretical_gbps is None:
            return "PCIe link unknown (NVML not available)"
        enc = "8b/10b" if self.used_gen <= 2 else ("128b/130b" if self.used_gen <= 5 else "FLIT")
        gt = PCIE_GT_PER_LANE[self.used_gen]
        text = (
            f"PCIe gen{self.used_gen} x{self.used_width}: {gt:g} GT/s x {self.used_width} lanes, "
            f"{enc} = {self.theoretical_gbps:.1f} GB/s per direction (link read through NVML)"
        )
        return f"{text}; {self.note}" if self.note else text


def judge_link(
    readings: list[tuple[int | None, int | None]], max_gen: int | None, max_width: int | None
) -> PcieLink:
    """From NVML readings (gen, width) taken under load, the generation and width to judge by.

    Idle GPUs drop to a lower generation; if even the loaded reading is below the maximum, the
    maximum is used and the note says so (a link that stays low under load is the doctor's
    ``env.pcie_degraded``). A narrower width is kept: it does not change with load.
    """
    gens = [g for g, _ in readings if g]
    widths = [w for _, w in readings if w]
    gen = max(gens) if gens else None
    width = max(widths) if widths else None
    used_gen, note = gen, None
    if gen is not None and max_gen is not None and gen < max_gen:
        used_gen = max_gen
        note = (
            f"the link read gen{gen} (idle GPUs lower the link generation to save power); "
            f"judged at its maximum, gen{max_gen}"
        )
    elif gen is None and max_gen is not None:
        used_gen = max_gen
        note = "current link generation unreadable; judged at the maximum"
    used_width = width if width is not None else max_width
    if used_width is not None and max_width is not None and used_width < max_width:
        extra = f"the link runs x{used_width} of x{max_width} lanes"
        note = f"{note}; {extra}" if note else extra
    if used_gen is not None and used_gen not in PCIE_GT_PER_LANE:
        used_gen = None
    theory = pcie_gbps(used_gen, used_width)
    return PcieLink(gen, width, max_gen, max_width, used_gen, used_width, theory, note)


def _skipped_all(
    reason: str,
    directions: Sequence[tuple[str, str]] = DIRECTIONS,
    device_copy: bool = True,
) -> list[Benchmark]:
    rows = [skipped(f"copy.{d}.{m}", LABELS[(d, m)], UNIT, reason) for d, m in directions]
    if device_copy:
        rows.append(skipped("copy.d2d", D2D_LABEL, UNIT, reason))
    return rows


def transparent_hugepages() -> str | None:
    """The kernel's THP mode ('always', 'madvise', 'never'), or None: whether a large pageable
    buffer gets 2 MiB pages changes the CPU memcpy that stages a pageable copy."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return None


def _host_available() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:
        return None


def run(
    *,
    budget_s: float = 10.0,
    quick: bool = False,
    device: Any = None,
    progress: Progress | None = None,
    directions: Sequence[tuple[str, str]] = DIRECTIONS,
    device_copy: bool = True,
) -> list[Benchmark]:
    """Rows copy.h2d.pinned, copy.h2d.pageable, copy.d2h.pinned, copy.d2h.pageable (GB/s at the
    largest size, the sweep as series) and copy.d2d; ``directions`` and ``device_copy`` pick
    a subset (a check that times each row next to a reference runs them one at a time)."""
    directions = [(d, m) for d, m in directions if (d, m) in LABELS]
    reason = cuda_unavailable_reason()
    if reason is not None:
        return _skipped_all(reason, directions, device_copy)
    import torch

    index = resolve_device(device)
    span = Span(progress)
    nvml = GpuNvml(index)
    box: dict[str, Any] = {}
    sweep_share = 0.85 if device_copy and directions else (1.0 if directions else 0.0)
    try:
        with torch.cuda.device(index):
            limits = device_limits(index)
            rows: list[Benchmark] = []
            if directions:
                if quick:
                    cap = copy_sweep(limits.free_bytes, _host_available(), lo=QUICK_SIZES[-1])
                    sizes = list(QUICK_SIZES) if cap else []
                else:
                    sizes = copy_sweep(limits.free_bytes, _host_available())
                if not sizes:
                    return _skipped_all(
                        "not enough free GPU or host memory for the copy sweep",
                        directions,
                        device_copy,
                    )
                rows = _sweep(
                    torch,
                    index,
                    sizes,
                    directions,
                    box,
                    nvml,
                    budget_s * sweep_share,
                    quick,
                    span.sub(0, sweep_share),
                )
                box.clear()
            if device_copy:
                rows.append(
                    _d2d(
                        torch,
                        index,
                        limits,
                        box,
                        budget_s * (1 - sweep_share),
                        quick,
                        span.sub(sweep_share, 1),
                    )
                )
            return rows
    except Exception as exc:
        rows = _skipped_all("", directions, device_copy)
        return [failed(r.id, r.label, UNIT, exc) for r in rows]
    finally:
        box.clear()
        nvml.close()
        release_pinned_memory()
        release_device_memory()


# Share of a direction's budget kept for its largest size: the row's value, and the slowest copy.
HEADLINE_SHARE = 0.4


def cell_budget(left_s: float, *, sizes_left: int, direction_budget: float) -> float:
    """Seconds for the next size of a direction that has ``left_s`` of its ``direction_budget``
    left: the largest size keeps ``HEADLINE_SHARE`` of the direction's budget, the smaller
    sizes share the rest, and what cheap cells leave unused passes on to the next ones."""
    left_s = max(left_s, 0.0)
    if sizes_left <= 1:
        return left_s
    smaller = max(left_s - HEADLINE_SHARE * direction_budget, 0.0)
    return smaller / (sizes_left - 1)


def _copy_fn(box: dict[str, Any], non_blocking: bool) -> Callable[[int], object]:
    def copy(i: int) -> object:
        return box["dst"].copy_(box["src"], non_blocking=non_blocking)

    return copy


def _sweep(
    torch: Any,
    index: int,
    sizes: list[int],
    directions: Sequence[tuple[str, str]],
    box: dict[str, Any],
    nvml: GpuNvml,
    budget_s: float,
    quick: bool,
    span: Span,
) -> list[Benchmark]:
    start = time.perf_counter()
    largest = sizes[-1]
    dev = f"cuda:{index}"
    kinds = {memory for _, memory in directions}
    gen = torch.Generator(device=dev)
    gen.manual_seed(4321)
    span("copies: allocating buffers", 0.0)
    box["dev"] = torch.randint(0, 256, (largest,), dtype=torch.uint8, device=dev, generator=gen)
    if "pageable" in kinds:
        # Random bytes written into ordinary memory: every page faulted in before any timing.
        box["pageable"] = box["dev"].cpu()
    burst = min(largest, 256 * MiB)
    box["pinned"] = torch.empty(
        largest if "pinned" in kinds else burst, dtype=torch.uint8, pin_memory=True
    )
    box["pinned"].copy_(box["dev"][: box["pinned"].numel()])
    torch.cuda.synchronize(index)

    # Load the link with pinned copies and read NVML while they are in flight.
    readings = [nvml.pcie()]
    for _ in range(8):
        box["dev"][:burst].copy_(box["pinned"][:burst], non_blocking=True)
    readings.append(nvml.pcie())
    torch.cuda.synchronize(index)
    link = judge_link(readings, *nvml.pcie_max())
    if "pinned" not in kinds:
        del box["pinned"]
    thp = transparent_hugepages()

    rows: list[Benchmark] = []
    cells = len(directions) * len(sizes)
    done = 0
    for direction, memory in directions:
        # An even share of what is left, so that an overrun does not starve the last direction.
        direction_start = time.perf_counter()
        direction_budget = max(budget_s - (direction_start - start), 0.0) / (
            len(directions) - len(rows)
        )
        series: list[dict[str, Any]] = []
        last: tuple[float, tuple[float, float], int] | None = None
        for size in sizes:
            stage = f"copy {direction} {memory} {_fmt_bytes(size)}"
            host = box[memory][:size]
            if direction == "h2d":
                box["src"], box["dst"] = host, box["dev"][:size]
            else:
                box["src"], box["dst"] = box["dev"][:size], host
            del host
            per_cell = cell_budget(
                direction_budget - (time.perf_counter() - direction_start),
                sizes_left=len(sizes) - sizes.index(size),
                direction_budget=direction_budget,
            )
            timing = time_fn(
                _copy_fn(box, non_blocking=memory == "pinned"),
                clock="cuda_event",
                warmup=1 if size >= 256 * MiB else 2,
                repeats=10 if quick else 30,
                min_repeats=3,
                budget_s=per_cell,
                device=index,
                progress=span.sub(done / cells, (done + 1) / cells).inner(stage),
            )
            done += 1
            gbps, (lo, hi) = timing.rate(size / 1e9)
            series.append({"x": size, "y": finite(gbps), "label": f"{direction} {memory}"})
            last = (gbps, (lo, hi), timing.stats.n)
        box.pop("src", None)
        box.pop("dst", None)
        assert last is not None
        gbps, (lo, hi), n = last
        peak = max((p["y"] for p in series if p["y"] is not None), default=None)
        rows.append(
            Benchmark(
                id=f"copy.{direction}.{memory}",
                label=LABELS[(direction, memory)],
                value=finite(gbps),
                unit=UNIT,
                ceiling=finite(link.theoretical_gbps),
                ceiling_source=link.describe(),
                spread=band(lo, hi),
                repeats=n,
                params={
                    "bytes": largest,
                    "definition": DEFINITIONS[memory],
                    **({"host_thp": thp} if memory == "pageable" and thp else {}),
                    "peak_gbps": peak,
                    "pcie_gen": link.gen,
                    "pcie_width": link.width,
                    "pcie_max_gen": link.max_gen,
                    "pcie_max_width": link.max_width,
                    "pcie_note": link.note,
                    "encoding": (
                        f"{pcie_encoding(link.used_gen):.4f}" if link.used_gen is not None else None
                    ),
                },
                series=series,
            )
        )
    return rows


def _d2d(
    torch: Any,
    index: int,
    limits: Any,
    box: dict[str, Any],
    budget_s: float,
    quick: bool,
    span: Span,
) -> Benchmark:
    size = d2d_bytes(limits, largest=256 * MiB if quick else 1 * GiB)
    if size < MiB:
        return skipped("copy.d2d", D2D_LABEL, UNIT, "not enough free GPU memory")
    dev = f"cuda:{index}"
    gen = torch.Generator(device=dev)
    gen.manual_seed(99)
    box["src"] = torch.randint(0, 256, (size,), dtype=torch.uint8, device=dev, generator=gen)
    box["dst"] = torch.empty(size, dtype=torch.uint8, device=dev)
    timing = time_fn(
        _copy_fn(box, non_blocking=False),
        clock="cuda_event",
        warmup=3,
        repeats=10 if quick else 50,
        min_repeats=3,
        budget_s=budget_s,
        device=index,
        progress=span.inner("copy d2d"),
    )
    box.clear()
    gbps, (lo, hi) = timing.rate(2 * size / 1e9)  # every byte is read once and written once
    name = torch.cuda.get_device_name(index)
    peaks = lookup(name)
    ceiling = peaks.memory_gbps if peaks is not None else None
    source = (
        f"{peaks.source}: {peaks.name} memory bandwidth"
        if peaks is not None
        else f"no datasheet row for {name!r} in gpusight.bench.peaks"
    )
    return Benchmark(
        id="copy.d2d",
        label=D2D_LABEL,
        value=finite(gbps),
        unit=UNIT,
        ceiling=ceiling,
        ceiling_source=source,
        spread=band(lo, hi),
        repeats=timing.stats.n,
        params={
            "bytes": size,
            "counted": "bytes read + bytes written",
            "l2_bytes": limits.l2_bytes,
        },
    )


def _fmt_bytes(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"
