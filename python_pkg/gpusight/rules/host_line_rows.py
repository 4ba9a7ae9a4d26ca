"""A host-work finding on its line: the costliest lines of the user's own work as its evidence,
its title naming the top one, and its fix chosen by what that line does (``host_line_fix.py``).
Without timed lines (a lean watch, a traced process) the finding stays as its rule made it."""

from __future__ import annotations

import os
from dataclasses import replace

from ..report import Evidence, Finding, Fix, Impact, SourceLine
from .batch_generators import generator_of
from .framework_hook_fix import loop_text
from .host_line_fix import HostLine, calls, fix_text, is_framework, is_step_math, kind_of
from .host_line_loops import grouped, is_tensor_loop, same_file
from .item_loops import grouped_items, in_item_loop
from .output_reads import feeds_backward, grouped_output, reads_output
from .workload_evidence import WorkloadEvidence, median_step
from .workload_impacts import idle_impact, rnd

TOP_SHARE_PCT = 20.0
"""A line is the finding's own where it holds this share of the timed steps' host time..."""
LARGEST_PART = 1 / 3
MIN_SHARE_PCT = 5.0
"""... or ``LARGEST_PART`` of the host time on the user's lines outside the model, where those
hold ``MIN_SHARE_PCT`` of it together: a tokenizer's 14 % beside a forward's 83 % is all of the
host work outside the model (an inference script at batch 1); a batch stacked from numpy rows
is half of the three lines that build it, beside a CPU model's step."""
SHOWN = 3


def own_lines(ev: WorkloadEvidence) -> list[HostLine]:
    """The user's lines of work, the step's framework calls and its wait for data left out
    (a loop's header, but not one over a model's tensors, ``host_line_loops.py``, nor one over
    the batch's items, ``item_loops.py``), each marked
    where it works on the model's output (``output_reads.py``)."""
    call = ev.forward_source.line if ev.forward_source is not None else None
    text, path = _file_of(ev)
    return [
        _marked(ln, text, path, call, ev.main_model_calls)
        for ln in ev.host_lines
        if _own(ln, text, path, call, ev.model_calls, ev.main_model_calls)
    ]


def _calls_a_model(ln: HostLine, models: frozenset[tuple[str, int]]) -> bool:
    """A line seen calling an outermost module (a GAN's other model, a teacher copy): the
    step's computation."""
    return not ln.in_forward and (os.path.basename(ln.file), ln.line) in models


def _own(
    ln: HostLine,
    text: str | None,
    path: str | None,
    call: int | None,
    models: frozenset[tuple[str, int]] = frozenset(),
    mains: frozenset[tuple[str, int]] = frozenset(),
) -> bool:
    if ln.line != call and _calls_a_model(ln, mains):
        # The main model run again (a validation loss) is the user's work; a call the backward
        # differentiates (a second view) is the step's own.
        return _again(ln, text, path, call, mains)
    if _differentiated(ln, text, path, call):
        return False
    if not is_framework(ln, call) and not _calls_a_model(ln, models):
        return True
    if text is None or path is None or not same_file(ln, path) or ln.in_forward:
        return False
    header = (ln.code or "").lstrip().startswith("for ")
    return (header and is_tensor_loop(text, ln.line)) or in_item_loop(text, call, ln.line)


def _marked(
    ln: HostLine,
    text: str | None,
    path: str | None,
    call: int | None,
    mains: frozenset[tuple[str, int]] = frozenset(),
) -> HostLine:
    """The line marked where it works on the model's output, or calls the main model again
    (not its step's own call, which is the framework's)."""
    if ln.in_forward:
        return ln
    if _again(ln, text, path, call, mains):
        return replace(ln, model_again=True)
    if path is None or not same_file(ln, path):
        return ln
    return replace(
        ln, on_output=reads_output(text, call, ln.line), batch_source=generator_of(text, ln.line)
    )


def _again(
    ln: HostLine, text: str | None, path: str | None, call: int | None,
    mains: frozenset[tuple[str, int]],
) -> bool:  # fmt: skip
    """The line calls the main model again beside the step's own call, for something the
    backward does not differentiate (a validation batch); a second view's forward in a
    contrastive step, or a meta-learning step's outer loss, is the step's own computation."""
    if not _calls_a_model(ln, mains):
        return False
    mine = text is not None and path is not None and same_file(ln, path)
    return not (mine and feeds_backward(text, call, ln.line))


def _differentiated(ln: HostLine, text: str | None, path: str | None, call: int | None) -> bool:
    """A line after the model's call that computes what the backward differentiates (a
    meta-learning step's inner gradients and fast weights, a loss of the user's own terms): the
    step's computation, as the loss is. A loop over the batch's items stays the user's: it has
    a fix of its own (``item_loops.py``)."""
    if text is None or path is None or call is None or ln.in_forward or ln.line <= call:
        return False
    if not same_file(ln, path) or in_item_loop(text, call, ln.line):
        return False
    return feeds_backward(text, call, ln.line)


def _file_of(ev: WorkloadEvidence) -> tuple[str | None, str | None]:
    """The text and path of the file that calls the model, where it is a file (a notebook
    cell's lines are numbered in the cell)."""
    src = ev.forward_source
    if src is None or src.cell is not None:
        return None, None
    return src.text, src.path


def step_math_fraction(ev: WorkloadEvidence) -> float:
    """Of the host time on the user's lines outside the model (its forward, the model's call,
    backward, the optimizer and the wait for data left out), the fraction on the loss's and the
    gradients' clipping's lines (``host_line_fix.is_step_math``): the step's own computation,
    which the split counts outside the model. A fraction, as the timed steps are traced ones:
    their lines' times are not the measured steps'."""
    call = ev.forward_source.line if ev.forward_source is not None else None
    # The model's call on the loss's line (``loss = F.cross_entropy(model(x), y)``) is the
    # forward's time there, which the split counts as the model's, not outside it.
    text, path = _file_of(ev)
    math = [
        ln.ms
        for ln in ev.host_lines
        if not ln.in_forward
        and (
            is_step_math(ln)
            or _calls_a_model(ln, ev.model_calls | ev.main_model_calls)
            or _differentiated(ln, text, path, call)
        )
        and ln.line != call
        and not _own(ln, text, path, call, ev.model_calls, ev.main_model_calls)
    ]
    rest = [ln.ms for ln in own_lines(ev) if not ln.in_forward]
    total = sum(math) + sum(rest)
    return sum(math) / total if total > 0 else 0.0


def on_its_line(f: Finding, ev: WorkloadEvidence) -> Finding:
    """Host work outside the model (``load.cpu_preprocessing``) on the user's lines outside
    it: a line inside ``forward`` is the model's time, not this finding's."""
    call = ev.forward_source.line if ev.forward_source is not None else None
    text, path = _file_of(ev)
    lines = grouped_items([ln for ln in own_lines(ev) if not ln.in_forward], text, path, call)
    lines = grouped_output(grouped(lines, text, path), text, path, call)
    mine = sum(ln.share_pct for ln in lines)
    if ev.host_lines and mine < MIN_SHARE_PCT:
        return _on_no_line(f, mine, _call_line(ev))
    if not lines:
        return f
    top = _lead(lines)
    if top is not lines[0]:
        # The library's share stays the library's: the fix of the user's line recovers theirs.
        yours = sum(ln.share_pct for ln in lines if kind_of(ln) not in _LIBRARY_KINDS)
        _scale_impact(f, yours / mine if mine > 0 else 1.0)
        lines = [top, *(ln for ln in lines if ln is not top)]
    f.evidence.extend(
        Evidence(
            "host time at" + (" (in forward)" if ln.in_forward else ""),
            rnd(ln.ms, 2),
            "ms/step",
            SourceLine(file=ln.file, line=ln.line, code=ln.code),
        )
        for ln in lines[:SHOWN]
    )
    most = top.share_pct >= LARGEST_PART * mine
    if top.share_pct < TOP_SHARE_PCT and not most:
        return f
    inside = " inside forward" if top.in_forward else ""
    code = (top.code or "").strip()
    library = {"framework_loop": "the training framework's", "generation_loop": "the library's "
               "generation"}.get(kind_of(top))  # fmt: skip
    if library is not None:
        # Its share of the host time holds the library's model (and update) too: the
        # finding's own share (outside the model's calls) is the one to show.
        f.title = f"{f.title}, inside {library} loop at {top.where} (`{code}`)"
    else:
        f.title = (
            f"{top.where}{inside} (`{code}`) takes {top.share_pct:.0f}% of the step's host time"
        )
    text = fix_text(top)
    if kind_of(top) == "framework_loop":
        at = f"{top.where} (`{code}`)"
        text = loop_text(at, ev.framework_hooks, median_step(ev), ev.optimizer_ms) or text
    if text is not None:
        f.fix = Fix(text=text)
    return f


_LIBRARY_KINDS = ("framework_loop", "generation_loop")


def _lead(lines: list[HostLine]) -> HostLine:
    """The line the finding names: the costliest, unless that is a library's loop called from
    the user's file (``trainer.fit(...)``: its own per-step code, not a line to move) and a
    line of the user's own holds ``TOP_SHARE_PCT`` beside it (a metric in ``training_step``):
    that one has a change to make."""
    top = lines[0]
    if kind_of(top) not in _LIBRARY_KINDS:
        return top
    yours = next((ln for ln in lines[1:] if kind_of(ln) not in _LIBRARY_KINDS), None)
    return yours if yours is not None and yours.share_pct >= TOP_SHARE_PCT else top


def _scale_impact(f: Finding, part: float) -> None:
    """The finding's estimate cut to ``part`` of the host time it counted."""
    rec = f.impact.recoverable_pct if f.impact is not None else None
    if f.impact is None or rec is None:
        return
    f.impact = idle_impact(rec * part, f.impact.text or "")


def _call_line(ev: WorkloadEvidence) -> HostLine | None:
    """The model's call line where it calls more than the model (``loss = F.cross_entropy(
    model(x[i : i + 128]), y[i : i + 128])``, ``out = model(tokenizer(texts))``): what else
    runs there is timed with the model's call, not apart."""
    src = ev.forward_source
    if src is None:
        return None
    at = next(
        (
            ln
            for ln in ev.host_lines
            if ln.line == src.line and not ln.in_forward and same_file(ln, src.path)
        ),
        None,
    )
    return at if at is not None and len(calls(at.code)) > 1 else None


def _on_no_line(f: Finding, mine: float, call: HostLine | None) -> Finding:
    """The lines were timed, and the user's own outside the model hold less than
    ``MIN_SHARE_PCT`` of the host time: there is no transform or logger of theirs to move. The
    time is the loop's own around the framework's calls (the loss on the model's line, the
    batch's slicing, Python's dispatch): information, not the first fix."""
    f.severity = "info"
    f.impact = Impact(basis="none", text="No line of yours holds it: nothing to move.")
    f.evidence.append(Evidence("your lines outside the model", rnd(mine), "% of host time"))
    f.fix = Fix(
        text="No line of your own code outside the model holds this time: it is the loop's "
        "own work around the framework's calls (the loss on the model's line, the batch's "
        "slicing, Python's dispatch between calls), with no transform or logger to move. "
        "Fewer, larger steps (a larger batch) or a compiled step (torch.compile) spread it."
        + (
            f" Part of it may be on {call.where} (`{(call.code or '').strip()}`), timed with the "
            "model's call: put what else that line computes on lines of its own to see it "
            "apart."
            if call is not None
            else ""
        )
    )
    return f


def sync_on_its_line(
    f: Finding, ev: WorkloadEvidence, file: str | None, line: int | None
) -> Finding:
    """The sync finding where the line that waits is numpy or a logger's work on a copied value
    (``np.argpartition(h.cpu().numpy())`` inside forward, a histogram of every parameter): the
    fix is that work's, not "read the value every few steps"."""
    lines = own_lines(ev)
    if not lines or (lines[0].file, lines[0].line) != (file, line):
        return f
    top = lines[0]
    waits = ("numpy_in_forward", "numpy", "logging", "parameter_reads", "metric", "model_again")
    if kind_of(top) not in waits:
        return f
    text = fix_text(top)
    if text is not None:
        f.fix = Fix(text=text)
        f.evidence.append(
            Evidence(
                "host time at" + (" (in forward)" if top.in_forward else ""),
                rnd(top.ms, 2),
                "ms/step",
                SourceLine(file=top.file, line=top.line, code=top.code),
            )
        )
    return f


_HOST_IN_FORWARD = ("host_tensor_in_forward", "gc", "empty_cache", "logging", "tokenizer")
"""What a line of ``forward`` does on the host that no kernel launch explains (numpy there is
the sync finding's: it copies the activation back)."""


def forward_on_its_line(f: Finding, ev: WorkloadEvidence) -> Finding:
    """The launch-bound finding where the GPU waits on host work of the user's inside a
    ``forward`` (a mask built from Python lists at every call), not on launches: that line,
    where it holds ``TOP_SHARE_PCT`` of the host time, is named with its fix."""
    lines = [ln for ln in ev.host_lines if ln.in_forward and kind_of(ln) in _HOST_IN_FORWARD]
    if not lines:
        return f
    top = max(lines, key=lambda ln: ln.ms)
    if top.share_pct < TOP_SHARE_PCT:
        return f
    code = (top.code or "").strip()
    f.title = (
        f"{top.where} inside forward (`{code}`) keeps the GPU waiting: "
        f"{top.share_pct:.0f}% of the step's host time"
    )
    f.evidence.append(
        Evidence(
            "host time at (in forward)",
            rnd(top.ms, 2),
            "ms/step",
            SourceLine(file=top.file, line=top.line, code=top.code),
        )
    )
    text = fix_text(top)
    if text is not None:
        f.fix = Fix(text=text)
    return f
