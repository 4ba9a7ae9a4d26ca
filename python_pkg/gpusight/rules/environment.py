"""Environment rules: facts -> the checklist (``Check`` rows) and findings with catalogue ids.

Pure functions of plain data (``probes.facts``); nothing here imports torch or pynvml, so a test
can hand in an H200 on PCIe Gen5 x16 with a lowered power limit and get the real judgement.

The rules live by layer: ``env_torch`` (the torch build, CUDA, driver, toolkit), ``env_gpu``
(each GPU, from NVML), ``env_system`` (the process and machine), ``env_settings`` (torch flags);
``env_versions`` holds the arithmetic they share and ``env_checks`` the checklist they fill.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..probes.facts import Facts
from ..report import Finding, Verdict
from .env_checks import NOT_CHECKED, EnvironmentResult
from .env_gpu import BUSY_UTIL_PCT, POWER_CAP_RATIO, _gpu_rules
from .env_settings import _settings_rules, _tensorflow_rules, tf32_cudnn, tf32_matmul
from .env_system import SHM_MIN_BYTES, _system_rules, launch_blocking_on, visible_devices_hide_all
from .env_torch import _cuda_rules, _toolkit_rules, _torch_rules
from .env_versions import (
    DEFAULT_INDEX,
    DRIVER_BRANCH_FOR_MAJOR,
    PCIE_EFFICIENCY,
    PCIE_GT_S,
    TORCH_CUDA_INDEXES,
    arch_support,
    cudnn_version,
    driver_support,
    fmt_bytes,
    index_for_driver,
    parse_arch,
    parse_version,
    pcie_gbps,
    vstr,
)

__all__ = [
    "BUSY_UTIL_PCT",
    "DEFAULT_INDEX",
    "DRIVER_BRANCH_FOR_MAJOR",
    "NOT_CHECKED",
    "PCIE_EFFICIENCY",
    "PCIE_GT_S",
    "POWER_CAP_RATIO",
    "SHM_MIN_BYTES",
    "TORCH_CUDA_INDEXES",
    "EnvironmentResult",
    "arch_support",
    "cudnn_version",
    "driver_support",
    "evaluate",
    "fmt_bytes",
    "index_for_driver",
    "launch_blocking_on",
    "parse_arch",
    "parse_version",
    "pcie_gbps",
    "tf32_cudnn",
    "tf32_matmul",
    "verdict",
    "visible_devices_hide_all",
    "vstr",
]


def evaluate(facts: Facts) -> EnvironmentResult:
    """Walk the environment checklist over ``facts``."""
    out = EnvironmentResult()
    _torch_rules(facts, out)
    _cuda_rules(facts, out)
    _toolkit_rules(facts, out)
    _gpu_rules(facts, out)
    _system_rules(facts, out)
    _settings_rules(facts, out)
    _tensorflow_rules(facts, out)
    if facts.toolkit.nvcc_why:
        out.notes.append(f"nvcc not checked: {facts.toolkit.nvcc_why}")
    return out


def verdict(facts: Facts, findings: Sequence[Finding]) -> Verdict:
    """'environment' when anything critical stands in the way, else 'none'; one sentence."""
    critical = [f for f in findings if f.severity == "critical"]
    warns = [f for f in findings if f.severity == "warn"]
    if critical:
        more = f" (and {len(critical) - 1} more critical problem(s))" if len(critical) > 1 else ""
        return Verdict(
            bottleneck="environment",
            gpu_busy_pct=None,
            summary=f"Not ready: {critical[0].title}{more}.",
        )
    t = facts.torch
    names = ", ".join(d.name for d in t.devices) or "no GPU"
    where = f"torch {t.version} (CUDA {t.cuda or t.hip}) sees {t.device_count} GPU(s): {names}"
    if warns:
        return Verdict(
            bottleneck="none",
            gpu_busy_pct=None,
            summary=f"Usable: {where}, with {len(warns)} warning(s), first: {warns[0].title}.",
        )
    return Verdict(
        bottleneck="none",
        gpu_busy_pct=None,
        summary=f"Ready: {where}, and nothing in the environment holds it back.",
    )
