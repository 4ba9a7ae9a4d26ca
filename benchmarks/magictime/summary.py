"""The runs of ``benchmarks/magic_speed.py`` summed up: each run's time split by stage, then per
state the medians over runs, and the table printed last."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

from harness.table import aligned, fmt

MARK = "GPUSIGHT_MAGIC "
# The stages ``gpusight.bench.run_all`` names as it enters each benchmark, in order.
BENCH_STAGES = ("cpu", "matmul", "copies", "launch")
CHECK_STAGE = "checking the environment"
PARTS = ("before check", "check", *BENCH_STAGES, "after bench")
LONGEST = 8  # the stages the table lists by name, longest first


def parse(stdout: str) -> dict[str, Any] | None:
    """The last ``GPUSIGHT_MAGIC`` line of a child's output, or None."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith(MARK)]
    return json.loads(lines[-1][len(MARK) :]) if lines else None


def stage_times(marks: Sequence[tuple[float, str]], end_s: float) -> list[tuple[str, float]]:
    """Each stage the progress named, with the seconds until the next one (or the end)."""
    out: list[tuple[str, float]] = []
    for i, (t, stage) in enumerate(marks):
        nxt = marks[i + 1][0] if i + 1 < len(marks) else end_s
        out.append((stage, nxt - t))
    return out


def split(marks: Sequence[tuple[float, str]], end_s: float) -> dict[str, float | None]:
    """``%gpusight``'s seconds by part: before the check starts (argument parsing, the progress
    display), the check, each benchmark, and after the benchmarks (merging the reports, the
    display). A part the progress never named is None."""
    first: dict[str, float] = {}
    for t, stage in marks:
        first.setdefault(stage, t)
    named = [("check", CHECK_STAGE), *((s, s) for s in BENCH_STAGES), ("after bench", "done")]
    bounds = [(name, first.get(key)) for name, key in named]
    known = [(name, t) for name, t in bounds if t is not None]
    out: dict[str, float | None] = dict.fromkeys(PARTS)
    out["before check"] = known[0][1] if known else None
    for i, (name, t) in enumerate(known):
        nxt = known[i + 1][1] if i + 1 < len(known) else end_s
        out[name] = nxt - t
    return out


def _median(xs: Sequence[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return round(statistics.median(vals), 4) if vals else None


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians over one state's runs: the whole, each part, each probe, each row's figure."""
    ok = [r for r in runs if "report" in r]
    splits = [split(r["marks"], r["end_s"]) for r in ok]
    keys = sorted({k for r in ok for k in r["parts"]})
    rows = sorted({k for r in ok for k in r["report"]["rows"]})
    stages: dict[str, list[float]] = {}
    for r in ok:
        seen: dict[str, float] = {}
        for stage, secs in stage_times(r["marks"], r["end_s"]):
            seen[stage] = seen.get(stage, 0.0) + secs
        for stage, secs in seen.items():
            stages.setdefault(stage, []).append(secs)
    return {
        "runs": len(runs),
        "ok": len(ok),
        "total_s": _median([r["total_s"] for r in ok]),
        "total_runs_s": [round(r["total_s"], 4) for r in ok],
        "load_ext_s": _median([r["load_ext_s"] for r in ok]),
        "magic_s": _median([r["magic_s"] for r in ok]),
        "process_wall_s": _median([r.get("wall_s") for r in ok]),
        "import_torch_cuda_init_s": _median([r.get("import_torch_cuda_init_s") for r in ok]),
        "split_s": {p: _median([s[p] for s in splits]) for p in PARTS},
        "stages_s": {k: _median(v) for k, v in stages.items()},
        "check_parts_s": {k: _median([r["parts"].get(k) for r in ok]) for k in keys},
        "rows": {k: _median([r["report"]["rows"].get(k) for r in ok]) for k in rows},
        "findings": sorted({f for r in ok for f in r["report"]["findings"]}),
        "checks": ok[0]["report"]["checks"] if ok else {},
        "skipped": ok[0]["report"]["skipped"] if ok else {},
        "summary": ok[0]["report"]["summary"] if ok else None,
        "errors": [r.get("error") for r in runs if "report" not in r],
    }


def slim(run: dict[str, Any]) -> dict[str, Any]:
    """One run as the results keep it: its times, its split and its figures (what every run
    shares, the checks and the skip reasons, is kept once per state by ``summarise``)."""
    if "report" not in run:
        return {"error": run.get("error"), "wall_s": run.get("wall_s")}
    keep = ("total_s", "load_ext_s", "magic_s", "wall_s", "import_torch_cuda_init_s")
    out = {k: round(run[k], 4) for k in keep if run.get(k) is not None}
    out["split_s"] = {
        k: v if v is None else round(v, 4) for k, v in split(run["marks"], run["end_s"]).items()
    }
    out["parts_s"] = {k: round(v, 4) for k, v in run["parts"].items()}
    out["rows"] = run["report"]["rows"]
    out["findings"] = run["report"]["findings"]
    return out


def table(by_state: dict[str, dict[str, Any]], target_s: float) -> str:
    """The medians side by side, one column per state."""
    states = list(by_state)
    n = max((s["ok"] for s in by_state.values()), default=0)
    head = [f"%gpusight, median of {n} fresh processes (s)", *states]
    body: list[list[Any]] = [
        ["%load_ext gpusight + %gpusight", *(fmt(by_state[s]["total_s"], 3) for s in states)],
        ["  %load_ext gpusight", *(fmt(by_state[s]["load_ext_s"], 3) for s in states)],
        ["  %gpusight", *(fmt(by_state[s]["magic_s"], 3) for s in states)],
    ]
    for part in PARTS:
        body.append([f"    {part}", *(fmt(by_state[s]["split_s"][part], 3) for s in states)])
    probes = sorted({k for s in states for k in by_state[s]["check_parts_s"]})
    for key in probes:
        body.append(
            [f"      {key}", *(fmt(by_state[s]["check_parts_s"].get(key), 3) for s in states)]
        )
    first = by_state[states[0]]["stages_s"] if states else {}
    longest = sorted(first, key=lambda k: -(first[k] or 0.0))[:LONGEST]
    if longest:
        body.append([f"  longest stages ({states[0]})", *([""] * len(states))])
    for stage in longest:
        cells = (fmt(by_state[s]["stages_s"].get(stage), 3) for s in states)
        body.append([f"    {stage}", *cells])
    body.append(
        [
            "import torch; torch.cuda.init() (reference)",
            *(fmt(by_state[s]["import_torch_cuda_init_s"], 3) for s in states),
        ]
    )
    warm = by_state.get("warm", {}).get("total_s")
    met = "-" if warm is None else ("yes" if warm <= target_s else "NO")
    body.append([f"warm <= {target_s:g} s", met, *([""] * (len(states) - 1))])
    return aligned([head, *body], rule=True)
