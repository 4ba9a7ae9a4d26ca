"""Every process of a re-run sees the user's folder through an overlay (``rerun/overlay.py``):
a child process writing by absolute path, sqlite, and a native write through one of the scratch
copy's links to the user's large files all leave the folder byte-identical (issue #52). Python's
own ``open`` is guarded apart (``test_rerun_sandbox.py``); these writers are past that guard.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from gpusight.commands.run import sandbox_note
from gpusight.rerun import overlay, sandbox
from gpusight.rerun.driver import ScriptRunner

WRITERS = """import os, sqlite3, subprocess, sys
import torch

USER = {user!r}
# A child process that writes by absolute path (a shell, another python, a tool).
subprocess.run([sys.executable, "-c",
                f"open({{os.path.join(USER, 'notes.txt')!r}}, 'a').write('child was here')"],
               check=True)
subprocess.run(["sh", "-c", f"echo shell > '{{USER}}/made_by_shell.txt'"], check=True)
# sqlite writes from C, into the user's database by its absolute path.
db = sqlite3.connect(os.path.join(USER, "runs.db"))
db.execute("INSERT INTO runs VALUES ('a re-run')")
db.commit()
db.close()
# A native write through the copy's link to a large file (os.open is not Python's open).
fd = os.open("data.raw", os.O_WRONLY)
os.write(fd, b"overwritten")
os.close(fd)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(200):
    opt.zero_grad()
    model(torch.randn(16, 8)).pow(2).mean().backward()
    opt.step()
"""


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text(WRITERS.format(user=str(root)))
    (root / "notes.txt").write_text("the user's notes\n")
    (root / "data.raw").write_bytes(bytes(range(256)) * 16)
    db = sqlite3.connect(root / "runs.db")
    db.execute("CREATE TABLE runs (name TEXT)")
    db.execute("INSERT INTO runs VALUES ('the user''s run')")
    db.commit()
    db.close()
    return root


def _runner(project: Path, monkeypatch: pytest.MonkeyPatch, warm: bool = False) -> ScriptRunner:
    monkeypatch.setattr(sandbox, "COPY_MAX_FILE", 1024)  # data.raw (4 KB) is linked, not copied
    monkeypatch.chdir(project)
    box = sandbox.make(str(project))
    assert "data.raw" in box.linked
    return ScriptRunner("train.py", [], steps=6, warmup=2, lean=True, sandbox=box, warm=warm)


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "forked"])
def test_a_reruns_child_processes_sqlite_and_native_writes_leave_the_folder_as_it_was(
    project: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    """Forked from the warm start (``warm_start.py``), a run enters its overlay itself."""
    before = _digests(project)
    runner = _runner(project, monkeypatch, warm)
    assert runner.sandbox is not None
    try:
        if isinstance(runner.overlay, str):
            pytest.skip(f"no overlay on this machine: {runner.overlay}")
        for label in ("control", "again"):  # the second run sees none of the first's writes
            res = runner(label, {}, False, 120.0)
            assert res.ok, res.error
        assert _digests(project) == before
        assert not (project / "made_by_shell.txt").exists()
        rows = sqlite3.connect(project / "runs.db").execute("SELECT name FROM runs").fetchall()
        assert rows == [("the user's run",)]
        # Each run's layer went with it.
        assert [p.name for p in runner.tmp.iterdir() if p.name.startswith("overlay-")] == []
        note = sandbox_note(runner.sandbox, {}, runner.overlay)
        assert "through an overlay" in note
        if warm:
            assert runner.warm is not None and runner.warm.why is None
            assert runner.warm.asked == 2 and runner.warm.said is not None  # "again" forked
    finally:
        runner.close()
        runner.sandbox.remove()
        overlay.remove(str(runner.tmp))


def test_where_no_overlay_can_be_made_the_report_says_what_was_not_kept_off(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(overlay.OFF_ENV, "1")
    runner = _runner(project, monkeypatch)
    assert runner.sandbox is not None
    try:
        assert runner.overlay == f"{overlay.OFF_ENV} is set"
        note = sandbox_note(runner.sandbox, {}, runner.overlay)
        assert "were not kept off your folder (GPUSIGHT_NO_OVERLAY is set)" in note
    finally:
        runner.sandbox.remove()
        overlay.remove(str(runner.tmp))


def test_no_overlay_is_tried_over_a_folder_that_holds_its_own_scratch(tmp_path: Path) -> None:
    holder = tmp_path / "tmp"
    holder.mkdir()
    assert overlay.over(str(tmp_path), str(holder)) == (
        "the scratch folder lies inside the folder it would cover"
    )
    assert overlay.unsuitable("/", str(holder)) == "the folder is the file system's root"


def test_a_layer_is_removed_even_where_overlayfs_left_its_work_folder_unreadable(
    tmp_path: Path,
) -> None:
    made = overlay.Overlay(str(tmp_path / "user"), str(tmp_path))
    with made.layer() as (upper, work):
        locked = Path(work) / "work"
        locked.mkdir()
        (locked / "f").write_text("x")
        locked.chmod(0)
        Path(upper, "a.txt").write_text("a")
    assert [p.name for p in tmp_path.iterdir()] == []


def test_without_an_overlay_a_copy_that_links_the_users_files_is_refused_unless_allowed(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where no overlay can be made, a native writer could change a file the copy only links
    (too large to copy): the what-if refuses before running, names the files and the flag."""
    from gpusight.cli import main

    monkeypatch.setenv(overlay.OFF_ENV, "1")
    monkeypatch.setattr(sandbox, "COPY_MAX_FILE", 1024)  # data.raw (4 KB) is linked
    monkeypatch.chdir(project)
    (project / "train.py").write_text(
        "import torch\nm = torch.nn.Linear(8, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(100):\n    opt.zero_grad()\n    m(torch.randn(4, 8)).sum().backward()\n"
        "    opt.step()\n"
    )
    before = _digests(project)
    assert main(["run", "--what-if", "--budget", "8", "train.py"]) == 2
    err = capsys.readouterr().err
    assert "no overlay can be made here (GPUSIGHT_NO_OVERLAY is set)" in err
    assert "data.raw" in err and "--allow-linked-files" in err
    assert _digests(project) == before
    assert main(["run", "--what-if", "--budget", "8", "--steps", "4", "--allow-linked-files",
                 "--json", "../r.json", "train.py"]) == 0  # fmt: skip
    notes = " ".join(__import__("json").loads((project.parent / "r.json").read_text())["notes"])
    assert "were not kept off your folder (GPUSIGHT_NO_OVERLAY is set)" in notes


def test_a_folder_with_a_file_system_mounted_inside_gets_no_overlay(tmp_path: Path) -> None:
    """An overlay shows one file system: a data folder mounted inside the user's would look empty
    to the re-runs, so none is made there (the copy and its guard keep the folder)."""
    table = tmp_path / "mountinfo"
    user = tmp_path / "my project"
    table.write_text(
        "22 27 0:21 / /proc rw - proc proc rw\n"
        f"90 27 0:50 / {str(user).replace(' ', chr(92) + '040')}/data rw - nfs srv:/d rw\n"
        f"91 27 0:51 / {tmp_path}/other rw - tmpfs tmpfs rw\n"
    )
    assert overlay.mounts_below(str(user), str(table)) == [f"{user}/data"]
    assert overlay.mounts_below(str(tmp_path / "other"), str(table)) == []
    (user / "data").mkdir(parents=True)
    holder = tmp_path / "hold"
    holder.mkdir()
    import subprocess

    made = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(user / "data")], check=False,
                          capture_output=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip("mounting needs root")
    try:
        why = overlay.over(str(user), str(holder))
        assert why == f"a file system is mounted inside the folder ({user}/data)"
    finally:
        subprocess.run(["umount", "-l", str(user / "data")], check=False)
