"""The distributed rules' thresholds, in one place."""

# A rank whose own work per step is this much above the median rank's is a straggler ...
STRAGGLER_PCT = 10.0
# ... and the wait it causes must cost at least this share of the step to be a finding.
IMBALANCE_NAMED_PCT = 5.0
# Exposed communication (on the slowest rank) as a share of the step.
COMM_WARN_PCT = 20.0
COMM_CRITICAL_PCT = 50.0
# NVML utilisation: a GPU under IDLE is idle; one at BUSY or above is doing the run's work.
IDLE_UTIL_PCT = 5.0
BUSY_UTIL_PCT = 20.0
# All-reduce bus bandwidth under this share of the link's ceiling (largest message) is slow:
# nccl-tests reach 70-90 % of the per-GPU NVLink bandwidth on healthy H100/H200 systems.
NCCL_SLOW_SHARE = 0.5
