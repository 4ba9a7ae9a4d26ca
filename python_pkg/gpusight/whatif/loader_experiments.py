"""The DataLoader experiments built on the num_workers sweep's winner: pinned memory, persistent
workers, prefetch_factor, the winners together (``LoaderTogether``), and the dataset kept on
the GPU. They run a clone of the user's DataLoader: the loader is what they measure.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..knobs.base import Arm as Plan
from ..knobs.gain_rule import MIN_GAIN, noise_pct
from ..knobs.tensors import batch_len, batch_nbytes, tensors_of
from ..report import Fix, Scalar, WhatIf
from .arms import merged, planned, relabelled, source_of
from .context import Context, Skip
from .experiment import Experiment, Outcome, input_bound_gate, loader_gate
from .loaders import clone_loader, items_deterministic, shutdown
from .snippets import combined
from .worker_sweep import loader_workers, winner_block_s


class PinMemory(Experiment):
    """Pinned batches copied with ``non_blocking=True``.

    With a DataLoader it stacks on the num_workers sweep's winner, as ``PrefetchFactor`` does:
    with ``w`` winning workers it measures ``num_workers=w, pin_memory=True`` against
    ``num_workers=w``. Pinning pays off there (the loader's pin thread does it, off the main
    thread, whose step the workers now limit); in the main process of a loader without workers
    it only adds a copy, so measuring it against the user's ``num_workers=0`` would miss it.
    """

    key = "pin_memory"
    finding_id = "code.pageable_copy"
    label = "pin_memory=True + non_blocking copies"
    group = "loader"

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device: pinned memory only speeds up copies to a GPU"
        if ctx.dataloader and ctx.work.loader.pin_memory:
            return "the DataLoader already pins memory (pin_memory=True)"
        if ctx.work.cached and all(
            t.device.type != "cpu" for b in ctx.work.cached for t in tensors_of(b)
        ):
            return "the batches are already on the GPU: there is no host copy to pin"
        return None

    def cost_s(self, ctx: Context) -> float:
        if not ctx.dataloader:
            return ctx.reps * (2 * ctx.block_s("cached") + 0.3)
        on_winner = planned("", source="loader", num_workers=loader_workers(ctx))
        return ctx.reps * (2 * winner_block_s(ctx, on_winner) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        if not ctx.dataloader:
            variant = planned("pinned batches, non_blocking=True", non_blocking=True)
            return self.measure_one(ctx, variant, "pinned batches copied with non_blocking=True")
        w = loader_workers(ctx)
        stacked = w != int(ctx.work.loader.num_workers or 0)
        base = (
            ctx.build(planned(f"num_workers={w}", source="loader", num_workers=w))
            if stacked
            else None
        )
        variant = planned(
            "pin_memory=True, non_blocking=True",  # its change; the workers are the winner's
            source="loader",
            pin_memory=True,
            **({"num_workers": w} if stacked else {}),
            non_blocking=True,
        )
        change = "DataLoader(pin_memory=True) and .to(device, non_blocking=True)"
        against = f"num_workers={w} (the sweep's winner)" if stacked else "your loader"
        try:
            out = self.measure_one(
                ctx,
                variant,
                f"{change} with num_workers={w}" if stacked else change,
                "loader",
                params={
                    "num_workers": w,
                    "against": against,
                },
                base=base,
            )
        finally:
            ctx.drop(base)
        out.params.update(num_workers=w)
        return out


class PersistentWorkers(Experiment):
    """Worker start-up at every epoch, measured, spread over the epoch's batches."""

    key = "persistent_workers"
    finding_id = "load.input_bound"
    label = "persistent_workers=True"
    group = "loader"

    def applies(self, ctx: Context) -> str | None:
        gate = loader_gate(ctx)
        if gate:
            return gate
        if ctx.work.loader.persistent_workers:
            return "the DataLoader already keeps its workers (persistent_workers=True)"
        if loader_workers(ctx) == 0:
            return (
                "no worker processes (num_workers=0): persistent_workers only keeps workers alive"
            )
        try:
            len(ctx.work.loader)
        except TypeError:
            return "the loader has no length: an epoch's start-up cannot be spread over its batches"
        return None

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * 2 * (0.5 + 0.05 * loader_workers(ctx))

    def apply(self, ctx: Context) -> Outcome:
        w = loader_workers(ctx)
        epoch = len(ctx.work.loader)
        plain = clone_loader(ctx.work.loader, num_workers=w)
        keep = clone_loader(ctx.work.loader, num_workers=w, persistent_workers=True)
        cold: list[float] = []
        warm: list[float] = []
        try:
            it = iter(keep)
            next(it)  # start the workers once, as the first epoch would
            for _ in range(ctx.reps):
                if cold and not ctx.affordable(self.cost_s(ctx) / ctx.reps):
                    break
                t0 = time.perf_counter()
                it_plain = iter(plain)
                next(it_plain)
                cold.append(time.perf_counter() - t0)
                shutdown(it_plain)
                t0 = time.perf_counter()
                it = iter(keep)  # a new epoch: the same workers, reset
                next(it)
                warm.append(time.perf_counter() - t0)
                ctx.budget.tell(ctx.stage)
        except Exception as exc:
            raise Skip(f"persistent workers failed: {type(exc).__name__}: {exc}") from exc
        finally:
            shutdown(getattr(keep, "_iterator", None))
        base = ctx.results.get("num_workers")
        step_ms = (
            base.what_if.after_ms
            if base is not None and base.winner is not None and base.what_if.after_ms
            else min(ctx.loader_base_ms)
        )
        cold_ms = 1000 * sorted(cold)[len(cold) // 2]
        warm_ms = 1000 * sorted(warm)[len(warm) // 2]
        before = step_ms + cold_ms / epoch
        after = step_ms + warm_ms / epoch
        speedup = before / after if after > 0 else 0.0
        spread = noise_pct(cold)
        # A win only if every cold start was slower than every warm one, and it adds up.
        wins = min(cold) > max(warm) and speedup >= MIN_GAIN
        what = WhatIf(
            scope="end_to_end",  # the loader's own epoch start-up, on the step with the loader
            change=f"DataLoader(num_workers={w}, persistent_workers=True): workers kept",
            finding_id=self.finding_id,
            params={
                "num_workers": w,
                "epoch_start_ms": round(cold_ms, 1),
                "epoch_start_persistent_ms": round(warm_ms, 1),
                "batches_per_epoch": epoch,
                "repeats": len(cold),
                "won": wins,
                "basis": "epoch start-up measured, spread over an epoch's batches",
            },
            before_ms=round(before, 3),
            after_ms=round(after, 3),
            speedup=round(speedup, 3),
            noise_pct=None if spread is None else round(spread, 1),
        )
        variant = planned("persistent_workers", source="loader", persistent_workers=True)
        return Outcome(
            self.key, what, variant if wins else None, self.finding_id, {"num_workers": w}
        )


class PrefetchFactor(Experiment):
    key = "prefetch_factor"
    finding_id = "load.input_bound"
    label = "prefetch_factor=4"
    group = "loader"
    FACTOR = 4

    def applies(self, ctx: Context) -> str | None:
        gate = loader_gate(ctx)
        if gate:
            return gate
        if loader_workers(ctx) == 0:
            return "no worker processes (num_workers=0): prefetch_factor is per worker"
        if (ctx.work.loader.prefetch_factor or 2) >= self.FACTOR:
            return (
                f"the DataLoader already prefetches {ctx.work.loader.prefetch_factor} "
                "batches per worker"
            )
        return input_bound_gate(ctx)

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * (2 * ctx.block_s("loader") + 1.0)

    def apply(self, ctx: Context) -> Outcome:
        w = loader_workers(ctx)
        base_variant = planned(f"num_workers={w}", source="loader", num_workers=w)
        base = ctx.build(base_variant) if w != (ctx.work.loader.num_workers or 0) else None
        variant = planned(
            f"num_workers={w}, prefetch_factor={self.FACTOR}",
            source="loader",
            num_workers=w,
            prefetch_factor=self.FACTOR,
        )
        try:
            return self.measure_one(
                ctx,
                variant,
                f"DataLoader(prefetch_factor={self.FACTOR}) with num_workers={w}",
                "loader",
                params={"num_workers": w, "prefetch_factor": self.FACTOR},
                base=base,
            )
        finally:
            ctx.drop(base)


# The DataLoader settings whose winners LoaderTogether measures together, in the order they are
# named (pin_memory brings its non_blocking copies along).
LOADER_SETTINGS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")


def loader_together(loader: Any, winners: list[Outcome]) -> tuple[Plan, dict[str, Any]] | None:
    """The variant with every winning DataLoader setting, and the settings it changes.

    ``winners`` are the loader experiments' outcomes; only their DataLoader settings count (the
    dataset kept on the GPU is no DataLoader setting). The changes are the settings that differ
    from ``loader``'s own; None when no winner changes any.
    """
    v = planned("the DataLoader winners together", source="loader")
    for o in winners:
        if o.key in LOADER_SETTINGS and o.winner is not None and source_of(o.winner) == "loader":
            v = merged(v, o.winner, v.label)
    changes = {
        k: v.changes[k]
        for k in LOADER_SETTINGS
        if k in v.changes and v.changes[k] != getattr(loader, k, None)
    }
    return (v, changes) if changes else None


def together_change(changes: dict[str, Any], non_blocking: bool) -> str:
    args = ", ".join(f"{k}={v}" for k, v in changes.items())
    copies = " and .to(device, non_blocking=True)" if non_blocking else ""
    return f"DataLoader({args}){copies}, together"


class LoaderTogether(Experiment):
    """Every DataLoader setting that won, in one loader, against the user's loader.

    Runs after the other loader experiments, each of which measured one setting (pin_memory and
    prefetch_factor on top of the num_workers winner): whether the settings add up is measured
    here, in one arm, not multiplied. It needs two settings or more that won; with one, that
    setting's own row is already the measurement. (persistent_workers pays at epoch starts,
    which these blocks cross only when an epoch is a few blocks long: its own row measures that.)
    """

    key = "loader_combined"
    finding_id = "load.input_bound"
    label = "DataLoader winners together"
    group = "loader"

    def together(self, ctx: Context) -> tuple[Plan, dict[str, Any]] | None:
        won = [ctx.results[k] for k in LOADER_SETTINGS if k in ctx.results]
        return loader_together(ctx.work.loader, won)

    def applies(self, ctx: Context) -> str | None:
        gate = loader_gate(ctx)
        if gate:
            return gate
        found = self.together(ctx)
        if found is None:
            return "no DataLoader setting won: there is nothing to put together"
        _, changes = found
        if len(changes) < 2:
            (name, value), *_ = changes.items()
            return f"only one DataLoader setting won ({name}={value}): its own row measures it"
        return None

    def cost_s(self, ctx: Context) -> float:
        found = self.together(ctx)
        together = found[0] if found else planned("", source="loader")
        return ctx.reps * (ctx.block_s("loader") + winner_block_s(ctx, together) + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        found = self.together(ctx)
        if found is None:
            raise Skip("no DataLoader setting won: there is nothing to put together")
        v, changes = found
        change = together_change(changes, bool(v.changes.get("non_blocking")))
        params: dict[str, Scalar] = {
            **changes,
            "non_blocking": bool(v.changes.get("non_blocking")),
            "loader_settings": ", ".join(changes),
            "against": "your loader",
        }
        out = self.measure_one(ctx, relabelled(v, change), change, "loader", params=params)
        out.params.update(changes)
        loader = ctx.work.loader
        out.what_if.fix = Fix(
            text="The DataLoader settings that won, together: the loader that was measured.",
            snippet_id="whatif.loader_combined",
            code=combined(
                loader,
                loader_changes=changes,
                non_blocking=bool(v.changes.get("non_blocking")),
                device_type=ctx.device.type,
                speedup=f"{out.speedup:.2f}x per step",
                title="The DataLoader winners together",
            ),
            language="python",
        )
        return out


# Experiments that measure other experiments' winners together: report rows, not one more
# winner (their parts make the findings and go into the final run of every winner).
TOGETHER_KEYS = frozenset({LoaderTogether.key})


class DatasetOnDevice(Experiment):
    key = "dataset_on_gpu"
    finding_id = "load.memory_headroom"
    label = "dataset kept on the GPU"
    group = "loader"
    SHARE = 0.5  # of free device memory the dataset may take

    def dataset_bytes(self, ctx: Context) -> int | None:
        b = ctx.work.cached[0] if ctx.work.cached else None
        n = batch_len(b) if b is not None else None
        try:
            total = len(ctx.work.loader.dataset)
        except (TypeError, AttributeError):
            return None
        if not n:
            return None
        return int(batch_nbytes(b) / n * total)

    def applies(self, ctx: Context) -> str | None:
        if not ctx.cuda:
            return "no CUDA device"
        gate = loader_gate(ctx)
        if gate:
            return gate
        size = self.dataset_bytes(ctx)
        if size is None:
            return "the dataset has no length: cannot tell whether it fits on the GPU"
        reason = self.frozen_augmentation(ctx)
        if reason:
            return reason
        free, _ = torch.cuda.mem_get_info(ctx.device)
        if size > self.SHARE * free:
            return (
                f"the dataset ({size / 1e9:.1f} GB) does not fit in half the free GPU memory "
                f"({free / 1e9:.1f} GB)"
            )
        return input_bound_gate(ctx)

    @staticmethod
    def frozen_augmentation(ctx: Context) -> str | None:
        """Why caching would freeze the dataset's items (None: the same index gives the same
        item twice, so a copy kept on the device is what the loader would give)."""
        same = items_deterministic(ctx.work.loader.dataset)
        if same is False:
            return (
                "the dataset gives a different item each time the same index is fetched (random "
                "augmentation): a copy kept on the GPU would freeze the augmentation"
            )
        if same is None:
            return "cannot tell whether the dataset's items are fixed (fetching an item failed)"
        return None

    def cost_s(self, ctx: Context) -> float:
        return ctx.reps * (ctx.block_s("loader") + ctx.block_s("cached") + 0.3)

    def apply(self, ctx: Context) -> Outcome:
        size = self.dataset_bytes(ctx) or 0
        free, _ = torch.cuda.mem_get_info(ctx.device)
        out = self.measure_one(
            ctx,
            planned("dataset on the GPU", source="device"),
            "whole dataset kept on the GPU, batches indexed there (no loading, no copies)",
            against="loader",
            params={"dataset_gb": round(size / 1e9, 2), "free_gb": round(free / 1e9, 1)},
        )
        out.params.update(dataset_gb=round(size / 1e9, 2), free_gb=round(free / 1e9, 1))
        out.notes.append(
            "Keeping the dataset on the GPU keeps its items as they are now: the same index gave "
            "the same item twice (no random augmentation was seen); any added later must run on "
            "the GPU."
        )
        return out
