"""The TF32 switch the matmul benchmark flips is put back exactly, from any starting state.

Each scenario runs in a fresh interpreter: the flags are process-wide, and a test must not leave
other tests a changed torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCENARIOS = textwrap.dedent(
    """
    import torch
    from gpusight.bench.flags import matmul_fp32_precision, snapshot

    def check(mode, interrupt):
        before = snapshot()
        try:
            with matmul_fp32_precision(mode):
                inside = torch._C._get_fp32_precision_getter("cuda", "matmul")
                assert inside == mode, inside
                if interrupt:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        after = snapshot()
        changed = {k: (v, after.get(k)) for k, v in before.items() if v != after.get(k)}
        assert after == before, changed

    setups = [
        lambda: None,                                                   # defaults
        lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),  # legacy API
        lambda: torch.set_float32_matmul_precision("high"),             # legacy, several backends
        lambda: setattr(torch.backends, "fp32_precision", "tf32"),      # new API, generic
        lambda: setattr(torch.backends.cuda.matmul, "fp32_precision", "ieee"),
    ]
    for setup in setups:
        setup()
        for mode in ("ieee", "tf32"):
            for interrupt in (False, True):
                check(mode, interrupt)
    print("ok", len(setups))
    """
)


def test_precision_is_restored_exactly() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCENARIOS], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok 5"
