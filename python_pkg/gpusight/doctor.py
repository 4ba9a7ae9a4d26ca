"""The environment doctor: ``check()`` collects facts, applies the rules, returns a Report."""

from __future__ import annotations

from typing import Any

from .machine_facts import build_machine
from .probes import collect
from .probes.facts import Facts, NvmlGpu, TorchDevice, TorchFacts
from .report import Report
from .rules.environment import evaluate, pcie_gbps, verdict, vstr


def _uuid_key(uuid: str | None) -> str | None:
    # NVML says 'GPU-6ba4...', torch's device properties '6ba4...'.
    return uuid.lower().removeprefix("gpu-") if uuid else None


def _torch_info(t: TorchFacts) -> dict[str, Any] | None:
    if not t.importable or t.version is None:
        return None
    return {
        "version": t.version,
        "cuda": t.cuda,
        "hip": t.hip,
        "cudnn": t.cudnn,
        "cuda_available": t.cuda_available,
        "device_count": t.device_count,
        "arch_list": list(t.arch_list),
        "settings": dict(t.settings),
    }


def _nvml_gpu(g: NvmlGpu, torch_dev: TorchDevice | None) -> dict[str, Any]:
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "capability": vstr(g.capability) if g.capability else None,
        "sm_count": torch_dev.sm_count if torch_dev else None,
        "memory_total_bytes": g.memory_total_bytes,
        "memory_used_bytes": g.memory_used_bytes,
        "persistence_mode": g.persistence_mode,
        "power_limit_w": g.power_limit_w,
        "power_default_limit_w": g.power_default_limit_w,
        "power_draw_w": g.power_draw_w,
        "temperature_c": g.temperature_c,
        "sm_clock_mhz": g.sm_clock_mhz,
        "sm_clock_max_mhz": g.sm_clock_max_mhz,
        "clock_event_reasons": list(g.clock_event_reasons or []),
        "pcie": {
            "gen": g.pcie_gen,
            "width": g.pcie_width,
            "max_gen": g.pcie_max_gen,
            "max_width": g.pcie_max_width,
            "theoretical_gbps": pcie_gbps(g.pcie_gen, g.pcie_width),
        },
        "mig_mode": g.mig_mode,
        "compute_mode": g.compute_mode,
        "utilization_pct": g.utilization_pct,
        "processes": [
            {"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes, "kind": p.kind}
            for p in g.processes or []
        ],
    }


def _torch_gpu(d: TorchDevice) -> dict[str, Any]:
    return {
        "index": d.index,
        "name": d.name,
        "uuid": d.uuid,
        "capability": vstr(d.capability) if d.capability else None,
        "sm_count": d.sm_count,
        "memory_total_bytes": d.total_memory_bytes,
    }


def machine(facts: Facts) -> dict[str, Any]:
    """The report's ``machine`` (schema Machine). GPUs come from NVML (every GPU on the host)
    where it works, matched to torch's devices by UUID for what only torch knows; else torch's."""
    s, nv, tk = facts.system, facts.nvml, facts.toolkit
    by_uuid = {_uuid_key(d.uuid): d for d in facts.torch.devices if d.uuid}
    if nv.gpus:
        gpus = [_nvml_gpu(g, by_uuid.get(_uuid_key(g.uuid))) for g in nv.gpus]
    else:
        gpus = [_torch_gpu(d) for d in facts.torch.devices]
    return build_machine(
        hostname=s.hostname,
        platform=s.platform,
        python=s.python,
        cpu_count=s.cpu_count,
        memory_total_bytes=s.memory_total_bytes,
        shm_bytes=s.shm_bytes,
        torch=_torch_info(facts.torch),
        driver_version=nv.driver_version,
        driver_cuda_version=vstr(nv.cuda_driver_version) if nv.cuda_driver_version else None,
        nvcc_version=vstr(tk.nvcc_version) if tk.nvcc_version else None,
        gpus=gpus,
        env=dict(s.env),
    )


def report_from_facts(facts: Facts) -> Report:
    from .rules.topology import with_topology

    result = evaluate(facts)
    return Report(
        kind="check",
        title="Environment check",
        machine=machine(facts),
        checks=with_topology(result.checks, facts.topology),
        findings=result.findings,
        verdict=verdict(facts, result.findings),
        notes=result.notes,
    )


def check() -> Report:
    """Walk the environment checklist. Never raises for a broken setup: what cannot be read
    is a check marked not_checked, with the reason."""
    return report_from_facts(collect())
