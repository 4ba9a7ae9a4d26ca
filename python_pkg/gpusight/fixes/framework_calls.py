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
