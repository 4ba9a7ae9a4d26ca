"""Fixes as changes to whole statements of the user's file (fixes/statement_patches.py): bf16
autocast around the model's call, TF32 after ``import torch``, a logging line read every N steps;
applied with fixes/diff_apply.py and ``patch -p1``, and carried by the findings that the watch
and ``run --what-if`` raise (with the hashes of the files they were made from)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from gpusight.fixes.diff_apply import PatchError, apply, parse
from gpusight.fixes.patch_files import header, made_from, stale, text_sha256
from gpusight.fixes.statement_patches import autocast_patch, log_every_patch, tf32_patch
from gpusight.rerun.driver import RunResult
from gpusight.rules.workload import CodeSource, GpuWindow, SyncSite, WorkloadEvidence, analyse

TRAIN = '''"""A training script."""
from __future__ import annotations

import torch as th
from torch import nn


def train(model, loader, opt):
  for i, (x, y) in enumerate(loader):
      out = model(
          x,
      )
      loss = nn.functional.cross_entropy(out, y)
      loss.backward(); opt.step()
      print(f"step {i} loss {loss.item():.3f}")
      total = loss.item()
      if i > 3: print(loss.item())
      msg = """a
  multi-line string"""
'''


def patched(source: str, diff: str) -> str:
    """The diff applied to ``source`` by gpusight's own strict applier."""
    files = parse(diff)
    assert len(files) == 1
    return apply(source, files[0])


def test_autocast_wraps_the_forward_statement_in_the_files_own_indentation() -> None:
    diff = autocast_patch(TRAIN, 11, "train.py")  # any line of the multi-line call
    assert diff is not None
    new = patched(TRAIN, diff)
    assert (
        "  for i, (x, y) in enumerate(loader):\n"
        '      with th.autocast("cuda", dtype=th.bfloat16):\n'
        "          out = model(\n"
        "              x,\n"
        "          )\n"
        "      loss = nn.functional.cross_entropy(out, y)\n"
    ) in new
    compile(new, "train.py", "exec")
    # Only the forward's lines changed.
    assert [ln for ln in diff.splitlines() if ln.startswith("-") and not ln.startswith("---")] == [
        "-      out = model(",
        "-          x,",
        "-      )",
    ]


def test_autocast_imports_torch_where_the_file_does_not() -> None:
    src = TRAIN.replace("import torch as th\n", "")
    new = patched(src, autocast_patch(src, 10, "train.py") or "")
    head = new.splitlines()[:4]
    doc, future = '"""A training script."""', "from __future__ import annotations"
    assert head == [doc, future, "import torch", ""]
    assert 'with torch.autocast("cuda", dtype=torch.bfloat16):' in new
    compile(new, "train.py", "exec")


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (9, "a compound statement's header"),
        (14, "two statements on one line"),
        (17, "a statement after an if on its line"),
        (18, "a multi-line string that indenting would change"),
        (1, "the docstring is not a call of the model"),
    ],
)
def test_no_autocast_patch_where_no_safe_wrap_exists(line: int, why: str) -> None:
    assert autocast_patch(TRAIN, line, "train.py") is None, why


def test_no_autocast_patch_under_autocast_already() -> None:
    src = (
        "import torch\n"
        "def f(model, x):\n"
        "    with torch.autocast('cuda'):\n"
        "        out = model(x)\n"
        "    return out\n"
    )
    assert autocast_patch(src, 4, "m.py") is None
    assert autocast_patch(src, 5, "m.py") is not None  # a return outside it can be wrapped


def test_tf32_goes_right_after_import_torch_under_its_name() -> None:
    new = patched(TRAIN, tf32_patch(TRAIN, "train.py") or "")
    lines = new.splitlines()
    at = lines.index("import torch as th")
    assert lines[at + 1].startswith("th.backends.cuda.matmul.allow_tf32 = True")
    assert lines[at + 2] == "th.backends.cudnn.allow_tf32 = True"
    compile(new, "train.py", "exec")
    assert tf32_patch("from torch import nn\n", "a.py") is None  # no torch name to set it on
    assert tf32_patch(new, "train.py") is None  # already set


def test_a_logging_line_that_syncs_is_read_every_n_steps() -> None:
    diff = log_every_patch(TRAIN, 15, "train.py", every=25)
    assert diff is not None
    new = patched(TRAIN, diff)
    assert ('      if i % 25 == 0:\n          print(f"step {i} loss {loss.item():.3f}")\n') in new
    compile(new, "train.py", "exec")


@pytest.mark.parametrize(
    "call",
    ["log_metrics(i, loss.item())", "wandb.log({'loss': loss.item()})", "self.log(loss.item())"],
)
def test_a_function_that_says_it_logs_is_a_logging_line(call: str) -> None:
    # item_per_step's own logger on the H200 got no patch: only print and logger methods were.
    src = f"for i in range(9):\n    loss = step()\n    {call}\n"
    new = patched(src, log_every_patch(src, 3, "t.py", every=50) or "")
    assert f"    if i % 50 == 0:\n        {call}\n" in new


def test_a_logging_line_in_a_branch_that_runs_every_step_is_read_every_n_steps() -> None:
    # item_per_step's planted sync sits in the else of ``if args.fix:``: on the H200 it got no
    # patch, as if a condition on the step already thinned it out.
    src = (
        "for i in range(9):\n    loss = step()\n    if fix:\n        pass\n"
        "    else:\n        log_metrics(i, loss.item())\n"
    )
    new = patched(src, log_every_patch(src, 6, "t.py", every=50) or "")
    assert "    else:\n        if i % 50 == 0:\n            log_metrics(i, loss.item())\n" in new
    compile(new, "t.py", "exec")


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("for i in range(9):\n    if i % 10 == 0:\n        print(x.item())\n", 3),  # thinned
        ("for i in range(9):\n    while busy:\n        print(x.item())\n", 3),  # inner while
        ("for i in range(9):\n    F.log_softmax(x.item())\n", 2),  # math, not a logger
        ("for i in range(9):\n    catalog(x.item())\n", 2),  # "log" inside a word
        (TRAIN, 16),  # total = loss.item(): the value is used, deferring it changes the program
        (TRAIN, 17),  # already under a condition
        ("import torch\nprint(torch.ones(1).item())\n", 2),  # not in a loop
        ("while True:\n    print(x.item())\n", 2),  # no step counter
        ("for x in loader:\n    print(x.item())\n", 2),  # no step counter
        ("for i in range(9):\n    print(i)\n", 2),  # reads no tensor
    ],
)
def test_no_sync_patch_without_a_safe_rewrite(source: str, line: int) -> None:
    assert log_every_patch(source, line, "t.py") is None


def test_diff_applier_is_strict_and_stays_below_its_root() -> None:
    diff = autocast_patch(TRAIN, 10, "train.py") or ""
    changed = TRAIN.replace("      loss = nn", "      loss  = nn")  # a line the hunk covers
    with pytest.raises(PatchError, match=r"hunk 1 .* does not match"):
        patched(changed, diff)
    for bad in ("/etc/passwd", "../up.py", "a/../../x.py"):
        evil = diff.replace("a/train.py", f"a/{bad}").replace("b/train.py", f"b/{bad}")
        with pytest.raises(PatchError, match="only paths below"):
            parse(evil)
    with pytest.raises(PatchError, match="no unified diff"):
        parse("just text\n")
    # A file without a final newline round-trips.
    src = "import torch\nx = 1"
    new = patched(src, tf32_patch(src, "n.py") or "")
    assert new.endswith("x = 1") and "allow_tf32" in new


def test_the_header_records_what_the_patch_was_made_from(tmp_path: Path) -> None:
    from gpusight.report import PatchFile

    diff = tf32_patch(TRAIN, "pkg/train.py") or ""
    rec = [PatchFile("pkg/train.py", text_sha256(TRAIN))]
    text = header(rec, "cfg.tf32_disabled: allow TF32") + diff
    assert made_from(text) == {"pkg/train.py": text_sha256(TRAIN)}
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    assert stale(made_from(text), str(tmp_path)) == []
    (tmp_path / "pkg" / "train.py").write_text(TRAIN + "# edited\n")
    assert stale(made_from(text), str(tmp_path)) == [
        "pkg/train.py changed since the run that made the patch"
    ]
    assert stale({"gone.py": "0" * 64}, str(tmp_path)) == ["gone.py: no such file here"]
    # patch and git apply both skip the header and apply the diff.
    (tmp_path / "pkg" / "train.py").write_text(TRAIN)
    (tmp_path / "fix.diff").write_text(text)
    if shutil.which("patch") is not None:
        done = subprocess.run(["patch", "-p1", "--dry-run", "-i", "fix.diff"], cwd=tmp_path,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    if shutil.which("git") is not None:
        done = subprocess.run(["git", "apply", "--check", "fix.diff"], cwd=tmp_path,
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr


def _gpu_evidence(**kw: object) -> WorkloadEvidence:
    split = dict.fromkeys(
        ("compute", "communication", "copy", "sync_stall", "data_wait", "launch_overhead",
         "other_cpu"), 0.0)  # fmt: skip
    split.update({"compute": 55.0, "sync_stall": 40.0, "launch_overhead": 5.0})
    w = GpuWindow(steps=3, gpu=True, split_ms=split)
    w.matmul_fp32_ms = 50.0
    ev = WorkloadEvidence(step_mode="optimizer", step_times_ms=[100.0] * 6, cuda_available=True,
                          cuda_devices=1, window=w, tf32_matmul=False)  # fmt: skip
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def test_watch_findings_carry_the_patch_of_the_users_lines() -> None:
    ev = _gpu_evidence(
        forward_source=CodeSource("train.py", TRAIN, 10),
        syncs=[
            SyncSite(
                "item", 6, "train.py", 15, "print(...)", 110.0, CodeSource("train.py", TRAIN, 15)
            ),
        ],
    )
    found = {f.id: f for f in analyse(ev).findings}
    amp = found["load.amp_unused"].fix
    assert amp.patch is not None and "+      with th.autocast(" in amp.patch
    assert [(p.path, p.sha256) for p in amp.patch_files or []] == [("train.py", text_sha256(TRAIN))]
    sync = found["code.host_sync"].fix
    assert sync.patch is not None and "+      if i % 50 == 0:" in sync.patch
    assert sync.code  # the snippet stays beside it


def test_a_sync_without_a_safe_rewrite_keeps_the_generic_snippet_only() -> None:
    ev = _gpu_evidence(
        syncs=[
            SyncSite(
                "item",
                6,
                "train.py",
                16,
                "total = loss.item()",
                110.0,
                CodeSource("train.py", TRAIN, 16),
            )
        ],
    )
    f = next(f for f in analyse(ev).findings if f.id == "code.host_sync")
    assert f.fix.patch is None and f.fix.patch_files is None and f.fix.code


def _result(label: str, changes: dict[str, object], step_ms: float) -> RunResult:
    run = {"steps": 20, "step_time_ms": step_ms, "items_per_step": 32,
           "step_times_ms": [step_ms] * 20}  # fmt: skip
    return RunResult(label, changes, True, 5.0, {"run": run}, {})


def test_what_if_autocast_and_tf32_rows_carry_patches(tmp_path: Path) -> None:
    from gpusight.report import Report
    from gpusight.rerun.driver import Outcome
    from gpusight.rerun.plan import Arm
    from gpusight.rerun.results import apply

    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    site = {"file": str(script), "shown": "train.py", "line": 10}
    base = _result("baseline", {}, 10.0)
    base.facts = {"forward_site": site, "loader_site": None}
    auto = Arm("autocast", "bf16 autocast", {"autocast": "bfloat16"}, "load.amp_unused")
    tf32 = Arm("tf32", "TF32", {"tf32": True}, "cfg.tf32_disabled")
    out = Outcome(baseline=base, control=None, noise_pct=1.0)
    out.arms = [(auto, _result("a", auto.changes, 5.0)), (tf32, _result("t", tf32.changes, 8.0))]
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2,
                                        "gpus": []})  # fmt: skip
    apply(rep, out)
    rep.validate()
    amp, tf = rep.finding("load.amp_unused"), rep.finding("cfg.tf32_disabled")
    assert amp is not None and amp.impact.speedup == 2.0
    assert "with th.autocast" in (amp.fix.patch or "")
    assert tf is not None and "th.backends.cudnn.allow_tf32 = True" in (tf.fix.patch or "")
    assert tf.fix.patch_files is not None and tf.fix.patch_files[0].sha256 == text_sha256(TRAIN)
    # A model called from a line that cannot be wrapped: the snippet alone.
    base.facts = {"forward_site": dict(site, line=9)}
    rep2 = Report(kind="watch", machine=rep.machine)
    apply(rep2, out)
    amp2 = rep2.finding("load.amp_unused")
    assert amp2 is not None and amp2.fix.patch is None and amp2.fix.code


def test_run_records_the_scripts_forward_line_when_torch_comes_after_gpusight(
    tmp_path: Path,
) -> None:
    # A fresh `gpusight run` maps sources before the script imports torch. torch's frames were
    # then taken for the user's, so the model's call site was torch's own line (and dropped):
    # no autocast patch on the H200 for fp32_transformer. The script's line 8 must be found.
    import json
    import os
    import sys

    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "from torch import nn\n"
        "model = nn.Linear(8, 3)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))\n"
        "for _ in range(30):\n"
        "    opt.zero_grad()\n"
        "    loss = nn.functional.cross_entropy(model(x), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    facts = tmp_path / "facts.json"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run(
        [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "5",
         "--profile-steps", "0", "--facts", str(facts), str(script)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    site = json.loads(facts.read_text())["forward_site"]
    assert site is not None and site["line"] == 8 and site["file"].endswith("train.py")
