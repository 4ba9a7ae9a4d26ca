"""benchmarks/whatifs/corpus.py: which of the script's own arguments make the change a what-if
row measured, so its truth is the same change (a combined row's winners, the script's switches)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bench_support import benchmark


@pytest.fixture(scope="module")
def corpus() -> Iterator[ModuleType]:
    with benchmark("whatifs.corpus") as mod:
        yield mod


def _row(group: str, speedup: float, **params: Any) -> dict[str, Any]:
    return {"speedup": speedup, "params": {"group": group, **params}}


REPORT = {
    "what_if": [
        _row("batch", 2.7, set_script_arg="--per_device_train_batch_size 32"),
        _row("batch", 4.48, set_script_arg="--per_device_train_batch_size 512"),
        _row("autocast", 0.61, set_autocast="bfloat16"),
        _row("together", 19.3, winners="batch,autocast"),
    ]
}


def test_a_combined_row_is_its_winners_arguments_together(corpus: ModuleType) -> None:
    meta = {"TRUTH_ARGS": {"autocast": ["--bf16"]}}
    got = corpus.same_change(REPORT["what_if"][-1], REPORT, meta)
    assert got == ["--per_device_train_batch_size", "512", "--bf16"]


def test_a_winner_without_the_scripts_own_switch_leaves_no_same_change(
    corpus: ModuleType,
) -> None:
    assert corpus.same_change(REPORT["what_if"][-1], REPORT, {}) == []


def test_a_batch_row_is_its_own_argument(corpus: ModuleType) -> None:
    assert corpus.same_change(REPORT["what_if"][0], REPORT, {}) == [
        "--per_device_train_batch_size",
        "32",
    ]


def test_a_loader_setting_on_the_winning_workers_is_compared_over_the_control() -> None:
    # On the H200: pinning read 1.28x over the 14 workers' run, which read 7.59x over the
    # control; --fix (workers and pinning) is held to the two together, 9.72x.
    with benchmark("whatifs.truth") as truth:
        rows = [
            {"change": "DataLoader num_workers=14", "speedup": 7.59,
             "params": {"group": "workers"}},
            {"change": "DataLoader pin_memory=True on top of DataLoader num_workers=14",
             "speedup": 1.28,
             "params": {"group": "loader", "stacked_on": "DataLoader num_workers=14"}},
        ]  # fmt: skip
        got = truth.pick({"what_if": rows}, "loader_together")
        assert got is not None and got["speedup"] == pytest.approx(7.59 * 1.28, abs=1e-3)
        assert got["over"] == "DataLoader num_workers=14"
        # A combined row, where one ran, is the answer.
        both = [*rows, {"change": "all winners together", "speedup": 9.9,
                        "params": {"group": "together"}}]  # fmt: skip
        assert truth.pick({"what_if": both}, "loader_together")["speedup"] == 9.9


def test_a_combined_row_the_scripts_arguments_cannot_make_is_held_to_no_truth(
    corpus: ModuleType,
) -> None:
    # On the H100, hf_trainer_defaults' combined row (batch 128, bf16, TF32) read 10.27x and
    # was held to --fix (batch 64, bf16, 4 workers: 5.96x): another computation, +72 %.
    report = {"what_if": [*REPORT["what_if"][:3], _row("tf32", 2.61, stacked_on="batch")]}
    together = _row("together", 10.27, winners="batch,autocast,tf32")
    report["what_if"].append(together)
    own = {"TRUTH_ARGS": {"autocast": ["--bf16"]}}
    assert corpus.same_change(together, report, own) == []
    note = corpus.unlike_fix(together, [])
    assert note is not None and "batch,autocast,tf32" in note
    both = {"TRUTH_ARGS": {"autocast": ["--bf16"], "tf32": ["--tf32"]}}
    variant = corpus.same_change(together, report, both)
    assert variant == ["--per_device_train_batch_size", "512", "--bf16", "--tf32"]
    assert corpus.unlike_fix(together, variant) is None
    assert corpus.unlike_fix(REPORT["what_if"][0], []) is None  # one change: --fix stands


def test_a_combined_loader_row_takes_the_scripts_switch_for_each_setting_it_ran(
    corpus: ModuleType,
) -> None:
    """The H100's tv_transforms_loader (run31): 14 workers won, pinning won on top of 28; the
    combined run took 28 workers and pinning, which ``-j`` and ``--pin-memory`` make."""
    report = {
        "what_if": [
            _row("workers", 6.78, set_num_workers=14),
            _row("workers", 6.17, set_num_workers=28),
            _row("loader", 1.24, set_num_workers=28, set_pin_memory=True),
        ]
    }
    together = _row("together", 7.67, winners="workers,loader")
    own = {"TRUTH_ARGS": {"set_num_workers": ["-j", "{}"], "set_pin_memory": ["--pin-memory"]}}
    assert corpus.same_change(together, report, own) == ["-j", "28", "--pin-memory"]
    # A setting the script has no switch for (prefetch_factor): no truth of the same change.
    report["what_if"][2] = _row("loader", 1.3, set_num_workers=28, set_prefetch_factor=4)
    assert corpus.same_change(together, report, own) == []


def test_kept_workers_and_an_injected_batch_have_the_scripts_own_switches(
    corpus: ModuleType,
) -> None:
    """The H100's audio_melspec_loader (run42): 14 kept workers and batch 256 (injected: the
    script's -b defaults to None) read 11.24x together, and no truth could be made of them;
    the scripts whose rows keep workers now say how to keep them."""
    report = {
        "what_if": [
            _row("workers", 4.85, set_num_workers=8, set_persistent_workers=True),
            _row("workers", 8.48, set_num_workers=14, set_persistent_workers=True),
            _row("batch", 1.31, set_batch_size=256),
        ]
    }
    together = _row("together", 11.24, winners="workers,batch")
    meta = corpus.scripts()
    assert corpus.same_change(together, report, meta["audio_melspec_loader"]) == [
        "-j", "14", "--persistent-workers", "-b", "256"
    ]  # fmt: skip
    workers_only = _row("together", 8.0, winners="workers")
    assert corpus.same_change(workers_only, report, meta["tv_transforms_loader"]) == [
        "-j", "14", "--persistent-workers"
    ]  # fmt: skip


def test_an_injected_row_is_held_to_the_scripts_own_switch_for_it(corpus: ModuleType) -> None:
    """The H100's timm_accum (run42): the micro-batch row (DataLoader batch_size=256, injected:
    the script's -b defaults to None) was held to --fix (batch 128, no accumulation), another
    change; -b 256 is the same one. A row on top of another's winner is over that run: none."""
    meta = corpus.scripts()["timm_accum"]
    report = {"what_if": [_row("batch", 4.99, set_batch_size=256)]}
    assert corpus.same_change(report["what_if"][0], report, meta) == ["-b", "256"]
    stacked = _row("channels_last", 1.02, set_batch_size=256, set_channels_last=True,
                   stacked_on="DataLoader batch_size=256")  # fmt: skip
    assert corpus.same_change(stacked, report, meta) == []
    unknown = _row("tf32", 1.1, set_tf32=True)
    assert corpus.same_change(unknown, report, meta) == []
    # The accumulation's row (the loop's own accum = 8 at 1 beside a batch of 128) is the
    # script's --fix, through its own switches.
    traded = _row("accumulation", 4.4, set_batch_size=128, set_accumulation=1)
    assert corpus.same_change(traded, report, meta) == ["-b", "128", "--accum-steps", "1"]
    assert corpus.pick({"what_if": [*report["what_if"], traded]}, "accumulation") == traded


def test_the_budget_reached_the_plans_end_where_no_row_was_left_out_for_it(
    corpus: ModuleType,
) -> None:
    """The H100's tv_transforms_loader (run29): one winner, so no combined row, but its batch
    arm was left out over the budget: the plan's end was not reached."""
    ran = [{"change": "DataLoader num_workers=8", "speedup": 6.15, "skipped": None},
           {"change": "line 61", "speedup": None,
            "skipped": "not tried: line 61 is not in the loop"}]  # fmt: skip
    assert corpus.plan_done(ran)
    short = {"change": "DataLoader batch_size=512", "speedup": None,
             "skipped": "over the budget: needs ~37 s, 29 s left (raise --budget)"}  # fmt: skip
    kept = {"change": "autocast on top of batch", "speedup": None,
            "skipped": "not run: needs ~20 s; the 25 s left are kept for the winners together "
            "(~22 s; raise --budget for this one too)"}  # fmt: skip
    together = {"change": "all winners together: a, b", "speedup": None,
                "skipped": "over the budget", "group": "together"}  # fmt: skip
    for left_out in (short, kept, together):
        assert not corpus.plan_done([*ran, left_out])
    assert not corpus.plan_done([])


def test_the_table_says_which_what_ifs_forked_their_runs_and_why_the_others_did_not(
    corpus: ModuleType,
) -> None:
    forked = "each re-run after the first started from one process that had imported torch"
    fresh = "each re-run imported its libraries afresh: an import started Python threads (x)"
    rows = [{"change": "--batch-size 64", "speedup": 4.0, "skipped": None, "group": "batch"}]
    results = {
        name: {"library": "torch", "verdict": "launch_overhead", "verdict_ok": True,
               "rows": rows, "start": corpus.how_runs_started({"notes": ["x", note]})}
        for name, note in (("a", forked), ("b", fresh))
    }  # fmt: skip
    text = corpus.table(results)
    assert "the re-runs forked from the warm start on 1 of 2" in text
    assert "started fresh: each re-run imported its libraries afresh: an import started" in text
    assert corpus.how_runs_started({"notes": ["no such note"]}) is None


def test_a_row_stacked_on_another_winner_is_not_held_to_the_scripts_fix() -> None:
    # hf_bert_custom_loop on an H100 (h100-run35): bf16 autocast read 3.29x on top of batch 64
    # (over the batch-64 run), 0.25x alone; --fix is autocast at the script's batch of 16.
    with benchmark("whatifs.truth") as truth:
        rows = [
            {"change": "bf16 autocast", "speedup": 0.25, "params": {"group": "autocast"}},
            {"change": "bf16 autocast on top of --batch-size 64", "speedup": 3.29,
             "params": {"group": "autocast", "stacked_on": "--batch-size 64"}},
        ]  # fmt: skip
        got = truth.pick({"what_if": rows}, "autocast")
        assert got is not None and got["speedup"] == 0.25
        assert truth.pick({"what_if": rows[1:]}, "autocast") is None


def test_every_pick_the_corpus_names_finds_its_row() -> None:
    """lightning_progress_bar's pick (h100 run41): its row read 1.12x, and the table said
    "no knob: verdict only", since the pick was not one the harness knew."""
    import ast
    from pathlib import Path

    corpus_dir = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus"
    picks = set()
    for script in corpus_dir.glob("*.py"):
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "pick":
                        if isinstance(v, ast.Constant) and isinstance(v.value, str):
                            picks.add(v.value)
    assert "progress_bar" in picks
    with benchmark("whatifs.truth") as truth:
        for how in picks:
            row = {"change": how, "speedup": 1.5, "params": {"group": how}}
            together = {
                "change": "all",
                "speedup": 2.0,
                "params": {"group": "together", "winners": "autocast,tf32"},
            }
            assert truth.pick({"what_if": [row, together]}, how) is not None, how


def test_a_combined_row_no_truth_can_make_holds_its_largest_winner_row_instead(
    corpus: ModuleType,
) -> None:
    # The H100's hf_trainer_defaults (h100-run37): batch 128, bf16, TF32 and compile together,
    # which the script's arguments cannot make; its batch row can, through the script's own
    # argument. bf16 on top of the batch is another computation than bf16 alone: left out.
    rows = [
        _row("batch", 2.80, set_script_arg="--per_device_train_batch_size 32"),
        _row("batch", 4.44, set_script_arg="--per_device_train_batch_size 128"),
        _row("autocast", 2.37, set_autocast="bfloat16", stacked_on="batch"),
        _row("compile", 1.25),
        _row("together", 14.79, winners="batch,autocast,tf32,compile"),
    ]
    report = {"what_if": rows}
    held = corpus.held_instead(rows[-1], report, {})
    assert held is not None
    row, variant = held
    assert row["speedup"] == 4.44 and variant == ["--per_device_train_batch_size", "128"]
    # No winner the script's arguments can make: nothing held.
    lone = {"what_if": [_row("compile", 1.25), _row("together", 1.3, winners="compile,tf32")]}
    assert corpus.held_instead(lone["what_if"][-1], lone, {}) is None


RATES = """import json, sys
from pathlib import Path

# Each bare run reads the next rate from RATES (a drifting machine); --fix runs at 1000 items/s.
seen = Path(__file__).with_suffix(".n")
n = int(seen.read_text()) if seen.exists() else 0
fix = "--fix" in sys.argv
if not fix:
    seen.write_text(str(n + 1))
rates = RATES
rate = 1000.0 if fix else rates[min(n, len(rates) - 1)]
print("CORPUS_RESULT " + json.dumps({"items_per_s": rate}))
"""


def _rated(tmp_path: Path, rates: list[float]) -> None:
    (tmp_path / "drift.py").write_text(RATES.replace("rates = RATES", f"rates = {rates}"))


def test_a_truth_whose_rounds_disagree_takes_more_rounds(
    tmp_path: Path, corpus: ModuleType
) -> None:
    with benchmark("whatifs.truth") as truth:
        _rated(tmp_path, [100.0, 150.0, 125.0, 125.0, 50.0])
        got = truth.truth("drift", ["--fix"], None, 2, folder=tmp_path)
        # 10x and 6.67x are 40 % apart: two more rounds (not more than twice those asked).
        assert got["bare_items_per_s"] == [100.0, 150.0, 125.0, 125.0]
        assert got["gain"] == 8.0 and got["spread_pct"] == 41.7
        # The table says so beside the row held to it.
        said = corpus.table({"drift": {"truth_fix": got, "rows": []}})
        assert "truth unsettled: rounds [10.0, 6.667, 8.0, 8.0], 42% apart" in said
        (tmp_path / "drift.n").unlink()
        _rated(tmp_path, [100.0, 104.0, 50.0])
        got = truth.truth("drift", ["--fix"], None, 2, folder=tmp_path)
        assert got["bare_items_per_s"] == [100.0, 104.0] and got["spread_pct"] < 10


def test_the_trainers_nan_check_row_is_held_to_the_scripts_switch(corpus: ModuleType) -> None:
    """hf_trainer_defaults takes the nan-check change as a switch of its own: the row alone and
    the winners together each have a truth of the same change."""
    meta = corpus.scripts()["hf_trainer_defaults"]
    off = _row("nan_check", 1.2, set_nan_check="off")
    batch = _row("batch", 3.3, set_script_arg="--per_device_train_batch_size 128")
    together = _row("together", 3.9, winners="batch,nan_check")
    report = {"what_if": [batch, off, together]}
    assert corpus.same_change(off, report, meta) == ["--no-nan-filter"]
    assert corpus.same_change(together, report, meta) == [
        "--per_device_train_batch_size", "128", "--no-nan-filter"]  # fmt: skip
