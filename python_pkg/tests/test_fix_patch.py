"""A fix as a patch of the user's own DataLoader call (fixes/patch.py), and ``gpusight run
--patch`` writing one that ``patch -p1`` applies to a real script that then runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.fixes.patch import loader_patch, set_call_keywords
from gpusight.fixes.patch_files import made_from, text_sha256
from gpusight.report import load_report
from scenario_support import apply_patch, copy_scenario, run_scenario, watch_scenario

SRC = """import torch
from torch.utils.data import DataLoader

loader = DataLoader(
    dataset,
    batch_size=32,
    num_workers=0,  # the user's comment stays
)
other = DataLoader(dataset, 8)
"""


def test_existing_keyword_replaced_missing_ones_added_after_the_last_argument() -> None:
    out = set_call_keywords(SRC, 5, {"num_workers": "8", "pin_memory": "True"})
    assert out is not None
    assert "    num_workers=8, pin_memory=True,  # the user's comment stays\n" in out
    assert "other = DataLoader(dataset, 8)\n" in out  # the other call is left alone
    # Any line of a multi-line call finds it; a positional-only call gets keywords appended.
    assert set_call_keywords(SRC, 9, {"num_workers": "2"}) == SRC.replace(
        "DataLoader(dataset, 8)", "DataLoader(dataset, 8, num_workers=2)"
    )
    assert set_call_keywords("dl = DataLoader()\n", 1, {"num_workers": "2"}) == (
        "dl = DataLoader(num_workers=2)\n"
    )


def test_no_call_or_no_change_is_no_patch() -> None:
    assert set_call_keywords(SRC, 1, {"num_workers": "8"}) is None  # line 1 has no loader
    assert set_call_keywords("x = (\n", 1, {"num_workers": "8"}) is None  # does not parse
    assert loader_patch(SRC, 5, "train.py", {"num_workers": 0}) is None  # already so


def test_the_diff_applies_with_patch_p1(tmp_path: Path) -> None:
    diff = loader_patch(SRC, 6, "pkg/train.py", {"num_workers": 4, "persistent_workers": True})
    assert diff is not None and diff.startswith("--- a/pkg/train.py\n+++ b/pkg/train.py\n")
    (tmp_path / "pkg").mkdir()
    target = tmp_path / "pkg" / "train.py"
    target.write_text(SRC)
    if shutil.which("patch") is None:
        pytest.skip("no patch program")
    subprocess.run(["patch", "-p1"], input=diff, text=True, cwd=tmp_path, check=True)
    new = target.read_text()
    compile(new, "train.py", "exec")
    assert "num_workers=4, persistent_workers=True," in new


SCRIPT = """import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.003)
        return torch.randn(16), i % 4


def main():
    model = nn.Linear(16, 4)
    model(torch.zeros(1, 16))  # a dummy call before the loop
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(
        Slow(),
        batch_size=16,
    )
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i == 12:
            break


if __name__ == "__main__":
    main()
"""


def test_run_patch_changes_the_users_loader_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(SCRIPT)
    assert main(["run", "--quiet", "--steps", "4", "--json", "r.json", "--patch", "fix.diff",
                 "train.py"]) == 0  # fmt: skip
    text = Path("fix.diff").read_text()
    # Above the diff: what it fixes, and the hash of the file it was made from.
    sha = made_from(text)["train.py"]
    assert sha == text_sha256(SCRIPT)
    diff = text[text.index("--- a/") :]
    assert diff.startswith("--- a/train.py\n+++ b/train.py\n")
    fix = next(f["fix"] for f in load_report("r.json")["findings"] if f["fix"].get("patch"))
    assert fix["patch"] == diff and fix["patch_files"] == [{"path": "train.py", "sha256": sha}]
    assert "+        batch_size=16, num_workers=" in diff
    if shutil.which("patch") is None:
        pytest.skip("no patch program")
    subprocess.run(["patch", "-p1", "-i", "fix.diff"], check=True, capture_output=True)
    patched = Path("train.py").read_text()
    assert "persistent_workers=True" in patched
    # The patched script still runs as the user's script.
    done = subprocess.run([sys.executable, "train.py"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # A patch that no longer applies is refused by patch itself (the file changed since).
    check = subprocess.run(
        ["patch", "-p1", "--dry-run", "-i", "fix.diff"], capture_output=True, text=True
    )
    assert check.returncode != 0


def test_run_patch_without_a_call_of_the_users_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("s.py").write_text("print(1)\n")
    assert main(["run", "--quiet", "--patch", "fix.diff", "s.py"]) == 0
    assert not Path("fix.diff").exists()
    assert "nothing written" in capsys.readouterr().err


def test_the_watch_records_the_loops_call_of_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("train.py").write_text(SCRIPT)
    assert main(["run", "--quiet", "--steps", "4", "--facts", "f.json", "train.py"]) == 0
    site = json.loads(Path("f.json").read_text())["forward_site"]
    line = SCRIPT.splitlines().index(
        "        loss = nn.functional.cross_entropy(model(x), y)") + 1  # fmt: skip
    assert (site["shown"], site["line"]) == ("train.py", line)  # the loop's, not the dummy's


def test_a_second_run_in_one_process_patches_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both scripts are "train.py": the second one's patch and hash are made from its own text,
    # not from lines cached for the first.
    for name, text in (
        ("a", SCRIPT),
        ("b", "# another script\n" + SCRIPT.replace("16,\n", "8,\n")),
    ):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        Path("train.py").write_text(text)
        assert main(["run", "--quiet", "--steps", "3", "--patch", "fix.diff", "train.py"]) == 0
        diff = Path("fix.diff").read_text()
        assert made_from(diff) == {"train.py": text_sha256(text)}
    assert "-        batch_size=8,\n" in diff


def test_a_setting_given_by_position_is_changed_in_place() -> None:
    # DataLoader(ds, 8, True): a batch_size keyword added beside the 8 would be a TypeError
    # ("got multiple values for argument 'batch_size'") when the patched script runs.
    src = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, 8, True)\n"
    new = set_call_keywords(src, 2, {"batch_size": "256", "pin_memory": "True"})
    assert new == (
        "from torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, 256, True, pin_memory=True)\n"
    )
    # Settings that may hide in *args / **kwargs: no edit rather than a wrong one.
    assert set_call_keywords("DataLoader(ds, **opts)\n", 1, {"batch_size": "256"}) is None
    assert set_call_keywords("DataLoader(*args)\n", 1, {"batch_size": "256"}) is None


# The public scenarios whose fix is a patch of their own lines on a CPU-only machine (the loader's
# workers); on a GPU the autocast, batch and logging patches join them (benchmarks/run_whatif.py
# --verify measures those on the H200).
SCENARIOS_WITH_A_CPU_PATCH = ("bursty_loader", "slow_loader", "small_batch_rnn")


@pytest.mark.slow
@pytest.mark.parametrize("name", SCENARIOS_WITH_A_CPU_PATCH)
def test_each_scenarios_patch_applies_and_the_patched_script_runs(
    name: str, tmp_path: Path
) -> None:
    copy_scenario(name, tmp_path)
    # 16 steps: small_batch_rnn's loader wait on the CPU is ~10 % of its step, and over 6 steps
    # of a busy 2-core machine it once read under the finding's 5 % (no patch).
    run = watch_scenario(
        tmp_path, "--steps", "16", "--profile-steps", "0", "--patch", "fix.diff", f"{name}.py",
        "--iters", "60",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "fix.diff").exists(), run.stderr[-2000:]
    diff = (tmp_path / "fix.diff").read_text()
    assert f"--- a/{name}.py" in diff and "DataLoader(" in diff
    apply_patch(tmp_path)
    assert run_scenario(tmp_path, name, "--iters", "8")  # it ran and said its SCENARIO_RESULT
