"""What a watched run saw that the what-if planner needs, as plain JSON: the DataLoader's
settings, the model's placement and layout, the torch flags in force, the step's items and time.

Written by the run (``gpusight run --facts FILE``) next to its report; read by the planner
(``plan.py``) and the driver, never by the report's renderers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from ..knobs import recorded
from ..watch.code_sources import forward_site, forward_source, loader_source
from ..watch.collected import busiest_loader
from ..watch.report_builder import batches_per_step

if TYPE_CHECKING:
    from ..report import Report
    from ..watch.session import Watch


def from_watch(w: Watch, wall_s: float | None = None) -> dict[str, Any]:
    rep = w.report
    run = (rep.run or {}) if rep is not None else {}
    # A loader's epochs counted together, as the report's items per step are: a run over
    # several short epochs is fed by the loader, a batch a step.
    ld = busiest_loader(w.collected.loaders.values())
    mods = [m for m in w.collected.modules.values() if m.calls > 0]
    main = max(mods, key=lambda m: (m.n_params, m.calls)) if mods else None
    flags = w.flags()
    rec = w.recorder
    site = w.collected.loader_sites.get(ld.dataset_id) if ld is not None else None
    src = loader_source(w, ld) if ld is not None else None
    cell = src.cell if src is not None else None
    fwd = forward_site(w)
    fwd_src = forward_source(w) if fwd is not None else None
    steps = run.get("steps") or 0
    measured = rec.clean()[0][:steps] if rec else []
    of_model, of_loader = recorded(main, ld)
    return {
        "step_mode": rec.kind if rec is not None else None,
        "steps": steps,
        "step_time_ms": run.get("step_time_ms"),
        "items_per_step": run.get("items_per_step"),
        "breakdown_ms": run.get("breakdown_ms") or {},
        "gpu_busy_pct": run.get("gpu_busy_pct"),
        "peak_memory_bytes": run.get("peak_memory_bytes"),
        "memory_capacity_bytes": run.get("memory_capacity_bytes"),
        "cuda": bool(w.cuda_available),
        "cpu_count": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "loader": None
        if ld is None
        else {
            **of_loader,
            "batches": ld.calls,
            "batches_per_step": batches_per_step(ld.calls, rec.completed if rec else 0),
            "batches_per_epoch": ld.batches_per_epoch,
            "epoch_start_ms": (
                round(sum(ld.epoch_start_ns) / len(ld.epoch_start_ns) / 1e6, 3)
                if ld.epoch_start_ns
                else None
            ),
            "fetch_cpu_pct": ld.fetch_cpu_pct(),
            "dataset_set_epoch": ld.dataset_set_epoch,
        },
        "epochs_seen": len(run.get("epoch_starts") or []),
        "recompiled_steps": [i for i, r in enumerate(measured) if r.compiled],
        "new_shape_steps": [i for i, r in enumerate(measured) if r.new_shape],
        "loader_site": None
        if site is None
        else {"file": site.filename, "shown": site.shown, "line": site.line},
        "loader_cell": None if cell is None else dataclasses.asdict(cell),
        "forward_cell": None
        if fwd_src is None or fwd_src.cell is None
        else dataclasses.asdict(fwd_src.cell),
        "forward_site": None
        if fwd is None
        else {"file": fwd.filename, "shown": fwd.shown, "line": fwd.line},
        "model": None
        if main is None
        else {
            "name": main.name,
            "param_devices": list(main.param_devices),
            "input_devices": sorted(main.input_devices),
            "has_conv": main.has_conv,
            **of_model,
            "grad_enabled": main.grad_enabled,
            "input_dim0s": sorted(main.input_dim0s),
            "input_opaque": sorted(main.input_opaque),
            "input_shape": main.input_shape,
            "input_shapes": [list(x) for x in sorted(main.input_shapes)],
        },
        "compiled": bool(w.compiled_graphs) or any(m.name == "OptimizedModule" for m in mods),
        "syncs": [
            {
                "kind": a.kind,
                "count": a.count,
                "in_model": a.in_model,
                "file": a.site.file if a.site else None,
                "line": a.site.line if a.site else None,
                "code": a.site.code if a.site else None,
            }
            for a in sorted(w.collected.syncs.values(), key=lambda a: -a.count)[:12]
        ],
        "host_lines": _host_lines(w, run.get("host_lines")),
        "warmup_step_ms": [
            round(r.duration_ns / 1e6, 3)
            for r in (rec.records if rec else [])
            if r.phase == "warmup"
        ],
        "optimizer": _optimizer(w),
        "flags": {k: v for k, v in flags.items() if isinstance(v, (bool, str)) or v is None},
        "finding_ids": [f.id for f in rep.findings] if rep is not None else [],
        "framework_callback": _framework_callback(rep),
        "bottleneck": rep.verdict.bottleneck if rep is not None else None,
        "outcome": w.outcome,
        "wall_s": wall_s,
    }


def _framework_callback(rep: Report | None) -> dict[str, Any] | None:
    """The framework's callback ``code.framework_callback`` names, and its share of the step."""
    f = next((f for f in rep.findings if f.id == "code.framework_callback"), None) if rep else None
    if f is None:
        return None
    ev = {e.label: e.value for e in f.evidence}
    return {
        "name": ev.get("callback"),
        "share_pct": ev.get("share of step"),
        "change": ev.get("change"),
    }


def _host_lines(w: Watch, shown: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report's timed lines, each ``file`` the path the code names (a knob reads it)."""
    times = w.lines.result
    if not shown or times is None:
        return shown
    paths = {(t.file, t.line): t.path for t in times.lines if t.path}
    names = w.lines.sources.names
    rows = []
    for r in shown.get("lines") or []:
        path = paths.get((r.get("file"), r.get("line")))
        if path is None:
            rows.append(r)
            continue
        # A cell's lines are shown below its magic line: ``line`` is the code's own, as the
        # model call's line is, ``offset`` what the user is shown above it.
        offset = names.get(path, (None, 0))[1]
        rows.append({**r, "file": path, "line": int(r["line"]) - offset, "offset": offset})
    return {**shown, "lines": rows}


def _optimizer(w: Watch) -> dict[str, Any] | None:
    """The optimizer over the most parameter tensors: what it is, and the line that built it."""
    o = max(w.collected.optimizers.values(), key=lambda x: x.tensors, default=None)
    if o is None:
        return None
    site = o.site
    return {
        "name": o.name,
        "tensors": o.tensors,
        "foreach": o.foreach,
        "fused": o.fused,
        "cuda": o.cuda,
        "site": None
        if site is None
        else {"file": site.filename, "shown": site.shown, "line": site.line},
    }
