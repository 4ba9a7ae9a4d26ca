"""``gpusight run --verify fix.diff script.py``: the patch applied to a temporary copy, the
original and the patched script each watched in a fresh process, their items per second
compared; a stale patch, one that does not apply, an unsafe path or a patched script that
crashes is a clear error, and the user's files are never changed."""

from __future__ import annotations

import difflib
import os
import tempfile
from pathlib import Path

import pytest
from gpusight.cli import main
from gpusight.fixes.patch import loader_patch
from gpusight.fixes.patch_files import header, text_sha256
from gpusight.report import PatchFile
from gpusight.rerun import sandbox

# A loader that cannot keep up, a local module imported beside the script, and a data file
# read by a path relative to where the run starts: the copy must keep all three working.
SCRIPT = """import time
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from local_helpers import SIZE

SCALE = float(open("data/scale.txt").read())


class Slow(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.randn(SIZE) * SCALE, i % 4


def main():
    model = nn.Linear(SIZE, 4)
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
        if i == 14:
            break
    with open("metrics.csv", "a") as f:  # a run's own output, beside the script
        f.write(f"{loss.item():.4f}\\n")


if __name__ == "__main__":
    main()
"""
LOADER_LINE = 24


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below ``root`` (links not followed) with its bytes and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def left_behind() -> list[str]:
    return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("gpusight-")]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    (root / "data" / "scale.txt").write_text("1.0\n")
    (root / "local_helpers.py").write_text("SIZE = 16\n")
    (root / "train.py").write_text(SCRIPT)
    (root / "metrics.csv").write_text("an earlier run's metrics\n")
    monkeypatch.chdir(root)
    # The copies land here, so that a copy left behind would be seen.
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    return root


def write_fix(root: Path, values: dict[str, object], *, with_header: bool = True) -> Path:
    text = (root / "train.py").read_text()
    diff = loader_patch(text, LOADER_LINE, "train.py", values)
    assert diff is not None
    made = header([PatchFile("train.py", text_sha256(text))], "test") if with_header else ""
    out = root.parent / "fix.diff"  # outside the project: the snapshot is the user's files
    out.write_text(made + diff)
    return out


def run_verify(fix: Path, *extra: str) -> int:
    return main(["run", "--quiet", "--steps", "4", "--warmup", "1", "--verify", str(fix),
                 *extra, "train.py"])  # fmt: skip


def test_verify_measures_the_patched_copy_and_leaves_the_files_alone(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--quiet", "--steps", "4", "--json", "../before.json", "--patch",
                 "../fix.diff", "train.py"]) == 0  # fmt: skip
    before = snapshot(project)
    code = run_verify(project.parent / "fix.diff", "--report", "../before.json")
    out = capsys.readouterr()
    assert code == 0, out.err
    assert snapshot(project) == before  # nothing of the user's changed, no bytecode added
    assert not left_behind()  # the copy and the runs' files are gone
    text = out.out
    assert "original:" in text and "patched:" in text
    gain = float(text.split("measured: ")[1].split("x")[0])
    assert gain > 1.3  # workers for a loader that sleeps 4 ms an item: clearly faster
    assert "predicted: " in text and "(load.input_bound" in text
    assert "gpusight diff: original -> patched" in text
    # Both runs forked from one process that imported torch once: they started alike.
    assert "note: both runs started from one process that had imported torch" in text


def test_a_patch_that_changes_what_is_imported_ahead_runs_both_scripts_fresh(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (project / "train.py").read_text()
    patched = "import os\nos.environ.setdefault('OMP_NUM_THREADS', '1')\n" + text
    diff = "".join(difflib.unified_diff(text.splitlines(keepends=True),
                                        patched.splitlines(keepends=True),
                                        "a/train.py", "b/train.py"))  # fmt: skip
    fix = project.parent / "env.diff"
    fix.write_text(header([PatchFile("train.py", text_sha256(text))], "test") + diff)
    assert run_verify(fix) == 0
    out = capsys.readouterr().out
    assert "each re-run imported its libraries afresh: the patch changes what the script" in out
    assert "both runs started" not in out


def test_a_stale_patch_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fix = write_fix(project, {"num_workers": 2})
    with open(project / "train.py", "a") as f:
        f.write("# edited after the run\n")
    before = snapshot(project)
    assert run_verify(fix) != 0
    err = capsys.readouterr().err
    assert "stale: train.py changed since the run that made the patch" in err
    assert "gpusight run --patch" in err  # what to do
    assert snapshot(project) == before


def test_a_patch_that_does_not_apply_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fix = write_fix(project, {"num_workers": 2}, with_header=False)
    src = (project / "train.py").read_text().replace("batch_size=16", "batch_size=32")
    (project / "train.py").write_text(src)
    before = snapshot(project)
    assert run_verify(fix) != 0
    err = capsys.readouterr().err
    assert "does not apply" in err and "hunk 1" in err
    assert snapshot(project) == before


@pytest.mark.parametrize("path", ["../outside.py", "/etc/hostname"])
def test_a_path_outside_the_directory_is_refused(
    project: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    fix = write_fix(project, {"num_workers": 2}, with_header=False)
    fix.write_text(fix.read_text().replace("a/train.py", f"a/{path}").replace(
        "b/train.py", f"b/{path}"))  # fmt: skip
    assert run_verify(fix) != 0
    assert "only paths below this directory" in capsys.readouterr().err


def test_a_patched_script_that_crashes_is_a_clear_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A keyword the DataLoader does not take: the patched script raises as it builds it.
    fix = write_fix(project, {"num_wrkers": 2})
    before = snapshot(project)
    assert run_verify(fix) != 0
    err = capsys.readouterr().err
    assert "the patched script did not run to its measured steps" in err
    assert "num_wrkers" in err  # the script's own error, from its last lines
    assert "nothing was changed" in err
    assert snapshot(project) == before
    assert not left_behind()


def test_not_a_patch(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = project.parent / "fix.diff"
    bad.write_text("hello\n")
    assert run_verify(bad) != 0
    assert "not a patch gpusight can apply" in capsys.readouterr().err
    assert run_verify(project.parent / "missing.diff") != 0
    assert "cannot read" in capsys.readouterr().err


def test_the_copy_keeps_the_layout_with_real_files(project: Path) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "model.py").write_text("A = 1\n")
    (project / "pkg" / "other.py").write_text("B = 2\n")
    (project / ".git").mkdir()
    box = sandbox.make(str(project), {"pkg/model.py": "A = 2\n"})
    copy = Path(box.path)
    try:
        assert (copy / "pkg" / "model.py").read_text() == "A = 2\n"
        for rel in ("pkg/model.py", "pkg/other.py", "pkg", "train.py", "data", "data/scale.txt"):
            assert not (copy / rel).is_symlink(), rel  # writes there land in the copy
        assert (copy / "pkg" / "other.py").read_text() == "B = 2\n"
        assert (copy / ".git").is_symlink() and box.linked == [".git"]  # tooling, not copied
        assert (project / "pkg" / "model.py").read_text() == "A = 1\n"
    finally:
        box.remove()
    assert not copy.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "../outside.py", "link_out"])
def test_a_hostile_made_from_path_is_refused_without_reading_it(
    project: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """The ``gpusight-made-from:`` lines are paths too: one naming a device, a FIFO, a file
    outside the folder or a link out of it is refused before anything is read or run."""
    (project.parent / "outside.py").write_text("SECRET = 1\n")
    if where == "fifo":
        os.mkfifo(project / "pipe")
        where = "pipe"
    elif where == "link_out":
        os.symlink(project.parent / "outside.py", project / "escape.py")
        where = "escape.py"
    fix = write_fix(project, {"num_workers": 2})
    text = fix.read_text()
    fix.write_text(f"gpusight-made-from: {'0' * 64} {where}\n" + text)
    before = snapshot(project)
    assert run_verify(fix) != 0
    err = capsys.readouterr().err
    assert "the patch is stale" in err and "cannot be read" in err
    assert snapshot(project) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["/dev/zero", "fifo"])
def test_verify_reads_no_device_or_fifo_as_its_patch_or_report(
    project: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    special = "/dev/zero"
    if what == "fifo":
        special = str(project.parent / "pipe")
        os.mkfifo(special)
    assert run_verify(Path(special)) == 2
    assert "not a regular file" in capsys.readouterr().err
    fix = write_fix(project, {"num_workers": 2})
    assert run_verify(fix, "--report", special) == 2
    assert "not a regular file" in capsys.readouterr().err


WRITERS = """    import sqlite3, subprocess, sys
    user = {root!r}
    subprocess.run([sys.executable, "-c", "open(%r, 'a').write('child')" % (user + "/notes.txt")],
                   check=True)
    db = sqlite3.connect(user + "/runs.db")
    db.execute("CREATE TABLE IF NOT EXISTS runs (name TEXT)")
    db.execute("INSERT INTO runs VALUES ('a run')")
    db.commit()
    db.close()
"""


def test_verify_leaves_the_folder_as_it_was_through_child_processes_and_sqlite(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both runs of --verify write to the user's folder by absolute path from a child process
    and from sqlite (past the write guard, which sees Python's own opens): every process of a
    run sees the folder through an overlay, so it is byte-identical afterwards (#52)."""
    from gpusight.rerun import overlay

    script = SCRIPT.replace("def main():\n", "def main():\n" + WRITERS.format(root=str(project)))
    (project / "train.py").write_text(script)
    (project / "notes.txt").write_text("the user's notes\n")
    why = overlay.unsuitable(str(project), tempfile.gettempdir())
    if why is not None:
        pytest.skip(f"no overlay here: {why}")
    line = script.splitlines().index("    loader = DataLoader(") + 1
    diff = loader_patch(script, line, "train.py", {"num_workers": 2})
    assert diff is not None
    fix = project.parent / "fix.diff"
    fix.write_text(header([PatchFile("train.py", text_sha256(script))], "test") + diff)
    before = snapshot(project)
    code = run_verify(fix)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert snapshot(project) == before
    assert not (project / "runs.db").exists()
    assert not left_behind()


def test_verify_without_an_overlay_refuses_a_copy_that_links_the_users_files(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpusight.rerun import overlay

    monkeypatch.setenv(overlay.OFF_ENV, "1")
    monkeypatch.setattr(sandbox, "COPY_MAX_FILE", 1024)
    (project / "data" / "big.raw").write_bytes(bytes(4096))  # linked, not copied
    fix = write_fix(project, {"num_workers": 2})
    before = snapshot(project)
    assert run_verify(fix) == 1
    err = capsys.readouterr().err
    assert "data/big.raw" in err and "--allow-linked-files" in err
    assert "nothing was changed in your files" in err
    assert snapshot(project) == before and not left_behind()
