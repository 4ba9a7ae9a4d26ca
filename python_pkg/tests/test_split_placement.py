"""A model left partly on the CPU beside the rest on a GPU (issue #47 point 2): the parts named as
the user's file names them, with their class, parameters, the statement that builds them and the
copy that feeds them; the fix in the user's names; ``code.cpu_model`` only for a model all on the
CPU; ``load.optimizer_unfused`` deferring to the parameters on the CPU.

There is no GPU here: ``"meta"`` stands in for it (a real device type of real torch, counted as
an accelerator by ``Watch(device_types=("meta",))``, as in test_fix_where_made.py). The modules
are real torch modules with real parameters on the two devices; the watch reads them as it reads
a GPU model's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from gpusight.fixes import diff_apply
from gpusight.report import Finding, Report
from gpusight.rules.workload import (
    BREAKDOWN_KEYS,
    GpuWindow,
    OptimizerInfo,
    Placement,
    SyncSite,
    WorkloadEvidence,
    analyse,
)
from gpusight.watch import Watch
from gpusight.watch.call_sites import CallSite, SiteCounts
from gpusight.watch.collected import Collected
from gpusight.watch.placement import inspect_module
from gpusight.watch.placement_report import placement
from gpusight.watch.recorder import StepRecorder
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)
from torch import nn

# Issue #47's script, as the H200 run had it (the watch saw the model calls on lines 14, 15).
SCRIPT = """import torch
import torch.nn.functional as F
from torch import nn

dev = torch.device("cuda")
backbone = timm.create_model("vit_base_patch16_224", num_classes=0).to(dev)
head = nn.Sequential(
    nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)
)
opt = torch.optim.AdamW([*backbone.parameters(), *head.parameters()], lr=1e-4)
for epoch in range(2):
    for x, y in loader:
        x = x.to(dev, non_blocking=True)
        feats = backbone(x)
        logits = head(feats.cpu())
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def n_params(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@dataclass
class SeenRun:
    """What ``placement()`` reads of a finished watch: the outermost modules it saw with the
    lines that called them, and the device types it counts as accelerators."""

    collected: Collected = field(default_factory=Collected)
    device_types: tuple[str, ...] = ("meta",)
    recorder: StepRecorder | None = None

    def saw(self, module: nn.Module, site: CallSite) -> None:
        info = inspect_module(module)
        info.calls = 10
        self.collected.modules[id(module)] = info
        counts = self.collected.forward_sites.setdefault(id(module), SiteCounts())
        counts.add(site)


def line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def site_of(path: Path, source: str, call: str) -> CallSite:
    line = line_of(source, call)
    return CallSite(str(path), path.name, line, 0, source.splitlines()[line - 1].index(call))


def split_evidence(tmp_path: Path, head_device: str = "cpu", **kw: object) -> WorkloadEvidence:
    """The evidence of issue #47's run: the backbone on the accelerator, the head built after it
    (larger, as the H200's 33 M head was against its share of the step), called on SCRIPT's
    lines."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    backbone = nn.Sequential(nn.Linear(16, 16), nn.GELU()).to("meta")
    head = nn.Sequential(
        nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)
    ).to(head_device)
    run = SeenRun()
    run.saw(backbone, site_of(script, SCRIPT, "backbone(x)"))
    run.saw(head, site_of(script, SCRIPT, "head(feats"))
    p = placement(run)  # type: ignore[arg-type]
    split = {**dict.fromkeys(BREAKDOWN_KEYS, 0.0), "compute": 5.0, "other_cpu": 45.0}
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[50.0] * 6,
        framework_ms=[40.0] * 6,
        cuda_available=True,
        cuda_devices=1,
        window=GpuWindow(steps=3, gpu=True, split_ms=split),
        placement=p,
    )
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def validated(findings: list[Finding]) -> Report:
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2, "gpus": []})
    rep.findings = findings
    rep.validate()
    return rep


def test_the_head_left_on_the_cpu_is_named_with_its_line_and_its_copy(tmp_path: Path) -> None:
    syncs = [SyncSite("cpu", 12, "train.py", 15, "logits = head(feats.cpu())")]
    ev = split_evidence(tmp_path, syncs=syncs)
    p = ev.placement
    assert p is not None and p.accelerator == "meta"
    assert p.param_devices == ["cpu"]  # the head is the main model, as on the H200
    res = analyse(ev)
    ids = [f.id for f in res.findings]
    assert "code.cpu_model" not in ids  # not all of the model is on the CPU
    f = next(f for f in res.findings if f.id == "code.device_mismatch")
    validated(res.findings)
    assert res.verdict.bottleneck == "device_placement"
    assert res.verdict.summary.startswith("head (Sequential, 5.9 k parameters) stays on the CPU")
    rows = {e.label: e for e in f.evidence}
    assert rows["module on the CPU"].value == "head"
    assert rows["head: class"].value == "Sequential"
    assert rows["head: parameters"].value == 16 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10 == 5898
    built = rows["head: built at (found in the source)"]
    assert built.value == "train.py:7" and built.source is not None
    assert built.source.code == "head = nn.Sequential("
    copy = rows["head: fed by a copy to the CPU (seen by the watch)"]
    assert copy.value == "feats.cpu()" and copy.source is not None
    assert (copy.source.line, copy.source.count) == (15, 12)
    # The fix in the script's own names: its device is ``dev``.
    assert f.fix.code is not None and "head = head.to(dev)\n" in f.fix.code
    assert "before the optimizer is built" in f.fix.text and "feats.cpu()" in f.fix.text
    assert f.fix.patch is not None and f.fix.patch.startswith("--- a/train.py\n")
    (diff,) = diff_apply.parse(f.fix.patch)
    patched = diff_apply.apply(SCRIPT, diff)
    assert ")\nhead = head.to(dev)\nopt = torch.optim.AdamW(" in patched
    assert "        logits = head(feats)\n" in patched
    assert "        y = y.to(dev, non_blocking=True)\n" in patched


@pytest.mark.parametrize(
    ("forward_ms", "severity", "verdict"),
    [(10.0, "critical", "device_placement"), (0.1, "info", "host_cpu")],
)
def test_the_parts_host_time_sets_the_severity_and_the_verdict(
    tmp_path: Path, forward_ms: float, severity: str, verdict: str
) -> None:
    ev = split_evidence(tmp_path)
    assert ev.placement is not None
    ev.placement.cpu_modules[0].forward_ms = forward_ms
    res = analyse(ev)
    f = next(f for f in res.findings if f.id == "code.device_mismatch")
    assert f.severity == severity
    # Forward and a backward of twice it: 30 of the 50 ms step, or 0.3 ms.
    assert f.impact.basis == "estimated" and f.impact.speedup_range is not None
    lo, hi = f.impact.speedup_range
    moved = 3 * forward_ms
    assert lo == pytest.approx(50 / (50 - 0.8 * moved), abs=0.01)
    assert hi == pytest.approx(50 / (50 - moved), abs=0.01)
    # A part whose time is a small share of the step is no verdict of its own.
    assert res.verdict.bottleneck == verdict


def test_the_copy_is_found_in_the_source_where_the_watch_saw_no_sync(tmp_path: Path) -> None:
    f = next(f for f in analyse(split_evidence(tmp_path)).findings
             if f.id == "code.device_mismatch")  # fmt: skip
    labels = [e.label for e in f.evidence]
    assert "head: fed by a copy to the CPU (found in the source)" in labels


def test_a_model_all_on_one_device_gets_no_split_finding(tmp_path: Path) -> None:
    on_one = split_evidence(tmp_path, head_device="meta")
    assert on_one.placement is not None and on_one.placement.cpu_modules == []
    ids = [f.id for f in analyse(on_one).findings]
    assert "code.device_mismatch" not in ids and "code.cpu_model" not in ids
    # All of it on the CPU beside a usable GPU: that one is code.cpu_model, as before.
    p = Placement(module="Sequential", param_devices=["cpu"], input_devices=["cpu"])
    ev = split_evidence(tmp_path, placement=p)
    ids = [f.id for f in analyse(ev).findings]
    assert "code.cpu_model" in ids and "code.device_mismatch" not in ids


NESTED = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.body(x).cpu())


model = Net()
model.body.to("cuda")
for x in loader:
    model(x.cuda()).sum().backward()
"""


class Net(nn.Module):
    """NESTED's model, its body moved and its head not."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 16).to("meta")
        self.head = nn.Linear(16, 4)


def test_a_part_of_a_model_is_named_by_its_path_and_where_its_class_builds_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "net.py"
    script.write_text(NESTED)
    run = SeenRun()
    run.saw(Net(), site_of(script, NESTED, "model(x.cuda())"))
    ev = split_evidence(tmp_path, placement=placement(run))  # type: ignore[arg-type]
    f = next(f for f in analyse(ev).findings if f.id == "code.device_mismatch")
    rows = {e.label: e for e in f.evidence}
    assert rows["module on the CPU"].value == "model.head"
    assert rows["model.head: class"].value == "Linear"
    assert rows["model.head: parameters"].value == 16 * 4 + 4
    built = rows["model.head: built at (found in the source)"]
    assert built.value == f"net.py:{line_of(NESTED, 'self.head = ')}"
    # The device as the file moves the rest: a literal, since it moves a part (not a model call).
    assert f.fix.code is not None and 'model.head = model.head.to("meta")' in f.fix.code
    assert f.fix.patch is None  # the copy inside forward is not patched (yet)


def _optimizer_evidence(cpu_params: int) -> WorkloadEvidence:
    return WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[55.0] * 6,
        cuda_available=True,
        cuda_devices=1,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 12.0, "launch_overhead": 39.0, "other_cpu": 4.0},
            launches_per_step=5200,
            median_kernel_us=3.0,
        ),
        placement=Placement(
            module="Tower", param_devices=["cuda"], input_devices=["cuda"], batch_size=512
        ),
        optimizer=OptimizerInfo(
            "AdamW", 800, None, None, True, params=119_000_000, cpu_params=cpu_params
        ),
        optimizer_ms=30.0,
    )


# With no parameters on the CPU the estimate is 1.12x to 1.49x: a warning by the severity rule.
@pytest.mark.parametrize(("cpu_params", "severity"), [(33_000_000, "info"), (0, "warn")])
def test_the_fused_optimizer_finding_defers_to_parameters_on_the_cpu(
    cpu_params: int, severity: str
) -> None:
    res = analyse(_optimizer_evidence(cpu_params))
    f = next(f for f in res.findings if f.id == "load.optimizer_unfused")
    validated([f])
    assert f.severity == severity
    if cpu_params:
        assert f.impact.basis == "none" and f.impact.speedup is None
        assert "33.0 M parameters on the CPU" in f.title
        assert "explains the 30.0 ms in optimizer.step()" in f.impact.text
        assert "fused=True cannot change that" in f.impact.text
    else:
        assert f.impact.basis == "estimated" and f.impact.speedup is not None


class Backbone(nn.Module):
    """Its parameters on "meta", standing in for the GPU: its forward runs there and hands back
    host features of the shape it computed (a meta tensor holds no data to copy back, so the
    script's ``.cpu()`` is a real call with nothing to move)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(self.proj(x.to("meta")).shape)


def test_a_watched_loop_names_the_head_it_left_on_the_cpu() -> None:
    dev = "meta"
    backbone = Backbone().to(dev)
    head = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))  # HEAD LINE
    opt = torch.optim.SGD(head.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    with Watch(steps=4, warmup=2, profile_steps=1, device_types=("meta",)) as w:
        for _ in range(200):
            feats = backbone(x)
            out = head(feats.cpu())
            out.sum().backward()
            opt.step()
            opt.zero_grad()
    rep = w.report
    assert rep is not None
    rep.validate()
    assert "code.cpu_model" not in rep.finding_ids
    f = rep.finding("code.device_mismatch")
    assert f is not None
    assert f.title.startswith(f"head (Sequential, {n_params(head) / 1e3:.1f} k parameters)")
    rows = {e.label: e for e in f.evidence}
    assert rows["head: parameters"].value == n_params(head)
    source = Path(__file__).read_text()
    built = rows["head: built at (found in the source)"]
    assert built.source is not None and built.source.line == line_of(source, "# HEAD LINE")
    copy = rows["head: fed by a copy to the CPU (found in the source)"]
    assert copy.value == "feats.cpu()"
    fwd = rows["head: host time in its forward"]
    assert isinstance(fwd.value, float) and fwd.value > 0
    assert f.fix.code is not None and "head = head.to(dev)\n" in f.fix.code
    assert f.fix.patch is not None
    assert "+    head = head.to(dev)\n" in f.fix.patch
    assert "-            out = head(feats.cpu())\n+            out = head(feats)\n" in f.fix.patch


class LogMels(nn.Module):
    """A feature transform the dataset runs per item, as torchaudio's ``MelSpectrogram`` or a
    torchvision v2 transform is: a module with a buffer and no parameters, on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("fb", torch.rand(33, 8))

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wave, 64, 16, window=torch.hann_window(64), return_complex=True)
        return torch.log1p(spec.abs().pow(2).transpose(-1, -2) @ self.fb).flatten()


class Clips(torch.utils.data.Dataset[tuple[torch.Tensor, int]]):
    def __init__(self) -> None:
        self.features = LogMels()

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        wave = torch.sin(torch.arange(512) * (0.01 * (i % 7 + 1)))
        return self.features(wave), i % 4


def test_a_transform_module_the_dataset_runs_is_the_input_pipeline_not_a_part_of_the_model() -> (
    None
):
    """run39: audio_melspec_loader's ``MelSpectrogram`` Sequential, called in ``__getitem__``
    with no workers, read as a part of the model left on the CPU (critical, device_placement)
    where the loader starves the step."""
    data = Clips()
    loader = torch.utils.data.DataLoader(data, batch_size=16, num_workers=0)
    width = data[0][0].numel()
    model = nn.Sequential(nn.Linear(width, 64), nn.ReLU(), nn.Linear(64, 4)).to("meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Watch(steps=4, warmup=2, profile_steps=1, device_types=("meta",)) as w:
        for x, _y in loader:
            out = model(x.to("meta"))
            out.sum().backward()
            opt.step()
            opt.zero_grad()
    rep = w.report
    assert rep is not None
    rep.validate()
    assert "code.device_mismatch" not in rep.finding_ids
    assert "code.cpu_model" not in rep.finding_ids
    assert "load.input_bound" in rep.finding_ids
    seen = {info.name for info in w.collected.modules.values()}
    assert "Sequential" in seen and "LogMels" not in seen
