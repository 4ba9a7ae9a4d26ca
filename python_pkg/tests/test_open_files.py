"""Files an earlier cell left open for writing write to scratch copies while a cell's re-runs
run (``jupyter/open_files.py``, issue #52): a buffered Python file, a raw descriptor and a
read-write one (sqlite's kind) each leave the user's file as it was, and afterwards write to it
again where they left off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gpusight.jupyter.open_files import files_redirected, writable_in

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="Linux only")


def test_open_files_write_to_copies_inside_and_to_the_users_files_again_after(
    tmp_path: Path,
) -> None:
    root, scratch = tmp_path / "project", tmp_path / "scratch"
    root.mkdir()
    log, raw, db = root / "train.log", root / "raw.bin", root / "state.db"
    log.write_text("the user's log\n")
    db.write_bytes(b"0123456789")
    f = open(log, "a")  # an earlier cell's open file
    f.write("before\n")  # still in the buffer when the re-runs start
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"abc")
    rw = os.open(db, os.O_RDWR)
    os.lseek(rw, 4, os.SEEK_SET)
    reader = open(log)  # read-only: left alone
    try:
        with files_redirected(str(root), str(scratch)) as covered:
            assert covered == sorted(str(p) for p in (log, raw, db))
            f.write("from a re-run\n")
            f.flush()
            os.write(fd, b"XYZ")
            assert os.read(rw, 2) == b"45"  # the copy holds the file's bytes, at its offset
            os.write(rw, b"##")
        f.write("after\n")
        f.flush()
        os.write(fd, b"def")
        os.write(rw, b"!!")
    finally:
        f.close()
        os.close(fd)
        os.close(rw)
        reader.close()
    assert log.read_text() == "the user's log\nbefore\nafter\n"
    assert raw.read_bytes() == b"abcdef"
    assert db.read_bytes() == b"0123!!6789"


def test_only_descriptors_open_for_writing_inside_the_folder_are_taken(tmp_path: Path) -> None:
    inside, outside = tmp_path / "project", tmp_path / "elsewhere"
    (inside / ".ipython").mkdir(parents=True)  # a notebook started at the home directory
    outside.mkdir()
    with (
        open(inside / "w.txt", "w") as w,
        open(inside / "w.txt") as _r,
        open(outside / "o.txt", "w") as _o,
        open(inside / ".ipython" / "history.sqlite", "w") as _history,
    ):
        assert writable_in(str(inside)) == [(w.fileno(), str(inside / "w.txt"))]
