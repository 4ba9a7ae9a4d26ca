"""How far the step is from the GPU's limit: FLOPs per step over the step's time, against the
matrix rate gpusight measures on this GPU and against the datasheet's.

The FLOPs are ``FlopCounterMode``'s (``flop_step.py``): matrix products, convolutions and
attention, the model FLOPs MFU is defined over; elementwise work counts nothing. A step that
mixes precisions is set against a blended ceiling: the time each precision's FLOPs take at its
own rate, summed. The measured ceiling is ``bench.matmul``'s sustained rate of the precision,
measured once per process and device after the watch ends (the GPU otherwise idle).
"""

from __future__ import annotations

from typing import Any

from ..bench.peaks import PRECISIONS
from .flop_step import CountedFlops

MINOR_SHARE = 0.05
"""Precisions with less of the FLOPs than this may lack a ceiling: their time is left out."""
CEILING_BUDGET_S = 1.5
"""Per precision: ``bench.matmul``'s sustained warm-up (1 s) and its timed products."""

BUSY_VERDICTS = ("compute", "precision")
"""Verdicts of a GPU kept busy: their summary says how far the step is from the limit."""

_MEASURED: dict[tuple[int, str], tuple[float | None, str]] = {}


def measured_ceiling(torch: Any, precision: str) -> tuple[float | None, str]:
    """This GPU's sustained matrix rate in ``precision`` (TFLOP/s), or None and why."""
    index = int(torch.cuda.current_device())
    key = (index, precision)
    if key not in _MEASURED:
        from ..bench import matmul

        try:
            row = matmul.run(budget_s=CEILING_BUDGET_S, precisions=(precision,), device=index)[0]
            label = f"{precision} matmul measured on this GPU, sustained"
            _MEASURED[key] = (
                (row.value, label) if row.value else (None, row.skipped or "not measured")
            )
        except Exception as exc:  # the user's tensors may fill the GPU: no ceiling, said
            _MEASURED[key] = (None, f"the {precision} matmul could not run: {exc}")
    return _MEASURED[key]


def _blend(by: dict[str, float], ceilings: dict[str, float | None]) -> float | None:
    """Seconds the FLOPs take at the ceilings' rates (TFLOP/s); None where a major precision
    has none."""
    total = sum(by.values())
    seconds = 0.0
    for p, f in by.items():
        c = ceilings.get(p)
        if c:
            seconds += f / (c * 1e12)
        elif f > MINOR_SHARE * total:
            return None
    return seconds or None


def _mfu(by: dict[str, float], ceilings: dict[str, float | None], step_s: float) -> float | None:
    at_peak = _blend(by, ceilings)
    return None if at_peak is None else round(100.0 * at_peak / step_s, 2)


def speed_of_light(
    counted: CountedFlops | None,
    step_ms: float | None,
    device_name: str | None,
    measured: dict[str, tuple[float | None, str]],
) -> dict[str, Any] | None:
    """``run.speed_of_light``; None where no count was tried (a lean run)."""
    if counted is None:
        return None
    if counted.unavailable is not None or not counted.by_precision:
        return {"unavailable": counted.unavailable or "no FLOPs were counted"}
    by = counted.by_precision
    total = counted.total
    main = max(by, key=lambda p: by[p])
    out: dict[str, Any] = {
        "flops_per_step": total,
        "flops_by_precision": {p: by[p] for p in sorted(by, key=lambda q: -by[q])},
        "precision": main,
        "counted": f"torch FlopCounterMode over step {counted.step_index}, the one after the "
        "measured steps",
    }
    if not step_ms or step_ms <= 0:
        out["unavailable"] = "no measured step time"
        return out
    step_s = step_ms / 1e3
    out["step_time_ms"] = round(step_ms, 3)
    out["achieved_tflops"] = round(total / step_s / 1e12, 3)
    ceilings = _ceilings(by, device_name, measured)
    out["ceilings"] = ceilings
    rates = {src: {c["precision"]: c.get("tflops") for c in ceilings if c["source"] == src}
             for src in ("measured", "datasheet")}  # fmt: skip
    out["mfu_pct"] = _mfu(by, rates["measured"], step_s)
    out["mfu_datasheet_pct"] = _mfu(by, rates["datasheet"], step_s)
    if out["mfu_pct"] is None and out["mfu_datasheet_pct"] is None:
        out["unavailable"] = _no_ceiling(main, device_name, ceilings)
    return out


def _no_ceiling(main: str, device_name: str | None, ceilings: list[dict[str, Any]]) -> str:
    if not device_name:
        return "the step ran on no GPU: gpusight knows the ceilings of GPUs only"
    why = [c["label"] for c in ceilings if c["precision"] == main and not c.get("tflops")]
    return f"no {main} ceiling is known for {device_name}" + (f" ({'; '.join(why)})" if why else "")


def _ceilings(
    by: dict[str, float], device_name: str | None, measured: dict[str, tuple[float | None, str]]
) -> list[dict[str, Any]]:
    from ..bench.matmul import ceiling_for
    from ..bench.peaks import lookup

    if not device_name:
        return []
    peaks = lookup(device_name)
    rows: list[dict[str, Any]] = []
    for p in sorted(by, key=lambda q: -by[q]):
        if p in measured:
            value, label = measured[p]
            rows.append({"source": "measured", "precision": p, "tflops": value, "label": label})
        value, label = (
            ceiling_for(peaks, p, device_name)
            if p in PRECISIONS
            else (None, f"no datasheet rate for {p}")
        )
        rows.append({"source": "datasheet", "precision": p, "tflops": value, "label": label})
    return rows


def measure_ceilings(
    torch: Any, counted: CountedFlops | None
) -> dict[str, tuple[float | None, str]]:
    """The measured rate of each precision holding a real share of the FLOPs (CUDA only)."""
    if counted is None or not counted.by_precision or not torch.cuda.is_available():
        return {}
    total = counted.total
    return {
        p: measured_ceiling(torch, p)
        for p, f in counted.by_precision.items()
        if f > MINOR_SHARE * total and p in PRECISIONS
    }


def summary_line(sol: dict[str, Any] | None) -> str | None:
    """One sentence for the verdict of a busy GPU: how far the step is from the limit."""
    if not sol or (sol.get("mfu_pct") is None and sol.get("mfu_datasheet_pct") is None):
        return None
    p = sol["precision"]
    got = sol["achieved_tflops"]
    if sol.get("mfu_pct") is not None:
        ceiling = next(c["tflops"] for c in sol["ceilings"]
                       if c["source"] == "measured" and c["precision"] == p)  # fmt: skip
        return (
            f"The step reaches {sol['mfu_pct']:.0f}% of the {p} matrix rate measured on this GPU "
            f"({got:.1f} of {ceiling:.0f} TFLOP/s)."
        )
    return f"The step reaches {sol['mfu_datasheet_pct']:.0f}% of the datasheet's {p} rate."
