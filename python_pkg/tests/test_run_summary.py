"""``gpusight run``'s closing lines: the change to make first (with its gain marked measured or
estimated and its changed lines), the other findings, the next command, the files written. One
real CPU run in a subprocess; the rest on reports built here."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

from gpusight.commands.run_summary import print_summary, print_what_if
from gpusight.first_fix import changed_lines, first_finding, gain_text
from gpusight.report import Finding, Fix, Impact, Report, Verdict, WhatIf
from gpusight.text_report import render_summary

LOADER_SCRIPT = """\
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Slow(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        time.sleep(0.002)  # a decode in the main process
        return torch.randn(32), i % 10


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


model = Net()
opt = torch.optim.SGD(model.parameters(), 0.1)
loader = DataLoader(Slow(), batch_size=8)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_real_run_ends_with_the_change_its_gain_and_the_next_command(tmp_path: Path) -> None:
    script = tmp_path / "train_loader.py"
    script.write_text(LOADER_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "gpusight", "run", "--steps", "8", "--json", "r.json",
         "--html", "r.html", "train_loader.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    err = done.stderr
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  do this first: "))
    # The run's own fix, not the CPU-only build (this machine has no GPU for one to use).
    assert "worker processes" in lines[first]
    assert "pinned" not in lines[first]  # no pin_memory without CUDA, and the patch adds none
    assert lines[first + 1].startswith("    for load.input_bound: ")
    assert lines[first + 2].startswith("    gain: estimated ")
    assert lines[first + 3].strip() == "-loader = DataLoader(Slow(), batch_size=8)"
    assert "num_workers=" in lines[first + 4] and lines[first + 4].strip().startswith("+")
    assert "  next: gpusight run --what-if train_loader.py" in err
    assert "gpusight run --patch fix.diff train_loader.py" in err
    wrote = next(line for line in lines if line.startswith("  wrote: "))
    assert "r.json" in wrote and "r.html" in wrote
    assert lines.index(wrote) == len(lines) - 1
    assert "env.cpu_only_build" not in err


def _args(**kw: object) -> argparse.Namespace:
    base = {"script": "train.py", "args": ["--lr", "0.1"], "json": None, "html": None,
            "patch": None, "what_if": False}  # fmt: skip
    return argparse.Namespace(**{**base, **kw})


PATCH = """\
--- a/train.py
+++ b/train.py
@@ -3,1 +3,1 @@
-loader = DataLoader(ds, batch_size=8)
+loader = DataLoader(ds, batch_size=8, num_workers=4)
"""


def _report(basis: str = "estimated") -> Report:
    loader = Finding(
        id="load.input_bound",
        severity="critical",
        title="The input pipeline starves the step",
        impact=Impact(basis=basis, speedup=2.31, recoverable_pct=57.0),  # type: ignore[arg-type]
        fix=Fix(text="Load batches in 4 worker processes.", patch=PATCH),
    )
    small = Finding(
        id="load.small_batch",
        severity="warn",
        title="Batches are small",
        impact=Impact(basis="estimated", speedup=1.2, speedup_range=(1.2, 4.0)),
        fix=Fix(text="Grow the batch."),
    )
    return Report(
        kind="watch",
        machine={
            "gpus": [{"index": 0, "name": "NVIDIA H200"}],
            "torch": {"version": "2.11.0", "cuda": "12.8"},
        },
        verdict=Verdict("input_pipeline", 30.0, "Input pipeline."),
        findings=[small, loader],
    )


def test_a_measured_gain_is_called_measured_and_a_range_keeps_both_ends() -> None:
    out = io.StringIO()
    print_summary(_report("measured"), out, _args())
    text = out.getvalue()
    assert "  do this first: Load batches in 4 worker processes." in text
    assert "    gain: measured 2.31x" in text
    assert "load.small_batch: Batches are small (estimated 1.20x to 4.00x)" in text
    # An estimate elsewhere: --what-if is the next command, with the script's own arguments.
    assert "next: gpusight run --what-if train.py --lr 0.1" in text


def test_after_a_patch_is_written_the_next_command_verifies_it(tmp_path: Path) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text(PATCH)
    out = io.StringIO()
    print_summary(_report("measured"), out, _args(patch=str(patch), what_if=True))
    text = out.getvalue()
    assert f"next: gpusight run --verify {patch} train.py --lr 0.1" in text
    assert "--what-if train.py" not in text  # it ran
    assert f"wrote: {patch}" in text


def test_without_args_the_summary_names_no_command_and_no_file() -> None:
    out = io.StringIO()
    print_summary(_report(), out)
    assert "next:" not in out.getvalue() and "wrote:" not in out.getvalue()


def test_the_first_finding_follows_the_machine() -> None:
    r = _report()
    assert first_finding(r) is not None and first_finding(r).id == "load.input_bound"  # type: ignore[union-attr]
    build = Finding(
        id="env.cpu_only_build",
        severity="critical",
        title="torch is a CPU-only build",
        fix=Fix(text="Install a CUDA build."),
    )
    r.findings.append(build)
    assert first_finding(r) is build  # a GPU here that the build leaves unused
    r.machine["gpus"] = []
    assert first_finding(r).id == "load.input_bound"  # type: ignore[union-attr]


def test_a_debugging_switch_leads_over_a_critical_finding() -> None:
    r = _report()
    switch = Finding(id="cfg.anomaly_detection", severity="warn", title="anomaly detection",
                     fix=Fix(text="Turn it off outside debugging."))  # fmt: skip
    r.findings.append(switch)
    assert first_finding(r) is switch  # every figure of the step is the switch's too
    switch.severity = "info"  # a check's note, not a switch that slowed the steps
    assert first_finding(r).id == "load.input_bound"  # type: ignore[union-attr]


def test_gain_and_changed_lines() -> None:
    assert gain_text(Impact(basis="none", text="x")) is None
    assert gain_text(Impact(basis="estimated", recoverable_pct=18.0)) == (
        "estimated up to 18% of the step"
    )
    # A fix measured slower says so beside its figure; one within a few percent of 1x does not.
    assert gain_text(Impact(basis="measured", speedup=0.38)) == "measured 0.38x, slower"
    assert gain_text(Impact(basis="measured", speedup=0.98)) == "measured 0.98x"
    assert changed_lines(PATCH) == [
        "-loader = DataLoader(ds, batch_size=8)",
        "+loader = DataLoader(ds, batch_size=8, num_workers=4)",
    ]


def test_the_what_if_lines_end_with_the_best_measured_change() -> None:
    r = _report()
    r.what_if = [
        WhatIf(
            "num_workers=4",
            20.0,
            8.0,
            2.5,
            noise_pct=3.0,
            fix=Fix(text="Use 4 workers.", patch=PATCH),
        ),
        WhatIf("bf16 autocast", 20.0, 19.8, 1.01, noise_pct=4.0),
        # On the H100 a workers sweep of a GPU-bound graph loop read 0.61x ±3%: a loss
        WhatIf("num_workers=2", 20.0, 32.8, 0.61, noise_pct=3.0),
        WhatIf("pin_memory=True", 20.0, 20.8, 0.96, noise_pct=3.0),
        WhatIf("batch x4", None, None, None, skipped="out of memory"),
    ]
    out = io.StringIO()
    print_what_if(r, out)
    text = out.getvalue()
    assert "num_workers=4: 2.50x ±3%\n" in text
    assert "bf16 autocast: 1.01x ±4% (within the noise)" in text
    assert "num_workers=2: 0.61x ±3% (slower, beyond the noise)" in text
    assert "pin_memory=True: 0.96x ±3% (within the noise)" in text
    assert "batch x4: not run (out of memory)" in text
    assert "the best measured change: num_workers=4: Use 4 workers." in text
    assert "+loader = DataLoader(ds, batch_size=8, num_workers=4)" in text


def test_a_change_measured_again_shows_one_gain_in_the_what_if_lines() -> None:
    r = _report()
    r.what_if = [
        WhatIf("num_workers=4", 20.0, 8.0, 2.5, noise_pct=3.0, fix=Fix(text="Use 4 workers.")),
        WhatIf(
            "all winners together: num_workers=4",
            21.0,
            6.0,
            3.5,
            noise_pct=9.0,
            params={"winners": "workers", "repeat_of": "num_workers=4"},
        ),
    ]
    out = io.StringIO()
    print_what_if(r, out)
    text = out.getvalue()
    assert "num_workers=4: 2.50x ±3%" in text and "3.50" not in text
    assert "all winners together: num_workers=4: num_workers=4 measured again" in text
    assert "the best measured change: num_workers=4: Use 4 workers." in text


def test_the_steps_split_is_said_in_words_not_keys() -> None:
    r = _report()
    r.run = {"steps": 20, "step_time_ms": 84.0,
             "breakdown_ms": {"compute": 31.0, "data_wait": 45.0, "other_cpu": 8.0}}  # fmt: skip
    text = render_summary(r)
    assert "step 84.0 ms over 20 steps: GPU compute 31.0 ms, waiting for data 45.0 ms, " in text
    assert "other CPU work 8.00 ms" in text
    assert "data_wait" not in text and "other_cpu" not in text
    r.machine = {"gpus": []}  # a CPU run: its compute is the host's
    assert "compute (CPU) 31.0 ms" in render_summary(r)


def test_lines_timed_in_slowed_steps_say_the_traced_steps_time() -> None:
    r = _report()
    row = {"file": "fit.py", "line": 133, "code": "trainer.fit(model, datamodule=dm)",
           "function": "<module>", "ms_per_step": 6.97, "share_pct": 86.0}  # fmt: skip
    r.run = {"steps": 1000, "step_time_ms": 1.37, "breakdown_ms": {"compute": 1.24},
             "host_lines": {"steps": 2, "step_ms": 8.1, "lines": [row]}}  # fmt: skip
    text = render_summary(r)
    # A Lightning step of many Python calls ran 6x slower under the line clock.
    assert "host time by line (in steps traced line by line: 8.10 ms each, 1.37 ms measured): " \
        "fit.py:133 trainer.fit(model, datamodule=dm) 6.97 ms (86%)" in text  # fmt: skip
    r.run["host_lines"]["step_ms"] = 1.6  # about the measured step: nothing to say
    assert "host time by line: fit.py:133" in render_summary(r)
