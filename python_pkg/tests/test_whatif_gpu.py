"""diagnose() on a real GPU: device memory back where it was, CUDA RNG and flags untouched, and the
GPU-only experiments actually run. Skipped without CUDA (run by benchmarks/gpu_whatif.py's
companion command on the H200)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from gpusight.whatif import OutOfMemoryDuringDiagnosis, diagnose
from gpusight.whatif.findings import SCOPE_TEXT
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from whatif_support import SmallConvNet, world

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

MB = 1 << 20


@pytest.fixture
def setup() -> Iterator[tuple[nn.Module, torch.optim.Optimizer, DataLoader[Any], nn.Module]]:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    data = TensorDataset(torch.randn(512, 3, 8, 8), torch.randint(0, 10, (512,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = SmallConvNet().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = next(iter(loader))
    loss_fn(model(x.to(dev)), y.to(dev)).backward()
    opt.step()
    yield model, opt, loader, loss_fn
    del model, opt
    gc.collect()
    torch.cuda.empty_cache()


def test_device_memory_returns_and_the_world_is_bit_identical(setup: Any) -> None:
    model, opt, loader, loss_fn = setup
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    before = world(model, opt)  # includes every CUDA generator's state
    report = diagnose(model, loader, loss_fn=loss_fn, optimizer=opt, steps=5, budget_s=15)
    torch.cuda.synchronize()
    assert abs(torch.cuda.memory_allocated() - allocated) <= 1 * MB
    assert world(model, opt) == before
    ran = {w.change for w in report.what_if if w.skipped is None}
    assert any("autocast" in c for c in ran), [(w.change, w.skipped) for w in report.what_if]
    for f in report.findings:
        # Measured end to end, or (where the tiny model's step waits on this host's loader)
        # measured on cached batches with the whole step's gain bounded and said to be so.
        covered = {e.label: e.value for e in f.evidence}.get("what the timing covered")
        if f.impact.basis != "measured":
            assert f.impact.basis == "estimated" and covered == SCOPE_TEXT["compute_only"], f
            assert "at most" in f.impact.text and f.impact.speedup is not None
        assert f.fix.code
        compile(f.fix.code, f.id, "exec")


def test_a_real_oom_in_the_batch_sweep_frees_memory_and_stops(setup: Any) -> None:
    # Batches up to 64 take no extra memory, so the sweep's memory forecast (the growth from
    # the last point, doubled) lets it go on; a larger batch asks for more than the GPU has: a
    # real OOM, not a forecast.
    model, opt, loader, loss_fn = setup
    free, _ = torch.cuda.mem_get_info()

    def step_fn(m: nn.Module, batch: Any, o: torch.optim.Optimizer | None) -> None:
        x, y = batch
        size = int(free * 1.5) if x.shape[0] > 64 else 1
        ballast = torch.empty(size, dtype=torch.uint8, device=x.device)
        loss = loss_fn(m(x), y) + ballast[:1].float().sum() * 0
        assert o is not None
        o.zero_grad()
        loss.backward()
        o.step()

    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    before = world(model, opt)
    try:
        report = diagnose(
            model,
            loader,
            optimizer=opt,
            step_fn=step_fn,
            steps=3,
            budget_s=20,
            experiments=["batch_size"],
        )
    except OutOfMemoryDuringDiagnosis:  # pragma: no cover - a GPU too busy for even batch 32
        pytest.skip("the baseline itself did not fit")
    row = report.what_if[0]
    assert row.series is not None
    oom = [p["x"] for p in row.series if p.get("label") == "out of memory"]
    assert len(oom) == 1 and oom[0] > 64, row.series
    torch.cuda.synchronize()
    assert abs(torch.cuda.memory_allocated() - allocated) <= 1 * MB
    assert world(model, opt) == before
