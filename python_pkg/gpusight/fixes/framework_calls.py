"""Where a training framework is set up in the user's own file: the one call that makes its
arguments or trainer (``TrainingArguments(...)``, Lightning's ``Trainer(...)``,
``Accelerator(...)``). A knob's change to the framework (its batch, its precision) is handed
over as that call with the keyword set, not as a template in names the script does not have.
Pure ``ast``."""

from __future__ import annotations

import ast

from .patch import call_patch, called_name

CALLS: dict[str, tuple[str, ...]] = {
    "transformers": ("TrainingArguments", "Seq2SeqTrainingArguments"),
    "lightning": ("Trainer",),
    "accelerate": ("Accelerator",),
}


def setup_line(source: str, framework: str) -> int | None:
    """The line of the file's one call that sets ``framework`` up; None where it has none, or
    several (which one trains is not known from the text)."""
    names = CALLS.get(framework)
    if names is None:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and called_name(n) in names
    ]
    return found[0] if len(found) == 1 else None


def setup_patch(source: str, path: str, framework: str, values: dict[str, object]) -> str | None:
    """The diff that sets ``values`` in that call, or None."""
    line = setup_line(source, framework)
    if line is None:
        return None
    return call_patch(source, line, path, values, CALLS[framework])


PROGRESS_BARS = ("TQDMProgressBar", "RichProgressBar")
"""Lightning's progress bars a script makes (each takes ``refresh_rate``)."""
PROGRESS_BAR_CLASSES = (*PROGRESS_BARS, "ProgressBar")
"""Their classes, with the base a bar of the user's own derives from."""
REFRESH_EVERY = 50


def progress_bar_patch(source: str, path: str) -> tuple[str, str] | None:
    """Lightning's progress bar redrawn less often, as a diff and what it does: the bar the
    file makes (``TQDMProgressBar(...)``, one call) with ``refresh_rate=50``, or, where it makes
    none, its one ``Trainer(...)`` call with ``enable_progress_bar=False`` (Lightning refuses a
    bar in ``callbacks`` with the switch off). None where neither is one call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    bars = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and called_name(n) in PROGRESS_BARS
    ]
    if len(bars) > 1:
        return None
    if bars:
        values: dict[str, object] = {"refresh_rate": REFRESH_EVERY}
        patch = call_patch(source, bars[0], path, values, PROGRESS_BARS)
        return (patch, f"refresh_rate={REFRESH_EVERY}") if patch else None
    patch = setup_patch(source, path, "lightning", {"enable_progress_bar": False})
    return (patch, "enable_progress_bar=False") if patch else None
