"""The costs the hooks' own clocks cannot see: measured at watch start, added per event.

No timing targets here (those live in ``benchmarks/cost/overhead.py --micro``): these tests check
that the figures are measured on real stand-ins, reported, and added once per event they stand for.
"""

from __future__ import annotations

import warnings

import torch
from gpusight.watch.calibration import Calibration, calibrate, module_hooks_ns
from gpusight.watch.session import SYNC_MESSAGE, Watch
from torch import nn


def test_a_hooked_module_call_costs_more_than_a_plain_one() -> None:
    # Two Python hooks and torch's slow path against its fast path: always a cost; the
    # smallest of a few interleaved differences is taken, so one retry absorbs a noisy run.
    assert module_hooks_ns(torch) > 0 or module_hooks_ns(torch) > 0


def test_calibration_leaves_the_warning_machinery_as_found() -> None:
    filters = list(warnings.filters)
    show = warnings.showwarning
    cal = calibrate(torch)
    assert warnings.filters == filters and warnings.showwarning is show
    assert all(isinstance(v, int) and v >= 0 for v in cal.as_dict().values())


def test_each_event_of_a_measured_step_carries_its_calibrated_cost() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    steps, syncs, copies = 12, 2, 1
    with Watch(warmup=2, profile_steps=0, stop_after_steps=False, device_types=("meta",)) as w:
        # Known figures, large enough to dominate the hooks' own microseconds.
        w.calibration = Calibration(module_hooks_ns=1_000_000, wrapper_ns=10_000_000,
                                    warning_ns=100_000_000)  # fmt: skip
        for _ in range(steps):
            x.to("meta")
            model(x)
            for _ in range(syncs):
                warnings.warn(SYNC_MESSAGE, stacklevel=1)
    rec = w.recorder
    assert rec is not None
    measured = [r for r in rec.records if r.phase == "measure"]
    assert len(measured) >= 5
    # A step runs from one forward's end to the next: one copy, one hooked forward (only the
    # outermost module is hooked after warm-up) and its syncs. The hooks' own time is far
    # below a millisecond, so each step's overhead is the calibrated sum plus a little.
    want = 1_000_000 + copies * 10_000_000 + syncs * 100_000_000
    for r in measured[1:]:
        assert want <= r.overhead_ns < want + 1_000_000
    assert w.report is not None and w.report.run is not None
    kernels = w.report.run["kernels"]
    assert kernels["overhead_calibration_warning_ns"] == 100_000_000
