"""Debugging switches that were on while a watched run's steps were measured: autograd anomaly
detection, deterministic algorithms, ``CUDA_LAUNCH_BLOCKING``. ``gpusight check`` finds them as
the process has them; a script that turns one on itself (``torch.autograd.set_detect_anomaly(True)``
at its top) is found only here, from the flags the measured steps ran with.

Anomaly detection and a blocking launch slow every step several times over, and every other
figure of the report carries their cost: on a GPU run they are critical and lead the report
(``report.LEADS``). Deterministic algorithms cost what the model's ops make of them: a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..report import Finding
from .env_checks import EnvironmentResult
from .env_settings import anomaly_check, deterministic_check
from .env_system import launch_blocking_finding, launch_blocking_on

MEASURED_WITH = (
    "It was on while the steps were measured: every figure of this report carries its cost, "
    "so watch again with it off before acting on the others."
)


def debug_switches(flags: Mapping[str, Any], env: Mapping[str, str], gpu: bool) -> list[Finding]:
    """The findings for the switches on in ``flags`` (``watch.machine.torch_flags``' reading)
    and ``env``; ``gpu``: the steps ran on a GPU."""
    settings = {
        "anomaly_enabled": flags.get("anomaly_detection"),
        "deterministic_algorithms": flags.get("deterministic_algorithms"),
        "cudnn.deterministic": flags.get("cudnn.deterministic"),
    }
    out = EnvironmentResult()
    anomaly_check(settings, out)
    deterministic_check(settings, out)
    found = list(out.findings)
    value = env.get("CUDA_LAUNCH_BLOCKING")
    if gpu and launch_blocking_on(value):
        found.append(launch_blocking_finding(str(value), gpu))
    for f in found:
        if f.id == "cfg.anomaly_detection" and gpu:
            f.severity = "critical"
        if f.id != "cfg.deterministic":
            f.detail = f"{f.detail} {MEASURED_WITH}"
    return found
