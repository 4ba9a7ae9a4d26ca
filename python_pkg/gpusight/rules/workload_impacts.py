"""How much of a step a finding's fix could give back: estimates from the idle share, ranges for a
change of the work per step, and the small figures every rule writes (shares, rounding, sites).
Pure."""

from __future__ import annotations

from ..report import Impact, Severity, SourceLine


def pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def rnd(x: float, n: int = 1) -> float:
    return round(x, n)


def severity_of(share: float, warn: float, critical: float) -> Severity:
    return "critical" if share >= critical else "warn" if share >= warn else "info"


def source_line(
    file: str | None, line: int | None, code: str | None, count: int | None
) -> SourceLine | None:
    if file is None or line is None:
        return None
    return SourceLine(file=file, line=line, code=code, count=count)


def site_text(file: str | None, line: int | None) -> str:
    if file is None or line is None:
        return "(line unknown)"
    return f"{file} line {line}" if file == "cell" else f"{file}:{line}"


# An estimate from the idle share of today's step never claims more than this share back: near
# 100 % the formula 1 / (1 - share) runs off to infinity on rounding alone.
MAX_ESTIMATED_SHARE = 95.0


def idle_impact(share: float, text: str) -> Impact:
    share = max(0.0, min(100.0, share))
    capped = min(share, MAX_ESTIMATED_SHARE)
    speedup = 100.0 / (100.0 - capped)
    if share > MAX_ESTIMATED_SHARE:
        text = f"{text} ({speedup:.0f}x or more: an estimate from the idle share stops there.)"
    return Impact(
        basis="estimated",
        text=text,
        recoverable_pct=rnd(share),
        speedup=round(speedup, 2),
    )


# Of a PCIe link's bandwidth after encoding, what pinned host-to-device copies reach (H200,
# Gen5 x16: 55 of 63 GB/s, benchmarks/results/h200-bench-run7).
PINNED_LINK_SHARE = 0.85


def pinned_copy_impact(split: dict[str, float], mb: float | None, link: float | None) -> Impact:
    """Copies from pinned memory, ``non_blocking``: the host no longer waits for them (nor, for
    a non_blocking copy from pageable memory, for the GPU's queue before them), so the step
    becomes the longer of the host's other work and the GPU's kernels plus the copy. The copy's
    time is a range: today's (at most) to none; the estimate is the copy at the share of the
    link's speed that pinned copies reach, or, the link unknown, at twice today's speed."""
    step = sum(split.values())
    host = split["launch_overhead"] + split["other_cpu"] + split["data_wait"]
    gpu = split["compute"] + split["communication"]
    if step <= 0 or split["copy"] <= 0:
        return idle_impact(0.0, "Pinned copies run asynchronously, overlapping compute.")
    floor = max(host, gpu, 1e-6)
    lo = min(MAX_RANGE, step / max(host, gpu + split["copy"], 1e-6))
    hi = max(lo, min(MAX_RANGE, step / floor))
    text = (
        "Pinned and non_blocking, a copy no longer holds the host: the step becomes the longer "
        f"of the host's other work ({host:.1f} ms) and the GPU's kernels plus the copy."
    )
    if link and mb:
        copy_ms = min(split["copy"], mb / (link * PINNED_LINK_SHARE))  # MB / (GB/s) = ms
        basis = (
            f" The copy's {mb:.0f} MB at {PINNED_LINK_SHARE:.0%} of the PCIe link's "
            f"{link:.0f} GB/s takes {copy_ms:.1f} ms"
        )
    else:
        # Pinned copies skip the host's staging copy: twice today's speed at least (6.4x on
        # the H200: 55 against 8.6 GB/s).
        copy_ms = split["copy"] / 2
        basis = " The link's speed is unknown here; with the copy twice as fast as today"
    point = min(hi, step / max(host, gpu + copy_ms, 1e-6))
    text += f"{basis}: about {point:.1f}x"
    text += f" (from {lo:.1f}x, the copy as long as today, to {hi:.1f}x, the copy free)."
    return Impact(
        basis="estimated",
        text=text,
        speedup=round(point, 2),
        recoverable_pct=rnd(100.0 * (1.0 - 1.0 / point)),
        speedup_range=(round(lo, 2), round(hi, 2)),
    )


# A model's math runs at least this many times faster on a GPU than on the host's cores.
GPU_MATH_SPEEDUP_MIN = 5.0
# A range's high end stops here.
MAX_RANGE = 100.0


def range_impact(lo: float, hi: float, text: str) -> Impact:
    """An estimate for a change of the work per step: the idle share of today's step does not
    bound it, so it is a range; ``speedup`` is the low end (what sorting sees)."""
    lo = max(1.0, min(lo, MAX_RANGE))
    hi = max(lo, min(hi, MAX_RANGE))
    return Impact(
        basis="estimated",
        text=f"{text} Estimated {lo:.1f}x to {hi:.1f}x."
        if hi < 10
        else f"{text} Estimated {lo:.1f}x to {hi:.0f}x.",
        speedup=round(lo, 2),
        recoverable_pct=rnd(100.0 * (1.0 - 1.0 / lo)),
        speedup_range=(round(lo, 2), round(hi, 2)),
    )


def batch_impact(batch: int, suggested: int, busy: float | None, what: str) -> Impact:
    """Items per second at ``suggested`` instead of ``batch``: at least the GPU's idle share
    filled (its kernel time grows in proportion), at most the whole factor (the step's time
    stays the same: small kernels that did not fill the GPU)."""
    k = suggested / max(1, batch)
    lo = min(k, 100.0 / max(busy or 0.0, 1.0)) if busy is not None else 1.0
    return range_impact(
        lo,
        k,
        f"At batch {suggested} instead of {batch} each {what} does {k:.0f}x the work for the same "
        "launches and host work: from the GPU's idle share filled (kernel time growing in "
        f"proportion) to the {what} taking no longer (kernels too small to fill the GPU today). "
        "gpusight run --what-if measures it.",
    )
