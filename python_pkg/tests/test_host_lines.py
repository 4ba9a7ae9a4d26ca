"""Every host millisecond on a line (issue #49, first slice): the watch times the steps after the
measured ones by line of the user's code, the report lists the costliest (``run.host_lines``),
and the host-work finding names the top line with a fix chosen by what it does. One script per
kind of waste, real CPU torch, ``gpusight run``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from gpusight.report import load_report
from gpusight.report_schema import validate

HEAD = """\
import gc
import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
"""

GC_EVERY_STEP = (
    HEAD
    + """\
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
heap = [[i] * 10 for i in range(200_000)]  # a heap for the collector to walk
for step in range(300):
    x = torch.randn(32, 64)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (32,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    gc.collect()
    torch.cuda.empty_cache()
"""
)

NUMPY_IN_FORWARD = (
    HEAD
    + """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 4096)
        self.out = nn.Linear(4096, 10)

    def forward(self, x):
        h = self.fc(x)
        top = np.argsort(np.tile(h.detach().cpu().numpy(), (1, 8)), axis=1)[:, -16:]
        return self.out(h) + torch.from_numpy(top[:, :10] % 2).float()


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    x = torch.randn(64, 64)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (64,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)

LOGGING = (
    HEAD
    + """\
class Histograms:
    \"\"\"A logger that writes a histogram of every parameter, as TensorBoard's add_histogram.\"\"\"

    def __init__(self, path):
        self.f = open(path, "w")

    def add_histogram(self, name, values, step):
        counts, edges = np.histogram(np.sort(np.tile(values.ravel(), 40)), bins=200)
        self.f.write(f"{step} {name} {counts.tolist()} {edges.tolist()}\\n")


writer = Histograms("hist.log")
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    x = torch.randn(32, 64)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 10, (32,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    for name, p in model.named_parameters():
        writer.add_histogram(name, p.detach().numpy(), step)
"""
)

TOKENIZER = (
    HEAD
    + """\
VOCAB = {w: i for i, w in enumerate(f"w{i}" for i in range(5000))}


def tokenize(texts):
    ids = [[VOCAB.get(w, 0) for w in t.split()][:64] for t in texts]
    return torch.tensor([x + [0] * (64 - len(x)) for x in ids])


texts = [" ".join(f"w{(i * 7 + j) % 6000}" for j in range(400)) for i in range(64)]
model = nn.Sequential(nn.Embedding(5000, 32), nn.Flatten(), nn.Linear(64 * 32, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(300):
    batch = tokenize(texts)
    loss = nn.functional.cross_entropy(model(batch), torch.zeros(64, dtype=torch.long))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)


def _run(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    assert main(["run", "--quiet", "--steps", "8", "--json", "r.json", "train.py"]) == 0
    rep = load_report(tmp_path / "r.json")
    validate(rep)
    return rep


def _line_of(source: str, text: str) -> int:
    return next(i for i, ln in enumerate(source.splitlines(), 1) if text in ln)


def _top(rep: dict[str, Any]) -> dict[str, Any]:
    lines = rep["run"]["host_lines"]["lines"]
    assert lines, rep["run"]["host_lines"]
    return lines[0]


def test_a_gc_collect_every_step_is_named_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, GC_EVERY_STEP, monkeypatch)
    top = _top(rep)
    assert (top["file"], top["line"]) == ("train.py", _line_of(GC_EVERY_STEP, "gc.collect()"))
    assert top["share_pct"] >= 60.0 and not top["in_forward"]
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f["title"].startswith(f"train.py:{top['line']} (`gc.collect()`)")
    assert f["fix"]["text"].startswith(f"Remove train.py:{top['line']} (`gc.collect()`)")
    assert "DataLoader" not in f["fix"]["text"] and "transforms" not in f["fix"]["text"]
    # The terminal's first screen says where the host time goes.
    from gpusight.report_parse import report_from_dict
    from gpusight.text_report import render_summary

    text = render_summary(report_from_dict(rep))
    assert f"host time by line: train.py:{top['line']} gc.collect() " in text


def test_numpy_inside_forward_is_named_as_inside_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, NUMPY_IN_FORWARD, monkeypatch)
    lines = rep["run"]["host_lines"]["lines"]
    argsort = _line_of(NUMPY_IN_FORWARD, "np.argsort")
    row = next(r for r in lines if r["line"] == argsort)
    assert row["in_forward"] and row["function"] == "Net.forward"
    # The costliest of the user's own lines (the step's backward aside).
    own = [r for r in lines if "backward" not in r.get("code", "")]
    assert own[0]["line"] == argsort, lines


def test_a_histogram_logger_every_step_is_named_and_logged_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, LOGGING, monkeypatch)
    lines = rep["run"]["host_lines"]["lines"]
    call = _line_of(LOGGING, "writer.add_histogram(name")
    # The logger's own lines are the user's too (its class is in the script); the loop's call
    # of it carries the rest.
    inside = {_line_of(LOGGING, "counts, edges"), _line_of(LOGGING, "self.f.write"), call}
    assert sum(r["share_pct"] for r in lines if r["line"] in inside) >= 60.0, lines
    assert lines[0]["line"] in inside
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f"train.py:{lines[0]['line']}" in f["title"]
    assert f["fix"]["text"].startswith(f"Log less often at train.py:{lines[0]['line']}")


def test_a_tokenizer_in_the_loop_is_named_and_moved_to_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rep = _run(tmp_path, TOKENIZER, monkeypatch)
    top = _top(rep)
    assert top["line"] == _line_of(TOKENIZER, "ids = [[VOCAB.get"), rep["run"]["host_lines"]
    assert top["function"] == "tokenize" and top["share_pct"] >= 60.0
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f["fix"]["text"].startswith("Tokenize once before the loop")


def test_a_traced_process_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def tracer(frame: Any, event: str, arg: Any) -> None:
        return None

    monkeypatch.setattr(sys, "gettrace", lambda: tracer)  # as under a debugger
    rep = _run(tmp_path, GC_EVERY_STEP, monkeypatch)
    assert rep["run"]["host_lines"] == {
        "steps": 0,
        "lines": [],
        "unavailable": "another tracer (a debugger, coverage) runs",
    }


def test_without_steps_the_steps_timed_by_line_come_before_the_measured_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpusight run`` as most users first run it (no ``--steps``): the measured steps run to
    the script's end, so the two steps timed by line come right after the profiled ones, and
    are not measured steps."""
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    src = GC_EVERY_STEP.replace("range(300)", "range(40)")
    (tmp_path / "train.py").write_text(src, encoding="utf-8")
    assert main(["run", "--quiet", "--json", "r.json", "train.py"]) == 0
    rep = load_report(tmp_path / "r.json")
    validate(rep)
    top = _top(rep)
    assert top["line"] == _line_of(src, "gc.collect()") and top["share_pct"] >= 60.0
    hl = rep["run"]["host_lines"]
    assert hl["steps"] == 2
    # 40 steps: 3 of warm-up, 4 profiled, 2 timed by line, the rest measured.
    assert rep["run"]["steps"] == 40 - 3 - 4 - 2


def test_a_minimum_window_that_outlasts_the_script_still_times_its_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A what-if's baseline asks for 20 steps and a 2 s window: a script that ends first (a
    500-request server on a fast step) was measured to its end, and its lines never timed. Its
    fix fell back to a template (a tokenizer's line got "do per-batch transforms on the GPU")."""
    from gpusight.cli import main

    monkeypatch.chdir(tmp_path)
    src = TOKENIZER.replace("range(300)", "range(40)")
    (tmp_path / "train.py").write_text(src, encoding="utf-8")
    args = ["--steps", "8", "--min-window", "60", "--profile-steps", "3"]
    assert main(["run", "--quiet", *args, "--json", "r.json", "train.py"]) == 0
    rep = load_report(tmp_path / "r.json")
    validate(rep)
    assert rep["run"]["host_lines"]["steps"] == 2
    assert _top(rep)["line"] == _line_of(src, "ids = [[VOCAB.get")
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f["fix"]["text"].startswith("Tokenize once before the loop")


def test_a_cell_watched_without_steps_gets_its_lines(ip: Any) -> None:
    """``%%gpusight`` with no options, the notebook's first use: the host lines are there."""
    ip.run_cell("import gc\nimport torch\nfrom torch import nn\n").raise_error()
    cell = """model = nn.Linear(64, 10)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
heap = [[i] * 10 for i in range(100_000)]
for step in range(30):
    loss = model(torch.randn(32, 64)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    gc.collect()
"""
    rep = ip.run_cell_magic("gpusight", "", cell)
    run = rep.run or {}
    lines = (run.get("host_lines") or {}).get("lines") or []
    assert lines and lines[0]["code"] == "gc.collect()", run.get("host_lines")
    # Line 10 of the cell as the notebook shows it: the %%gpusight line above the body's 9.
    assert lines[0]["line"] == 10 and lines[0]["file"] == "cell"


LOSS_OUTSIDE_MODEL = (
    HEAD
    + """\
import torch.nn.functional as F


def contrastive_loss(z, labels):
    d = torch.cdist(z, z)
    same = (labels[:, None] == labels[None, :]).float()
    pull = same * d.pow(2)
    push = (1 - same) * F.relu(1.0 - d).pow(2)
    return (pull + push).mean() + F.binary_cross_entropy(torch.sigmoid(-d), same)


model = nn.Linear(32, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(768, 32)
labels = torch.randint(0, 10, (768,))
for step in range(300):
    loss = contrastive_loss(model(x), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
)


def test_a_loss_computed_outside_the_model_is_the_steps_own_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loss function of the user's own, called in the loop on the model's output, is the
    step's computation: no "host work outside the model" finding, and no worker or transform
    on the GPU offered for it."""
    rep = _run(tmp_path, LOSS_OUTSIDE_MODEL, monkeypatch)
    lines = rep["run"]["host_lines"]["lines"]
    in_loss = [r for r in lines if r["function"] == "contrastive_loss"]
    assert sum(r["share_pct"] for r in in_loss) >= 30.0, lines
    ids = [f["id"] for f in rep["findings"]]
    assert "load.cpu_preprocessing" not in ids, rep["findings"]


def test_host_work_beside_a_loss_function_is_still_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss's lines leave the finding, a gc.collect() beside them keeps it."""
    source = LOSS_OUTSIDE_MODEL.replace("    opt.step()\n", "    opt.step()\n    gc.collect()\n")
    source = source.replace(
        "model = nn.Linear(32, 16)",
        "heap = [[i] * 10 for i in range(200_000)]\nmodel = nn.Linear(32, 16)",
    )
    rep = _run(tmp_path, source, monkeypatch)
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    line = _line_of(source, "gc.collect()")
    assert f["title"].startswith(f"train.py:{line} (`gc.collect()`)"), f["title"]
    label = "the loss and gradient clipping, left out"
    left_out = [e for e in f["evidence"] if e["label"] == label]
    assert left_out and left_out[0]["value"] > 0, f["evidence"]


CLIPPED_MANY_PARAMETERS = (
    HEAD
    + """\
model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(300)])
opt = torch.optim.SGD(model.parameters(), lr=0.001)
x = torch.randn(4, 8)
for step in range(300):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=False)
    opt.step()
"""
)


def test_gradient_clipping_is_the_steps_own_update_not_host_work_to_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``clip_grad_norm_`` over 600 tensors holds a large share of the step's host time, but it
    is the step's update: no worker, GPU transform or thinning is offered for it."""
    rep = _run(tmp_path, CLIPPED_MANY_PARAMETERS, monkeypatch)
    clip = _line_of(CLIPPED_MANY_PARAMETERS, "clip_grad_norm_")
    row = next(r for r in rep["run"]["host_lines"]["lines"] if r["line"] == clip)
    assert row["share_pct"] >= 10.0, rep["run"]["host_lines"]
    f = next((f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing"), None)
    assert f is None or f"train.py:{clip}" not in f["title"], f


EMA = (
    HEAD
    + """\
model = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32)) for _ in range(16)])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ema = copy.deepcopy(model)
decay = 0.999
for step in range(300):
    x = torch.randn(8, 32)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), model.parameters()):
            pe.mul_(decay).add_(p.detach(), alpha=1 - decay)
"""
)


GRAD_NORM = (
    HEAD
    + """\
model = nn.Sequential(*[nn.Linear(32, 32) for _ in range(24)])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
norms = []
for step in range(300):
    loss = model(torch.randn(4, 32)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    total_norm = sum(p.grad.norm().item() ** 2 for p in model.parameters()) ** 0.5
    norms.append(total_norm)
    opt.step()
"""
)


@pytest.mark.parametrize(
    ("source", "anchor", "span", "fix_start", "names"),
    [
        # An EMA update: a Python loop over the parameters is host work of its own (its header
        # is not the wait for the next batch), its two lines one piece of work.
        (EMA.replace("import gc\n", "import copy\nimport gc\n"), "for pe, p in zip(", 1,
         "Update the tensors of the loop", "torch._foreach_lerp_"),
        # A norm read per parameter: one read for all, not one .item() per tensor.
        (GRAD_NORM, "total_norm = sum(", 0, "Read one value for all the tensors",
         "get_total_norm"),
    ],
)  # fmt: skip
def test_work_over_every_parameter_is_named_with_a_fix_for_all_of_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    anchor: str,
    span: int,
    fix_start: str,
    names: str,
) -> None:
    rep = _run(tmp_path, source, monkeypatch)
    at = _line_of(source, anchor)
    where = f"train.py:{at}" + (f"-{at + span}" if span else "")
    f = next(f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing")
    assert f["title"].startswith(f"{where} (`{anchor}")
    assert f["fix"]["text"].startswith(f"{fix_start} at {where}")
    assert names in f["fix"]["text"]
