"""Why a re-run failed where its disk filled up: TMPDIR's (gpusight's copy of the folder, the
runs' reports, the script's temporary files all go there), or the script's own output."""

from __future__ import annotations

import os
import shutil

NO_SPACE = ("No space left on device", "[Errno 28]")
LOW_FREE = 64 << 20
"""TMPDIR with less than this free after a run that ran out of space: TMPDIR was the disk."""


def why(log: str, tmpdir: str) -> str | None:
    """The reason to give for a failed run whose output was ``log`` (None: not a full disk)."""
    no_space = any(m in log for m in NO_SPACE)
    real = os.path.realpath(tmpdir)
    try:
        free: int | None = shutil.disk_usage(real).free
    except OSError:
        free = None
    low = free is not None and free < LOW_FREE
    # The script's temporary files are gone once it exits: where it wrote is in the traceback.
    in_tmp = any(p in log for p in (real, tmpdir, f"{os.sep}tempfile.py"))
    if (low and (no_space or not log.strip())) or (no_space and in_tmp):
        shown = "?" if free is None else f"{free / 2**20:.0f} MB"
        return (
            f"TMPDIR ({tmpdir}, {shown} free now) filled up: the re-runs keep their copy of "
            "your folder, their reports and the script's temporary files there; free space "
            "there or point TMPDIR at a larger disk"
        )
    if no_space:
        return (
            "the disk the script wrote to filled up (No space left on device), not gpusight's "
            f"TMPDIR ({tmpdir}): free space where the script writes its output"
        )
    return None
