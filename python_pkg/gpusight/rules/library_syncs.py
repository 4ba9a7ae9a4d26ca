"""The fix for a host sync inside a library's code, chosen by what that line does.

A wait for the GPU on a line of Hugging Face's Trainer or Lightning is not a line the user can
edit, and "read the value every few steps" is a loop of theirs to write. A line known to sync
has its library's own option (``TrainingArguments(logging_nan_inf_filter=False)``: the Trainer
checks every step's loss for nan/inf, each check a read of the loss from the GPU), written
into the script's own call that sets the library up where the file holds exactly one; any other
library line is named as the library's, with where to look.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..fixes.framework_calls import setup_patch
from ..fixes.patch_files import with_patch
from ..report import Evidence, Finding, Fix
from .framework_hook_fix import with_bar_patch
from .workload_evidence import CodeSource, SyncSite
from .workload_impacts import site_text

_INSTALLED = re.compile(r"[\\/](?:site|dist)-packages[\\/]([A-Za-z0-9_]+)[\\/]")


@dataclass(frozen=True)
class KnownSync:
    libraries: tuple[str, ...]
    """The installed packages that hold the file (Lightning's code ships in ``lightning`` and in
    the standalone ``lightning_fabric``)."""
    file: str
    marker: str
    """Text of the line that syncs (it moves between the library's versions; its text does not)."""
    text: str
    code: str
    setup: dict[str, object] | None = None
    """The keywords that turn the read off, set in the script's ``TrainingArguments(...)``
    (None: the fix is not one call's keyword)."""
    bar: bool = False
    """The read is the progress bar's: the patch redraws the script's bar less often."""


NAN_CHECK = KnownSync(
    ("transformers",),
    "trainer.py",
    "isnan(tr_loss_step)",
    "Hugging Face's Trainer checks every step's loss for nan and inf "
    "(logging_nan_inf_filter, on by default), and each check reads the loss from the GPU. "
    "TrainingArguments(..., logging_nan_inf_filter=False) drops the check: training is "
    "the same, only the loss it logs then counts a nan step's as any other.",
    "TrainingArguments(..., logging_nan_inf_filter=False)",
    setup={"logging_nan_inf_filter": False},
)
"""The Trainer's per-step nan/inf check of the loss (the ``nan_check`` knob measures it)."""

KNOWN = (
    NAN_CHECK,
    KnownSync(
        ("transformers",),
        "masking_utils.py",
        "padding_mask.all()",
        "Hugging Face's model checks at every forward whether the attention mask pads any token "
        "(padding_mask.all(), a read from the GPU), so that a batch without padding runs "
        "PyTorch's SDPA without a mask, on its flash kernel. Where the batches carry no padding "
        "(sequences of one length, packed), call the model without attention_mask: the check "
        "is skipped and the result is the same. Where they do, fewer batches pad when they are "
        "grouped by length (TrainingArguments(group_by_length=True) for the Trainer).",
        "outputs = model(input_ids=input_ids, labels=labels)  # no attention_mask: no padding",
    ),
    KnownSync(
        ("lightning", "lightning_fabric"),
        "apply_func.py",
        "value.item()",
        "Lightning reads each value logged with prog_bar=True from the GPU at every redraw of "
        "its progress bar (and the logged values at each log_every_n_steps write): redraw the "
        "bar every 50 batches, Trainer(..., callbacks=[TQDMProgressBar(refresh_rate=50)]), or "
        "log per-step values with prog_bar=False. What the training computes is the same.",
        "Trainer(..., callbacks=[TQDMProgressBar(refresh_rate=50)])",
        bar=True,
    ),
)


def library_of(path: str) -> str | None:
    """The installed package a file belongs to (``transformers``), or None for the user's."""
    m = _INSTALLED.search(path)
    return m.group(1) if m else None


def known_sync(file: str, code: str) -> KnownSync | None:
    """The known library sync at that line of an installed package's file, or None."""
    lib = library_of(file)
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    return next(
        (k for k in KNOWN if lib in k.libraries and k.file == name and k.marker in code), None
    )


def library_sync_fix(f: Finding, site: SyncSite, src: CodeSource | None = None) -> Finding:
    """``code.host_sync`` whose first site is a library's line: that line's own fix, patched
    into ``src`` (the user's file that runs the training) where the fix is one call's keyword."""
    if site.source is not None or not site.file:
        return f
    lib = library_of(site.file)
    if lib is None:
        return f
    code = (site.code or "").strip()
    known = known_sync(site.file, code)
    if known is not None:
        f.fix = Fix(text=known.text, code=known.code, language="python")
        return _patched(f, known, src)
    f.fix = Fix(
        text=f"The wait is in the code of {lib} at {site_text(site.file, site.line)} (`{code}`), "
        "not a line of yours: it reads a value from the GPU each time it runs. Look for the "
        f"option of {lib} that turns that read off or makes it less often (a check, a "
        "logged value, a progress bar); the host time by line shows the call of yours that "
        "runs it."
    )
    return f


def _patched(f: Finding, known: KnownSync, src: CodeSource | None) -> Finding:
    """The known fix written into the user's file: the one ``TrainingArguments(...)`` call with
    the keyword set, or the one progress bar redrawn less often (Lightning's ``Trainer(...)``
    with the bar off where the file makes none); unchanged in a notebook cell or where the file
    holds no such single call."""
    if known.bar:
        return with_bar_patch(f, src, "Trainer", at=len(f.evidence))
    if src is None or src.cell is not None or not src.text or known.setup is None:
        return f
    patch = setup_patch(src.text, src.path, "transformers", known.setup)
    if patch is None:
        return f
    f.evidence.append(Evidence("change", ", ".join(f"{k}={v}" for k, v in known.setup.items())))
    f.fix = with_patch(f.fix, patch, {src.path: src.text})
    return f
