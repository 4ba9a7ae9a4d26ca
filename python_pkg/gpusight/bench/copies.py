"""Host<->device copies (pageable vs pinned, over a size sweep) against the PCIe link's theoretical
rate, and device-to-device copies against the memory's datasheet bandwidth.

The link rate comes from NVML: generation and width read while a copy loads the link, because idle
GPUs lower the link generation to save power. All buffers (pinned ones included) are freed on
every exit, Ctrl-C too: torch keeps freed pinned memory cached, so the cache is emptied as well.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
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


class _Nvml:
    """NVML for one torch device, or nothing (no pynvml, no driver, no match): then link is None."""

    def __init__(self, index: int) -> None:
        self.handle: Any = None
        self.pynvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.pynvml = pynvml
            self.handle = _handle_for(pynvml, index)
        except Exception:
            self.handle = None

    def read(self) -> tuple[int | None, int | None]:
        if self.handle is None:
            return None, None
        p = self.pynvml
        return _call(p.nvmlDeviceGetCurrPcieLinkGeneration, self.handle), _call(
            p.nvmlDeviceGetCurrPcieLinkWidth, self.handle
        )

    def max(self) -> tuple[int | None, int | None]:
        if self.handle is None:
            return None, None
        p = self.pynvml
        return _call(p.nvmlDeviceGetMaxPcieLinkGeneration, self.handle), _call(
            p.nvmlDeviceGetMaxPcieLinkWidth, self.handle
        )

    def close(self) -> None:
        if self.pynvml is not None:
            try:
                self.pynvml.nvmlShutdown()  # reference counted: others' NVML stays open
            except Exception:
                pass
            self.pynvml = None


def _call(fn: Callable[[Any], Any], handle: Any) -> int | None:
    try:
        value = int(fn(handle))
    except Exception:
        return None
    return value if value > 0 else None


def _handle_for(pynvml: Any, index: int) -> Any:
    """The NVML handle of torch's device ``index``: by UUID, then PCI bus id, then index (only
    when CUDA_VISIBLE_DEVICES cannot have renumbered the devices)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        for cand in (text, f"GPU-{text}"):
            try:
                return pynvml.nvmlDeviceGetHandleByUUID(cand)
            except Exception:
                continue
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        dom = int(getattr(props, "pci_domain_id", 0) or 0)
        dev = int(getattr(props, "pci_device_id", 0) or 0)
        bus_id = f"{dom:08X}:{int(bus):02X}:{dev:02X}.0"
        for fn_name in ("nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"):
            fn = getattr(pynvml, fn_name, None)
            if fn is None:
                continue
            try:
                return fn(bus_id)
            except Exception:
                continue
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    return None


def _skipped_all(reason: str) -> list[Benchmark]:
    rows = [skipped(f"copy.{d}.{m}", LABELS[(d, m)], UNIT, reason) for d, m in DIRECTIONS]
    rows.append(skipped("copy.d2d", D2D_LABEL, UNIT, reason))
    return rows


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
) -> list[Benchmark]:
    """Rows copy.h2d.pinned, copy.h2d.pageable, copy.d2h.pinned, copy.d2h.pageable (GB/s at the
    largest size, the sweep as series) and copy.d2d."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        return _skipped_all(reason)
    import torch

    index = resolve_device(device)
    span = Span(progress)
    nvml = _Nvml(index)
    box: dict[str, Any] = {}
    try:
        with torch.cuda.device(index):
            limits = device_limits(index)
            if quick:
                cap = copy_sweep(limits.free_bytes, _host_available(), lo=QUICK_SIZES[-1])
                sizes = list(QUICK_SIZES) if cap else []
            else:
                sizes = copy_sweep(limits.free_bytes, _host_available())
            if not sizes:
                return _skipped_all("not enough free GPU or host memory for the copy sweep")
            rows = _sweep(torch, index, sizes, box, nvml, budget_s * 0.85, quick, span.sub(0, 0.85))
            box.clear()
            rows.append(_d2d(torch, index, limits, box, budget_s * 0.15, quick, span.sub(0.85, 1)))
            return rows
    except Exception as exc:
        rows = _skipped_all("")
        return [failed(r.id, r.label, UNIT, exc) for r in rows]
    finally:
        box.clear()
        nvml.close()
        release_pinned_memory()
        release_device_memory()


def _copy_fn(box: dict[str, Any], non_blocking: bool) -> Callable[[int], object]:
    def copy(i: int) -> object:
        return box["dst"].copy_(box["src"], non_blocking=non_blocking)

    return copy


def _sweep(
    torch: Any,
    index: int,
    sizes: list[int],
    box: dict[str, Any],
    nvml: _Nvml,
    budget_s: float,
    quick: bool,
    span: Span,
) -> list[Benchmark]:
    largest = sizes[-1]
    dev = f"cuda:{index}"
    gen = torch.Generator(device=dev)
    gen.manual_seed(4321)
    span("copies: allocating buffers", 0.0)
    box["dev"] = torch.randint(0, 256, (largest,), dtype=torch.uint8, device=dev, generator=gen)
    box["pageable"] = box["dev"].cpu()  # random bytes, pages already resident
    box["pinned"] = torch.empty(largest, dtype=torch.uint8, pin_memory=True)
    box["pinned"].copy_(box["dev"])
    torch.cuda.synchronize(index)

    # Load the link with pinned copies and read NVML while they are in flight.
    readings = [nvml.read()]
    burst = min(largest, 256 * MiB)
    for _ in range(8):
        box["dev"][:burst].copy_(box["pinned"][:burst], non_blocking=True)
    readings.append(nvml.read())
    torch.cuda.synchronize(index)
    link = judge_link(readings, *nvml.max())

    per_cell = budget_s / (len(DIRECTIONS) * len(sizes))
    rows: list[Benchmark] = []
    cells = len(DIRECTIONS) * len(sizes)
    done = 0
    for direction, memory in DIRECTIONS:
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
