"""Fix snippets: ``render(snippet_id, **values)`` -> code; ``fix(...)`` -> a report ``Fix``."""

from __future__ import annotations

import shlex
import string

from ..report import Fix
from . import measured_snippets as _measured  # noqa: F401  (adds its snippets, as workload)
from . import workload as _workload  # noqa: F401  (adds its snippets: every caller sees them)
from .catalogue import SNIPPETS, Param, Snippet

__all__ = ["SNIPPETS", "Snippet", "fix", "placeholders", "render"]


def placeholders(snippet: Snippet) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(snippet.template) if name}


def render(snippet_id: str, **values: Param) -> str:
    """The snippet's code with ``values`` filled in (shell values quoted)."""
    try:
        snippet = SNIPPETS[snippet_id]
    except KeyError:
        known = ", ".join(sorted(SNIPPETS))
        raise KeyError(f"no fix snippet {snippet_id!r}; known: {known}") from None
    missing = placeholders(snippet) - values.keys()
    if missing:
        raise KeyError(f"fix snippet {snippet_id!r} needs {', '.join(sorted(missing))}")
    if snippet.language == "shell":
        values = {k: shlex.quote(str(v)) for k, v in values.items()}
    return snippet.template.format(**values)


def fix(text: str, snippet_id: str, **values: Param) -> Fix:
    return Fix(
        text=text,
        snippet_id=snippet_id,
        code=render(snippet_id, **values),
        language=SNIPPETS[snippet_id].language,
    )
