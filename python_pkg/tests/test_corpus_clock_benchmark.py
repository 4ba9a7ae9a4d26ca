"""benchmarks/corpus/_corpus.py's clock: a script that marks its batches' shapes gets a steady
rate too, each shape's first step left out, and the truth harness reads that rate."""

from __future__ import annotations

import argparse
import json

import torch
from bench_support import benchmark


def test_the_steady_rate_leaves_out_each_shapes_first_step() -> None:
    with benchmark("corpus._corpus") as corpus:
        # Five timed steps after one warm-up: lengths 128 (seen in warm-up), 200 (new: 1 s),
        # 200, 128, 300 (new: 1 s); the others take 0.1 s each, 10 items a step.
        ends = [0.0, 0.1, 1.1, 1.2, 1.3, 2.3]
        shapes: list[object] = [128, 200, 200, 128, 300]
        got = corpus.steady(ends, [10] * 5, shapes, 1)
    assert got["new_shape_steps"] == 2
    assert abs(float(got["steady_items_per_s"]) - 100.0) < 1e-6  # 20 items in 0.2 s


def test_a_script_that_marks_shapes_prints_both_rates_and_the_truth_takes_the_steady_one(
    capsys: object,
) -> None:
    with benchmark("corpus._corpus") as corpus:
        args = argparse.Namespace(warmup=1, fix=False)
        with corpus.Clock("t", args, torch.device("cpu")) as clock:
            for n in (8, 8, 9, 8, 9, 10):
                clock.mark(4, shape=n)
            clock.done()
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    line = next(ln for ln in out.splitlines() if ln.startswith("CORPUS_RESULT "))
    r = json.loads(line.split(" ", 1)[1])
    assert r["new_shape_steps"] == 2 and r["items_per_s"] and r["steady_items_per_s"]
    with benchmark("harness.scripts") as scripts:
        assert scripts.items_per_s(line) == r["steady_items_per_s"]
        plain = {k: v for k, v in r.items() if not k.startswith(("steady", "new_shape"))}
        assert scripts.items_per_s("CORPUS_RESULT " + json.dumps(plain)) == r["items_per_s"]
