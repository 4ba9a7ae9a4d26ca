"""The batch option the script was given on its command line (``gpusight run``), as the report
reads it: the items of a step whose model input is not batch-first, and the command a larger
batch's fix runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..script_command import BatchCommand
    from .watched_run import WatchedRun


def batch_command(w: WatchedRun) -> BatchCommand | None:
    try:
        return w.batch_hint() if w.batch_hint is not None else None
    except Exception:  # reading the script's parser is a nicety; the report stands without it
        return None


def hinted_batch(w: WatchedRun, cmd: BatchCommand | None) -> int | None:
    """The command line's batch size (``cmd``, ``batch_command``'s) where it is a size of the
    model's first input other than its first (``[seq, batch]`` inputs): the script's items
    then, not dim 0."""
    value = cmd.value if cmd is not None else None
    mods = [m for m in w.collected.modules.values() if m.calls > 0]
    if not value or not mods:
        return None
    shape = max(mods, key=lambda m: (m.n_params, m.calls)).input_shape or []
    return int(value) if value in shape[1:] and shape[:1] != [value] else None
