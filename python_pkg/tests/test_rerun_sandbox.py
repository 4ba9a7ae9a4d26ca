"""Re-runs work in a scratch copy of the user's folder: the folder is byte-identical afterwards.

``gpusight run --what-if`` re-runs the script several times; a script that writes its metrics,
checkpoint and log beside itself (truncating, through ``torch.save``'s native writer, appending)
and a data file below it must leave all of them as they were, a ``gpusight.py`` of the user's
must not replace gpusight in the re-runs, and no scratch folder may be left behind. The guard in
each re-run makes a file it writes through a link its own, and refuses to change the user's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gpusight.rerun import sandbox
from gpusight.rerun.driver import LAUNCH
from gpusight.rerun.write_guard import ENV

WRITER = """import torch
from torch import nn

model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
open("metrics.csv", "w").write("step,loss\\n")
for i in range(400):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if i % 50 == 0:
        with open("metrics.csv", "a") as f:
            f.write(f"{i},{loss.item():.4f}\\n")
with open("train.log", "a") as f:
    f.write("done\\n")
open("data/data.txt", "w").write("overwritten\\n")
torch.save(model.state_dict(), "ckpt.pt")
"""


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    import torch

    root = tmp_path / "project"
    (root / "data").mkdir(parents=True)
    (root / "train.py").write_text(WRITER)
    (root / "metrics.csv").write_text("step,loss\n" + "".join(f"{i},0.1\n" for i in range(5000)))
    (root / "train.log").write_text("an earlier run\n")
    (root / "data" / "data.txt").write_text("the user's data\n")
    torch.save({"w": torch.ones(3)}, root / "ckpt.pt")
    (root / "gpusight.py").write_text("raise SystemExit('the user gpusight.py was imported')\n")
    return root


def test_a_what_if_leaves_the_users_folder_as_it_was(project: Path, tmp_path: Path) -> None:
    before = _digests(project)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = tmp_path / "r.json"
    env = {**os.environ, "TMPDIR": str(scratch)}
    # The command as users type it (``python -m gpusight`` here would import the folder's
    # gpusight.py, as Python does for any module name).
    gpusight = str(Path(sys.executable).parent / "gpusight")
    cmd = [gpusight, "run", "--what-if", "--budget", "40", "--json", str(out), "train.py"]
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _digests(project) == before
    assert "the user gpusight.py was imported" not in done.stderr
    report = json.loads(out.read_text())
    assert report["run"]["steps"] > 0  # the baseline ran (gpusight, not the user's gpusight.py)
    assert any("scratch copy" in n for n in report["notes"])
    # Every scratch folder of gpusight's removed (torch keeps its compile cache there).
    assert [p.name for p in scratch.iterdir() if p.name.startswith("gpusight")] == []


def _guarded_run(box: sandbox.Sandbox, code: str) -> subprocess.CompletedProcess[str]:
    script = Path(box.path) / "step.py"
    script.write_text(code)
    guard = {"copy": box.path, "protect": [box.root]}
    cmd = [sys.executable, "-c", LAUNCH, "run", "--quiet", "--facts",
           str(Path(box.path) / "facts.json"), str(script)]  # fmt: skip
    env = {**os.environ, ENV: json.dumps(guard)}
    return subprocess.run(cmd, cwd=box.path, env=env, capture_output=True, text=True, timeout=120)


def test_a_file_written_through_a_link_becomes_the_copys_own(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "COPY_MAX_TOTAL", 0)  # nothing fits: every file is linked
    ckpt = hashlib.sha256((project / "ckpt.pt").read_bytes()).hexdigest()
    box = sandbox.make(str(project))
    try:
        assert "train.log" in box.linked and (Path(box.path) / "train.log").is_symlink()
        assert (Path(box.path) / "ckpt.pt").is_symlink()
        done = _guarded_run(
            box,
            "open('train.log', 'a').write('appended\\n')\n"
            "open('metrics.csv', 'w').write('new\\n')\n"
            "import torch\n"
            "torch.save({'w': torch.zeros(2)}, 'ckpt.pt')  # written from C++\n",
        )
        assert done.returncode == 0, done.stderr[-2000:]
        copy = Path(box.path)
        assert (copy / "train.log").read_text() == "an earlier run\nappended\n"
        assert (copy / "metrics.csv").read_text() == "new\n"
        assert not (copy / "train.log").is_symlink()
        assert (project / "train.log").read_text() == "an earlier run\n"
        assert (project / "metrics.csv").read_text().count("\n") == 5001
        assert hashlib.sha256((project / "ckpt.pt").read_bytes()).hexdigest() == ckpt
        assert not (copy / "ckpt.pt").is_symlink()
    finally:
        box.remove()


def test_a_write_that_would_reach_the_users_folder_is_refused(project: Path) -> None:
    box = sandbox.make(str(project))
    target = project / "data" / "data.txt"
    try:
        done = _guarded_run(box, f"open({str(target)!r}, 'w').write('x')\n")
        assert done.returncode != 0
        assert "does not change your files" in done.stderr
        assert target.read_text() == "the user's data\n"
    finally:
        box.remove()


def test_writes_outside_the_folder_are_recorded(project: Path, tmp_path: Path) -> None:
    elsewhere = Path.home() / f".gpusight-test-{os.getpid()}.txt"
    box = sandbox.make(str(project))
    try:
        done = _guarded_run(box, f"open({str(elsewhere)!r}, 'w').write('x')\n")
        assert done.returncode == 0, done.stderr[-2000:]
        facts = json.loads((Path(box.path) / "facts.json").read_text())
        assert str(elsewhere.resolve()) in facts["writes_outside"]
    finally:
        box.remove()
        elsewhere.unlink(missing_ok=True)


def test_a_copy_within_its_limits_links_the_rest_and_never_copies_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "home"
    for d in ("a", "b", "c"):
        (root / d).mkdir(parents=True)
        (root / d / "f.txt").write_text(d)
    monkeypatch.setattr(sandbox, "COPY_MAX_FILES", 1)
    monkeypatch.setattr(sandbox, "COPY_MAX_ENTRIES", 3)
    monkeypatch.setattr(sandbox.tempfile, "tempdir", str(root / "c"))  # the copy lies below
    box = sandbox.make(str(root))
    try:
        copy = Path(box.path)
        assert copy.parent.parent == root / "c" and copy.name == "home"
        assert not (copy / "a").is_symlink() and not (copy / "a" / "f.txt").is_symlink()
        assert (copy / "b").is_symlink()  # the entries were spent: the folder is linked whole
        assert not (copy / "c").is_symlink()  # it holds the copy: walked, the copy left out
        assert (copy / "c" / "f.txt").is_symlink()  # past the file limit: linked
        assert not (copy / "c" / copy.parent.name).exists()
    finally:
        box.remove()


def test_a_what_if_refuses_writes_outside_the_folder_unless_allowed(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    # Not below /tmp (scratch, whose writes are routine): the user's home.
    outside = Path.home() / f".gpusight-test-outside-{os.getpid()}" / "ckpt.txt"
    outside.parent.mkdir(exist_ok=True)
    request.addfinalizer(lambda: shutil.rmtree(outside.parent, ignore_errors=True))
    (project / "train.py").write_text(
        "import torch\nm = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        f"open({str(outside)!r}, 'a').write('a run\\n')\n"
        "for _ in range(200):\n    opt.zero_grad()\n    m(torch.randn(3, 4)).sum().backward()\n"
        "    opt.step()\n"
    )
    gpusight = str(Path(sys.executable).parent / "gpusight")
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    env["TMPDIR"] = str(tmp_path / "scratch")  # not the folder written to
    Path(env["TMPDIR"]).mkdir()

    def what_if(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [gpusight, "run", "--what-if", "--budget", "30", *extra, "--json", "r.json",
               "train.py"]  # fmt: skip
        return subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True,
                              timeout=200)  # fmt: skip

    refused = what_if()
    assert refused.returncode == 1
    assert "writes outside its folder" in refused.stderr and "--allow-writes-outside" in (
        refused.stderr
    )
    assert not outside.exists()
    allowed = what_if("--allow-writes-outside")
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert outside.read_text().count("a run") >= 2  # once per re-run, as the note says
    notes = json.loads((project / "r.json").read_text())["notes"]
    assert any("wrote outside the folder" in n and str(outside) in n for n in notes)


def test_compiler_caches_are_routine_even_where_writes_outside_are_refused(
    tmp_path: Path,
) -> None:
    from gpusight.rerun.write_guard import Guard

    guard = Guard(str(tmp_path / "copy"), [str(tmp_path / "user")], refuse_outside=True)
    # Triton builds its launcher modules under ~/.triton (torch.compile on a GPU), the CUDA
    # driver its JIT cache under ~/.nv: a compiled re-run writes there every time.
    for cache in ("~/.triton/cache/ab/cuda_utils.so", "~/.nv/ComputeCache/index"):
        guard.hook("open", (os.path.expanduser(cache), "wb", 0))
    with pytest.raises(PermissionError, match="writes outside its folder"):
        guard.hook("open", (os.path.expanduser("~/.gpusight-not-a-cache/x"), "w", 0))


def test_a_what_if_works_with_tmpdir_inside_the_users_folder(tmp_path: Path) -> None:
    """TMPDIR=./tmp is scratch, even inside the folder the re-runs must not change: gpusight's
    own files and the script's temporary ones go there (every what-if failed on them)."""
    import subprocess
    import sys

    folder = tmp_path / "project"
    (folder / "tmp").mkdir(parents=True)
    (folder / "train.py").write_text(
        "import tempfile, torch\n"
        "m = torch.nn.Linear(8, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "tempfile.NamedTemporaryFile(delete=False).write(b'scratch')\n"
        "for _ in range(40):\n"
        "    opt.zero_grad()\n    m(torch.randn(4, 8)).sum().backward()\n    opt.step()\n"
    )
    gpusight = str(Path(sys.executable).parent / "gpusight")
    env = {**os.environ, "TMPDIR": str(folder / "tmp")}
    done = subprocess.run(
        [gpusight, "run", "--what-if", "--budget", "40", "--steps", "8", "train.py"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "baseline run failed" not in done.stderr, done.stderr[-2000:]
    assert "does not change your files" not in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["tmp", "train.py"]


def test_what_a_run_writes_beside_its_folder_goes_with_the_copy(project: Path) -> None:
    """``os.chdir("../logs")`` in a re-run: the copy lies in a folder of its own, under the
    user's folder's name, so the logs land in it and go when it goes (they were left in TMPDIR)."""
    box = sandbox.make(str(project))
    holder = Path(box.path).parent
    try:
        assert Path(box.path).name == project.name
        done = _guarded_run(
            box, "import os\nos.makedirs('../logs')\nos.chdir('../logs')\nopen('l.txt', 'w')\n"
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert (holder / "logs" / "l.txt").is_file()
        assert not (project.parent / "logs").exists()
    finally:
        box.remove()
    assert not holder.exists()


def test_sigterm_while_the_folder_is_copied_leaves_no_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real SIGTERM to gpusight while it copies the folder for --what-if: it stops with the
    shell's code for it, and no gpusight-whatif-copy-* is left behind."""
    import signal
    import tempfile

    from gpusight.cli import main

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text("print('trained')\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.chdir(folder)
    fill = sandbox._fill

    def terminated_while_filling(*args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        fill(*args, **kwargs)

    monkeypatch.setattr(sandbox, "_fill", terminated_while_filling)
    assert main(["run", "--what-if", "--budget", "10", "train.py"]) == 128 + signal.SIGTERM
    assert "interrupted while copying" in capsys.readouterr().err
    assert list(scratch.iterdir()) == []
