"""Which changes a ``--what-if`` re-runs, in what order, and how each sweep goes on. Pure.

The baseline run's facts (``facts.py``) say what the script has: a DataLoader and its settings,
a model and where it lives, the flags in force, where the step's time went. Each candidate
change becomes an :class:`Arm`; arms are grouped (one group per kind of change), and groups are
ordered by the share of the step their change can act on, so the budget goes first where the
time goes. Two groups are sweeps that continue while they gain: DataLoader workers (doubling up
to the cores: the knee is found before the budget goes elsewhere) and the batch (x4 each time,
while the GPU's memory allows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A sweep stops when its last point gained less than this over the best before it.
KNEE_GAIN = 1.05
# Batch sweep: factor per point, points at most, items per step at most.
BATCH_FACTOR = 4
BATCH_POINTS = 3
MAX_ITEMS = 8192
COMPILE_SKIPPED = (
    "not tried from outside the script: compiling takes longer than a what-if run, and CUDA "
    "graphs need static shapes and inputs; measure it with gpusight.diagnose(), or apply "
    "launch.compile and compare with gpusight diff"
)
# Memory the batch sweep leaves free (a bigger batch needs about proportionally more).
MEMORY_SHARE = 0.8


@dataclass
class Arm:
    group: str
    label: str
    changes: dict[str, Any]
    finding_id: str | None = None
    skipped: str | None = None
    slowdown: float = 1.0
    """How much longer than the baseline one step may take (the batch grows): for forecasts."""


@dataclass
class Group:
    name: str
    priority: float
    arms: list[Arm] = field(default_factory=list)
    sweep: bool = False


def _share(facts: dict[str, Any], *keys: str) -> float:
    split = facts.get("breakdown_ms") or {}
    total = sum(float(v or 0.0) for v in split.values())
    if total <= 0:
        return 0.0
    return 100.0 * sum(float(split.get(k) or 0.0) for k in keys) / total


def worker_counts(current: int, cores: int) -> list[int]:
    """Doubling from twice today's workers (at least 2), then all cores but two (the training
    process and the pin-memory thread need theirs): the knee lies up there when loading is
    CPU work."""
    top = max(1, cores - 2) if cores > 4 else max(1, cores)
    out: list[int] = []
    n = max(2, current * 2)
    while n < top:
        out.append(n)
        n *= 2
    if top > current and top not in out:
        out.append(top)
    return [n for n in out if n > current]


def batch_factors(facts: dict[str, Any]) -> list[int]:
    """Batch multipliers to try: x4, x16, x64 while items and memory allow."""
    items = int(facts.get("items_per_step") or 0)
    if items <= 0:
        return []
    peak = facts.get("peak_memory_bytes") or 0
    cap = facts.get("memory_capacity_bytes") or 0
    out = []
    k = BATCH_FACTOR
    for _ in range(BATCH_POINTS):
        if items * k > MAX_ITEMS:
            break
        if peak and cap and peak * k > MEMORY_SHARE * cap:
            break
        out.append(k)
        k *= BATCH_FACTOR
    return out


def plan(facts: dict[str, Any]) -> list[Group]:
    """The groups of arms for this run, highest priority first (skipped arms say why)."""
    groups: list[Group] = []
    cuda = bool(facts.get("cuda"))
    loader = facts.get("loader") or None
    model = facts.get("model") or None
    flags = facts.get("flags") or {}
    cores = int(facts.get("cpu_count") or 1)
    data_share = _share(facts, "data_wait")
    host_share = _share(facts, "launch_overhead", "other_cpu", "sync_stall")
    compute_share = _share(facts, "compute")
    ids = set(facts.get("finding_ids") or [])
    mode = facts.get("step_mode")

    # The model left on the CPU: everything else waits for this.
    if cuda and model and model.get("param_devices") == ["cpu"]:
        groups.append(
            Group(
                "to_device",
                200.0,
                [
                    Arm(
                        "to_device",
                        "model and batches on the GPU",
                        {"to_device": "cuda"},
                        "code.cpu_model",
                    )
                ],
            )
        )

    if loader is not None and data_share >= 5.0:
        current = int(loader.get("num_workers") or 0)
        counts = worker_counts(current, cores)
        g = Group("workers", data_share, sweep=True)
        for n in counts:
            g.arms.append(
                Arm(
                    "workers", f"DataLoader num_workers={n}", {"num_workers": n}, "load.input_bound"
                )
            )
        if not counts:
            g.arms.append(
                Arm(
                    "workers",
                    "DataLoader num_workers",
                    {},
                    "load.input_bound",
                    skipped=f"num_workers={current} already uses the {cores} CPU cores",
                )
            )
        groups.append(g)
        extra = Group("loader", data_share * 0.5)
        if cuda and not loader.get("pin_memory"):
            extra.arms.append(
                Arm(
                    "loader", "DataLoader pin_memory=True", {"pin_memory": True}, "load.input_bound"
                )
            )
        if current > 0:
            if not loader.get("persistent_workers") and int(facts.get("epochs_seen") or 0) > 1:
                extra.arms.append(
                    Arm(
                        "loader",
                        "DataLoader persistent_workers=True",
                        {"persistent_workers": True},
                        "load.input_bound",
                    )
                )
            pf = int(loader.get("prefetch_factor") or 2)
            extra.arms.append(
                Arm(
                    "loader",
                    f"DataLoader prefetch_factor={pf * 2}",
                    {"prefetch_factor": pf * 2},
                    "load.input_bound",
                )
            )
        if extra.arms:
            groups.append(extra)

    # A bigger batch: through the DataLoader when one feeds the steps (its loading at the new
    # size is then in the measurement), else each input repeated along the batch dimension.
    small = bool(ids & {"load.small_batch", "load.launch_bound", "infer.unbatched"})
    if mode is not None and (small or host_share >= 30.0 or (cuda and compute_share < 50.0)):
        factors = batch_factors(facts)
        items = int(facts.get("items_per_step") or 0)
        via_loader = bool(
            loader is not None
            and loader.get("batch_size")
            and int(loader["batch_size"]) == items
            and mode != "forward"
        )
        finding = (
            "infer.unbatched"
            if mode == "forward"
            else "load.small_batch"
            if "load.small_batch" in ids
            else "load.launch_bound"
            if "load.launch_bound" in ids
            else "load.small_batch"
        )
        # A loader-bound step gains nothing from a bigger batch (the wait grows with it): its
        # priority is the host-bound share, so it runs after the loader's changes.
        g = Group("batch", max(host_share, 50.0 if small else 0.0), sweep=True)
        for k in factors:
            if via_loader:
                g.arms.append(
                    Arm(
                        "batch",
                        f"DataLoader batch_size={items * k}",
                        {"batch_size": items * k},
                        finding,
                        slowdown=float(k),
                    )
                )
            else:
                g.arms.append(
                    Arm(
                        "batch",
                        f"{items * k} items per forward (inputs repeated x{k})",
                        {"replicate": k},
                        finding,
                        slowdown=float(k),
                    )
                )
        if not factors:
            g.arms.append(
                Arm(
                    "batch",
                    "a larger batch",
                    {},
                    finding,
                    skipped="the batch size is unknown, or memory leaves no room",
                )
            )
        if g.arms:
            groups.append(g)

    if cuda and model:
        fp32 = "load.amp_unused" in ids or (not model.get("autocast") and compute_share >= 30.0)
        if fp32 and not model.get("autocast"):
            groups.append(
                Group(
                    "autocast",
                    compute_share + 1.0,
                    [
                        Arm(
                            "autocast",
                            "bf16 autocast around the model's forward",
                            {"autocast": "bfloat16"},
                            "load.amp_unused",
                        )
                    ],
                )
            )
        tf32_on = bool(flags.get("matmul.allow_tf32")) or flags.get("float32_matmul_precision") in (
            "high",
            "medium",
        )
        if not tf32_on and compute_share >= 20.0:
            # Under autocast the matmuls and convolutions already run in half precision:
            # TF32 reaches only what autocast leaves in float32, so it goes after the changes
            # the watch's findings point at (on the H200 conv_nchw_amp's TF32 run took the
            # budget that its channels_last finding needed).
            groups.append(
                Group(
                    "tf32",
                    compute_share * (0.2 if model.get("autocast") else 0.9),
                    [
                        Arm(
                            "tf32",
                            "TF32 for float32 matmuls and convolutions",
                            {"tf32": True},
                            "cfg.tf32_disabled",
                        )
                    ],
                )
            )
        if model.get("has_conv"):
            if not model.get("channels_last"):
                groups.append(
                    Group(
                        "channels_last",
                        compute_share * (0.95 if "load.channels_last" in ids else 0.5),
                        [
                            Arm(
                                "channels_last",
                                "channels_last for the model and its inputs",
                                {"channels_last": True},
                                "load.channels_last",
                            )
                        ],
                    )
                )
            if not flags.get("cudnn.benchmark"):
                groups.append(
                    Group(
                        "cudnn_benchmark",
                        compute_share * 0.4,
                        [
                            Arm(
                                "cudnn_benchmark",
                                "cudnn.benchmark=True",
                                {"cudnn_benchmark": True},
                                "cfg.cudnn_benchmark_off",
                            )
                        ],
                    )
                )
    if cuda and model and "load.launch_bound" in ids:
        groups.append(
            Group(
                "compile",
                0.0,
                [
                    Arm(
                        "compile",
                        "torch.compile / CUDA graphs",
                        {},
                        "load.launch_bound",
                        skipped=COMPILE_SKIPPED,
                    )
                ],
            )
        )
    groups.sort(key=lambda g: -g.priority)
    return groups


# Workers past the cores are tried while the sweep scales at least this close to linearly:
# a loader that waits (on storage, on the network) rather than computes.
LINEAR_SHARE = 0.75


def beyond_cores(ran: list[tuple[int, float]], cores: int) -> Arm | None:
    """One more worker count past the cores when the last two points (workers, gain) scaled
    nearly in proportion, up to four times the cores."""
    if len(ran) < 2:
        return None
    (w1, g1), (w2, g2) = ran[-2], ran[-1]
    if w2 < max(2, cores - 2) or w2 >= 4 * cores or g1 <= 0:
        return None
    if g2 / g1 < LINEAR_SHARE * (w2 / w1):
        return None
    n = 2 * w2
    return Arm(
        "workers",
        f"DataLoader num_workers={n}",
        {"num_workers": n},
        "load.input_bound",
    )


def sweep_goes_on(gains: list[float | None]) -> bool:
    """Whether a sweep goes on after the points measured so far (``gains`` in arm order, None
    for a point that failed: an OOM or a crash, which a larger point would repeat)."""
    if not gains:
        return True
    if gains[-1] is None:
        return False
    got = [g for g in gains if g is not None]
    if len(got) < 2:
        return True
    return got[-1] >= KNEE_GAIN * max(got[:-1])


def combine(winners: list[Arm]) -> dict[str, Any]:
    """The winners' changes in one run (the best point of each sweep)."""
    out: dict[str, Any] = {}
    for arm in winners:
        out.update(arm.changes)
    return out
