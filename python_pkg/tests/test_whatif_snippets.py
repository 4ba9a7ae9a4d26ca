"""Every fix snippet is valid Python; those that run on a CPU run, on a small real conv net, and do
what they say. Global flags a snippet sets (TF32, cudnn.benchmark) are put back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from gpusight.fixes import SNIPPETS
from gpusight.fixes.measured_code import combined, loader_args, render
from gpusight.whatif.restore import Snapshot
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from whatif_support import SmallConvNet, flags_state

# The measured what-if's snippets, in the one catalogue every fix's snippet is in.
CATALOGUE = {sid: snip for sid, snip in SNIPPETS.items() if sid.startswith("whatif.")}


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
        assert snip.finding_id is not None and snip.finding_id.split(".")[0] in (
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
            "knobs": {"channels_last": True, "tf32": True, "cudnn_benchmark": True},
            "lr_factor": 2,
        },
        {"loader_changes": {"pin_memory": True}, "autocast": "float16"},
        {
            "dataset_on_gpu": True,
            "channels_last": True,
            "knobs": {"channels_last": True},
            "autocast": "bfloat16",
        },
    ],
    ids=["everything", "fp16-scaler", "dataset-on-device"],
)
def test_the_combined_snippet_runs(options: dict[str, Any], namespace: dict[str, Any]) -> None:
    from gpusight.knobs import owners

    # The lines before the loop are the winners' knobs' own (``Knob.setup_code``).
    changes = options.pop("knobs", {})
    setup = [line for k in owners(changes) for line in k.setup_code]
    assert len(setup) == len(changes) + ("tf32" in changes)  # TF32 takes two lines
    code = combined(
        namespace["loader"], device_type="cpu", speedup="1.50x end to end", setup=setup, **options
    )
    for line in setup:
        assert line in code
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


def test_findings_for_every_experiment_fill_their_snippet_and_validate() -> None:
    # GPU-only winners (pinning, autocast, TF32, ...) cannot win on this machine: fabricate one
    # measured outcome per experiment and check that each finding's fix is filled and valid.
    from gpusight.report import Report, WhatIf
    from gpusight.whatif.arms import Workload, loader_overrides, planned, source_of
    from gpusight.whatif.context import Budget, Context
    from gpusight.whatif.findings import combination, combined_code, findings_of, verdict
    from gpusight.whatif.machine import machine_facts
    from gpusight.whatif.plan import ALL
    from gpusight.whatif.procedures import Outcome

    data = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=True, num_workers=2)
    work = Workload(SmallConvNet(), loader, nn.CrossEntropyLoss(), None, None, torch.device("cpu"))
    work.cached = [next(iter(DataLoader(data, batch_size=8)))]
    ctx = Context(work, Budget(10, None), steps=3, reps=2, cpu_count=4)
    winners = {
        "num_workers": (
            planned("w4", source="loader", num_workers=4),
            {"sweep": "4: 2x"},
        ),
        "pin_memory": (
            planned("pin", source="loader", pin_memory=True, non_blocking=True),
            {},
        ),
        "dataset_on_gpu": (planned("dev", source="device"), {"dataset_gb": 0.1, "free_gb": 9.0}),
        "persistent_workers": (
            planned("pw", source="loader", persistent_workers=True),
            {},
        ),
        "prefetch_factor": (planned("pf", source="loader", prefetch_factor=4), {}),
        "loader_combined": (
            planned(
                "together",
                source="loader",
                num_workers=4,
                pin_memory=True,
                prefetch_factor=4,
                non_blocking=True,
            ),
            {},
        ),
        "autocast": (planned("bf16", autocast="bfloat16"), {"dtype": "bfloat16"}),
        "channels_last": (planned("cl", channels_last=True), {}),
        "tf32": (planned("tf32", tf32=True), {}),
        "cudnn_benchmark": (planned("cb", cudnn_benchmark=True), {}),
        "batch_size": (planned("bs", batch_factor=4), {"batch_size": 32, "factor": 4}),
        "compile": (planned("c", compile=True), {"compile_s": 12.5}),
    }
    assert set(winners) == {cls.key for cls in ALL}
    outcomes = []
    for i, cls in enumerate(ALL):
        variant, params = winners[cls.key]
        w = WhatIf(
            cls.label, 10.0, 10.0 / (1.2 + i / 10), 1.2 + i / 10, cls.finding_id, noise_pct=1.0
        )
        outcomes.append(Outcome(cls.key, w, variant, cls.finding_id, dict(params)))
    findings = findings_of(ctx, outcomes)
    assert {f.id for f in findings} == {cls.finding_id for cls in ALL}
    # The loader winners measured together are evidence of the loader finding, not its fix.
    loader_finding = next(f for f in findings if f.id == "load.input_bound")
    assert loader_finding.fix.snippet_id != "whatif.loader_combined"
    assert any(e.label == "DataLoader winners together" for e in loader_finding.evidence)
    for f in findings:
        assert f.impact.basis == "measured" and f.fix.code and f.fix.snippet_id
        compile(f.fix.code, f.id, "exec")
    loader_fix = next(f for f in findings if f.id == "load.input_bound").fix.code
    assert loader_fix is not None
    assert "num_workers=4, persistent_workers=True, prefetch_factor=4" in loader_fix
    combo = combination([o for o in outcomes])
    assert combo is not None and source_of(combo) == "device" and loader_overrides(combo) == {}
    code = combined_code(ctx, combo, "3.00x end to end")
    compile(code, "<combined>", "exec")
    assert "xs = torch.stack" in code and "torch.compile(model)" in code
    report = Report(
        kind="diagnose",
        machine=machine_facts(),
        findings=findings,
        verdict=verdict(findings, len(outcomes), 1.0),
    )
    report.validate()
    assert report.verdict.bottleneck != "none"


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_pinning_on_top_of_the_worker_count_combines_and_fills_its_snippets() -> None:
    # pin_memory measured on the num_workers winner carries that worker count: the winners
    # together, the final combination and the pin_memory fix all keep workers, pinning and
    # non_blocking copies together; losers and the GPU-resident dataset stay out of the loader.
    from gpusight.knobs.base import Arm as Plan
    from gpusight.report import WhatIf
    from gpusight.whatif.arms import Workload, loader_overrides, planned, source_of
    from gpusight.whatif.context import Budget, Context
    from gpusight.whatif.findings import combination, combined_code, findings_of
    from gpusight.whatif.procedures import Outcome, loader_together, together_change

    data = TensorDataset(torch.randn(32, 3, 8, 8), torch.randint(0, 10, (32,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)

    def outcome(key: str, fid: str, v: Plan, won: bool = True) -> Outcome:
        return Outcome(key, WhatIf(v.label, 10.0, 5.0, 2.0, fid), v if won else None, fid)

    workers = outcome(
        "num_workers",
        "load.input_bound",
        planned("num_workers=2", source="loader", num_workers=2),
    )
    pinned = outcome(
        "pin_memory",
        "code.pageable_copy",
        planned(
            "pin",
            source="loader",
            num_workers=2,
            pin_memory=True,
            non_blocking=True,
        ),
    )
    lost = outcome(
        "prefetch_factor",
        "load.input_bound",
        planned("pf", source="loader", num_workers=2, prefetch_factor=4),
        won=False,
    )
    kept = outcome(
        "persistent_workers",
        "load.input_bound",
        planned("pw", source="loader", persistent_workers=True),
    )
    on_gpu = outcome("dataset_on_gpu", "load.memory_headroom", planned("dev", source="device"))

    found = loader_together(loader, [workers, pinned, lost, kept, on_gpu])
    assert found is not None
    v, changes = found
    assert list(changes.items()) == [
        ("num_workers", 2),
        ("pin_memory", True),
        ("persistent_workers", True),
    ]
    assert source_of(v) == "loader" and v.changes["non_blocking"]
    assert loader_overrides(v) == changes
    assert together_change(changes, v.changes["non_blocking"]) == (
        "DataLoader(num_workers=2, pin_memory=True, persistent_workers=True) and "
        ".to(device, non_blocking=True), together"
    )
    # Settings the user's loader already has are no change: nothing to put together.
    assert loader_together(DataLoader(data, batch_size=8, num_workers=2), [workers]) is None
    assert loader_together(loader, [lost, on_gpu]) is None

    combo = combination([workers, pinned])
    assert combo is not None and source_of(combo) == "loader" and combo.changes["non_blocking"]
    assert loader_overrides(combo) == {"num_workers": 2, "pin_memory": True}
    work = Workload(SmallConvNet(), loader, nn.CrossEntropyLoss(), None, None, torch.device("cpu"))
    work.cached = [next(iter(DataLoader(data, batch_size=8)))]
    ctx = Context(work, Budget(10, None), steps=3, reps=2, cpu_count=4)
    code = combined_code(ctx, combo, "2.00x end to end")
    assert "DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, pin_memory=True)" in code
    assert "inputs = inputs.to(device, non_blocking=True)" in code
    pin_fix = next(f for f in findings_of(ctx, [workers, pinned]) if f.id == "code.pageable_copy")
    assert pin_fix.fix.code is not None
    assert "num_workers=2, pin_memory=True" in pin_fix.fix.code
    assert "non_blocking=True" in pin_fix.fix.code
    compile(pin_fix.fix.code, "<pin fix>", "exec")
