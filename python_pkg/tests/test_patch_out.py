"""Which fix ``gpusight run --patch`` writes: the leading fix's diff, and under a measured what-if
only a measured fix's (an accelerate script's batch was its ``--train-batch-size`` option; the
diff written was the workers' of an input-bound finding whose row was inside the noise)."""

from __future__ import annotations

import sys
from typing import Any

from gpusight.commands.patch_out import patch_finding, write_patch
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


def test_a_diff_left_from_an_earlier_run_is_named_not_offered(tmp_path: Any, capsys: Any) -> None:
    """Nothing to write this run: the old diff is said to be another fix's, and the summary's
    next step does not offer to verify it."""
    import argparse

    from gpusight.commands.run_summary import _print_next
    from gpusight.report import Report

    old = tmp_path / "fix.diff"
    old.write_text("gpusight fix: load.input_bound: an earlier run's\n" + DIFF)
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    rep.findings = [finding("load.small_batch", "measured", 17.3, sev="critical")]
    assert write_patch(rep, str(old), quiet=False) is None
    assert "left from an earlier run, is not this run's fix" in capsys.readouterr().err
    args = argparse.Namespace(script="train.py", args=[], what_if=True, patch=str(old),
                              json=None, written=[])  # fmt: skip
    _print_next(rep, rep.findings[0], args, sys.stdout)
    assert "--verify" not in capsys.readouterr().out


def test_a_fix_measured_as_no_faster_is_not_written() -> None:
    """A tqdm loop on this CPU: 2 workers read 0.27x and the postfix line every 100 steps 0.82x
    (inside the noise), and the diff written was the workers'."""
    workers = finding("load.input_bound", "measured", 0.27, patch=DIFF, sev="info")
    postfix = finding("load.cpu_preprocessing", "measured", 0.82, patch=DIFF, sev="info")
    found, why = patch_finding([workers, postfix])
    assert found is None and why is not None and "measured no gain" in why
    sync = finding("code.host_sync", "estimated", 1.2, patch=DIFF, sev="info")
    found, _ = patch_finding([workers, sync])
    assert found is sync  # an estimate stands where the measured one lost
