"""The order of `gpusight run --what-if`'s runs: what the watch's findings point at goes first,
so that a budget spent early is spent on it."""

from __future__ import annotations

from typing import Any

from gpusight.rerun.plan import plan


def _facts(autocast: bool, ids: list[str]) -> dict[str, Any]:
    return {
        "cuda": True,
        "model": {"param_devices": ["cuda"], "has_conv": True, "autocast": autocast},
        "flags": {"cudnn.benchmark": True},
        "breakdown_ms": {"compute": 9.0, "launch_overhead": 1.0},
        "finding_ids": ids,
    }


def _order(facts: dict[str, Any]) -> list[str]:
    return [g.name for g in plan(facts)]


def test_a_conv_net_under_autocast_tries_channels_last_before_tf32() -> None:
    # conv_nchw_amp on the H200: TF32 went first and its run left no budget for channels_last.
    order = _order(_facts(autocast=True, ids=["load.channels_last"]))
    assert order.index("channels_last") < order.index("tf32")


def test_a_float32_model_still_tries_autocast_and_tf32_first() -> None:
    order = _order(_facts(autocast=False, ids=["load.amp_unused"]))
    assert order[:2] == ["autocast", "tf32"]
    assert order.index("tf32") < order.index("channels_last")


def test_a_change_of_the_kernels_alone_is_bounded_by_their_share_of_the_step() -> None:
    """Amdahl: kernels 9 ms of a 10 ms step, a change of them alone gains at most 10x; with no
    kernel time seen (no trace, no NVML) the bound is unknown, not 1x: nothing is hidden."""
    bounds = {g.name: g.bound for g in plan(_facts(autocast=False, ids=["load.amp_unused"]))}
    for name in ("autocast", "tf32", "channels_last"):
        assert bounds[name] is not None and abs(bounds[name] - 10.0) < 1e-6, bounds
    facts = {**_facts(autocast=False, ids=["load.amp_unused"]),
             "breakdown_ms": {"compute": 0.0, "launch_overhead": 1.0}}  # fmt: skip
    assert all(g.bound is None for g in plan(facts) if g.name in ("autocast", "channels_last"))


def test_compiling_runs_after_the_changes_that_pay_no_start_up_of_their_own() -> None:
    """lightning_small_batch on the H100 (run31): launch overhead 54 % of a 2.5 ms step, so
    compile's group outranked autocast and the loader's; its two runs took 27 and 29 s, lost,
    and left the workers sweep and the second control out of the 180 s budget."""
    facts = {
        "cuda": True,
        "step_mode": "optimizer",
        "items_per_step": 16,
        "cpu_count": 16,
        "model": {"param_devices": ["cuda"], "autocast": False},
        "breakdown_ms": {
            "compute": 0.27,
            "data_wait": 0.16,
            "copy": 0.49,
            "launch_overhead": 1.36,
            "other_cpu": 0.23,
        },
        "loader": {"batch_size": 16, "batches_per_step": 1, "num_workers": 0, "pin_memory": False},
        "finding_ids": ["load.launch_bound", "load.small_batch", "load.amp_unused"],
    }
    groups = plan(facts)
    order = [g.name for g in groups]
    assert "compile" in order and order[-1] == "compile", order
    # Without the start-up rule compile's share of the step would have put it earlier.
    by_share = [g.name for g in sorted(groups, key=lambda g: -g.priority)]
    assert by_share.index("compile") < by_share.index("autocast"), by_share
