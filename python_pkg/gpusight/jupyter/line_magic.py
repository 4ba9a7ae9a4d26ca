"""``%gpusight [check]``: the environment check, returned as a Report so the cell displays it."""

from __future__ import annotations

import shlex
from typing import Any

from ..report import Report

USAGE = "usage: %gpusight [check]"


def run_line(line: str, shell: Any) -> Report:
    """Run the line magic. ``shell`` is the IPython shell (unused by ``check``)."""
    from IPython.core.error import UsageError

    words = shlex.split(line)
    if words and words[0] != "check":
        raise UsageError(f"%gpusight: unknown command {words[0]!r}; {USAGE}")
    if len(words) > 1:
        raise UsageError(f"%gpusight check takes no arguments; {USAGE}")
    from ..doctor import check

    return check()
