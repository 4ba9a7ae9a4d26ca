"""benchmarks/cost/inject.py: a short real run on the CPU that leaves torch as it found it."""

from __future__ import annotations

import pytest
from bench_support import benchmark


def test_a_short_run_prints_each_variant_and_restores_torch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import torch
    from torch.nn.modules import module as m

    hooks = (len(m._global_forward_pre_hooks), len(m._global_forward_hooks))
    flags = (torch.get_num_threads(), torch.get_float32_matmul_precision())
    with benchmark("cost.inject") as mod:
        assert mod.main(["--rounds", "2", "--calls", "20"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("injection cost on a 20-module forward")
    assert "bare" in out and "injected" in out
    assert (len(m._global_forward_pre_hooks), len(m._global_forward_hooks)) == hooks
    # The injected flag (tf32) is undone after each block, and the thread count put back.
    assert (torch.get_num_threads(), torch.get_float32_matmul_precision()) == flags
