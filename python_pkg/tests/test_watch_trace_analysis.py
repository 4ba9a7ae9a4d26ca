"""The profiler-window split on a small trace in kineto's Chrome-trace format (no torch).

The trace is hand-built, event for event in the shape torch.profiler exports on CUDA (cats
``kernel``, ``gpu_memcpy``, ``cuda_runtime``, ``cpu_op``; ``correlation`` linking a launch to its
kernel), with round numbers so every expected millisecond can be checked by hand.
"""

from __future__ import annotations

from typing import Any

import pytest
from gpusight.watch import intervals as iv
from gpusight.watch.kernel_names import dtype_from_name, kernel_kind, tensor_cores
from gpusight.watch.trace_analysis import Alignment, HostRecord, analyse

MAIN = 100  # host thread id


def op(name: str, ts: float, dur: float, types: list[str] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": 1}
    if types:
        args["Input type"] = types
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": MAIN,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def rt(name: str, ts: float, dur: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": name,
        "pid": 1,
        "tid": MAIN,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr},
    }


def gpu(cat: str, name: str, ts: float, dur: float, corr: int, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": corr, **args},
    }


def trace() -> dict[str, Any]:
    ev = [
        # step 1 [0, 10000] us: DataLoader wait, an fp32 matmul, .item(), a bf16 matmul, then
        # the backward tail
        op("aten::mm", 1000, 100, ["float", "float"]),
        rt("cudaLaunchKernel", 1050, 10, 1),
        gpu("kernel", "volta_sgemm_128x64_nn", 1100, 3900, 1),
        rt("cudaStreamSynchronize", 4000, 1010, 90),
        op("aten::addmm", 7900, 90, ["c10::BFloat16", "c10::BFloat16"]),
        rt("cudaLaunchKernel", 7950, 10, 2),
        gpu("kernel", "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn", 8000, 1000, 2),
        # step 2 [10000, 20000] us: a pageable copy, a half-precision conv with NCHW transposes,
        # then CPU tensor work in the loop body
        rt("cudaMemcpyAsync", 10000, 2000, 3),
        gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 10100, 1890, 3, bytes=64_000_000),
        op("aten::cudnn_convolution", 11995, 55, ["c10::Half", "c10::Half"]),
        rt("cudaLaunchKernel", 12000, 10, 4),
        rt("cudaLaunchKernel", 12020, 10, 5),
        gpu("kernel", "void cudnn::ops::nchwToNhwcKernel<__half>", 12100, 400, 4),
        gpu(
            "kernel",
            "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nchw",
            12500,
            5500,
            5,
        ),
        op("aten::flip", 18000, 1500, ["float"]),
        {"ph": "i", "name": "instant", "ts": 0},
    ]
    return {"traceEvents": ev}


def host() -> HostRecord:
    ms = 1_000_000
    return HostRecord(
        steps=[(0, 10 * ms), (10 * ms, 20 * ms)],
        data_wait=[(0, 1 * ms)],
        host_copies=[(10 * ms, 12 * ms)],
        framework=[(1 * ms, 1 * ms + 200_000), (9 * ms, 10 * ms)],
        syncs=[(5_020_000, "train.py:7")],
    )


def test_split_counts_each_microsecond_once() -> None:
    s = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), host(), main_tid=MAIN)
    assert s is not None and s.gpu and s.steps == 2
    # Step 1: compute 3900+1000; data 1000; sync 10 (host in sync, GPU idle) + 2990 (the gap
    # the sync left until the next kernel); launch 100 + 1000 (inside forward/backward).
    # Step 2: copy 1890 (GPU) + 100 + 10 (host blocked) + 100 (gap after the blocking copy);
    # compute 400 + 5500; other host 1500 (aten::flip) + 500.
    expected_ms = {
        "compute": (4900 + 5900) / 2 / 1000,
        "data_wait": 1000 / 2 / 1000,
        "sync_stall": 3000 / 2 / 1000,
        "launch_overhead": 1100 / 2 / 1000,
        "copy": 2100 / 2 / 1000,
        "other_cpu": 2000 / 2 / 1000,
        "communication": 0.0,
    }
    assert s.split_ms == pytest.approx(expected_ms)
    assert sum(s.split_ms.values()) == pytest.approx(s.step_ms) == pytest.approx(10.0)
    assert s.busy_pct == pytest.approx(100 * 10800 / 20000)


def test_launch_overhead_is_split_by_the_call_it_fell_in() -> None:
    h = host()
    h.framework_phases = ["forward", "backward"]
    s = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), h, main_tid=MAIN)
    assert s is not None
    # The 100 us idle inside the forward [1000, 1200] and the 1000 us after the bf16 kernel,
    # inside the backward [9000, 10000]: per step over the two steps.
    assert s.launch_by_phase_ms == pytest.approx({"forward": 0.05, "backward": 0.5})
    assert sum(s.launch_by_phase_ms.values()) == pytest.approx(s.split_ms["launch_overhead"])
    assert s.kernels_dict()["launch_idle_backward_ms_per_step"] == 0.5
    # An optimizer step nested in the backward's range takes its own share first.
    h.framework = [*h.framework, (9_500_000, 10_000_000)]
    h.framework_phases = ["forward", "backward", "optimizer"]
    s = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), h, main_tid=MAIN)
    assert s is not None
    assert s.launch_by_phase_ms == pytest.approx({"optimizer": 0.25, "backward": 0.25,
                                                  "forward": 0.05})  # fmt: skip
    # Phases not known (lists that disagree): no split, the total as before.
    h.framework_phases = ["forward"]
    s = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), h, main_tid=MAIN)
    assert s is not None and s.launch_by_phase_ms == {}


def test_kernel_facts() -> None:
    s = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), host(), main_tid=MAIN)
    assert s is not None
    assert s.matmul_fp32_ms == pytest.approx(3.9 / 2)  # sgemm, float inputs, no Tensor Cores
    assert s.matmul_tensor_core_ms == pytest.approx((1.0 + 5.5) / 2)
    assert s.conv_lowp_ms == pytest.approx(5.5 / 2)
    assert s.layout_transform_ms == pytest.approx(0.4 / 2)
    assert s.memcpy_h2d_pageable == 1 and s.memcpy_h2d_pageable_bytes == 64_000_000
    assert s.launches_per_step == 2.0
    assert s.sync_idle_ms == {"train.py:7": pytest.approx(2.99)}
    assert s.cpu_op_loop_ms == pytest.approx(0.75)
    assert s.top_cpu_ops[0][0] == "aten::flip"
    # Gaps: [0, 1100] ends with a kernel launched at 1050 (after the GPU idled): host wait;
    # [5000, 8000] ends with one launched at 7950: host wait; [9000, 10000] and the copy-ended
    # gaps are "other"; [11990, 12100] ends with a kernel launched at 12000: host wait.
    assert s.idle_host_wait_ms == pytest.approx((1100 + 3000 + 110) / 2 / 1000)
    assert s.idle_other_ms == pytest.approx((1000 + 100 + 2000) / 2 / 1000)
    assert s.idle_kernel_wait_ms == 0.0
    k = s.kernels_dict()
    assert k["memcpy_h2d_pageable"] == 1 and k["matmul_fp32_ms_per_step"] == pytest.approx(1.95)


def test_alignment_shifts_host_ranges() -> None:
    # The same run on a trace clock 5 s ahead: host ranges must land on the same events.
    shifted = trace()
    for e in shifted["traceEvents"]:
        e["ts"] = e["ts"] + 5_000_000
    a = analyse(trace(), Alignment(perf_ns=0, trace_us=0.0), host(), main_tid=MAIN)
    b = analyse(shifted, Alignment(perf_ns=0, trace_us=5_000_000.0), host(), main_tid=MAIN)
    assert a is not None and b is not None and a.split_ms == pytest.approx(b.split_ms)


def test_no_steps_no_stats() -> None:
    assert analyse(trace(), Alignment(0, 0.0), HostRecord(steps=[]), main_tid=MAIN) is None


def test_interval_sets() -> None:
    u = iv.union([(5, 7), (0, 2), (1, 3), (7, 8)])
    assert u == [(0, 3), (5, 8)]
    assert iv.subtract([(0, 10)], u) == [(3, 5), (8, 10)]
    assert iv.intersect(u, [(2, 6)]) == [(2, 3), (5, 6)]
    assert iv.clip(u, 1, 6) == [(1, 3), (5, 6)]
    assert iv.gaps(u, 0, 10) == [(3, 5), (8, 10)]
    assert iv.total(u) == 6


@pytest.mark.parametrize(
    ("name", "kind", "tc", "dtype"),
    [
        ("volta_sgemm_128x64_nn", "matmul", False, "fp32"),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
            "matmul",
            True,
            "tf32",
        ),
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "matmul", True, "bf16"),
        ("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8", "matmul", False, "fp32"),
        ("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT", "matmul", True, None),
        ("void cudnn::ops::nchwToNhwcKernel<__half>", "layout", None, "fp16"),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "nccl", None, None),
        ("flash_fwd_kernel", "attention", True, None),
        ("void at::native::vectorized_elementwise_kernel<4>", "other", None, None),
    ],
)
def test_kernel_names(name: str, kind: str, tc: bool | None, dtype: str | None) -> None:
    assert kernel_kind(name) == kind
    if kind in ("matmul", "attention"):
        assert tensor_cores(name) is tc
    assert dtype_from_name(name) == dtype


@pytest.mark.parametrize(("tf32", "fp32_no_tc"), [(False, 2.0), (True, 0.0)])
def test_float32_matmul_tensor_cores_follow_torch_flags(tf32: bool, fp32_no_tc: float) -> None:
    """Hopper cuBLAS names its GEMMs nvjet_*: for a float32 op, torch's TF32 flag decides."""
    t = {
        "traceEvents": [
            op("aten::mm", 0, 50, ["float", "float"]),
            rt("cudaLaunchKernel", 10, 5, 1),
            gpu("kernel", "nvjet_tst_192x192_64x3_1x2_h_bz_coopB_NNT", 100, 2000, 1),
        ]
    }
    host = HostRecord(steps=[(0, 3_000_000)])
    s = analyse(t, Alignment(0, 0.0), host, main_tid=MAIN, fp32_tensor_cores=tf32)
    assert s is not None
    assert s.matmul_fp32_ms == pytest.approx(fp32_no_tc)
    assert s.matmul_dtypes == {("tf32" if tf32 else "fp32"): pytest.approx(2.0)}


def test_two_point_alignment_corrects_the_rate() -> None:
    a = Alignment(
        perf_ns=0, trace_us=100.0, perf_ns_end=1_000_000_000, trace_us_end=100.0 + 1_000_500.0
    )
    assert a.rate == pytest.approx(1.0005)
    assert a.to_trace(500_000_000) == pytest.approx(100.0 + 500_250.0)
    assert Alignment(0, 0.0, 10, 5.0).rate == 1.0  # too close together to say


def test_cast_kernels_inside_linear_are_not_matmul_time() -> None:
    """Under autocast, aten::linear (float) casts its inputs, then runs aten::addmm in bf16."""
    t = {
        "traceEvents": [
            op("aten::linear", 0, 100, ["float", "float"]),
            op("aten::_to_copy", 5, 20, ["float"]),
            rt("cudaLaunchKernel", 10, 5, 1),
            op("aten::addmm", 40, 50, ["c10::BFloat16", "c10::BFloat16"]),
            rt("cudaLaunchKernel", 50, 5, 2),
            gpu("kernel", "void at::native::unrolled_elementwise_kernel<copy>", 100, 300, 1),
            gpu("kernel", "nvjet_tst_128x128_64x4_1x2_h_bz_TNT", 400, 1000, 2),
        ]
    }
    s = analyse(t, Alignment(0, 0.0), HostRecord(steps=[(0, 2_000_000)]), main_tid=MAIN)
    assert s is not None
    assert s.matmul_ms == pytest.approx(1.0) and s.matmul_fp32_ms == 0.0
    assert s.matmul_dtypes == {"bf16": pytest.approx(1.0)}
