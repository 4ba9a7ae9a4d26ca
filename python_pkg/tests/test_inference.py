"""``gpusight.diagnose_inference`` on small CPU models: latency/throughput rows, findings,
what-ifs skipped on the CPU with a reason, and the user's model and world left as found."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import gpusight
import pytest
import torch
from gpusight.fixes import SNIPPETS, render
from gpusight.report_schema import validate
from gpusight.whatif.errors import DiagnoseError
from gpusight.whatif.inference import batch_size_of, diagnose_inference, make_batch
from gpusight.whatif.restore import read_flags
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).eval()


class FixedCost(nn.Module):
    """A forward whose cost hardly depends on the batch (like launch-bound GPU inference)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.003)
        return self.fc(x)


def test_latency_throughput_rows_and_grad_enabled() -> None:
    model = mlp()
    report = diagnose_inference(model, torch.randn(2, 32), budget_s=2.0, batch_sizes=[1, 8])
    data = report.to_dict()
    validate(data)
    assert data["kind"] == "inference" and data["run"]["step_time_ms"] > 0
    rows = {b["id"]: b for b in data["benchmarks"]}
    assert set(rows) == {"infer.latency_p50", "infer.latency_p99", "infer.throughput"}
    p50 = {p["x"]: p["y"] for p in rows["infer.latency_p50"]["series"]}
    p99 = {p["x"]: p["y"] for p in rows["infer.latency_p99"]["series"]}
    thr = {p["x"]: p["y"] for p in rows["infer.throughput"]["series"]}
    assert set(p50) == {1, 2, 8}  # the sweep, plus the example's own batch
    for b in p50:
        assert p99[b] >= p50[b] > 0
        assert thr[b] == pytest.approx(1000 * b / p50[b], rel=1e-3)
    assert rows["infer.throughput"]["params"]["batch"] == 2
    # Called with grad enabled (pytest's default): the finding, measured by the what-if.
    f = report.finding("infer.grad_enabled")
    assert f is not None and f.impact.basis == "measured" and f.impact.speedup is not None
    assert f.fix.snippet_id == "infer.inference_mode"
    whatifs = {w.change: w for w in report.what_if}
    im = whatifs["torch.inference_mode()"]
    assert (
        im.before_ms
        and im.after_ms
        and im.speedup == pytest.approx(im.before_ms / im.after_ms, rel=0.01)
    )
    assert im.finding_id == "infer.grad_enabled"
    for gpu_only in ("bf16 autocast", "CUDA graph replay"):
        assert whatifs[gpu_only].speedup is None
        assert "GPU only" in (whatifs[gpu_only].skipped or "")


def test_no_grad_call_path_has_no_grad_finding() -> None:
    model = mlp()
    with torch.no_grad():
        report = diagnose_inference(model, torch.randn(4, 32), budget_s=1.0, batch_sizes=[4])
    assert report.finding("infer.grad_enabled") is None
    assert torch.is_grad_enabled()  # the caller's own no_grad block ended as usual
    explicit = diagnose_inference(
        model, torch.randn(4, 32), budget_s=1.0, batch_sizes=[4], grad_enabled=False
    )
    assert explicit.finding("infer.grad_enabled") is None


def test_one_request_at_a_time_is_unbatched() -> None:
    report = diagnose_inference(FixedCost(), torch.randn(1, 8), budget_s=3.0, batch_sizes=[1, 16])
    f = report.finding("infer.unbatched")
    assert f is not None and f.impact.basis == "measured"
    assert f.impact.speedup is not None and f.impact.speedup > 4  # ~16x: the cost is per call
    assert f.fix.snippet_id == "infer.dynamic_batching" and "class MicroBatcher" in (
        f.fix.code or ""
    )
    sweep = next(w for w in report.what_if if w.finding_id == "infer.unbatched")
    assert sweep.series is not None and [p["x"] for p in sweep.series] == [1, 16]
    assert report.verdict.bottleneck == "launch_overhead"


def test_state_is_restored() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(
        nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Dropout(0.2), nn.Linear(32, 2)
    ).train()  # training mode: every forward moves the batch-norm statistics and draws dropout
    example = torch.randn(4, 16)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    flags = read_flags()
    rng = torch.get_rng_state()
    py = random.getstate()
    report = diagnose_inference(model, example, budget_s=1.5, batch_sizes=[2, 4])
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert model.training and all(m.training for m in model.modules())
    assert read_flags() == flags
    assert torch.equal(torch.get_rng_state(), rng) and random.getstate() == py
    assert any("model buffers" in n for n in report.notes)
    assert any("training mode" in n for n in report.notes)


class Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.rand(1)  # consumes RNG before failing
        raise RuntimeError("shape mismatch in my model")


def test_a_raising_model_says_why_and_leaves_rng_alone() -> None:
    model, example = Broken(), torch.randn(2, 4)
    rng = torch.get_rng_state()
    with pytest.raises(DiagnoseError, match="shape mismatch in my model"):
        diagnose_inference(model, example, budget_s=1.0)
    assert torch.equal(torch.get_rng_state(), rng)


def test_inputs_as_tuple_and_dict() -> None:
    class TwoArgs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor, scale: float = 1.0, mask: Any = None) -> torch.Tensor:
            out = self.fc(x) * scale
            return out if mask is None else out * mask

    x, mask = torch.randn(3, 8), torch.ones(3, 1)
    for example in ((x, 2.0), {"x": x, "mask": mask}):
        report = diagnose_inference(TwoArgs(), example, budget_s=0.8, batch_sizes=[1, 3])
        validate(report.to_dict())
    grown = make_batch({"x": x, "mask": mask, "scale": 2.0}, 5)
    assert grown["x"].shape == (5, 8) and grown["mask"].shape == (5, 1) and grown["scale"] == 2.0
    assert torch.equal(grown["x"][3], x[0])  # rows cycle through the example's own
    assert batch_size_of((x, 2.0)) == 3


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        diagnose_inference(lambda x: x, torch.randn(2, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="batch dimension"):
        diagnose_inference(mlp(), {"n": 3})
    with pytest.raises(ValueError, match="batch sizes"):
        diagnose_inference(mlp(), torch.randn(2, 32), batch_sizes=[0, 2])
    with pytest.raises(ValueError, match="budget_s"):
        diagnose_inference(mlp(), torch.randn(2, 32), budget_s=0)


def test_exported_lazily_from_the_package() -> None:
    assert "diagnose_inference" in gpusight.__all__
    report = gpusight.diagnose_inference(mlp(), torch.randn(1, 32), budget_s=0.5, batch_sizes=[1])
    assert report.kind == "inference"


def test_dynamic_batching_snippet_serves_requests() -> None:
    """The micro-batcher handed out with infer.unbatched runs as written."""
    code = render("infer.dynamic_batching", **SNIPPETS["infer.dynamic_batching"].example)
    scope: dict[str, Any] = {}
    exec(compile(code, "snippet", "exec"), scope)
    model = mlp()
    calls: list[int] = []
    model.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[0]))
    xs = [torch.randn(32) for _ in range(12)]

    async def serve() -> list[torch.Tensor]:
        batcher = scope["MicroBatcher"](model, max_batch=8, max_wait_s=0.05)
        task = asyncio.create_task(batcher.run())
        try:
            return list(await asyncio.gather(*(batcher.infer(x) for x in xs)))
        finally:
            task.cancel()

    ys = asyncio.run(serve())
    served = list(calls)  # forwards the batcher made: 12 requests in a few batches of <= 8
    assert sum(served) == 12 and len(served) < 12 and max(served) <= 8
    with torch.no_grad():
        want = model(torch.stack(xs))
    assert all(torch.allclose(y, w, atol=1e-5) for y, w in zip(ys, want, strict=True))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_what_ifs_are_measured_and_memory_comes_back() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).cuda().eval()
    x = torch.randn(1, 256, device="cuda")
    # torch keeps a cuBLAS workspace per stream that ran a product (the graph's capture stream
    # gets one): diagnose_inference releases them all at its end, so start from none.
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    report = diagnose_inference(model, x, budget_s=6.0, batch_sizes=[1, 8, 64])
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
    rows = {w.change: w for w in report.what_if}
    for change in ("bf16 autocast", "CUDA graph replay"):
        assert rows[change].skipped is None and rows[change].speedup, rows[change].skipped
    validate(report.to_dict())


def test_the_forwards_changes_are_made_by_the_knobs_own_before() -> None:
    """diagnose_inference times a change as the knobs make it (``Knob.before``, as a re-run
    does), around each call of the user's own model, which gets no hook; a graph capture turns
    autocast's cast cache off; the switches end with the call, also when it raises."""
    from gpusight.whatif.inference import GRAD_MODE, INFER
    from gpusight.whatif.knob_hooks import KnobHooks

    assert [k.name for k in INFER] == ["grad_mode", "autocast"]
    model = mlp()
    seen: list[tuple[bool, bool, bool]] = []
    model.register_forward_pre_hook(
        lambda m, a: seen.append(
            (
                torch.is_inference_mode_enabled(),
                torch.is_autocast_enabled("cpu"),
                torch.is_autocast_cache_enabled(),
            )
        )
    )
    hooks = KnobHooks({"inference_mode": True, "autocast": "bfloat16"})
    hooks.capturing = True
    out = hooks.call(model, (torch.randn(4, 32),), {})
    assert out.dtype == torch.bfloat16 and out.is_inference()
    assert seen == [(True, True, False)]
    assert len(model._forward_pre_hooks) == 1  # the test's own: the change added none
    with pytest.raises(RuntimeError):
        hooks.call(model, (torch.randn(4, 3),), {})  # wrong width: the forward raises
    assert not torch.is_inference_mode_enabled() and not torch.is_autocast_enabled("cpu")
    report = diagnose_inference(mlp(), torch.randn(8, 32), budget_s=1.0, batch_sizes=[8])
    assert report.what_if[0].change == GRAD_MODE.infer_label
