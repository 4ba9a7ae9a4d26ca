"""The winners confirmed before they are combined: each gain judged again once the control has
run again; and the control run again at once where it ran slower than the profiled baseline.

A winner is judged when it runs, against the control as it stands then. Where the first control
ran slow and the next ones fast (the H100's hf_trainer_defaults, run42: 37.2, then 26.5 and
31.0 ms a step), changes that gain nothing cleared the band against it: TF32 read 1.09x then,
0.91x against the controls' median, and the combined row ran TF32 and torch.compile beside the
two real winners. Only a gain judged against the unchanged script is judged again; one judged
against the winner it ran on top of keeps its verdict (that run did not move).
"""

from __future__ import annotations

from ..knobs.gain_rule import threshold
from .outcome import Outcome, RunResult
from .plan import Arm


def slower_than_baseline(control: RunResult, base: RunResult, items0: int, noise: float) -> bool:
    """``control`` ran slower than the profiled baseline by more than the noise band. The
    baseline is the slower as a rule (its profiler's after-effects): a control slower still
    ran in a slow phase of the host, and every arm would be judged against it, so the driver
    runs it again at once (run42's hf_trainer_defaults: 37.2 ms a step, then 26.5 and 31.0,
    where the baseline ran at 33.8)."""
    a, b = control.items_per_s(items0), base.items_per_s(items0)
    return bool(a and b and b / a >= threshold(noise))


def confirmed(out: Outcome, winners: list[Arm], items0: int) -> list[Arm]:
    """``winners`` less those whose gain over the unchanged script, as its runs now put it, no
    longer clears the row's noise band."""
    ms = out.reference_ms(items0)
    if not ms:
        return winners
    rate = items0 / ms * 1000.0
    keep = []
    for arm in winners:
        at = [i for i, (a, r) in enumerate(out.arms) if a is arm and r is not None and r.ok]
        if not at or at[-1] in out.stacked_on or _won_on_top(out, arm):
            keep.append(arm)
            continue
        res = out.arms[at[-1]][1]
        ips = res.items_per_s(items0) if res is not None else None
        if ips is not None and ips / rate >= threshold(out.row_noise(res)):
            keep.append(arm)
    return keep


def _won_on_top(out: Outcome, arm: Arm) -> bool:
    """``arm`` lost alone and won on top of the winning batch (``stacking.on_top``: its group,
    its changes and the batch's, judged against the batch's own run)."""
    return any(
        a.stacked_on is not None
        and a.group == arm.group
        and all(a.changes.get(k) == v for k, v in arm.changes.items())
        for a, r in out.arms
        if r is not None and r.ok
    )
