"""Steps at a batch shape new to the run that cost several times the others: a cost paid once
per shape (in bf16, cuDNN's attention plan for each new sequence length; cuDNN's autotuning
under ``cudnn.benchmark``; torch.compile's recompiles). A long run pays it off once its shapes
have all come; a short window counts it as every step's. The watch's report says so in a note;
a what-if's re-run counts such steps at the others' median (``rerun/outcome.py``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

ONE_OFF_RATIO = 2.0
MIN_SEEN_STEPS = 5
"""Steps at a new shape cost once where, by their median, they took ``ONE_OFF_RATIO`` times the
steps at a shape seen before, of which there were ``MIN_SEEN_STEPS`` at least: BERT's bf16
steps read 384 ms against fp32's 97 over a short window on an H100, and step at 34 ms on an
H200 with their lengths padded to a multiple of 64 (``h100-run35``)."""


def costly_new_shapes(times: Sequence[float], marked: set[int]) -> float | None:
    """How many times the steps at a seen shape the steps at a new one took (medians), where
    that is ``ONE_OFF_RATIO`` or more; None otherwise."""
    new = [x for i, x in enumerate(times) if i in marked]
    seen = [x for i, x in enumerate(times) if i not in marked]
    if not new or len(seen) < MIN_SEEN_STEPS:
        return None
    base = statistics.median(seen)
    ratio = statistics.median(new) / base if base > 0 else None
    return ratio if ratio is not None and ratio >= ONE_OFF_RATIO else None


def shape_cost_note(times: Sequence[float], marked: set[int]) -> str | None:
    """The watch's note, where the steps at a new shape cost several times the others."""
    ratio = costly_new_shapes(times, marked)
    if ratio is None:
        return None
    return (
        f"{len(marked)} of {len(times)} measured steps took a batch of a shape new to the run "
        f"and ran {ratio:.1f}x as long as the others (medians): a cost paid once per shape (in "
        "bf16, cuDNN's attention plan for each new sequence length; cuDNN's autotuning; "
        "torch.compile's recompiles), which the mean step holds; batches padded to a few "
        "shapes (a multiple of 64) do not pay it"
    )
