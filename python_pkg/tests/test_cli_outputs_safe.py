"""What gpusight writes never costs the user a file, and what it prints never drives the terminal.

Output paths are checked before any work (never the script, a report or patch the command reads,
a source file, or an existing file gpusight did not write); every write is whole or nothing (two
writers, a reader polling, a disk that fills half-way); report strings printed by ``diff`` and
``merge`` go through the one terminal escape ``check`` uses.
"""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from gpusight import atomic_write
from gpusight.cli import main
from html_support import typical_report

OSC52 = "\x1b]52;c;cm0gLXJmIH4=\x07"  # would set the clipboard to `rm -rf ~`


def _disk_full(fd: int) -> None:
    """``os.fsync`` on a disk that filled while the file was written."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _report_file(path: Path, title: str = "t", rank: bool = False, poison: str = "") -> Path:
    data: dict[str, Any] = typical_report().to_dict()
    data["title"] = title
    if poison:  # in what the commands print: a finding's title and a note
        data["findings"][0]["title"] += poison
        data["notes"].append(f"note{poison}")
    if rank:
        data["run"]["kernels"] = {"dist_rank": 0, "dist_world_size": 1}
    path.write_text(json.dumps(data), "utf-8")
    return path


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "train.py"
    p.write_text("print('trained')\n")
    return p


@pytest.mark.parametrize("option", ["--json", "--html", "--patch"])
def test_run_never_writes_over_its_script(
    script: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digest(script)
    assert main(["run", option, str(script), str(script)]) == 2
    assert "this command reads it" in capsys.readouterr().err
    assert _digest(script) == before


def test_run_refuses_a_source_file_and_a_file_not_its_own(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "model.py"
    other.write_text("x = 1\n")
    assert main(["run", "--json", str(other), str(script)]) == 2
    assert "a .py file is code or data" in capsys.readouterr().err
    data = tmp_path / "data.json"
    data.write_text('{"rows": [1, 2, 3]}')
    assert main(["run", "--json", str(data), str(script)]) == 2
    assert "is not a gpusight report" in capsys.readouterr().err
    assert data.read_text() == '{"rows": [1, 2, 3]}'
    assert other.read_text() == "x = 1\n"


def test_run_refuses_two_outputs_in_one_file(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert main(["run", "--json", str(out), "--html", str(out), str(script)]) == 2
    assert "two outputs to one file" in capsys.readouterr().err
    assert not out.exists()


def test_an_earlier_report_is_replaced(script: Path, tmp_path: Path) -> None:
    out = _report_file(tmp_path / "r.json", "old")
    pytest.importorskip("torch")
    assert main(["run", "--quiet", "--json", str(out), str(script)]) == 0
    assert json.loads(out.read_text())["title"] == "train.py"


def test_verify_never_writes_over_the_patch_or_the_report(
    script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "fix.diff"
    patch.write_text("--- a/train.py\n+++ b/train.py\n")
    before = _digest(patch)
    assert main(["run", "--verify", str(patch), "--json", str(patch), str(script)]) == 2
    assert "this command reads it" in capsys.readouterr().err
    assert _digest(patch) == before


def test_html_and_diff_never_write_over_their_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _report_file(tmp_path / "a.json"), _report_file(tmp_path / "b.json")
    digests = (_digest(a), _digest(b))
    assert main(["diff", str(a), str(b), "--html", str(b)]) == 2
    assert main(["html", str(a), "-o", str(tmp_path / "keep.py")]) == 2
    err = capsys.readouterr().err
    assert "this command reads it" in err and "code or data" in err
    assert (_digest(a), _digest(b)) == digests


def test_merge_never_writes_over_an_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rank = _report_file(tmp_path / "rank0.json", rank=True)
    before = _digest(rank)
    assert main(["merge", str(rank), "--json", str(rank)]) == 2
    assert "this command reads it" in capsys.readouterr().err
    assert _digest(rank) == before


def test_diff_and_merge_escape_what_the_reports_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _report_file(tmp_path / "a.json", "before", poison=f"{OSC52}\r\u202eevil")
    b = _report_file(tmp_path / "b.json", "after")
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    rank = _report_file(tmp_path / "rank0.json", "rank", rank=True, poison=OSC52)
    assert main(["merge", str(rank), "--label", f"job{OSC52}"]) == 0
    out += capsys.readouterr().out
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in out
    assert "\\x1b]52" in out


# -- atomic writes ------------------------------------------------------------------------------


def _writer(path: str, tag: int, rounds: int) -> None:
    for i in range(rounds):
        atomic_write.write_text(path, json.dumps({"tag": tag, "i": i, "pad": "x" * 200_000}))


def test_two_writers_and_a_reader_never_see_half_a_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), t, 10)) for t in (1, 2)]
    for p in procs:
        p.start()
    seen = 0
    while any(p.is_alive() for p in procs):
        if path.exists():
            json.loads(path.read_text())  # never partial
            seen += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    assert json.loads(path.read_text())["tag"] in (1, 2)
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_a_write_that_fails_half_way_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _report_file(tmp_path / "r.json", "kept")
    before = _digest(good)

    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(OSError, match="No space left"):
        typical_report().save(good)
    assert _digest(good) == before
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]


def test_a_rewritten_file_keeps_its_permissions(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text("{}")
    p.chmod(0o640)
    atomic_write.write_text(p, '{"a": 1}')
    assert p.stat().st_mode & 0o777 == 0o640
    assert json.loads(p.read_text()) == {"a": 1}


def _error_paths(tmp_path: Path, script: Path) -> dict[str, list[str]]:
    """Each command's error paths, every file name it is given carrying OSC 52."""
    bad = tmp_path / f"x{OSC52}"
    bad.mkdir()
    diff = bad / f"fix{OSC52}.diff"
    diff.write_text(f"not a diff {OSC52}\n")
    report = _report_file(bad / f"r{OSC52}.json")
    broken = bad / f"broken{OSC52}.json"
    broken.write_text("{" + OSC52)
    gone = str(bad / f"gone{OSC52}.json")
    return {
        "run a missing script": ["run", str(bad / f"missing{OSC52}.py")],
        "verify a missing patch": ["run", "--verify", gone, "--report", str(report), str(script)],
        "verify a bad patch": ["run", "--verify", str(diff), "--report", str(report), str(script)],
        "verify a missing report": ["run", "--verify", str(diff), "--report", gone, str(script)],
        "verify a broken report": [
            "run",
            "--verify",
            str(diff),
            "--report",
            str(broken),
            str(script),
        ],
        "html a missing report": ["html", gone],
        "html a broken report": ["html", str(broken)],
        "diff a broken report": ["diff", str(broken), str(report)],
        "merge a missing file": ["merge", gone],
        "check into a missing folder": ["check", "--json", str(bad / f"no{OSC52}" / "r.json")],
    }


def test_no_error_path_drives_the_terminal(
    tmp_path: Path, script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name is the user's text, never a terminal command: every message that names one
    (a missing patch, a report that is not JSON, a folder that does not exist) escapes it."""
    raw_out: dict[str, str] = {}
    named = []
    for case, argv in _error_paths(tmp_path, script).items():
        code = main(argv)
        out, err = capsys.readouterr()
        assert code != 0, case
        if any(c in out + err for c in ("\x1b", "\x07", "\x9b")):
            raw_out[case] = (out + err)[-200:]
        if "\\x1b]52" in out + err:  # the name shown, escaped
            named.append(case)
    assert raw_out == {}
    assert len(named) >= 6, named


def test_the_scripts_own_output_is_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Escaping is for what gpusight prints: the watched script's colours reach the terminal."""
    script = tmp_path / "colours.py"
    script.write_text("print('\\x1b[32mgreen\\x1b[0m')\n")
    assert main(["run", "--lean", str(script)]) == 0
    out = capsys.readouterr().out
    assert "\x1b[32mgreen\x1b[0m" in out


def test_a_long_legal_name_is_written(tmp_path: Path) -> None:
    """A 250-byte file name is legal; the temporary file beside it must be too."""
    path = tmp_path / ("r" * 245 + ".json")
    typical_report().save(path)
    assert json.loads(path.read_text())["title"] == typical_report().to_dict()["title"]
    assert [f.name for f in tmp_path.iterdir()] == [path.name]


def test_wrote_names_only_what_was_written(
    script: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A report left from an earlier run is not "wrote:" when this run's write failed."""
    old = _report_file(tmp_path / "r.json", "earlier")
    before = _digest(old)

    monkeypatch.setattr(os, "fsync", _disk_full)
    assert main(["run", "--lean", "--json", str(old), str(script)]) == 0
    err = capsys.readouterr().err
    assert f"could not write {old}: No space left on device" in err
    assert "wrote:" not in err and ".tmp" not in err
    assert _digest(old) == before


@pytest.mark.parametrize("spec", ["notjson", "[1]", '{"protect": []}'])
def test_a_stray_sandbox_variable_is_a_clear_error(
    spec: str, script: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GPUSIGHT_SANDBOX is gpusight's own, for its re-runs: set by anything else, the run says
    so and what to do, not "internal error"."""
    monkeypatch.setenv("GPUSIGHT_SANDBOX", spec)
    assert main(["run", "--lean", str(script)]) == 2
    err = capsys.readouterr().err
    assert "GPUSIGHT_SANDBOX is set" in err and "unset it" in err
    assert "internal error" not in err


def test_a_report_named_like_json_is_read_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file may be called ``{run1}.json``: the commands read it, never parse its name."""
    monkeypatch.chdir(tmp_path)
    _report_file(tmp_path / "{run1}.json", "braced")
    _report_file(tmp_path / "b.json", "plain")
    assert main(["html", "{run1}.json", "-o", "page.html"]) == 0
    assert main(["diff", "{run1}.json", "b.json"]) == 0
    assert "braced" in (tmp_path / "page.html").read_text()
    capsys.readouterr()
