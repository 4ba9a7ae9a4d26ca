"""The DataLoader's settings: workers (a sweep), pin_memory, persistent_workers, prefetch_factor.

In a re-run, every DataLoader the script builds (subclasses too: they call this ``__init__``)
takes the change; the batch knob's ``batch_size`` goes the same way (``LOADER_KEYS``). In the
kernel (``gpusight.diagnose``) the same settings are measured on a clone of the user's DataLoader:
the workers swept over the same points, the other settings on the sweep's winner.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Local, LocalRow, Situation, Target, amdahl, share
from .gain_rule import threshold

if TYPE_CHECKING:
    from ..report import Fix

# The DataLoader's own settings, in the order a fix names them; the batch knob's batch_size too.
SETTINGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
LOADER_KEYS = (*SETTINGS, "batch_size")
FINDING = "load.input_bound"
EPOCH_FINDING = "load.epoch_start"
# The loader's changes are planned where loading takes at least this share of the step (%).
MIN_DATA_SHARE = 5.0
UNAPPLIED = "no DataLoader took the setting: a batch sampler, or no DataLoader at all"
NOT_A_DATALOADER = (
    "the loader is not a torch.utils.data.DataLoader: gpusight cannot change its settings"
)
PIN_FINDING = "code.pageable_copy"
SET_EPOCH = (
    "the dataset has a set_epoch: workers kept across epochs hold it as they started, and would "
    "not see what set_epoch changes"
)


def workers_of(facts: dict[str, Any] | None) -> int:
    """The worker processes of a run's DataLoader (its facts), at least 1: a round of them
    delivers that many batches, then waits."""
    return int(((facts or {}).get("loader") or {}).get("num_workers") or 1)


def workers_change(n: int) -> dict[str, int]:
    """The DataLoader argument that sets ``n`` workers (a change's, a row's parameter)."""
    return {"num_workers": n}


def workers_in(changes: dict[str, Any]) -> int | None:
    """The workers a change sets, None where it keeps the loader's."""
    w = changes.get("num_workers")
    return None if w is None else int(w)


def keeps_workers(facts: dict[str, Any] | None) -> bool:
    """A run's DataLoader keeps its workers across epochs: they start once, not per epoch."""
    return bool(((facts or {}).get("loader") or {}).get("persistent_workers"))


def spare_workers(cores: int) -> int:
    """The most workers that leave the training process and the pin-memory thread a core each
    (all cores on a machine of four or fewer)."""
    return max(1, cores - 2) if cores > 4 else max(1, cores)


def worker_counts(current: int, cores: int) -> list[int]:
    """Doubling from twice today's workers (at least 2), then all cores but two
    (``spare_workers``): the knee lies up there when loading is CPU work."""
    top = spare_workers(cores)
    out: list[int] = []
    n = max(2, current * 2)
    while n < top:
        out.append(n)
        n *= 2
    if top > current and top not in out:
        out.append(top)
    return [n for n in out if n > current]


# Workers past the cores are tried while the sweep scales at least this close to linearly:
# a loader that waits (on storage, on the network) rather than computes.
LINEAR_SHARE = 0.75
# A loader whose fetches in the main process kept it busy this share of their time computes:
# workers past the cores would only take the cores that the training process and the pin
# thread need (on the H100's 16 cores tv_transforms_loader's transforms went from 14 workers,
# 6.78x, to 28, 6.17x, in a run of 22 s).
CPU_BOUND_PCT = 50.0


def beyond_cores(
    ran: list[tuple[int, float]], cores: int, fetch_cpu_pct: float | None = None, keep: bool = False
) -> Arm | None:
    """One more worker count past the cores when the last two points (workers, gain) scaled
    nearly in proportion, up to four times the cores; never for loading known to compute
    (``fetch_cpu_pct``: the CPU share of the unchanged run's main-process fetches). ``keep``:
    as ``workers_arm``'s."""
    if len(ran) < 2 or (fetch_cpu_pct is not None and fetch_cpu_pct >= CPU_BOUND_PCT):
        return None
    (w1, g1), (w2, g2) = ran[-2], ran[-1]
    if w2 < max(2, cores - 2) or w2 >= 4 * cores or g1 <= 0:
        return None
    if g2 / g1 < LINEAR_SHARE * (w2 / w1):
        return None
    return workers_arm(2 * w2, keep)


def workers_arm(n: int, keep: bool = False) -> Arm:
    """``n`` workers; ``keep``: kept across epochs too (``persistent_workers=True``), as the
    finding's fix builds the loader: the row measures the loader that the fix writes."""
    if not keep:
        return Arm("workers", f"DataLoader num_workers={n}", workers_change(n), FINDING)
    return Arm("workers", f"DataLoader num_workers={n}, persistent_workers=True",
               {**workers_change(n), "persistent_workers": True}, FINDING)  # fmt: skip


def _keeps(s: Situation) -> bool:
    """The sweep's workers are to be kept across epochs: the loader does not keep them yet, and
    its dataset has no ``set_epoch`` (kept workers hold the dataset as they forked it: a
    ``set_epoch`` called in the main process would never reach them)."""
    return not keeps_workers(s.facts) and not (s.loader or {}).get("dataset_set_epoch")


def prefetch_point(current: int | None) -> int:
    """The prefetch_factor tried: twice today's (torch's default is 2)."""
    return 2 * int(current or 2)


def _workers_now(ctx: Local) -> int:
    return int(getattr(ctx.loader, "num_workers", 0) or 0)


def _nonneg_int(changes: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        v = changes.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            return f"{key} must be a non-negative integer, got {v!r}"
    return None


# Hugging Face's Trainer builds its DataLoader from these TrainingArguments.
TRAINER_ARGS = {
    "num_workers": "dataloader_num_workers",
    "pin_memory": "dataloader_pin_memory",
    "persistent_workers": "dataloader_persistent_workers",
    "prefetch_factor": "dataloader_prefetch_factor",
}


def _loader_fix(arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
    from ..fixes import fix
    from .user_lines import patched_loader, patched_setup

    loader = facts.get("loader") or {}
    settings = {k: v for k, v in arm.changes.items() if k in LOADER_KEYS}

    def made(text: str) -> Fix:
        return fix(
            text,
            "loader.workers",
            batch_size=int(loader.get("batch_size") or items or 64),
            workers=int(arm.changes.get("num_workers") or loader.get("num_workers") or 4),
        )

    args = ", ".join(f"{k}={v}" for k, v in settings.items())
    f = patched_loader(made(f"Build the DataLoader with {args or arm.label} (measured)."), arm,
                       facts)  # fmt: skip
    trainer = {TRAINER_ARGS[k]: v for k, v in settings.items() if k in TRAINER_ARGS}
    if f.patch is None and f.cell is None and trainer and facts.get("framework") == "transformers":
        # Hugging Face's Trainer makes the DataLoader: its settings are the TrainingArguments'.
        named = ", ".join(f"{k}={v}" for k, v in trainer.items())
        f = made(f"Build the Trainer's DataLoader with TrainingArguments(..., {named}) (measured).")
        f = patched_setup(f, facts, dict(trainer))
    return f


class _LoaderKnob(Knob):
    """What the loader's knobs share: how a re-run shows them, their finding, their fix."""

    applied_as = "loader"
    unapplied = UNAPPLIED

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        return _loader_fix(arm, items, facts)

    def not_planned(self, s: Situation) -> str:
        if s.loader is None:
            return "no DataLoader fed the model"
        return (
            f"the step waits for its DataLoader {s.data_share:.0f}% of the time, under "
            f"{MIN_DATA_SHARE:.0f}%: the loader keeps up"
        )


class Workers(_LoaderKnob):
    """The DataLoader's worker processes: a sweep of their number to the knee. In a re-run the
    workers are kept across epochs (persistent_workers=True), as the fix builds the loader,
    unless the dataset has a set_epoch that kept workers would not see. Where Hugging Face's
    Trainer makes the DataLoader, the fix sets its TrainingArguments' dataloader_num_workers and
    dataloader_persistent_workers instead."""

    name = "workers"
    findings = (FINDING,)
    keys = ("num_workers",)

    def groups(self, s: Situation) -> list[Group]:
        if s.loader is None or s.data_share < MIN_DATA_SHARE:
            return []
        current = int(s.loader.get("num_workers") or 0)
        counts = worker_counts(current, s.cores)
        # More workers remove at most the step's wait for data.
        g = Group("workers", s.data_share, sweep=True, bound=amdahl(s.data_share))
        g.arms = [workers_arm(n, _keeps(s)) for n in counts]
        if not counts:
            g.arms.append(
                Arm("workers", "DataLoader num_workers", {}, FINDING,
                    skipped=f"num_workers={current} already uses the {s.cores} CPU cores")
            )  # fmt: skip
        return [g]

    def validate(self, changes: dict[str, Any]) -> str | None:
        return _nonneg_int(changes, "num_workers")

    def stack_base(self, group: Group, noise_pct: float | None, cores: int) -> Arm | None:
        """The most workers whose gain is within the noise of the best, and that leave the
        main process and the pin-memory thread their cores (``worker_counts``' top) where one
        does. A sweep that stopped gaining before its workers ran out met its next bound in the
        main process (a pageable copy, the collation), which pinning and prefetching relieve
        once workers are to spare: on the H100 tv_transforms_loader stepped 45.6 ms on 8 and on
        14 workers, and pinning on the 8 read 0.95x; on the H200's 14, 1.28x. But workers past
        the cores starve the pin thread: on 16 cores, pinned on 28 workers (within the noise of
        14) it stepped 46 ms, where ``--fix`` pinned on 12 steps 30 ms."""
        ran = [(a, w, g) for a, g in group.measured if (w := workers_in(a.changes)) is not None]
        if not ran:
            return super().stack_base(group, noise_pct, cores)
        best = max(g for _a, _w, g in ran)
        near = [(a, w) for a, w, g in ran if g * threshold(noise_pct) >= best]
        spare = [(a, w) for a, w in near if w <= spare_workers(cores)]
        if not spare:  # only workers past the cores come near the best: the best, then
            return max(ran, key=lambda m: m[2])[0]
        return max(spare, key=lambda m: m[1])[0]

    def extend(self, group: Group, gains: list[float | None], s: Situation) -> Arm | None:
        ran = [
            (int(a.changes["num_workers"]), x)
            for a, x in zip(
                [a for a in group.arms if not a.skipped and "num_workers" in a.changes],
                gains,
                strict=False,
            )
            if x is not None
        ]
        return beyond_cores(ran, s.cores, (s.loader or {}).get("fetch_cpu_pct"), _keeps(s))

    def install(self, hooks: Target) -> None:
        # One patch of DataLoader for every loader key, whichever knob owns it.
        values = {k: hooks.changes[k] for k in LOADER_KEYS if hooks.changes.get(k) is not None}
        if values:
            patch_loader(hooks.torch, values, hooks.inj)

    def owns(self, changes: dict[str, Any]) -> bool:
        return any(changes.get(k) is not None for k in LOADER_KEYS)

    SWEEP = LocalRow("num_workers", "DataLoader num_workers sweep", FINDING, "sweep",
                     input_bound=True)  # fmt: skip

    def local_rows(self) -> tuple[LocalRow, ...]:
        return (self.SWEEP,)

    def local_arm_of(self, row: LocalRow, ctx: Local) -> Arm | str:
        if not ctx.dataloader:
            return NOT_A_DATALOADER
        if isinstance(ctx.loader.dataset, ctx.torch.utils.data.IterableDataset):
            return (
                "the dataset is an IterableDataset: more workers repeat its batches unless it "
                "shards itself with torch.utils.data.get_worker_info()"
            )
        points = self.local_points(ctx)
        if not points:
            now, cores = _workers_now(ctx), ctx.cpu_count
            return f"the loader already uses {now} workers for {cores} CPU cores"
        return points[0]

    def local_points(self, ctx: Local) -> list[Arm]:
        return [workers_arm(n) for n in worker_counts(_workers_now(ctx), ctx.cpu_count)]

    def local_snippet(self, key: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return f"whatif.{key}", {"what": f"num_workers sweep {params.get('sweep', '')}".strip()}

    def local_next(self, ctx: Local, ran: list[tuple[Arm, float]]) -> Arm | None:
        ran_at = [(int(a.changes["num_workers"]), g) for a, g in ran]
        return beyond_cores(ran_at, ctx.cpu_count, ctx.fetch_cpu_pct)


class LoaderSettings(_LoaderKnob):
    """The DataLoader's other settings, on the most workers the sweep found within the noise of
    its best: pinned memory with non_blocking copies, a deeper prefetch per worker, and the
    workers kept across epochs."""

    name = "loader"
    findings = (FINDING, EPOCH_FINDING, PIN_FINDING)
    keys = ("pin_memory", "persistent_workers", "prefetch_factor")
    stacks_on = "workers"

    def groups_on(self, s: Situation, winner: Arm) -> list[Group]:
        won = {k: v for k, v in winner.changes.items() if k in LOADER_KEYS}
        loader = {**(s.loader or {}), **won}
        return self.groups(Situation.of({**s.facts, "loader": loader}))

    def groups(self, s: Situation) -> list[Group]:
        # Epoch starts are a phase between the steps (the watch's load.epoch_start), out of
        # the steps' data wait: keeping the workers is tried for them whatever that wait is.
        restarts = EPOCH_FINDING in s.ids
        if s.loader is None or (s.data_share < MIN_DATA_SHARE and not restarts):
            return []
        ld = s.loader
        between = share(s.facts, "between_steps") if restarts else 0.0
        g = Group("loader", max(s.data_share, between) * 0.5)
        feeds = s.data_share >= MIN_DATA_SHARE
        if feeds and s.cuda and not ld.get("pin_memory"):
            # Pinned batches are the pageable copies' own fix: measured, the row settles that
            # finding (and a memory_transfer verdict), not only the loader's.
            pin = PIN_FINDING if PIN_FINDING in s.ids else FINDING
            g.arms.append(Arm("loader", "DataLoader pin_memory=True", {"pin_memory": True},
                              pin))  # fmt: skip
        if int(ld.get("num_workers") or 0) > 0:
            if _keeps(s) and int(s.facts.get("epochs_seen") or 0) > 1:
                g.arms.append(Arm("loader", "DataLoader persistent_workers=True",
                                  {"persistent_workers": True},
                                  EPOCH_FINDING if restarts else FINDING))  # fmt: skip
            pf = prefetch_point(ld.get("prefetch_factor"))
            if feeds:
                g.arms.append(Arm("loader", f"DataLoader prefetch_factor={pf}",
                                  {"prefetch_factor": pf}, FINDING))  # fmt: skip
        return [g] if g.arms else []

    def validate(self, changes: dict[str, Any]) -> str | None:
        bad = _nonneg_int(changes, "prefetch_factor")
        if bad is None and changes.get("prefetch_factor") == 0:
            return "prefetch_factor must be at least 1"
        return bad

    # In the kernel: each setting on a clone of the user's DataLoader, on the sweep's winner.

    PIN = LocalRow("pin_memory", "pin_memory=True + non_blocking copies", PIN_FINDING, "loader")
    PERSISTENT = LocalRow("persistent_workers", "persistent_workers=True", FINDING, "epoch_start")
    PREFETCH = LocalRow("prefetch_factor", "prefetch_factor doubled", FINDING, "loader",
                        input_bound=True)  # fmt: skip

    def local_rows(self) -> tuple[LocalRow, ...]:
        return (self.PIN, self.PERSISTENT, self.PREFETCH)

    def local_arm_of(self, row: LocalRow, ctx: Local) -> Arm | str:
        if row.key == self.PIN.key:
            return _pin_arm(ctx)
        if not ctx.dataloader:
            return NOT_A_DATALOADER
        w = ctx.loader_workers()
        if row.key == self.PERSISTENT.key:
            return _persistent_arm(ctx, w)
        if w == 0:
            return "no worker processes (num_workers=0): prefetch_factor is per worker"
        pf = prefetch_point(ctx.loader.prefetch_factor)
        return Arm("loader", f"DataLoader(prefetch_factor={pf}) with num_workers={w}",
                   {"num_workers": w, "prefetch_factor": pf}, FINDING)  # fmt: skip

    def local_params(self, arm: Arm, ctx: Local) -> dict[str, Any]:
        return {k: arm.changes[k] for k in ("prefetch_factor",) if k in arm.changes}


def _pin_arm(ctx: Local) -> Arm | str:
    """Pinned batches copied with ``non_blocking=True``: on the workers the sweep found, where
    pinning pays off (the loader's pin thread does it, off the main thread, whose step the
    workers now limit); in the main process of a loader without workers it only adds a copy."""
    from .tensors import tensors_of

    if not ctx.cuda:
        return "no CUDA device: pinned memory only speeds up copies to a GPU"
    if ctx.dataloader and ctx.loader.pin_memory:
        return "the DataLoader already pins memory (pin_memory=True)"
    if ctx.batches and all(t.device.type != "cpu" for b in ctx.batches for t in tensors_of(b)):
        return "the batches are already on the GPU: there is no host copy to pin"
    if not ctx.dataloader:  # pinned copies of the cached batches
        return Arm("loader", "pinned batches copied with non_blocking=True",
                   {"source": "cached", "non_blocking": True}, PIN_FINDING)  # fmt: skip
    w = ctx.loader_workers()
    change = "DataLoader(pin_memory=True) and .to(device, non_blocking=True)"
    if w == _workers_now(ctx):
        return Arm("loader", change, {"pin_memory": True, "non_blocking": True}, PIN_FINDING)
    return Arm("loader", f"{change} with num_workers={w}",
               {"pin_memory": True, "num_workers": w, "non_blocking": True},
               PIN_FINDING)  # fmt: skip


def _persistent_arm(ctx: Local, w: int) -> Arm | str:
    if ctx.loader.persistent_workers:
        return "the DataLoader already keeps its workers (persistent_workers=True)"
    if w == 0:
        return "no worker processes (num_workers=0): persistent_workers only keeps workers alive"
    if callable(getattr(ctx.loader.dataset, "set_epoch", None)):
        return SET_EPOCH
    try:
        len(ctx.loader)
    except TypeError:
        return "the loader has no length: an epoch's start-up cannot be spread over its batches"
    return Arm("loader", f"DataLoader(num_workers={w}, persistent_workers=True): workers kept",
               {"num_workers": w, "persistent_workers": True}, FINDING)  # fmt: skip


def patch_loader(torch: Any, loader: dict[str, Any], inj: Any) -> None:
    """Every DataLoader built from now on takes ``loader``'s settings (undone by ``inj``)."""
    cls = torch.utils.data.DataLoader
    orig = cls.__init__
    sig = inspect.signature(orig)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:
            orig(self, *args, **kwargs)
            return
        a = bound.arguments
        changed = False
        for key, value in loader.items():
            if key == "batch_size" and (a.get("batch_sampler") is not None or a.get(key) is None):
                continue  # a batch sampler (or batch_size=None) fixes the batch itself
            if key == "pin_memory" and not torch.cuda.is_available():
                continue
            a[key] = value
            changed = True
        if a.get("num_workers", 0) == 0:
            # These need workers; torch refuses them without.
            a.pop("persistent_workers", None)
            a.pop("prefetch_factor", None)
        if changed:
            inj.hit("loader")
        orig(*bound.args, **bound.kwargs)

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    cls.__init__ = __init__
    inj._undo.append(lambda: setattr(cls, "__init__", orig))
