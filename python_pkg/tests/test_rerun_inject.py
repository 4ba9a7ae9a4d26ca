"""Changes injected into an unmodified script's process (rerun/inject.py), on real CPU torch."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from gpusight.cli import main
from gpusight.rerun.inject import Injected, InjectError, _ModelHooks, check, install
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def _data() -> TensorDataset:
    return TensorDataset(torch.randn(64, 8), torch.randint(0, 3, (64,)))


def test_loader_settings_reach_every_dataloader_and_undo_restores() -> None:
    orig = DataLoader.__init__
    inj = install({"num_workers": 2, "batch_size": 16, "prefetch_factor": 4})
    try:
        a = DataLoader(_data(), batch_size=4)
        b = DataLoader(_data(), 8, True)  # positional batch_size and shuffle
        assert (a.num_workers, a.batch_size, a.prefetch_factor) == (2, 16, 4)
        assert (b.num_workers, b.batch_size) == (2, 16)
        # A batch sampler fixes the batch: left alone, the workers still change.
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.SequentialSampler(range(64)), 5, False
        )
        c = DataLoader(_data(), batch_sampler=sampler)
        assert c.batch_sampler is sampler and c.num_workers == 2
        assert inj.applied["loader"] == 3
    finally:
        inj.undo()
    assert DataLoader.__init__ is orig
    assert DataLoader(_data(), batch_size=4).num_workers == 0


def test_prefetch_without_workers_is_dropped_not_an_error() -> None:
    inj = install({"num_workers": 0, "prefetch_factor": 4, "persistent_workers": True})
    try:
        d = DataLoader(_data(), batch_size=4)
        assert d.num_workers == 0 and not d.persistent_workers
    finally:
        inj.undo()


def test_replicate_grows_the_models_batch_and_cuts_outputs_back() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    seen: list[int] = []
    h = model[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].shape[0]))
    loss_fn = nn.CrossEntropyLoss()
    inj = install({"replicate": 4})
    try:
        x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
        model(x)  # the first call finds the model and runs unchanged (warm-up)
        assert seen == [8]
        out = model(x)
        assert out.shape == (8, 3)  # what the script expects
        loss = loss_fn(out, y)  # the loss module (no parameters) is not the model
        loss.backward()
        assert seen == [8, 32]
        assert model[0].weight.grad is not None
        assert inj.applied["replicate"] == 1
    finally:
        inj.undo()
    assert model(torch.randn(8, 8)).shape == (8, 3) and seen[-1] == 8
    h.remove()


def test_autocast_covers_only_the_models_forward() -> None:
    model = nn.Linear(8, 8)
    inj = install({"autocast": "bfloat16"})
    try:
        assert model(torch.randn(4, 8)).dtype == torch.float32  # the first call: warm-up
        out = model(torch.randn(4, 8))
        assert out.dtype == torch.bfloat16
        assert not torch.is_autocast_enabled("cpu")  # ended with the forward
        with pytest.raises(RuntimeError):

            class Boom(nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.w = nn.Parameter(torch.ones(1))

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    raise RuntimeError("boom")

            # Not the model (another module was called first): runs without autocast.
            Boom()(torch.ones(1))
        assert not torch.is_autocast_enabled("cpu")
    finally:
        inj.undo()


def test_channels_last_and_flags_at_the_first_call() -> None:
    before = (torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision())
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    inj = install({"channels_last": True, "cudnn_benchmark": True, "tf32": True})
    try:
        model(torch.randn(2, 3, 8, 8))
        model(torch.randn(2, 3, 8, 8))
        assert model[0].weight.is_contiguous(memory_format=torch.channels_last)
        assert torch.backends.cudnn.benchmark
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        inj.undo()
        torch.backends.cudnn.benchmark = before[0]
        torch.set_float32_matmul_precision(before[1])
        torch.backends.cuda.matmul.allow_tf32 = False


@pytest.mark.parametrize(
    "changes",
    [
        {"bogus": 1},
        {"num_workers": -1},
        {"batch_size": 0},
        {"autocast": "int8"},
        {"replicate": 1.5},
    ],
)
def test_bad_changes_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(InjectError):
        check(changes)


def test_run_inject_bad_json_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    assert main(["run", "--inject", json.dumps({"bogus": 1}), str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown change" in err[0]
    assert main(["run", "--inject", "{not json", str(script)]) == 2


def test_replicate_makes_host_batches_cost_a_k_times_copy() -> None:
    model = nn.Linear(8, 3)
    orig_to = torch.Tensor.to
    inj = install({"replicate": 4})
    try:
        x = torch.randn(2, 8)
        model(x)
        model(x.to("cpu"))  # the second call: the script's batch (2) is learned
        assert inj.applied.get("replicate_copy") is None  # a host-to-host .to is no copy
        y = x.to("meta")  # a copy to a device: a 4x batch is copied as well
        assert y.shape == (2, 8)
        assert inj.applied["replicate_copy"] == 1
        torch.randn(5, 8).to("meta")  # not the batch: left alone
        assert inj.applied["replicate_copy"] == 1
    finally:
        inj.undo()
    assert torch.Tensor.to is orig_to


def test_changes_reach_keyword_inputs() -> None:
    """Models called as ``model(**batch)`` (a framework's habit): the inputs are keywords."""

    class Output(OrderedDict[str, torch.Tensor]):
        """A framework's model output: a mapping whose constructor takes fields."""

        def __init__(self, logits: torch.Tensor | None = None) -> None:
            super().__init__()
            if logits is not None:
                self["logits"] = logits

    class Keyworded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 3)

        def forward(self, *, input_ids: torch.Tensor, scale: float = 1.0) -> Output:
            return Output(logits=self.lin(input_ids) * scale)

    model = Keyworded()
    seen: list[tuple[int, torch.dtype]] = []
    h = model.lin.register_forward_pre_hook(lambda m, a: seen.append((a[0].shape[0], a[0].dtype)))
    inj = install({"replicate": 4, "autocast": "bfloat16"})
    try:
        model(input_ids=torch.randn(2, 8))
        out = model(input_ids=torch.randn(2, 8), scale=2.0)
        assert isinstance(out, Output) and out["logits"].shape == (2, 3)
        assert seen[-1][0] == 8
        assert inj.applied["replicate"] == 1 and inj.applied["autocast"] == 1
    finally:
        inj.undo()
        h.remove()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a second device: CUDA")
def test_an_optimizer_that_stepped_before_the_model_moved_follows_it() -> None:
    # The model moves at its second call (the first is warm-up), after the optimizer's first
    # step made its state on the host; without the hook its next step mixes devices (found on
    # the H200 with cpu_model: "Expected all tensors to be on the same device").
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))
    inj = install({"to_device": "cuda"})
    try:
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        state = opt.state[model[0].weight]
        assert model[0].weight.device.type == "cuda"
        assert state["exp_avg"].device.type == "cuda"
        assert state["step"].device.type == "cpu"  # torch's rule: Adam's step on the host
        assert inj.applied["optimizer_state_moved"] == 1
        assert inj.applied["outputs_back"] >= 2  # the script's loss is on the host
    finally:
        inj.undo()


def test_an_optimizer_is_left_alone_until_the_model_moved() -> None:
    model = nn.Linear(8, 3)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    inj = Injected({"to_device": "cuda"})
    hooks = _ModelHooks(torch, inj.changes, inj)
    hooks._optimizer_follows(opt, (), {})  # the model has not moved (device None)
    assert not hooks.optimizers_moved and "optimizer_state_moved" not in inj.applied
    assert opt.state[model.weight]["exp_avg"].device.type == "cpu"


def test_the_watch_counts_the_scripts_items_under_a_repeated_batch(tmp_path: Path) -> None:
    # The watch sees each call as the script made it: with the batch repeated 4x, the report
    # still says 8 items a step (the driver scales by the factor once, not twice).
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "from torch import nn\n"
        "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x, y = torch.randn(8, 8), torch.randint(0, 3, (8,))\n"
        "for _ in range(40):\n"
        "    opt.zero_grad()\n"
        "    nn.functional.cross_entropy(model(x), y).backward()\n"
        "    opt.step()\n"
    )
    out = tmp_path / "r.json"
    facts = tmp_path / "facts.json"
    code = main(
        [
            "run",
            "--quiet",
            "--steps",
            "20",
            "--json",
            str(out),
            "--inject",
            json.dumps({"replicate": 4}),
            "--facts",
            str(facts),
            str(script),
        ]
    )
    assert code == 0
    assert json.loads(out.read_text())["run"]["items_per_step"] == 8
    assert json.loads(facts.read_text())["injected"]["replicate"] > 10


def test_an_optimizer_that_stepped_before_channels_last_takes_the_new_layout() -> None:
    # The layout changes at the model's second call, after AdamW's first step made its state in
    # NCHW; left so, its per-parameter kernels mix layouts (conv_nchw_amp's what-if read 1.40x
    # on the H200 against its fix's 1.88x, which builds the optimizer after the change).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(2, 3, 8, 8), torch.randint(0, 2, (2,))
    inj = install({"channels_last": True})
    try:
        for _ in range(3):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        w = model[0].weight
        state = opt.state[w]
        assert w.is_contiguous(memory_format=torch.channels_last)
        for name in ("exp_avg", "exp_avg_sq"):
            assert state[name].stride() == w.stride(), name
        assert inj.applied["optimizer_state_relaid"] == 2  # the conv weight's two moments
        assert "optimizer_state_moved" not in inj.applied  # nothing changed device
    finally:
        inj.undo()


def test_the_global_hooks_come_off_after_the_models_first_call() -> None:
    # On every module of every step they would take torch's slow call path: a launch-bound
    # changed run would pay it and the baseline not, and the gain would read short.
    from torch.nn.modules import module as m

    def global_hooks() -> tuple[int, int]:
        return len(m._global_forward_pre_hooks), len(m._global_forward_hooks)

    before = global_hooks()
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
    calls: list[int] = []
    inner = model[0].register_forward_pre_hook(lambda mod, a: calls.append(1))
    inj = install({"replicate": 2})
    try:
        assert global_hooks() == (before[0] + 1, before[1] + 1)
        model(torch.randn(3, 4))  # finds the model; its first call is warm-up
        assert global_hooks() == before
        for _ in range(3):
            assert model(torch.randn(3, 4)).shape == (3, 4)
        assert inj.applied["replicate"] == 3 and len(calls) == 4
    finally:
        inj.undo()
        inner.remove()
    assert global_hooks() == before and not model._forward_pre_hooks


def test_a_model_that_calls_itself_is_changed_around_its_outermost_call_only() -> None:
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.sizes: list[int] = []

        def forward(self, x: torch.Tensor, inner: bool = False) -> torch.Tensor:
            self.sizes.append(x.shape[0])
            return self.lin(x) if inner else self(self.lin(x), inner=True)

    model = Twice()
    inj = install({"replicate": 3})
    try:
        model(torch.randn(2, 4))
        out = model(torch.randn(2, 4))
        assert out.shape == (2, 4)  # cut back once, at the outermost call
        assert model.sizes == [2, 2, 6, 6] and inj.applied["replicate"] == 1
    finally:
        inj.undo()
