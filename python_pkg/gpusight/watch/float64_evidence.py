"""A watched model (or its inputs) in float64, as the rule reads it: how many parameters, which
of the model's parts, the inputs' dtypes, and the user's lines that made them float64: those
the watch saw run (``float64_calls.py``), else those the text of the code that calls the model
asks for (``rules/float64_source.py``), labelled as found in the source.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..rules.float64_source import float64_lines
from ..rules.workload_evidence import CodeSource, Float64Line, Float64Use
from .code_sources import site_source
from .float64_calls import Float64Call
from .placement import ModuleInfo

if TYPE_CHECKING:
    from .watched_run import WatchedRun

MAX_DATA_LINES = 3


def _line(call: Float64Call, target: str) -> Float64Line:
    site = call.site
    src = site_source(site)
    code = None
    if src is not None:
        rows = src.text.splitlines()
        code = rows[site.line - 1].strip() if 0 < site.line <= len(rows) else None
    count = call.count if target == "data" else None
    return Float64Line(call.what, target, site.shown, site.line + site.offset, code,
                       source=src, count=count)  # fmt: skip


def _model_line(w: WatchedRun, main: ModuleInfo) -> Float64Line | None:
    """The last ``.double()`` / ``.to(torch.float64)`` the watch saw on the model or a module
    inside it; else a float64 default dtype it saw set."""
    calls = w.collected.float64
    mine = [c for c in calls.model if c.module_id in main.module_ids]
    if mine:
        return _line(mine[-1], "model")
    return _line(calls.default, "default") if calls.default is not None else None


def _in_source(forward: CodeSource | None) -> list[Float64Line]:
    """The lines of the file (or cell) that calls the model which ask for float64."""
    if forward is None:
        return []
    offset = forward.cell.offset if forward.cell is not None else 0
    out = []
    for h in float64_lines(forward.text):
        src = CodeSource(forward.path, forward.text, h.line, forward.cell)
        out.append(Float64Line(h.what, "source", forward.path, h.line + offset, h.code, False, src))
    return out


def _unseen(model_known: bool, data_known: bool, params64: bool, inputs64: bool) -> str | None:
    if (model_known or not params64) and (data_known or not inputs64):
        return None
    return (
        "the watch saw no line make the model float64 and its caller's code names no float64: "
        "it was made so before the watch began (a notebook's earlier cell, a module imported "
        "before it, a checkpoint loaded in float64)"
        if params64 and not model_known
        else "the watch saw no line of yours make the inputs float64 (it sees torch.from_numpy, "
        "torch.tensor and torch.as_tensor called from your code; a DataLoader over float64 "
        "arrays collates them in torch's own code)"
    )


def _device_name(w: WatchedRun, main: ModuleInfo) -> str | None:
    torch: Any = w.torch
    if "cuda" not in main.param_devices or not torch.cuda.is_initialized():
        return None
    try:
        return str(torch.cuda.get_device_name(torch.cuda.current_device()))
    except Exception:
        return None


def float64_use(w: WatchedRun, forward: CodeSource | None) -> Float64Use | None:
    """The main model's float64 (the most parameters, then the most calls: the model the
    placement findings speak of); None where neither its parameters nor its inputs are."""
    mods = [m for m in w.collected.modules.values() if m.calls > 0]
    if not mods:
        return None
    main = max(mods, key=lambda m: (m.n_params, m.calls))
    inputs64 = "float64" in main.input_dtypes
    if not main.float64_params and not inputs64:
        return None
    lines: list[Float64Line] = []
    model = _model_line(w, main) if main.float64_params else None
    if model is not None:
        lines.append(model)
    data = sorted(w.collected.float64.data, key=lambda c: -c.count)[:MAX_DATA_LINES]
    if inputs64:
        lines.extend(_line(c, "data") for c in data)
    # The source's text where the run did not show a line: the model's, or the inputs' (a
    # tensor's own ``.double()``, a dtype given to ``torch.randn``, ...).
    if (main.float64_params and model is None) or (inputs64 and not data):
        seen = {(ln.file, ln.line) for ln in lines}
        lines.extend(ln for ln in _in_source(forward) if (ln.file, ln.line) not in seen)
    model_known = any(ln.target != "data" for ln in lines)
    # A dtype found in the source may be the inputs' (``torch.randn(..., dtype=torch.float64)``).
    data_known = bool(data) or any(ln.target == "source" for ln in lines)
    return Float64Use(
        params=main.n_params,
        params_float64=main.float64_params,
        parts=list(main.float64_parts),
        input_dtypes=sorted(main.input_dtypes),
        lines=lines,
        device_name=_device_name(w, main),
        unseen=_unseen(model_known, data_known, bool(main.float64_params), inputs64),
    )
