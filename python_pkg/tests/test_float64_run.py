"""A model made float64 by accident is named (issue #47 point 3): ``load.float64`` with the dtype,
the parameters and parts in float64, the user's line that made it so (``.double()`` seen run, a
float64 tensor made from a numpy array, or a dtype found in the source when the call was not
seen), a patch of those lines and an estimate whose basis is said. Real CPU torch,
``gpusight run`` in-process; the GPU estimates from evidence as the watch builds it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gpusight.bench.fp64_peaks import fp64_rate
from gpusight.fixes.diff_apply import apply, parse
from gpusight.fixes.float32_patch import float32_text
from gpusight.report import load_report
from gpusight.report_schema import validate
from gpusight.rules.float64_math import float64_math
from gpusight.rules.step_view import StepView
from gpusight.rules.workload import GpuWindow, WorkloadEvidence, breakdown
from gpusight.rules.workload_evidence import Float64Line, Float64Use
from thread_support import one_thread  # noqa: F401 (autouse: one torch thread)

DOUBLE_MODEL = """\
import numpy as np
import torch
from torch import nn

features = np.random.rand(256, 32)
labels = np.random.rand(256, 1)
X = torch.from_numpy(features)
Y = torch.from_numpy(labels)

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
model = model.double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(200):
    i = (step * 32) % 256
    x, y = X[i : i + 32], Y[i : i + 32]
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

FLOAT_MODEL = (
    DOUBLE_MODEL.replace("model = model.double()", "model = model.float()")
    .replace("torch.from_numpy(features)", "torch.from_numpy(features).float()")
    .replace("torch.from_numpy(labels)", "torch.from_numpy(labels).float()")
)

# No call the watch wraps makes this model float64: its layers are built so.
BUILT_FLOAT64 = """\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(32, 64, dtype=torch.float64)
        self.head = nn.Linear(64, 1, dtype=torch.float64)

    def forward(self, x):
        return self.head(torch.relu(self.body(x)))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(200):
    x = torch.randn(32, 32, dtype=torch.float64)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


# The float64 module is wrapped after its ``.to``: the call is still the model's; the batch is
# made float64 in the loop, every step.
INNER_TO_FLOAT64 = """\
import torch
from torch import nn


class Wrap(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


inner = nn.Linear(16, 1).to("cpu", torch.float64)
model = Wrap(inner)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(200):
    batch = torch.tensor([[0.5] * 16] * 8, dtype=torch.float64)
    loss = model(batch).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _run(tmp_path: Path, source: str, capsys: pytest.CaptureFixture[str]) -> dict:
    from gpusight.cli import main

    script = tmp_path / "x.py"
    script.write_text(source, encoding="utf-8")
    rc = main(["run", "--steps", "5", "--json", str(tmp_path / "r.json"), str(script)])
    capsys.readouterr()
    assert rc == 0
    report = load_report(tmp_path / "r.json")
    validate(report)
    return report


def _float64(report: dict) -> dict | None:
    return next((f for f in report["findings"] if f["id"] == "load.float64"), None)


def _evidence(finding: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for e in finding["evidence"]:
        out.setdefault(e["label"], []).append(e)
    return out


def test_a_double_model_on_numpy_data_is_named_with_its_lines_and_patched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = (torch.nn.Module.double, torch.nn.Module.to, torch.from_numpy, torch.tensor)
    found = _float64(_run(tmp_path, DOUBLE_MODEL, capsys))
    # The watch's wrappers came off with it: the user's torch is as it was.
    assert (torch.nn.Module.double, torch.nn.Module.to, torch.from_numpy, torch.tensor) == before
    assert found is not None
    ev = _evidence(found)
    assert ev["dtype"][0]["value"] == "float64"
    params = 32 * 64 + 64 + 64 + 1
    assert ev["float64 parameters"][0]["value"] == ev["parameters"][0]["value"] == params
    assert ev["float64 modules"][0]["value"] == "0, 2"  # the Linear layers; the ReLU has none
    assert ev["model inputs"][0]["value"] == "float64"
    model_line = ev["model made float64 at"][0]
    assert model_line["value"] == ".double()"
    assert model_line["source"] == {"file": "x.py", "line": 11, "code": "model = model.double()"}
    data = sorted(e["source"]["line"] for e in ev["float64 tensor made at"])
    assert data == [7, 8] and ev["float64 tensor made at"][0]["value"] == "torch.from_numpy"
    assert "line not seen" not in ev
    assert found["title"].startswith("The model and its inputs are float64")
    assert found["severity"] == "warn"  # a CPU run: from no gain to about 2x
    impact = found["impact"]
    assert impact["basis"] == "estimated" and "On a CPU float32" in impact["text"]
    lo, hi = impact["speedup_range"]
    assert lo == 1.0 and 1.0 < hi <= 2.0
    fix = found["fix"]
    assert "x.py:11" in fix["text"] and fix["snippet_id"] == "precision.float32"
    # The patch changes the user's three lines and nothing else, and applies to their file.
    patched = apply(DOUBLE_MODEL, parse(fix["patch"])[0])
    assert patched == DOUBLE_MODEL.replace("model.double()", "model.float()").replace(
        "torch.from_numpy(features)", "torch.from_numpy(features).float()"
    ).replace("torch.from_numpy(labels)", "torch.from_numpy(labels).float()")
    assert patched == FLOAT_MODEL


def test_a_float32_model_gets_no_float64_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = _run(tmp_path, FLOAT_MODEL, capsys)
    assert report["run"]["steps"] == 5
    assert _float64(report) is None


def test_a_model_built_float64_unseen_is_named_from_its_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    found = _float64(_run(tmp_path, BUILT_FLOAT64, capsys))
    assert found is not None
    ev = _evidence(found)
    assert ev["float64 modules"][0]["value"] == "body, head"
    assert "model made float64 at" not in ev  # no call the watch saw made it so
    in_source = [e["source"]["line"] for e in ev["float64 in the source at"]]
    assert in_source[:2] == [8, 9] and ev["float64 in the source at"][0]["value"] == "torch.float64"
    assert "asks for float64" in found["fix"]["text"]  # a line found, not seen: said so
    patched = apply(BUILT_FLOAT64, parse(found["fix"]["patch"])[0])
    assert "nn.Linear(32, 64, dtype=torch.float32)" in patched
    assert "nn.Linear(64, 1, dtype=torch.float32)" in patched


def test_an_inner_module_made_float64_before_it_is_wrapped_is_the_models_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    found = _float64(_run(tmp_path, INNER_TO_FLOAT64, capsys))
    assert found is not None
    ev = _evidence(found)
    assert ev["float64 modules"][0]["value"] == "inner"
    assert ev["model made float64 at"][0]["value"] == ".to(torch.float64)"
    assert ev["model made float64 at"][0]["source"]["line"] == 14
    batch = ev["float64 tensor made at"][0]
    assert batch["value"] == "torch.tensor" and batch["source"]["line"] == 18
    # Every step made one: warm-up, profiled and measured steps, at the least the 5 measured.
    assert batch["source"]["count"] >= 5
    text = found["fix"]["text"]
    assert "its inputs where x.py:18 makes them (torch.tensor(...).float()" in text
    patched = apply(INNER_TO_FLOAT64, parse(found["fix"]["patch"])[0])
    assert 'nn.Linear(16, 1).to("cpu", torch.float32)' in patched
    assert "torch.tensor([[0.5] * 16] * 8, dtype=torch.float32)" in patched


def _gpu_evidence(device: str | None, tf32: bool, fp64_ms: float | None) -> WorkloadEvidence:
    """A 10 ms GPU step, 9 ms of it kernels, of which ``fp64_ms`` float64 matmuls (None: no
    kernel trace, the GPU's busy time from NVML)."""
    window = None
    if fp64_ms is not None:
        window = GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 9.0, "other_cpu": 1.0},
            matmul_fp64_ms=fp64_ms,
            matmul_ms=fp64_ms,
        )
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[10.0] * 8,
        cuda_available=True,
        cuda_devices=1,
        window=window,
        gpu_used=True,
        nvml_util_pct=None if window else 90.0,
        tf32_matmul=tf32,
    )
    ev.float64 = Float64Use(
        params=1000,
        params_float64=1000,
        parts=["fc"],
        input_dtypes=["float64"],
        lines=[Float64Line(".double()", "model", "train.py", 12, "model = Net().double()")],
        device_name=device,
    )
    return ev


@pytest.mark.parametrize(
    ("device", "tf32", "ratio"),
    [
        ("NVIDIA GeForce RTX 4090", False, 64.0),  # Ada: float64 at 1/64 of float32
        ("NVIDIA H100 80GB HBM3", False, 1.0),  # float64 Tensor Cores: float32's own rate
        ("NVIDIA H100 80GB HBM3", True, 494.5 / 67.0),  # TF32 allowed for the float32 matmuls
    ],
)
def test_a_gpu_estimate_sets_the_float64_matmuls_at_the_datasheet_float32_rate(
    device: str, tf32: bool, ratio: float
) -> None:
    f = float64_math(StepView.of(ev := _gpu_evidence(device, tf32, 6.0), breakdown(ev)))[0]
    lo, hi = f.impact.speedup_range or (0.0, 0.0)
    # 6 ms of float64 matmuls at the float32 rate; the other 3 ms of kernels at most 2x faster.
    assert lo == pytest.approx(10.0 / (10.0 - 6.0 * (1 - 1 / ratio)), abs=0.01)
    assert hi == pytest.approx(10.0 / (10.0 - 6.0 * (1 - 1 / ratio) - 1.5), abs=0.01)
    assert f.severity == ("critical" if lo >= 1.5 else "warn")
    rate = fp64_rate(device)
    assert rate is not None and f"{rate.tflops:g} TFLOP/s ({rate.source})" in f.impact.text
    assert f.title.endswith("no Tensor Cores, a fraction of float32's rate")
    assert ("TF32, allowed here" in f.impact.text) is tf32


def test_a_gpu_without_a_known_rate_or_trace_gets_a_range_that_says_so() -> None:
    ev = _gpu_evidence("NVIDIA Future GPU 9000", False, None)
    f = float64_math(StepView.of(ev, breakdown(ev)))[0]
    assert f.impact.basis == "estimated"
    lo, hi = f.impact.speedup_range or (0.0, 0.0)
    assert lo == 1.0 and hi > 5.0  # from float64 Tensor Cores' 1x to a 1/64 part's
    assert "no float64 rate for NVIDIA Future GPU 9000" in f.impact.text
    assert "No kernel trace" in f.impact.text
    assert f.severity == "warn"


def test_the_float32_edit_changes_only_the_float64_on_the_lines_named() -> None:
    src = (
        "import numpy as np\n"
        "import torch as t\n"
        "m = Net().to('cuda', t.float64)\n"
        "a = np.zeros((4, 3)).astype('float64')\n"
        "x = t.tensor(a)\n"
        "y = t.from_numpy(a).float()\n"
        "z = t.tensor(a, dtype=t.double)\n"
        "keep = t.zeros(3, dtype=t.float64)\n"
    )
    new = float32_text(src, [3, 4, 5, 6, 7])
    assert new is not None
    assert new.splitlines() == [
        "import numpy as np",
        "import torch as t",
        "m = Net().to('cuda', t.float32)",
        "a = np.zeros((4, 3)).astype('float32')",
        "x = t.tensor(a).float()",
        "y = t.from_numpy(a).float()",  # already made float32 after the call: left alone
        "z = t.tensor(a, dtype=t.float32)",
        "keep = t.zeros(3, dtype=t.float64)",  # not a line named
    ]
    assert float32_text(src, [6]) is None  # nothing to change there
