"""benchmarks/harness: the dispatch of an entry point to its method, the runner's timeout, the
command written beside the results, and the orders runs take turns in."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from bench_support import BENCHMARKS


@pytest.fixture(scope="module")
def harness() -> dict[str, ModuleType]:
    if str(BENCHMARKS) not in sys.path:  # as an entry point has it: the harness imports itself
        sys.path.insert(0, str(BENCHMARKS))
    import harness.cli
    import harness.order
    import harness.proc
    import harness.record

    return {
        "cli": harness.cli,
        "order": harness.order,
        "proc": harness.proc,
        "record": harness.record,
    }


def test_dispatch_runs_the_named_module_with_the_rest_of_the_arguments(
    harness: dict[str, ModuleType],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "fake_method.py").write_text(
        textwrap.dedent(
            """
            SEEN = []

            def main(argv):
                SEEN.append(list(argv))
                return 3
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cli = harness["cli"]
    choices = {"fake": ("fake_method", "a fake method"), "other": ("no_such_module", "unused")}
    kw = {"doc": "Doc line.\n\nMore.", "flag": "--method", "choices": choices}
    assert cli.dispatch(["--method", "fake", "--rounds", "2"], default="other", **kw) == 3
    assert cli.dispatch(["--only", "a", "--method=fake"], default="other", **kw) == 3
    assert cli.dispatch(["--only", "b"], default="fake", **kw) == 3
    import fake_method

    assert fake_method.SEEN == [["--rounds", "2"], ["--only", "a"], ["--only", "b"]]
    # --help without the flag lists the methods and imports none of them.
    assert cli.dispatch(["--help"], default="other", **kw) == 0
    out = capsys.readouterr().out
    assert "Doc line." in out and "a fake method" in out and "--method (default other)" in out
    with pytest.raises(SystemExit):
        cli.dispatch(["--method", "nope"], default="fake", **kw)


def test_a_command_past_its_timeout_is_killed_and_keeps_its_output(
    harness: dict[str, ModuleType],
) -> None:
    proc = harness["proc"]
    code = "import time; print('started', flush=True); time.sleep(60)"
    ran = proc.run([sys.executable, "-c", code], 1.0)
    assert ran.rc == 124 and ran.timed_out and ran.wall_s < 30
    assert ran.stdout == "started\n" and ran.stderr.endswith("(timed out after 1 s)")
    missing = proc.run(["/no/such/program"], 5)
    assert missing.rc == 127 and "No such file" in missing.stderr
    ok = proc.run([sys.executable, "-c", "import sys; print('o'); print('e', file=sys.stderr)"], 30)
    assert (ok.rc, ok.out, ok.timed_out) == (0, "o\ne\n", False)


def test_the_command_is_appended_beside_the_results_once(
    harness: dict[str, ModuleType], tmp_path: Path
) -> None:
    record = harness["record"]
    (tmp_path / "COMMAND.txt").write_text("# written by hand\n")
    record.write_results(tmp_path, "x", {"a": 1}, "table", "x-table.txt")
    record.write_results(tmp_path, "x", {"a": 2})
    lines = (tmp_path / "COMMAND.txt").read_text().splitlines()
    assert lines[0] == "# written by hand" and len(lines) == 3
    assert lines[1].startswith("# ") and "python" in lines[1]
    assert lines[2] == record.command_line()
    assert (tmp_path / "x-table.txt").read_text() == "table\n"


def test_a_copy_of_the_tree_inside_a_checkout_names_its_own_commit(
    harness: dict[str, ModuleType], tmp_path: Path
) -> None:
    """run43: ``.gpu-tree`` (a ``git archive`` of one commit) inside the device's copy of the
    working tree read that checkout's commit, another one. A copy reads its ``.tree-commit``."""
    import subprocess

    record = harness["record"]
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    commit = record.git_commit.__wrapped__  # uncached: each root its own
    assert commit(tmp_path) == head
    copy = tmp_path / ".gpu-tree"
    copy.mkdir()
    assert commit(copy) is None
    (copy / record.TREE_COMMIT).write_text("684d733\n")
    assert commit(copy) == "684d733"


def test_orders_alternate_and_rotate(harness: dict[str, ModuleType]) -> None:
    order = harness["order"]
    assert order.round_order(0, "bare", ("a", "b")) == ["bare", "a", "b"]
    assert order.round_order(1, "bare", ("a", "b")) == ["a", "b", "bare"]
    rotations = [order.rotated(("x", "y", "z"), r) for r in range(3)]
    assert all({rot[i] for rot in rotations} == {"x", "y", "z"} for i in range(3))
    assert order.abba(2, sides=("ours", "ref")) == [
        (0, "ours"), (0, "ref"), (1, "ref"), (1, "ours"),
    ]  # fmt: skip
