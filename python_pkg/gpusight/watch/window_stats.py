"""A profiler window's figures (``trace_analysis.analyse``): per-step means of where the steps'
time went, and the kernel facts that go into the report's ``run.kernels``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WindowStats:
    """Per-step means over the analysed steps (ms), and kernel facts for ``run.kernels``."""

    steps: int
    step_ms: float
    split_ms: dict[str, float]
    data_wait_host_ms: float
    host_copy_ms: float
    gpu: bool
    device: int | None = None
    kernel_ms: float = 0.0
    kernels_per_step: float = 0.0
    launches_per_step: float = 0.0
    median_kernel_us: float | None = None
    short_kernel_pct: float | None = None
    matmul_ms: float = 0.0
    matmul_fp32_ms: float = 0.0
    """float32 matmul/conv/attention kernel time that ran without Tensor Cores (per step)."""
    matmul_tensor_core_ms: float = 0.0
    matmul_dtypes: dict[str, float] = field(default_factory=dict)
    conv_ms: float = 0.0
    conv_lowp_ms: float = 0.0
    layout_transform_ms: float = 0.0
    nccl_ms: float = 0.0
    memcpy_h2d_pageable: int = 0
    memcpy_h2d_pageable_bytes: int = 0
    memcpy_h2d_pageable_ms: float = 0.0
    memcpy_h2d_pinned: int = 0
    memcpy_d2h: int = 0
    memcpy_ms: float = 0.0
    sync_calls_per_step: float = 0.0
    sync_blocked_ms: float = 0.0
    cpu_op_ms: float = 0.0
    """Top-level aten ops on the main thread that launched no kernel (host compute)."""
    cpu_op_loop_ms: float = 0.0
    """The same, outside forward/backward/optimizer and the DataLoader: work in the loop body."""
    top_cpu_ops: list[tuple[str, float]] = field(default_factory=list)
    busy_pct: float | None = None
    sync_idle_ms: dict[str, float] = field(default_factory=dict)
    """Site key -> GPU idle time (ms, whole window) left behind by syncs from that site."""
    idle_host_wait_ms: float = 0.0
    """GPU idle gaps that ended with a kernel launched only after the GPU went idle: the GPU
    waited for the host (HolisticTraceAnalysis' "host wait"), per step."""
    idle_kernel_wait_ms: float = 0.0
    """Gaps before a kernel that was already launched: launch latency between kernels."""
    idle_other_ms: float = 0.0
    """Other gaps (before a copy, or at the end of the window)."""
    issued_gpu_ms: float | None = None
    """GPU time (union of kernels and copies) of the work the window's steps launched, per
    step, wherever on the GPU clock it ran: a step's device cost even when the host ran ahead."""
    gpu_behind_ms: float = 0.0
    """How long after the window's last step ended on the host the GPU finished that work."""
    device_paced: bool = False
    """The host ran ahead of the GPU (launch queue filling): the host-interval split is not the
    steady state, so the split and kernel facts come from the launched work instead."""
    launch_by_phase_ms: dict[str, float] = field(default_factory=dict)
    """The launch overhead (GPU idle inside the framework's calls) by the call it fell in:
    ``forward``, ``backward``, ``optimizer`` (per step; empty where the GPU set the pace)."""
    alignment_error_us: float | None = None
    """Median distance between the DataLoader's own profiler ranges and the hooks' data waits
    mapped onto the trace clock: a check of the alignment (None without a DataLoader)."""

    def kernels_dict(self) -> dict[str, float | int | str | None]:
        def r(x: float | None, n: int = 3) -> float | None:
            return None if x is None else round(x, n)

        out: dict[str, float | int | str | None] = {
            "window_steps": self.steps,
            "window_step_ms": r(self.step_ms),
            "cpu_op_ms_per_step": r(self.cpu_op_ms),
            "cpu_op_loop_ms_per_step": r(self.cpu_op_loop_ms),
        }
        if self.top_cpu_ops:
            out["top_cpu_op"] = self.top_cpu_ops[0][0]
        if self.alignment_error_us is not None:
            out["alignment_error_us"] = r(self.alignment_error_us, 1)
        if not self.gpu:
            return out
        out.update(
            {
                "device": self.device,
                "window_busy_pct": r(self.busy_pct, 2),
                "kernel_ms_per_step": r(self.kernel_ms),
                "kernels_per_step": r(self.kernels_per_step, 1),
                "launches_per_step": r(self.launches_per_step, 1),
                "median_kernel_us": r(self.median_kernel_us, 2),
                "short_kernel_pct": r(self.short_kernel_pct, 1),
                "matmul_ms_per_step": r(self.matmul_ms),
                "matmul_fp32_no_tensor_core_ms_per_step": r(self.matmul_fp32_ms),
                "matmul_tensor_core_ms_per_step": r(self.matmul_tensor_core_ms),
                "conv_ms_per_step": r(self.conv_ms),
                "conv_low_precision_ms_per_step": r(self.conv_lowp_ms),
                "layout_transform_ms_per_step": r(self.layout_transform_ms),
                "nccl_ms_per_step": r(self.nccl_ms),
                "memcpy_ms_per_step": r(self.memcpy_ms),
                "memcpy_h2d_pageable": self.memcpy_h2d_pageable,
                "memcpy_h2d_pageable_bytes": self.memcpy_h2d_pageable_bytes,
                "memcpy_h2d_pageable_ms_per_step": r(self.memcpy_h2d_pageable_ms),
                "memcpy_h2d_pinned": self.memcpy_h2d_pinned,
                "memcpy_d2h": self.memcpy_d2h,
                "idle_host_wait_ms_per_step": r(self.idle_host_wait_ms),
                "idle_kernel_wait_ms_per_step": r(self.idle_kernel_wait_ms),
                "idle_other_ms_per_step": r(self.idle_other_ms),
                "sync_calls_per_step": r(self.sync_calls_per_step, 2),
                "sync_blocked_ms_per_step": r(self.sync_blocked_ms),
                "issued_gpu_ms_per_step": r(self.issued_gpu_ms),
                "gpu_behind_ms": r(self.gpu_behind_ms),
                "device_paced": self.device_paced,
            }
        )
        for dtype, ms in sorted(self.matmul_dtypes.items()):
            out[f"matmul_{dtype}_ms_per_step"] = r(ms)
        for phase, ms in self.launch_by_phase_ms.items():
            out[f"launch_idle_{phase}_ms_per_step"] = r(ms)
        return out
