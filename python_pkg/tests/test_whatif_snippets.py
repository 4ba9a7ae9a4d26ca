"""Every fix snippet is valid Python; those that run on a CPU run, on a small real conv net, and do
what they say. Global flags a snippet sets (TF32, cudnn.benchmark) are put back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from gpusight.whatif.restore import Snapshot
from gpusight.whatif.snippets import CATALOGUE, combined, loader_args, render
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from whatif_support import SmallConvNet, flags_state


@pytest.fixture
def namespace() -> Iterator[dict[str, Any]]:
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,)))
    model = SmallConvNet()
    ns: dict[str, Any] = {
        "torch": torch,
        "dataset": dataset,
        "loader": DataLoader(dataset, batch_size=8, shuffle=True),
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "loss_fn": nn.CrossEntropyLoss(),
        "device": torch.device("cpu"),
        "num_epochs": 1,
    }
    flags = flags_state()
    snap = Snapshot.capture(nn.Linear(1, 1))
    yield ns
    snap.restore()  # a snippet may set global flags: the test leaves them as found
    assert flags_state() == flags


def test_every_template_compiles_filled_with_its_example() -> None:
    for sid, snip in CATALOGUE.items():
        code = snip.fill(device_type="cpu")
        compile(code, sid, "exec")
        assert code.startswith("#"), f"{sid} should say what was measured first"
        assert sid.startswith("whatif.") and snip.finding_id.split(".")[0] in (
            "load",
            "cfg",
            "code",
        )


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
@pytest.mark.parametrize("sid", sorted(s for s, v in CATALOGUE.items() if v.cpu_runnable))
def test_every_cpu_runnable_template_executes(sid: str, namespace: dict[str, Any]) -> None:
    snip = CATALOGUE[sid]
    assert set(snip.needs) <= set(namespace)
    before = [p.detach().clone() for p in namespace["model"].parameters()]
    exec(compile(snip.fill(device_type="cpu"), sid, "exec"), namespace)
    model = namespace["model"]
    if "optimizer.step()" in snip.template or "scaler.step" in snip.template:
        after = list(model.parameters())
        assert any(not torch.equal(a, b) for a, b in zip(after, before, strict=True)), (
            f"{sid} should train the model"
        )
    if sid == "whatif.channels_last":
        assert model.conv.weight.is_contiguous(memory_format=torch.channels_last)
    if sid == "whatif.tf32":
        assert torch.get_float32_matmul_precision() == "high"
    if sid == "whatif.cudnn_benchmark":
        assert torch.backends.cudnn.benchmark is True
    if sid == "whatif.batch_size":
        assert namespace["loader"].batch_size == 16
        assert namespace["optimizer"].param_groups[0]["lr"] == pytest.approx(0.2)


def test_loader_snippets_carry_the_users_settings_and_the_winners() -> None:
    data = TensorDataset(torch.randn(16, 4), torch.zeros(16))
    dl = DataLoader(data, batch_size=4, shuffle=True, drop_last=True, collate_fn=lambda b: b)
    args = loader_args(dl, {"num_workers": 6, "pin_memory": True, "persistent_workers": True})
    assert args == (
        "dataset, batch_size=4, shuffle=True, drop_last=True, num_workers=6, pin_memory=True, "
        "persistent_workers=True"
    )
    code = render("whatif.num_workers", loader=dl, loader_args=args, speedup="2.00x", what="sweep")
    assert code.startswith("# Keep your other DataLoader arguments as they are: collate_fn.")
    compile(code, "<fix>", "exec")


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
@pytest.mark.parametrize(
    "options",
    [
        {
            "loader_changes": {"num_workers": 2, "batch_size": 16},
            "non_blocking": True,
            "autocast": "bfloat16",
            "channels_last": True,
            "tf32": True,
            "cudnn_benchmark": True,
            "lr_factor": 2,
        },
        {"loader_changes": {"pin_memory": True}, "autocast": "float16"},
        {"dataset_on_gpu": True, "channels_last": True, "autocast": "bfloat16"},
    ],
    ids=["everything", "fp16-scaler", "dataset-on-device"],
)
def test_the_combined_snippet_runs(options: dict[str, Any], namespace: dict[str, Any]) -> None:
    code = combined(namespace["loader"], device_type="cpu", speedup="1.50x end to end", **options)
    before = namespace["model"].head.weight.detach().clone()
    exec(compile(code, "<combined>", "exec"), namespace)
    assert not torch.equal(namespace["model"].head.weight, before)
    if options.get("loader_changes", {}).get("num_workers"):
        assert namespace["loader"].num_workers == 2 and namespace["loader"].batch_size == 16


def test_the_compile_snippet_compiles() -> None:
    # Executing it means minutes of compiling on a small CPU: the GPU script measures it instead.
    code = render("whatif.compile", speedup="1.20x", compile_s=31.0)
    compile(code, "<compile>", "exec")
    assert "31.0 s" in code and "torch.compile(model)" in code
