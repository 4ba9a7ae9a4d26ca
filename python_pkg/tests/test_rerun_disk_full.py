"""A re-run that fails on a full disk says which disk (issue #52): TMPDIR, where gpusight keeps
the folder's copy, the runs' reports and the script's temporary files, is named with its free
space; a disk the script writes its own output to is not called TMPDIR."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from gpusight.rerun import disk_full

FILLS_TMP = """import tempfile, torch
with tempfile.NamedTemporaryFile() as f:
    for _ in range(64):
        f.write(b"x" * (1 << 20))  # 64 MB into an 8 MB TMPDIR
        f.flush()
"""


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "small"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                          capture_output=True, check=False)  # fmt: skip
    if made.returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_tmpdir_is_named_not_blamed_on_the_script(tmp_path: Path, small_tmpfs: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(FILLS_TMP)
    gpusight = str(Path(sys.executable).parent / "gpusight")
    done = subprocess.run(
        [gpusight, "run", "--what-if", "--budget", "30", "train.py"],
        cwd=project, env={**os.environ, "TMPDIR": str(small_tmpfs)},
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"the baseline run failed: TMPDIR ({small_tmpfs}, " in done.stderr, done.stderr
    assert "filled up" in done.stderr and "point TMPDIR at a larger disk" in done.stderr
    assert "crashed" not in done.stderr


def test_a_full_disk_elsewhere_is_the_scripts_own(tmp_path: Path) -> None:
    tail = "OSError: [Errno 28] No space left on device: '/data/run/ckpt.pt'"
    said = disk_full.why(tail, str(tmp_path))
    assert said is not None and said.startswith("the disk the script wrote to filled up")
    assert disk_full.why("ValueError: bad shape", str(tmp_path)) is None
    in_tmp = f"OSError: [Errno 28] No space left on device: '{tmp_path}/x'"
    assert (disk_full.why(in_tmp, str(tmp_path)) or "").startswith(f"TMPDIR ({tmp_path}, ")
