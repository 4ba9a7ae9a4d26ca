"""gpusight.bench.sizing and peaks: sizes within the device's limits, ceilings from the table."""

from __future__ import annotations

import itertools

import pytest
from gpusight.bench.copies import HEADLINE_SHARE, cell_budget, judge_link
from gpusight.bench.matmul import (
    SUSTAINED_MAX_REPEATS,
    SUSTAINED_MIN_REPEATS,
    SUSTAINED_TIMED_S,
    sustained_repeats,
)
from gpusight.bench.peaks import known_names, lookup, normalise_name, pcie_gbps
from gpusight.bench.sizing import (
    DeviceLimits,
    GiB,
    KiB,
    MiB,
    copy_sweep,
    d2d_bytes,
    matmul_size,
    rotation_sets,
)

H200 = DeviceLimits(sm_count=132, free_bytes=140 * GiB, total_bytes=141 * GiB, l2_bytes=60 * MiB)


def test_h200_gets_the_8192_class() -> None:
    for in_bytes in (4, 2, 1):
        size = matmul_size(H200, in_bytes)
        assert size is not None
        assert size.n == 8192
        assert size.fills_chip
        # the rotated inputs together exceed the L2 at least twice over
        assert size.sets * 2 * 8192**2 * in_bytes >= 2 * H200.l2_bytes


def test_small_memory_scales_down_and_fits() -> None:
    small = DeviceLimits(sm_count=132, free_bytes=1 * GiB, total_bytes=80 * GiB, l2_bytes=50 * MiB)
    size = matmul_size(small, 4)
    assert size is not None
    assert size.n < 8192
    assert size.bytes_needed <= 0.25 * small.free_bytes


def test_no_room_returns_none() -> None:
    tiny = DeviceLimits(sm_count=80, free_bytes=8 * MiB, total_bytes=16 * GiB, l2_bytes=6 * MiB)
    assert matmul_size(tiny, 4) is None


def test_smaller_gpus_start_at_4096() -> None:
    t4 = DeviceLimits(sm_count=40, free_bytes=15 * GiB, total_bytes=16 * GiB, l2_bytes=4 * MiB)
    size = matmul_size(t4, 2)
    assert size is not None and size.n == 4096


@pytest.mark.parametrize(
    ("sm", "free", "l2"),
    list(itertools.product([20, 46, 108, 132, 148], [256 * MiB, 3 * GiB, 20 * GiB, 180 * GiB],
                           [4 * MiB, 40 * MiB, 126 * MiB])),
)  # fmt: skip
def test_every_size_fits_the_device(sm: int, free: int, l2: int) -> None:
    limits = DeviceLimits(sm_count=sm, free_bytes=free, total_bytes=free * 2, l2_bytes=l2)
    for in_bytes in (4, 2, 1):
        size = matmul_size(limits, in_bytes)
        if size is not None:
            assert size.bytes_needed <= 0.25 * free
            assert 1024 <= size.n <= 8192
            assert 1 <= size.sets <= 8
    sweep = copy_sweep(free, 64 * GiB)
    assert all(s <= 0.25 * free and s <= GiB for s in sweep)
    assert d2d_bytes(limits) * 2 <= 0.2 * free + 1


def test_rotation_sets() -> None:
    assert rotation_sets(200 * MiB, 50 * MiB) == 1
    assert rotation_sets(40 * MiB, 50 * MiB) == 3
    assert rotation_sets(1 * MiB, 50 * MiB) == 8  # capped
    with pytest.raises(ValueError):
        rotation_sets(0, 50 * MiB)


def test_copy_sweep_spans_64k_to_1g() -> None:
    sizes = copy_sweep(140 * GiB, 128 * GiB)
    assert sizes[0] == 64 * KiB and sizes[-1] == GiB
    assert all(b == 4 * a for a, b in itertools.pairwise(sizes))
    capped = copy_sweep(140 * GiB, 1 * GiB)  # little host memory: two buffers must fit in it
    assert capped[-1] <= 128 * MiB


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200 96GB HBM3"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A10G", None),
        ("NVIDIA A30", "A30"),
        ("Tesla T4", "Tesla T4"),
        ("Tesla V100-SXM2-16GB", "Tesla V100 SXM2"),
        ("Tesla P100-PCIE-16GB", "Tesla P100 PCIe 16GB"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA GeForce RTX 5090", "GeForce RTX 5090"),
        ("NVIDIA GeForce RTX 3080", None),
        ("", None),
    ],
)
def test_lookup_by_device_name(name: str, expected: str | None) -> None:
    row = lookup(name)
    assert (row.name if row else None) == expected


def test_h200_ceilings_and_every_row_is_sourced() -> None:
    h200 = lookup("NVIDIA H200")
    assert h200 is not None
    assert (h200.bf16, h200.tf32, h200.fp32, h200.memory_gbps) == (989.5, 494.5, 67, 4800)
    assert normalise_name("NVIDIA A100-SXM4-80GB") == "a100 sxm4 80gb"
    assert len(known_names()) >= 25
    for name in known_names():
        row = lookup(name)
        assert row is not None and row.source and row.fp32 and row.memory_gbps
        rates = [r for r in (row.tf32, row.bf16, row.fp16, row.fp8) if r is not None]
        assert all(r >= row.fp32 for r in rates)
    with pytest.raises(ValueError):
        h200.tflops("int4")


def test_pcie_theoretical_rates() -> None:
    assert pcie_gbps(5, 16) == pytest.approx(63.015, abs=0.01)
    assert pcie_gbps(4, 16) == pytest.approx(31.5, abs=0.01)
    assert pcie_gbps(3, 16) == pytest.approx(15.75, abs=0.01)
    assert pcie_gbps(2, 8) == pytest.approx(4.0)
    assert pcie_gbps(1, 1) == pytest.approx(0.25)
    assert pcie_gbps(None, 16) is None
    assert pcie_gbps(7, 16) is None


def test_idle_link_is_judged_at_its_maximum() -> None:
    link = judge_link([(1, 16), (1, 16)], max_gen=5, max_width=16)
    assert link.used_gen == 5 and link.gen == 1
    assert link.theoretical_gbps == pytest.approx(63.015, abs=0.01)
    assert link.note is not None and "idle" in link.note
    assert "gen5 x16" in link.describe()


def test_loaded_link_and_narrow_width() -> None:
    loaded = judge_link([(1, 16), (5, 16)], max_gen=5, max_width=16)
    assert loaded.used_gen == 5 and loaded.note is None
    narrow = judge_link([(4, 8)], max_gen=4, max_width=16)
    assert narrow.used_width == 8
    assert narrow.theoretical_gbps == pytest.approx(15.75, abs=0.01)
    assert narrow.note is not None and "x8 of x16" in narrow.note
    unknown = judge_link([(None, None)], None, None)
    assert unknown.theoretical_gbps is None
    assert "unknown" in unknown.describe()


def test_the_largest_copy_keeps_its_share_of_the_budget() -> None:
    budget = 3.0
    # Seven smaller sizes share what the headline size does not keep.
    first = cell_budget(budget, sizes_left=8, direction_budget=budget)
    assert first == pytest.approx((1 - HEADLINE_SHARE) * budget / 7)
    # Cheap small sizes used 0.5 s of their 1.8 s: the largest gets everything left.
    assert cell_budget(2.5, sizes_left=1, direction_budget=budget) == pytest.approx(2.5)
    # The next-to-largest never eats into the headline's share.
    assert cell_budget(1.0, sizes_left=2, direction_budget=budget) == 0.0
    assert cell_budget(-1.0, sizes_left=1, direction_budget=budget) == 0.0


def test_sustained_matmul_times_a_window_not_a_count() -> None:
    # sub-ms tensor-core products get enough repeats to span the window (an fp8 8192^3 on an
    # H200 takes ~0.8 ms: 50 of them would cover 40 ms, one swing of the power controller)
    n = sustained_repeats(0.8e-3)
    assert n * 0.8e-3 >= SUSTAINED_TIMED_S
    assert n < SUSTAINED_MAX_REPEATS
    # a slow fp32 product keeps the minimum count, a tiny one the cap, a bad clock the cap
    assert sustained_repeats(0.02) == SUSTAINED_MIN_REPEATS
    assert sustained_repeats(1e-7) == SUSTAINED_MAX_REPEATS
    assert sustained_repeats(0.0) == SUSTAINED_MAX_REPEATS
