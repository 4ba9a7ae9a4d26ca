"""What the watched code raised, and where in the user's code: the line that raised (inside
``forward`` where it was), and the user's line that called into it (the loop's ``model(x)``).

Read from the traceback when the watch ends, with the watch's own map of which frames are the
user's (torch's and gpusight's frames are skipped), so a ``%%gpusight`` cell's lines are named
as the cell's.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .source_lines import Site, SourceMap

MESSAGE_CHARS = 300


@dataclass
class Raised:
    type: str
    message: str
    site: Site | None
    """The innermost line of the user's code in the traceback: where it raised."""
    function: str | None
    """That line's function, qualified (``Net.forward``); None at a script's top level."""
    call: Site | None
    """The outermost line of the user's code, where it differs from ``site``: the call in the
    loop that led there (``loss = loss_fn(model(x), y)``)."""
    in_forward: bool
    """``site`` is inside a module's ``forward``."""

    def as_dict(self, measured_steps: int) -> dict[str, Any]:
        """The report's ``run.error`` (schema 1.6)."""
        out: dict[str, Any] = {
            "type": self.type,
            "message": self.message,
            "measured_steps": measured_steps,
            "in_forward": self.in_forward,
        }
        if self.site is not None:
            out["source"] = _source(self.site)
        if self.function:
            out["function"] = self.function
        if self.call is not None:
            out["call"] = _source(self.call)
        return out


def _source(site: Site) -> dict[str, Any]:
    row: dict[str, Any] = {"file": site.file, "line": site.line}
    if site.code:
        row["code"] = site.code
    return row


def _message(exc: BaseException | None) -> str:
    text = str(exc) if exc is not None else ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 1] + "…"


def raised_from(
    exc_type: type[BaseException], exc: BaseException | None, tb: TracebackType | None,
    sources: SourceMap,
) -> Raised:  # fmt: skip
    user = []
    while tb is not None:
        if not sources.is_internal(tb.tb_frame.f_code):
            user.append(tb)
        tb = tb.tb_next
    site = call = None
    function = None
    in_forward = False
    if user:
        inner = user[-1]
        site = sources.site_at(inner.tb_frame.f_code, inner.tb_lineno)
        code = inner.tb_frame.f_code
        name = getattr(code, "co_qualname", code.co_name)
        function = None if code.co_name == "<module>" else name
        in_forward = code.co_name == "forward"
        outer = user[0]
        if outer is not inner:
            call = sources.site_at(outer.tb_frame.f_code, outer.tb_lineno)
    return Raised(exc_type.__name__, _message(exc), site, function, call, in_forward)
