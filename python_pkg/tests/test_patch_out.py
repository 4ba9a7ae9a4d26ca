"""Which fix ``gpusight run --patch`` writes: the leading fix's diff, and under a measured what-if
only a measured fix's (an accelerate script's batch was its ``--train-batch-size`` option; the
diff written was the workers' of an input-bound finding whose row was inside the noise)."""

from __future__ import annotations

from gpusight.commands.patch_out import patch_finding
from gpusight.report import Finding, Fix, Impact

DIFF = "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-a\n+b\n"


def finding(fid: str, basis: str = "none", speedup: float | None = None,
            patch: str | None = None, sev: str = "warn") -> Finding:  # fmt: skip
    return Finding(id=fid, severity=sev, title=fid,  # type: ignore[arg-type]
                   impact=Impact(basis=basis, speedup=speedup),  # type: ignore[arg-type]
                   fix=Fix(text=f"fix of {fid}", patch=patch))  # fmt: skip


def test_a_measured_command_is_not_replaced_by_an_unmeasured_patch() -> None:
    batch = finding("load.small_batch", "measured", 17.3, sev="critical")
    workers = finding("load.input_bound", "estimated", 1.08, patch=DIFF, sev="info")
    found, why = patch_finding([workers, batch])
    assert found is None and why is not None
    assert "fix of load.small_batch" in why and "nothing written" in why


def test_a_measured_patch_below_a_measured_command_is_written() -> None:
    batch = finding("load.small_batch", "measured", 12.0, sev="critical")
    log = finding("load.cpu_preprocessing", "measured", 1.27, patch=DIFF)
    workers = finding("load.input_bound", "estimated", 2.0, patch=DIFF, sev="critical")
    found, _ = patch_finding([workers, log, batch])
    assert found is log


def test_without_a_measurement_the_leading_patch_is_written() -> None:
    sync = finding("code.host_sync", "estimated", 1.3, patch=DIFF)
    plain = finding("load.small_batch", "estimated", 2.0)
    found, _ = patch_finding([plain, sync])
    assert found is sync
    found, why = patch_finding([plain])
    assert found is None and why is not None and "no fix here changes" in why
