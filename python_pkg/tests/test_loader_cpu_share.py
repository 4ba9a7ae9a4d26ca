"""Whether a loader's work computes or waits, from its own fetches in the main process (the
re-run's unchanged run, ``diagnose``'s baseline), and what both drivers' workers sweep does with
it: past the cores only for loading that waits.

On the H100's 16 cores (run31) tv_transforms_loader's transforms scaled from 8 to 14 workers at
1.315x, just over the 75 %-of-linear rule, so the sweep ran 28 workers: 6.17x against 14's
6.78x, in a run of 22 s of a 180 s budget.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from gpusight.knobs import Situation, by_name
from gpusight.knobs.base import Arm, Group
from gpusight.knobs.loader import beyond_cores
from gpusight.rerun.facts import from_watch
from gpusight.watch.session import Watch
from torch.utils.data import DataLoader, Dataset
from watch_support import small_model


class Loading(Dataset[tuple[torch.Tensor, int]]):
    """Items that take ``ms`` each: computed (a busy loop) or waited for (a sleep)."""

    def __init__(self, ms: float, busy: bool) -> None:
        self.s, self.busy = ms / 1000.0, busy

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.busy:
            end = time.perf_counter() + self.s
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(self.s)
        return torch.randn(32), i % 4


def _facts(busy: bool, workers: int = 0) -> dict[str, Any]:
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Loading(0.5, busy), batch_size=8, num_workers=workers)
    w = Watch(steps=None, warmup=2, profile_steps=0, label="loader cpu")
    with w:
        for x, y in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    return from_watch(w)


def test_the_run_says_whether_its_loading_computes_or_waits() -> None:
    computes = _facts(busy=True)["loader"]["fetch_cpu_pct"]
    waits = _facts(busy=False)["loader"]["fetch_cpu_pct"]
    # A busy machine takes the computing thread off its core now and then (57 % read once with
    # a second test run beside it, 97-100 % alone); the waiting one reads 7-10 %.
    assert computes is not None and waits is not None
    assert computes >= 40.0 and waits <= 25.0 and computes >= 3 * waits
    # With workers the main process only waits for them: no figure.
    assert _facts(busy=True, workers=1)["loader"]["fetch_cpu_pct"] is None


def test_the_sweep_goes_past_the_cores_only_for_loading_that_waits() -> None:
    run31 = [(8, 5.156), (14, 6.781)]  # 1.315x for 1.75x the workers: near linear
    assert beyond_cores(run31, 16) is not None  # nothing known of the loading: the old rule
    assert beyond_cores(run31, 16, fetch_cpu_pct=97.0) is None
    nxt = beyond_cores(run31, 16, fetch_cpu_pct=4.0)
    assert nxt is not None and nxt.changes == {"num_workers": 28}
    # Through the knob, as the re-run's driver asks it, with the unchanged run's facts.
    workers = by_name("workers")
    assert workers is not None
    g = Group("workers", 50.0, [Arm("workers", f"{n}", {"num_workers": n}) for n, _ in run31])
    gains: list[float | None] = [gain for _, gain in run31]

    def situation(pct: float | None) -> Situation:
        return Situation.of({"cpu_count": 16, "loader": {"num_workers": 0, "fetch_cpu_pct": pct}})

    assert workers.extend(g, gains, situation(97.0)) is None
    more = workers.extend(g, gains, situation(4.0))
    # Kept across epochs, as the sweep's other points are (the loader does not keep them).
    assert more is not None and more.changes == {"num_workers": 28, "persistent_workers": True}


def test_the_kernels_sweep_reads_the_same_from_its_own_fetches() -> None:
    """``diagnose``: the user's loader (a clone, no workers) timed as its baseline says the
    same, and the knob's next point follows it as in a re-run."""
    from gpusight.whatif.arms import Workload, planned
    from gpusight.whatif.context import Budget, Context

    workers = by_name("workers")
    assert workers is not None

    def kernel(busy: bool) -> Context:
        loader = DataLoader(Loading(0.5, busy), batch_size=8)
        work = Workload(small_model(), loader, torch.nn.CrossEntropyLoss(), None, None,
                        torch.device("cpu"))  # fmt: skip
        ctx = Context(work, Budget(30.0, None), steps=3, reps=2, cpu_count=16)
        assert ctx.fetch_cpu_pct is None  # nothing fetched yet
        ctx.loader_base = base = ctx.build(planned("", source="loader"))
        base.start_epoch()
        for _ in range(12):
            base.next_batch()
        return ctx

    computes, waits = kernel(busy=True), kernel(busy=False)
    assert computes.fetch_cpu_pct is not None and waits.fetch_cpu_pct is not None
    assert computes.fetch_cpu_pct >= 40.0 and waits.fetch_cpu_pct <= 25.0
    ran = [(Arm("workers", f"{n}", {"num_workers": n}), gain) for n, gain in
           [(8, 5.156), (14, 6.781)]]  # fmt: skip
    assert workers.local_next(computes, ran) is None
    nxt = workers.local_next(waits, ran)
    assert nxt is not None and nxt.changes == {"num_workers": 28}
    for ctx in (computes, waits):
        ctx.close()
