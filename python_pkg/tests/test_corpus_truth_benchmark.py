"""benchmarks/whatifs/corpus.py: which of the script's own arguments make the change a what-if
row measured, so its truth is the same change (a combined row's winners, the script's switches)."""

from __future__ import annotations

from collections.abc import Iterator
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
