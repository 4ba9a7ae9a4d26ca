"""What every experiment sees: the workload, the clock, the baselines, how to measure a variant."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any

import torch
from torch import nn, optim

from ..knobs import dataloader, owners
from ..knobs.base import Arm as Plan
from ..knobs.loader import Workers, workers_in
from ..knobs.tensors import batch_len
from .arms import Arm, Workload, source_of
from .errors import LoaderError, OutOfMemoryDuringDiagnosis, StepError
from .loaders import is_dataloader, worker_failure
from .restore import read_flags
from .runner import ArmFailure, Comparison, Overrun, compare, run_block

if TYPE_CHECKING:
    from .procedures import Outcome

Progress = Callable[[str, float], None]

# Loading must add at least this share to a step for the loader to count as setting the pace.
LOADER_SHARE = 1.10


class Skip(Exception):
    """An experiment that does not apply, cannot run, or failed: its message is the reason."""


class VariantOOM(Skip):
    """The variant ran out of device memory (memory is freed before this is raised)."""


class Budget:
    """Wall-clock budget for a whole diagnosis, and the progress callback's clock.

    Every run is forecast before it starts and skipped when it does not fit; a block that runs
    past the deadline anyway is stopped between two steps. The call then ends within
    ``seconds + margin_s``: the margin pays for one step in flight, releasing copies and
    restoring the user's state.
    """

    def __init__(self, seconds: float, progress: Progress | None) -> None:
        self.seconds = float(seconds)
        self.start = time.perf_counter()
        # Measuring stops a little early: releasing copies, restoring and the report come after.
        self.deadline = self.start + self.seconds - min(2.0, 0.04 * self.seconds)
        self.margin_s = max(2.0, 0.1 * self.seconds)
        self._progress = progress
        self._fraction = 0.0

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def tell(self, stage: str, fraction: float | None = None) -> None:
        """Report progress: ``fraction`` of the budget used (never goes backwards)."""
        if fraction is None:
            fraction = min(0.99, self.elapsed() / self.seconds) if self.seconds > 0 else 0.99
        self._fraction = max(self._fraction, min(1.0, fraction))
        if self._progress is not None:
            self._progress(stage, self._fraction)


def free_device_memory(device: torch.device) -> None:
    """Return released copies' device memory now (host memory needs no such push)."""
    if device.type == "cuda":
        gc.collect()  # reference cycles (autograd graphs, tracebacks) may still hold tensors
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


# Whole rounds of a loader's workers per timed block: at least MIN_ROUNDS, and more, up to
# MAX_ROUNDS, while the block stays under ROUNDS_BLOCK_S (see Context.steps_for).
MIN_ROUNDS = 2
MAX_ROUNDS = 8
ROUNDS_BLOCK_S = 0.3


@dataclass
class Context:
    work: Workload
    budget: Budget
    steps: int
    reps: int
    cpu_count: int
    cached_base: Arm | None = None
    loader_base: Arm | None = None
    loader_base_ms: list[float] = field(default_factory=list)
    cached_base_ms: list[float] = field(default_factory=list)
    arms: list[Arm] = field(default_factory=list)  # every arm alive, so that close() finds them
    results: dict[str, Outcome] = field(default_factory=dict)  # experiment key -> its Outcome
    notes: list[str] = field(default_factory=list)
    stage: str = ""
    slice_end: float | None = None  # when the running experiment must stop adding repetitions

    # facts ---------------------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return self.work.device

    @property
    def cuda(self) -> bool:
        return self.work.device.type == "cuda"

    @property
    def dataloader(self) -> bool:
        return is_dataloader(self.work.loader)

    @property
    def user_batch(self) -> int | None:
        """The user's batch: the loader's, else the cached batches' length."""
        bs = dataloader.batch_of(self.work.loader)
        if bs is not None:
            return bs
        return batch_len(self.work.cached[0]) if self.work.cached else None

    @property
    def loader_bound(self) -> bool:
        """Measured: steps with the user's loader are more than LOADER_SHARE slower than the
        same steps on cached batches (the loader, not compute, sets the pace)."""
        if not self.loader_base_ms or not self.cached_base_ms:
            return False
        return median(self.loader_base_ms) >= LOADER_SHARE * median(self.cached_base_ms)

    def end_to_end_bound(self, compute_speedup: float) -> float:
        """The most a compute-only gain can give the whole step while loading stays as it is.

        Per sample: loading (the loader's step minus the cached step) plus compute, which the
        change makes ``compute_speedup`` times faster (Amdahl, loading and compute in series as
        in a loader without workers; with workers overlapping them it is lower still).
        """
        if not self.loader_base_ms or not self.cached_base_ms or compute_speedup <= 0:
            return compute_speedup
        lo = median(self.loader_base_ms)
        ca = min(median(self.cached_base_ms), lo)
        after = (lo - ca) + ca / compute_speedup
        return lo / after if after > 0 else compute_speedup

    def has_module(self, *types: type[nn.Module]) -> bool:
        return any(isinstance(m, types) for m in self.work.model.modules())

    # what a knob reads (``knobs.base.Local``) --------------------------------------------------

    @property
    def torch(self) -> Any:
        return torch

    @property
    def model(self) -> nn.Module:
        return self.work.model

    @property
    def step_fn(self) -> Any:
        return self.work.step_fn

    @property
    def optimizer(self) -> optim.Optimizer | None:
        return self.work.optimizer

    @property
    def half_model(self) -> bool:
        params = list(self.work.model.parameters())
        return bool(params) and all(p.dtype in (torch.float16, torch.bfloat16) for p in params)

    @property
    def flags(self) -> dict[str, Any]:
        return read_flags()

    def seconds_left(self) -> float:
        return self.budget.left()

    @property
    def loader(self) -> Any:
        return self.work.loader

    @property
    def batches(self) -> list[Any]:
        return self.work.cached

    @property
    def fetch_cpu_pct(self) -> float | None:
        """The user's loader's fetches in this thread (no workers): how busy they kept it."""
        return self.loader_base.fetch_cpu_pct() if self.loader_base is not None else None

    def loader_workers(self) -> int:
        """The workers the loader's other settings are measured on: the sweep's (its
        ``stack_on``) where it won, else the user's."""
        won = self.results.get(Workers.SWEEP.key)
        if won is not None and won.winner is not None:
            w = workers_in((won.stack_on or won.winner).changes)
            if w is not None:
                return w
        return dataloader.workers(self.work.loader)

    def block_s(self, source: str) -> float:
        """Seconds one baseline block takes (warm-up included), from what was measured."""
        ms = (
            self.loader_base_ms
            if source == "loader" and self.loader_base_ms
            else self.cached_base_ms
        )
        per_step = min(ms) / 1000.0 if ms else 0.05
        return per_step * (self.steps + 2)

    def stop_at(self, per_pair: float) -> float:
        """When a block of a run forecast at ``per_pair`` seconds a pair must stop: at the
        budget's deadline, and within the running experiment's share plus one more pair."""
        end = self.budget.deadline
        if self.slice_end is not None:
            end = min(end, self.slice_end + per_pair)
        return end

    def affordable(self, seconds: float, reserve: float = 0.0) -> bool:
        """Would ``seconds`` more fit in the budget (and in the running experiment's share)?"""
        fits_slice = (
            self.slice_end is None or time.perf_counter() + seconds + reserve <= self.slice_end
        )
        return fits_slice and self.budget.left() - reserve >= seconds

    # arms ----------------------------------------------------------------------------------------

    def build(self, variant: Plan) -> Arm:
        try:
            arm = Arm(self.work, variant)
        except Exception as exc:
            from .runner import is_oom

            free_device_memory(self.device)
            if is_oom(exc):
                raise VariantOOM(f"out of device memory preparing {variant.label}") from exc
            raise Skip(f"could not set up {variant.label}: {type(exc).__name__}: {exc}") from exc
        self.arms.append(arm)
        return arm

    def drop(self, arm: Arm | None) -> None:
        if arm is None:
            return
        arm.close()
        if arm in self.arms:
            self.arms.remove(arm)
        free_device_memory(self.device)

    def close(self) -> None:
        for arm in list(self.arms):
            arm.close()
        self.arms.clear()
        self.cached_base = self.loader_base = None
        self.work.cached = []
        free_device_memory(self.device)

    def workers(self, variant: Plan) -> int:
        if source_of(variant) != "loader":
            return 0
        w = workers_in(variant.changes)
        return dataloader.workers(self.work.loader) if w is None else w

    def warmup(self, variant: Plan) -> int:
        if source_of(variant) == "loader":
            # The first round of batches arrives together once the workers are up; skip it.
            return max(2, self.workers(variant) + 1)
        return 1 + max((k.local_warmup for k in owners(variant.changes)), default=0)

    def steps_for(self, variant: Plan) -> int:
        """Timed steps of a block: whole rounds of the workers when a loader with workers runs.

        Workers that take equally long per batch deliver in rounds (``w`` batches together, then
        a wait); a block that is not a whole number of rounds would catch a burst or a gap. Even
        a whole number of rounds starts anywhere in a round, an error of up to one round in the
        block's time: so a block takes more rounds (up to ``MAX_ROUNDS``) while they are cheap,
        i.e. while the block stays under ``ROUNDS_BLOCK_S`` at the step time the num_workers
        sweep measured. (16 workers at 2.2 ms a step: 2 rounds were 70 ms, and the speedup of
        the loader's winners moved by 15-20 % from run to run.)
        """
        w = self.workers(variant)
        if w <= 1:
            return self.steps
        rounds = max(MIN_ROUNDS, -(-self.steps // w))
        ms = self.loader_step_ms(w)
        if ms:
            rounds = max(rounds, min(MAX_ROUNDS, int(ROUNDS_BLOCK_S * 1000 / (ms * w))))
        return rounds * w

    def loader_step_ms(self, workers: int) -> float | None:
        """The step time the num_workers sweep measured at ``workers`` workers, if it did."""
        won = self.results.get(Workers.SWEEP.key)
        if won is None or won.winner is None or workers_in(won.winner.changes) != workers:
            return None
        after = won.what_if.after_ms
        return float(after) if after else None

    def base_for(self, source: str) -> Arm:
        arm = self.loader_base if source == "loader" else self.cached_base
        assert arm is not None
        return arm

    def baseline_block(self, source: str, steps: int | None = None) -> float:
        """One block of a baseline; failures are the user's (the baseline is their own code).

        With ``steps`` (a probe) the block is not counted among the baseline's repetitions.
        """
        arm = self.base_for(source)
        try:
            ms = run_block(
                arm, steps or self.steps_for(arm.plan), self.warmup(arm.plan)
            ).ms_per_step
        except ArmFailure as exc:
            raise self.user_error(exc, arm.plan.label) from exc.cause
        if steps is None:
            (self.loader_base_ms if source == "loader" else self.cached_base_ms).append(ms)
        return ms

    # measuring -----------------------------------------------------------------------------------

    def measure(
        self,
        variant: Plan,
        *,
        against: str,
        base: Arm | None = None,
        scale: float = 1.0,
        reps: int | None = None,
        reserve: float = 0.0,
        steps: tuple[int, int] | None = None,
        pair_s: float | None = None,
    ) -> tuple[Comparison, Arm]:
        """Interleave ``variant`` with the baseline; the arm is returned still open (drop it).

        ``steps`` (baseline, variant) overrides the timed steps per block: a sweep's short
        trials; ``pair_s`` is then what one baseline + variant pair is expected to cost.
        """
        base = base or self.base_for(against)
        arm = self.build(variant)
        per_pair = (
            pair_s
            if pair_s is not None
            else self.block_s(against) + self.block_s(source_of(variant)) * scale
        )
        block_steps = steps or (self.steps_for(base.plan), self.steps_for(variant))

        def fits() -> bool:
            return self.affordable(per_pair, reserve)

        try:
            cmp = compare(
                base,
                arm,
                reps=reps or self.reps,
                steps=block_steps,
                warmup=(self.warmup(base.plan), self.warmup(variant)),
                scale=scale,
                fits=fits,
                on_block=lambda: self.budget.tell(self.stage),
                stop_at=self.stop_at(per_pair),
            )
        except Overrun as exc:
            self.drop(arm)
            raise Skip(
                f"budget exhausted: {variant.label} ran past its forecast of about "
                f"{per_pair:.1f} s a pair and was stopped ({exc}; raise budget_s)"
            ) from exc
        except ArmFailure as exc:
            self.drop(arm)
            if not exc.in_variant:
                raise self.user_error(exc, base.plan.label) from exc.cause
            raise self.variant_error(exc, variant) from exc.cause
        except BaseException:
            self.drop(arm)
            raise
        if base is self.loader_base:
            self.loader_base_ms += cmp.base_ms
        elif base is self.cached_base:
            self.cached_base_ms += cmp.base_ms
        return cmp, arm

    def user_error(self, exc: ArmFailure, label: str) -> Exception:
        cause = exc.cause
        what = f"{type(cause).__name__}: {cause}"
        where = f"while gpusight ran {label!r}"
        if exc.kind == "loader":
            return LoaderError(
                f"your DataLoader raised at batch {exc.index} of an epoch (counting from 0) "
                f"{where}: {what}. Iterate the loader by hand to reproduce (the original "
                f"exception is chained below); your model, optimizer, RNG and torch flags are "
                f"as they were.",
                experiment=label,
                batch_index=exc.index,
            )
        if exc.kind == "oom":
            return OutOfMemoryDuringDiagnosis(
                f"out of device memory {where} (step {exc.index}): gpusight runs a copy of your "
                f"model and optimizer beside yours, so it needs room for one more copy; free "
                f"memory (del unused tensors, torch.cuda.empty_cache()) or diagnose a smaller "
                f"batch. {what}"
            )
        return StepError(
            f"your training step raised at step {exc.index} {where}: {what}. Nothing was "
            f"changed yet (this is the unchanged baseline), so the step itself fails: run one "
            f"step by hand to reproduce.",
            experiment=label,
            step=exc.index,
        )

    def variant_error(self, exc: ArmFailure, variant: Plan) -> Exception:
        cause = exc.cause
        what = f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}"
        if exc.kind == "oom":
            return VariantOOM(f"out of device memory with {variant.label}")
        if exc.kind == "loader" and not worker_failure(cause):
            # The dataset's own error: the user's loader would hit it too.
            return self.user_error(exc, variant.label)
        return Skip(f"{variant.label} fails with your code: {what}")
