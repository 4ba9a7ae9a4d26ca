"""``code.device_mismatch`` for a model left partly on the CPU: some of the modules the step calls
(or parts of one) hold all their parameters and buffers on the CPU while the rest is on a GPU,
and a copy to the CPU feeds them (issue #47: a ``head`` built after ``backbone.to(dev)`` and never
moved, its input sent over with ``.cpu()``).

Each part is named as the user's file names it (``head``; ``model.head`` for a part of a model),
with its class, its parameters, the statement that builds it and the copies that feed it: those
two found in the source (``fixes/module_source.py``) and labelled so, a copy also counted where
the watch saw it sync. The fix moves the parts in the file's names to the device the script moves
the rest to, before the optimizer is built, and drops the copies (``fixes/split_placement.py``).
Pure; never imports torch.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..fixes import fix
from ..fixes import workload as _workload_snippets  # noqa: F401  (registers the snippets)
from ..fixes.module_source import Site, called_module, device_expr, in_class, last_binding
from ..fixes.workload_patches import move_modules_fix
from ..report import Evidence, Finding, Fix, Impact, SourceLine
from .step_view import StepView
from .workload_evidence import CodeSource, ModuleOnCpu, SyncSite, mean
from .workload_impacts import GPU_MATH_SPEEDUP_MIN, pct, range_impact, rnd, severity_of
from .workload_thresholds import (
    BACKWARD_PER_FORWARD,
    OPTIMIZER_CPU_SHARE,
    SPLIT_CRITICAL_PCT,
    SPLIT_WARN_PCT,
)

MAX_NAMED = 4
"""Parts given their own evidence rows; the rest are counted."""


@dataclass
class Named:
    """A part on the CPU, as the user's file names it."""

    part: ModuleOnCpu
    name: str
    """``head``, ``model.head``; its class where the file does not tell."""
    built: Site | None = None
    copies: list[Site] = field(default_factory=list)


def count_text(n: int) -> str:
    """``33.6 M``, ``12.3 k``, ``512``."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} M"
    return f"{n / 1e3:.1f} k" if n >= 1_000 else str(n)


def name_part(part: ModuleOnCpu) -> Named:
    """The part's name, the statement that builds it and the copies that feed it, as far as the
    file of the line that calls it tells."""
    src = part.call
    called = called_module(src.text, src.line, src.col) if src is not None else None
    if called is None:
        return Named(part, f"{part.outer}.{part.path}" if part.path else part.cls)
    if not part.path:
        return Named(part, called.name, called.built, called.copies)
    name = f"{called.name}.{part.path}"
    built = _part_built(src.text if src else "", part, name)
    return Named(part, name, built)


def _part_built(source: str, part: ModuleOnCpu, name: str) -> Site | None:
    """``model.head = ...`` in the file, else ``self.head = ...`` in the class of the model."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    stmt = last_binding(tree, name, 10**9) or in_class(tree, part.outer, part.path)
    if stmt is None:
        return None
    line = source.splitlines()[stmt.lineno - 1].strip()
    return Site(stmt.lineno, line)


def script_device(view: StepView, src: CodeSource | None) -> str:
    """The device as the script names it where it moves the rest of the model in the same file
    as ``src`` (``dev``), else the accelerator's own name as a literal (``"cuda"``)."""
    p = view.p
    for other in p.accelerator_calls:
        if src is not None and other.path == src.path and other.text == src.text:
            found = device_expr(other.text, other.line)
            if found:
                return found
    return repr(p.accelerator or "cuda").replace("'", '"')


def _seen(copy: Site, path: str, syncs: list[SyncSite]) -> tuple[str, int | None]:
    """How a copy is known: the watch's sync at its line (with its calls over the measured
    steps), or the source alone."""
    hit = next((s for s in syncs if s.file == path and s.line == copy.line), None)
    return ("found in the source", None) if hit is None else ("seen by the watch", hit.count)


def part_evidence(n: Named, view: StepView) -> list[Evidence]:
    src, part = n.part.call, n.part
    path = src.path if src is not None else "?"
    rows = [
        Evidence("module on the CPU", n.name),
        Evidence(f"{n.name}: class", part.cls),
        Evidence(f"{n.name}: parameters", part.params),
    ]
    if n.built is not None:
        rows.append(
            Evidence(
                f"{n.name}: built at (found in the source)",
                f"{path}:{n.built.line}",
                source=SourceLine(path, n.built.line, n.built.code),
            )
        )
    for c in n.copies:
        how, calls = _seen(c, path, view.ev.syncs)
        rows.append(
            Evidence(
                f"{n.name}: fed by a copy to the CPU ({how})",
                c.segment or c.code,
                source=SourceLine(path, c.line, c.code, calls),
            )
        )
    if part.forward_ms is not None:
        rows.append(Evidence(f"{n.name}: host time in its forward", part.forward_ms, "ms/step"))
    return rows


def _host_ms(view: StepView, named: list[Named]) -> tuple[float, float]:
    """The parts' host time per step, from the forward the watch timed: (what moves to the GPU,
    what the high end frees: that and the optimizer's time where it updates them on the CPU)."""
    ev = view.ev
    fwd = sum(n.part.forward_ms or 0.0 for n in named)
    training = ev.step_mode in ("optimizer", "backward")
    moved = fwd * (1.0 + BACKWARD_PER_FORWARD if training else 1.0)
    o = ev.optimizer
    opt = ev.optimizer_ms or 0.0
    cpu_opt = o is not None and o.params > 0 and o.cpu_params / o.params >= OPTIMIZER_CPU_SHARE
    ceiling = mean(ev.framework_ms) or view.total
    return min(moved, ceiling), min(moved + (opt if cpu_opt else 0.0), ceiling)


def _impact(view: StepView, named: list[Named], where: str) -> Impact:
    total = view.total
    moved, freed = _host_ms(view, named)
    if moved <= 0:
        return Impact(
            basis="none",
            text="The parts on the CPU compute there every step, and their inputs cross from "
            f"{where} and back; gpusight run --verify measures the patch.",
        )
    lo = total / max(1e-9, total - moved * (1.0 - 1.0 / GPU_MATH_SPEEDUP_MIN))
    hi = total / max(1e-9, total - freed)
    return range_impact(
        lo,
        hi,
        "The forward of the parts on the CPU, and a backward about twice it, take "
        f"{rnd(moved, 1)} ms of the {rnd(total, 1)} ms step"
        + (
            f", with the optimizer's update of their parameters up to {rnd(freed, 1)} ms"
            if freed > moved
            else ""
        )
        + f": from that math running 5x faster on {where} to it costing nothing. "
        "gpusight run --verify measures the patch.",
    )


def _fix(view: StepView, named: list[Named], where: str) -> Fix:
    first = named[0]
    src = first.part.call
    device = script_device(view, src)
    copies = [c.segment or c.code for n in named for c in n.copies]
    what = f"{first.name} ({first.part.cls}, {count_text(first.part.params)} parameters)"
    f = fix(
        f"Move {', '.join(n.name for n in named)} to {where} where "
        + ("it is" if len(named) == 1 else "they are")
        + " built, before the optimizer is built (an optimizer built earlier must be built again "
        "so that it updates the moved parameters)"
        + (
            f", and drop the copy to the CPU that feeds {'it' if len(named) == 1 else 'them'} "
            f"({', '.join(copies)})."
            if copies
            else "."
        ),
        "placement.move_module",
        what=what.replace("\n", " "),
        device_type=where,
        copy=f": {copies[0]}" if copies else "",
        module=first.name,
        device=device,
    )
    if f.code is not None:
        f.code += "".join(f"{n.name} = {n.name}.to({device})\n" for n in named[1:])
    calls = [c for n in named if not n.part.path for c in [n.part.call] if c is not None]
    same = [(c.line, c.col) for c in calls if src is not None and c.text == src.text]
    if len(same) == len(named):  # every part a module the file calls: one patch moves them all
        move_modules_fix(f, src, same, device)
    return f


def split_model(view: StepView) -> list[Finding]:
    """``code.device_mismatch``: parts of the model on the CPU while the rest is on a GPU."""
    p = view.p
    if not p.cpu_modules or p.accelerator is None:
        return []
    named = [name_part(m) for m in p.cpu_modules]
    where = p.accelerator
    cpu = sum(m.params for m in p.cpu_modules)
    if len(named) == 1:
        n = named[0]
        title = (
            f"{n.name} ({n.part.cls}, {count_text(n.part.params)} parameters) stays on the CPU "
            f"while the rest of the model is on {where}"
        )
    else:
        title = (
            f"{len(named)} modules ({', '.join(n.name for n in named[:MAX_NAMED])}) stay on the "
            f"CPU while the rest of the model is on {where}"
        )
    impact = _impact(view, named, where)
    share = pct(_host_ms(view, named)[0], view.total)
    rows = [r for n in named[:MAX_NAMED] for r in part_evidence(n, view)]
    return [
        Finding(
            id="code.device_mismatch",
            severity=severity_of(share, SPLIT_WARN_PCT, SPLIT_CRITICAL_PCT)
            if impact.basis != "none"
            else "warn",
            title=title,
            evidence=[
                *rows,
                Evidence("parameters on the CPU", cpu),
                Evidence(f"parameters on {where}", p.accelerator_params),
            ],
            impact=impact,
            fix=_fix(view, named, where),
        )
    ]
