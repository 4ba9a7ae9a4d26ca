"""The in-process driver's compute changes are the knobs' own: the arm, its gates and its finding
live in ``knobs/<name>.py`` and ``whatif/procedures.OnCached`` only times them (issue #51)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from gpusight.knobs import REGISTRY, by_name
from gpusight.knobs.base import Arm, Knob
from gpusight.whatif import diagnose
from gpusight.whatif.arms import Workload
from gpusight.whatif.context import Budget, Context
from gpusight.whatif.plan import ALL
from gpusight.whatif.procedures import OnCached
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(1))


def _ctx(model: nn.Module, budget_s: float = 30.0) -> Context:
    work = Workload(model, [], nn.CrossEntropyLoss(), None, None, torch.device("cpu"))
    return Context(work, Budget(budget_s, None), steps=3, reps=2, cpu_count=2)


def _knob(name: str) -> Knob:
    knob = by_name(name)
    assert knob is not None
    return knob


def test_every_knob_with_an_in_process_arm_is_measured_by_diagnose_under_its_own_names() -> None:
    timed = {e.key: e for e in ALL if isinstance(e, OnCached)}
    local = [k for k in REGISTRY if k.local_finding]
    assert sorted(timed) == sorted(k.name for k in local)
    assert {"autocast", "channels_last", "tf32", "cudnn_benchmark", "compile"} <= set(timed)
    for knob in local:
        exp = timed[knob.name]
        assert (exp.label, exp.finding_id) == (knob.local_label, knob.local_finding)
    # The one that pays a fixed start-up (compiling) is measured last.
    order = [e.key for e in ALL]
    assert order.index("compile") > order.index("channels_last")


def test_on_this_cpu_each_gpu_only_knob_says_why_and_channels_last_plans_its_arm() -> None:
    conv, mlp = _ctx(ConvNet()), _ctx(nn.Sequential(nn.Linear(8, 8)))
    for name in ("autocast", "tf32", "cudnn_benchmark"):
        why = _knob(name).local_arm(conv)
        assert isinstance(why, str) and why.startswith("no CUDA device"), (name, why)
    arm = _knob("channels_last").local_arm(conv)
    assert isinstance(arm, Arm) and arm.changes == {"channels_last": True}
    assert arm.finding_id == "load.channels_last"
    assert _knob("channels_last").local_arm(mlp) == "the model has no 2-d convolutions"


def test_compile_says_when_the_budget_cannot_pay_for_compiling_or_the_model_is_compiled() -> None:
    knob = _knob("compile")
    why = knob.local_arm(_ctx(ConvNet(), budget_s=5.0))
    assert isinstance(why, str) and why.startswith("budget exhausted: torch.compile usually needs")
    compiled = torch.compile(ConvNet())  # not compiled until called: cheap
    assert knob.local_arm(_ctx(compiled, budget_s=600.0)) == "the model is already compiled"


class GpuFacts:
    """What a CUDA machine would tell the knobs (this machine has no GPU): ``knobs.base.Local``."""

    def __init__(self, *, bf16: bool = True, capability: int = 9, **flags: Any) -> None:
        cuda = SimpleNamespace(
            is_bf16_supported=lambda: bf16, get_device_capability=lambda _d=None: (capability, 0)
        )
        cudnn = SimpleNamespace(is_available=lambda: True)
        self.torch = SimpleNamespace(
            cuda=cuda, nn=nn, backends=SimpleNamespace(cudnn=cudnn), compile=torch.compile
        )
        self.cuda, self.device = True, "cuda:0"
        self.model: nn.Module = ConvNet()
        self.step_fn: Any = None
        self.optimizer: Any = None
        self.half_model = False
        self.flags = {"float32_matmul_precision": "highest", "cudnn.allow_tf32": True, **flags}

    def has_module(self, *types: Any) -> bool:
        return any(isinstance(m, types) for m in self.model.modules())

    def affordable(self, seconds: float, reserve: float = 0.0) -> bool:
        return True

    def seconds_left(self) -> float:
        return 600.0


def test_on_a_gpu_the_knobs_choose_their_arm_from_the_machine_and_the_users_settings() -> None:
    autocast, tf32, cudnn = _knob("autocast"), _knob("tf32"), _knob("cudnn_benchmark")
    bf16 = autocast.local_arm(GpuFacts())
    assert isinstance(bf16, Arm) and bf16.changes == {"autocast": "bfloat16"}
    assert autocast.local_params(bf16, GpuFacts()) == {"dtype": "bfloat16"}
    fp16 = autocast.local_arm(GpuFacts(bf16=False))
    assert isinstance(fp16, Arm) and fp16.label.endswith("with a GradScaler")
    own_step = GpuFacts(bf16=False)
    own_step.step_fn, own_step.optimizer = object(), object()
    assert "GradScaler inside your step_fn" in str(autocast.local_arm(own_step))
    half = GpuFacts()
    half.half_model = True
    assert autocast.local_arm(half) == "the model's weights are already half precision"

    assert isinstance(tf32.local_arm(GpuFacts()), Arm)
    assert "compute capability 8.0" in str(tf32.local_arm(GpuFacts(capability=7)))
    on = GpuFacts(float32_matmul_precision="high")
    assert tf32.local_arm(on) == "TF32 is already on for matmuls and cudnn"

    assert isinstance(cudnn.local_arm(GpuFacts()), Arm)
    assert cudnn.local_arm(GpuFacts(**{"cudnn.benchmark": True})) == (
        "cudnn.benchmark is already on"
    )
    mlp = GpuFacts()
    mlp.model = nn.Sequential(nn.Linear(4, 4))
    assert "no convolutions or RNNs" in str(cudnn.local_arm(mlp))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_diagnose_measures_the_knobs_arm_and_reports_it_under_the_knobs_label() -> None:
    data = TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,)))
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    report = diagnose(
        model,
        DataLoader(data, batch_size=16),
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=opt,
        steps=3,
        budget_s=8,
        experiments=["channels_last", "tf32"],
    )
    rows = {w.finding_id: w for w in report.what_if}
    knob = _knob("channels_last")
    arm = knob.local_arm(_ctx(ConvNet()))
    assert isinstance(arm, Arm)
    measured = rows[knob.local_finding]
    assert measured.change == arm.label and measured.skipped is None and measured.speedup
    skipped = rows[_knob("tf32").local_finding]
    assert (skipped.change, skipped.skipped) == ("TF32 matmuls and convolutions", "no CUDA device")


def test_the_kernels_channels_last_arm_is_the_knobs_own_prepare_and_call_hooks() -> None:
    from gpusight.whatif.arms import Arm as Copies

    model = ConvNet()
    data = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))]
    work = Workload(model, data, nn.CrossEntropyLoss(), None, None, torch.device("cpu"))
    work.cached = list(data)
    knob = _knob("channels_last")
    assert knob.local_hooks
    plan = knob.local_arm(_ctx(model))
    assert isinstance(plan, Arm)
    seen: list[bool] = []
    arm = Copies(work, plan)
    arm.model.conv.register_forward_pre_hook(
        lambda _m, a: seen.append(a[0].is_contiguous(memory_format=torch.channels_last))
    )
    try:
        arm.step(arm.next_batch())
        # The copy relaid by the knob's prepare, its input by the knob's before, as a re-run's.
        assert arm.model.conv.weight.is_contiguous(memory_format=torch.channels_last)
        assert seen == [True] and arm.hooks.hits["channels_last"] == 1
    finally:
        arm.close()
    assert not model.conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert model._forward_pre_hooks == {} and model._forward_hooks == {}
