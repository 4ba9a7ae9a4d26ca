"""The numbers the workload findings rest on, in one place: when each rule fires, how severe its
finding is, and what share of the time it names its fix claims back. Shares are percent of the
mean steady step unless named otherwise; the figures an impact is bounded by are beside it in
``workload_impacts``.
"""

from __future__ import annotations

# load.input_bound: the step waits at least this share for its DataLoader ...
INPUT_WAIT_PCT = 5.0
INPUT_WAIT_WARN_PCT = 10.0
INPUT_WAIT_CRITICAL_PCT = 40.0
# ... but a batch built in the main process this fast (ms) is no input-pipeline problem: a
# worker's handoff of the batch (pickled through shared memory) costs a good part of it (the PyG
# GCN at one graph a batch read a false 1.17x warn beside its launch-bound verdict).
SMALL_COLLATE_MS = 1.0

# load.cpu_preprocessing: host work outside the model.
HOST_WORK_PCT = 10.0
HOST_WORK_WARN_PCT = 20.0
HOST_WORK_CRITICAL_PCT = 50.0

# load.launch_bound: the GPU idle between kernels inside forward/backward/optimizer.
LAUNCH_IDLE_PCT = 15.0
LAUNCH_IDLE_WARN_PCT = 15.0
LAUNCH_IDLE_CRITICAL_PCT = 50.0
# Of that idle time, what CUDA graphs (and fusion) give back.
LAUNCH_RECOVERY = 0.8

# load.small_batch: a training batch this small, the GPU busy under this share, and launch
# overhead at least this share of the step.
SMALL_BATCH_MAX = 64
SMALL_BATCH_BUSY_PCT = 50.0
SMALL_BATCH_LAUNCH_PCT = 15.0

# infer.unbatched: inference this many requests per forward or fewer; a warning while the GPU
# is busy under this share, else information.
UNBATCHED_MAX = 4
UNBATCHED_BUSY_PCT = 50.0

# load.amp_unused: float32 matmul/conv kernels at least this share of the GPU's compute time
# and this long (ms per step); critical from this share of the step.
FP32_MATMUL_SHARE = 0.25
FP32_MATMUL_MIN_MS = 0.05
FP32_MATMUL_CRITICAL_PCT = 50.0
# ... and where the loader's batches came in this many shapes (sequence lengths) or more, its
# fix pads them to a multiple of 64: bf16 attention in cuDNN builds a plan for each new length
# (BERT's bf16 steps took 267 ms over the first 25 steps of a run, 34 ms once its lengths were
# padded to a multiple of 64: h100-run35's probe on an H200).
MANY_SHAPES = 8
# Tensor Cores run bf16 matmuls several times faster than float32 without them; claim a
# conservative three quarters of that kernel time back.
TENSOR_CORE_RECOVERY = 0.75

# load.channels_last: NCHW<->NHWC transposes at least this share of the GPU's compute time (or
# a tensor not in channels_last), and half-precision convolutions with their transposes at
# least this share.
TRANSPOSE_SHARE = 0.03
NCHW_CONV_SHARE = 0.2
# Claimed back: the transposes, or at least this share of the convolutions' time.
CHANNELS_LAST_RECOVERY = 0.15

# code.host_sync: the GPU idle after syncs this share of the step, or this many syncs per step.
SYNC_STALL_PCT = 1.0
SYNCS_PER_STEP = 1.0
SYNC_WARN_PCT = 5.0
SYNC_CRITICAL_PCT = 25.0

# code.pageable_copy: blocking copies from pageable memory count from this share of the step;
# a copy share under the warning share is information.
PAGEABLE_SYNC_COPY_PCT = 10.0
COPY_WARN_PCT = 5.0
COPY_CRITICAL_PCT = 25.0

# load.oom_risk: the peak reserved this share of the GPU's memory or more; critical from the
# second.
OOM_RISK_SHARE = 0.9
OOM_CRITICAL_SHARE = 0.97
# load.memory_headroom: the peak under this share of the memory while the GPU is busy under
# this share; the suggested batch grows the peak towards the target share.
HEADROOM_SHARE = 0.3
HEADROOM_BUSY_PCT = 70.0
HEADROOM_TARGET_SHARE = 0.6

# load.optimizer_unfused: an optimizer's host time per step this large a share of the step, over
# at least this many parameter tensors, is launch work a fused update does in a few kernels.
OPTIMIZER_SHARE_PCT = 10.0
OPTIMIZER_CRITICAL_PCT = 30.0
OPTIMIZER_MIN_TENSORS = 64
# Of the optimizer's host time, what a fused update gives back: a loop over the tensors launches
# a few kernels per tensor (most of it), foreach a few per group of tensors (less).
FUSED_RECOVERY = {"loop": (0.5, 0.9), "foreach": (0.2, 0.6)}
# The optimizer's step holding this share of the launch overhead leads the launch fix with a
# fused optimizer (its per-parameter kernels are the launches).
OPTIMIZER_LAUNCH_SHARE = 0.5

# load.float64: critical where the low end of the estimate reaches this gain.
FLOAT64_CRITICAL_SPEEDUP = 1.5
# On a CPU float32 runs the math at about twice float64's rate: twice the values per SIMD
# instruction, half the bytes (this project's AMD EPYC core, one thread: sgemm 80, dgemm 32-36
# GFLOP/s at n=256-512, 2.2-2.5x; a step's other work gains less).
CPU_FP32_OVER_FP64 = 2.0
# A float64 kernel that is not a matmul (elementwise, reductions) reads twice float32's bytes: in
# float32 at most this many times faster.
FP64_BYTES_RATIO = 2.0
# Where the GPU's float64 rate is not known, float32 matmuls run from this many times faster
# (parts with float64 Tensor Cores, A100/H100) to this many (1/64-rate parts: Ada, GA10x).
FP64_RATIO_UNKNOWN = (1.0, 64.0)

# ... unless this share of its parameter elements is on the CPU while a GPU is used: their update
# is CPU math, a hundred times slower an element than the GPU's, which explains the optimizer's
# time (33 M of them behind a ViT on the H200 read a false critical 1.11x, issue #47).
OPTIMIZER_CPU_SHARE = 0.1

# code.device_mismatch, for modules left on the CPU beside the rest on a GPU: their host time
# (forward, the backward at about twice it, their optimizer update) this share of the step makes
# a warning, and this one critical.
SPLIT_WARN_PCT = 5.0
SPLIT_CRITICAL_PCT = 20.0
# A backward costs about twice its forward (two products per product of the forward).
BACKWARD_PER_FORWARD = 2.0
