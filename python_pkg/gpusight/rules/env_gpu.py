"""Environment rules for each GPU, from NVML: other processes, power cap, thermal throttling, MIG,
PCIe link.
"""

from __future__ import annotations

from ..fixes import fix
from ..probes.facts import Facts, GpuProcessFact, NvmlGpu
from ..report import CheckStatus, Finding, Impact
from .env_checks import EnvironmentResult, _ev
from .env_versions import fmt_bytes, pcie_gbps, vstr

# A power limit under this share of the default is a deliberate cap, not rounding.
POWER_CAP_RATIO = 0.9


# Utilisation at which a GPU counts as busy (its PCIe link should then be at full speed).
BUSY_UTIL_PCT = 20.0

# The clock event reasons NVML gives for slowing down to protect the GPU from heat.
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown")


def _gpu_rules(facts: Facts, out: EnvironmentResult) -> None:
    own_pid = facts.system.pid
    for g in facts.nvml.gpus:
        _one_gpu(g, own_pid, out)


def _one_gpu(g: NvmlGpu, own_pid: int, out: EnvironmentResult) -> None:
    reasons = g.clock_event_reasons or []
    busy = (
        g.utilization_pct >= BUSY_UTIL_PCT
        if g.utilization_pct is not None
        else (g.clock_event_reasons is not None and "gpu_idle" not in reasons)
    )
    _identity_checks(g, out)
    _power_check(g, reasons, out)
    _clock_checks(g, reasons, out)
    _pcie_rules(g, busy, out)
    _mig_checks(g, out)
    _process_check(g, own_pid, out)


def _identity_checks(g: NvmlGpu, out: EnvironmentResult) -> None:
    """Name, memory and persistence mode: facts to read, no finding."""
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    out.check(
        f"{p}.name",
        label,
        "info",
        f"{g.name}, cc {vstr(g.capability)}" + (f", {g.uuid}" if g.uuid else ""),
    )
    if g.memory_total_bytes is not None:
        out.check(
            f"{p}.memory",
            f"{label} memory",
            "info",
            f"{fmt_bytes(g.memory_total_bytes)} total, {fmt_bytes(g.memory_used_bytes)} used",
        )
    if g.persistence_mode is not None:
        out.check(
            f"{p}.persistence",
            f"{label} persistence mode",
            "pass" if g.persistence_mode else "info",
            "on" if g.persistence_mode else "off",
            None
            if g.persistence_mode
            else "with it off the driver unloads between jobs, and each CUDA start pays for "
            "reinitialising the GPU (seconds); `sudo nvidia-smi -pm 1` keeps it loaded",
        )


def _power_check(g: NvmlGpu, reasons: list[str], out: EnvironmentResult) -> None:
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    capped = (
        g.power_limit_w is not None
        and g.power_default_limit_w is not None
        and g.power_limit_w < POWER_CAP_RATIO * g.power_default_limit_w
    )
    brake = "hw_power_brake_slowdown" in reasons
    if g.power_limit_w is None:
        out.check(
            f"{p}.power", f"{label} power limit", "not_checked", g.errors.get("power_limit", "?")
        )
    else:
        value = f"{g.power_limit_w:.0f} W limit"
        if g.power_default_limit_w is not None:
            value += f" (default {g.power_default_limit_w:.0f} W)"
        if g.power_draw_w is not None:
            value += f", drawing {g.power_draw_w:.0f} W"
        finding = None
        if capped or brake:
            finding = _power_capped(g, capped, reasons)
        elif "sw_power_cap" in reasons:
            value += "; at the limit now (normal under full load)"
        out.check(
            f"{p}.power",
            f"{label} power limit",
            "warn" if finding else "pass",
            value,
            finding=finding,
        )


def _power_capped(g: NvmlGpu, capped: bool, reasons: list[str]) -> Finding:
    """``env.power_capped``: a power limit under ``POWER_CAP_RATIO`` of the default (``capped``),
    or the external power brake."""
    assert g.power_limit_w is not None  # the power check reads no limit without one
    i = g.index
    ev = [
        _ev("power limit", g.power_limit_w, "W"),
        _ev("default power limit", g.power_default_limit_w, "W"),
        _ev("power draw", g.power_draw_w, "W"),
        _ev("clock event reasons", ", ".join(reasons) or None),
    ]
    if capped:
        assert g.power_default_limit_w is not None
        ratio = g.power_limit_w / g.power_default_limit_w
        title = (
            f"GPU {i} ({g.name}) is power-capped at {g.power_limit_w:.0f} W, "
            f"{ratio:.0%} of its {g.power_default_limit_w:.0f} W default"
        )
        detail = (
            "Under load the GPU lowers its clocks to stay under the limit; compute-bound "
            "work slows roughly with the clock. Someone (or a cluster policy) set it "
            "with nvidia-smi -pl."
        )
        the_fix = fix(
            "Restore the default limit if the cap was not deliberate.",
            "nvidia.power_limit",
            index=i,
            watts=int(g.power_default_limit_w),
        )
        impact_text = f"Up to {1 - ratio:.0%} less sustained clock on power-bound work."
    else:
        title = f"GPU {i} ({g.name}): the external power brake is slowing its clocks"
        detail = (
            "NVML reports HW power brake slowdown: the system (power supply or chassis) "
            "asserted a signal that cuts the GPU's clocks hard."
        )
        the_fix = fix(
            "Check the server's power supplies and BMC event log.",
            "nvidia.watch_throttle",
            index=i,
        )
        impact_text = "Clocks are cut while the brake is asserted."
    return Finding(
        id="env.power_capped",
        severity="warn",
        title=title,
        detail=detail,
        evidence=ev,
        impact=Impact(basis="estimated", text=impact_text),
        fix=the_fix,
        gpu_index=i,
    )


def _clock_checks(g: NvmlGpu, reasons: list[str], out: EnvironmentResult) -> None:
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    thermal = [r for r in reasons if r in THERMAL_REASONS]
    if g.clock_event_reasons is None:
        out.check(
            f"{p}.clocks",
            f"{label} clocks",
            "not_checked",
            g.errors.get("clock_event_reasons", "?"),
        )
    else:
        clock = (
            f"SM {g.sm_clock_mhz:.0f} of {g.sm_clock_max_mhz:.0f} MHz"
            if g.sm_clock_mhz is not None and g.sm_clock_max_mhz is not None
            else "SM clock ?"
        )
        value = f"{clock}; reasons: {', '.join(reasons) or 'none'}"
        finding = None
        if thermal:
            finding = _thermal_throttle(g, reasons, thermal)
        out.check(
            f"{p}.clocks",
            f"{label} clocks",
            "warn" if finding else "pass",
            value,
            "gpu_idle and applications_clocks_setting are not problems: the GPU had no work, or "
            "clocks were pinned on purpose"
            if {"gpu_idle", "applications_clocks_setting"} & set(reasons)
            else None,
            finding=finding,
        )
    if g.temperature_c is not None:
        out.check(f"{p}.temperature", f"{label} temperature", "info", f"{g.temperature_c:.0f} C")


def _thermal_throttle(g: NvmlGpu, reasons: list[str], thermal: list[str]) -> Finding:
    """``env.thermal_throttle``: NVML's clock event reasons say the GPU slows down for heat."""
    i = g.index
    return Finding(
        id="env.thermal_throttle",
        severity="warn",
        title=f"GPU {i} ({g.name}) is slowing its clocks for heat"
        + (f" at {g.temperature_c:.0f} C" if g.temperature_c is not None else ""),
        detail=(
            "NVML reports "
            + ", ".join(thermal)
            + ": the GPU runs below its clocks to protect itself"
            + (
                " (hw_slowdown can also mean the power brake or a power excursion)"
                if "hw_slowdown" in thermal
                else ""
            )
            + ". Check cooling: airflow, fan or liquid-loop failures, inlet temperature."
        ),
        evidence=[
            _ev("temperature", g.temperature_c, "C"),
            _ev("SM clock", g.sm_clock_mhz, "MHz"),
            _ev("SM clock max", g.sm_clock_max_mhz, "MHz"),
            _ev("clock event reasons", ", ".join(reasons)),
        ],
        impact=Impact(
            basis="estimated",
            text="Throughput falls with the clock while the slowdown lasts.",
        ),
        fix=fix(
            "Fix the cooling, then watch the reasons under load.",
            "nvidia.watch_throttle",
            index=i,
        ),
        gpu_index=i,
    )


def _mig_checks(g: NvmlGpu, out: EnvironmentResult) -> None:
    """MIG mode and the compute mode."""
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    if g.mig_mode is None:
        out.check(f"{p}.mig", f"{label} MIG", "info", "not supported on this GPU")
    elif g.mig_mode:
        out.check(f"{p}.mig", f"{label} MIG", "warn", "on", finding=_mig_enabled(g))
    else:
        out.check(f"{p}.mig", f"{label} MIG", "pass", "off")
    if g.compute_mode is not None:
        status: CheckStatus = {"default": "pass", "prohibited": "fail"}.get(  # type: ignore[assignment]
            g.compute_mode, "info"
        )
        out.check(f"{p}.compute_mode", f"{label} compute mode", status, g.compute_mode)


def _mig_enabled(g: NvmlGpu) -> Finding:
    """``env.mig_enabled``: the GPU is split into MIG instances."""
    i = g.index
    return Finding(
        id="env.mig_enabled",
        severity="warn",
        title=f"GPU {i} ({g.name}) is split by MIG: a process gets one slice of it",
        detail=(
            "With MIG on, each CUDA process sees one GPU instance: a fixed share of the "
            "SMs and memory (1/7 for the smallest). A job that expects the whole GPU "
            "runs on a fraction of it. Fine if that was the plan."
        ),
        evidence=[_ev("MIG mode", "enabled"), _ev("GPU", g.name)],
        impact=Impact(basis="estimated", text="At most the instance's share of SMs and memory."),
        fix=fix(
            "Ask for a larger instance, or disable MIG for whole-GPU jobs.",
            "nvidia.mig_disable",
            index=i,
        ),
        gpu_index=i,
    )


def _process_check(g: NvmlGpu, own_pid: int, out: EnvironmentResult) -> None:
    """Other processes on the GPU (this one left out)."""
    p = f"gpu{g.index}"
    label = f"GPU {g.index}"
    if g.processes is None:
        out.check(
            f"{p}.processes",
            f"{label} processes",
            "not_checked",
            g.errors.get("processes.compute", "?"),
        )
    else:
        others = [q for q in g.processes if q.pid != own_pid]
        if not others:
            out.check(f"{p}.processes", f"{label} processes", "pass", "none besides this one")
        else:
            held = sum(q.used_memory_bytes or 0 for q in others)
            out.check(
                f"{p}.processes",
                f"{label} processes",
                "warn",
                f"{len(others)} other(s), {fmt_bytes(held)}",
                finding=_other_processes(g, others, own_pid),
            )


def _other_processes(g: NvmlGpu, others: list[GpuProcessFact], own_pid: int) -> Finding:
    """``env.other_processes``: other processes hold the GPU; critical when it is in
    exclusive-process mode (this one cannot start CUDA then)."""
    i = g.index
    held = sum(q.used_memory_bytes or 0 for q in others)
    exclusive = g.compute_mode == "exclusive_process"
    return Finding(
        id="env.other_processes",
        severity="critical" if exclusive else "warn",
        title=(f"{len(others)} other process(es) on GPU {i} ({g.name}) hold {fmt_bytes(held)}"),
        detail=(
            (
                "The GPU is in exclusive-process mode: while another process holds "
                "it, this one cannot create a CUDA context. "
                if exclusive
                else "They time-share the SMs with your job and hold memory it cannot use. "
            )
            + f"This process (pid {own_pid}) is left out; NVML shows host pids, so "
            "inside a container this process may still appear under its host pid."
        ),
        evidence=[
            _ev(
                f"pid {q.pid}" + (f" {q.name}" if q.name else ""),
                q.used_memory_bytes,
                "bytes",
            )
            for q in others
        ],
        impact=Impact(
            basis="estimated",
            text="Shared SMs and memory bandwidth while they compute.",
        ),
        fix=fix(
            "Stop them, or move to a free GPU (CUDA_VISIBLE_DEVICES).",
            "nvidia.list_processes",
            index=i,
        ),
        gpu_index=i,
    )


def _pcie_rules(g: NvmlGpu, busy: bool, out: EnvironmentResult) -> None:
    p = f"gpu{g.index}.pcie"
    label = f"GPU {g.index} PCIe link"
    if g.pcie_gen is None or g.pcie_width is None:
        out.check(
            p, label, "not_checked", g.errors.get("pcie_gen") or g.errors.get("pcie_width", "?")
        )
        return
    now = pcie_gbps(g.pcie_gen, g.pcie_width)
    full = pcie_gbps(g.pcie_max_gen, g.pcie_max_width)
    value = f"Gen{g.pcie_gen} x{g.pcie_width}"
    if now is not None:
        value += f", {now:g} GB/s per direction"
    narrow = g.pcie_max_width is not None and g.pcie_width < g.pcie_max_width
    slow_gen = g.pcie_max_gen is not None and g.pcie_gen < g.pcie_max_gen
    slot_limited = (
        g.pcie_gpu_max_gen is not None
        and g.pcie_max_gen is not None
        and g.pcie_max_gen < g.pcie_gpu_max_gen
    )
    if narrow or (slow_gen and busy):
        why = []
        if narrow:
            why.append(
                f"the link trained at x{g.pcie_width} of x{g.pcie_max_width} lanes (a GPU does "
                "not narrow its link to save power: a bad seat, riser, or slot wiring)"
            )
        if slow_gen and busy:
            why.append(
                f"it runs Gen{g.pcie_gen} of Gen{g.pcie_max_gen} while busy "
                f"({g.utilization_pct if g.utilization_pct is not None else '?'} % utilisation)"
            )
        ratio = now / full if now and full else None
        out.check(
            p,
            label,
            "warn",
            value + f" (max Gen{g.pcie_max_gen} x{g.pcie_max_width})",
            finding=Finding(
                id="env.pcie_degraded",
                severity="warn",
                title=(
                    f"GPU {g.index}'s PCIe link runs at Gen{g.pcie_gen} x{g.pcie_width}, below "
                    f"its Gen{g.pcie_max_gen} x{g.pcie_max_width}"
                ),
                detail="; ".join(why) + ". Host-device copies are limited to the link's speed.",
                evidence=[
                    _ev("current", f"Gen{g.pcie_gen} x{g.pcie_width}"),
                    _ev("max", f"Gen{g.pcie_max_gen} x{g.pcie_max_width}"),
                    _ev("theoretical now", now, "GB/s"),
                    _ev("theoretical at max", full, "GB/s"),
                    _ev("utilisation", g.utilization_pct, "%"),
                ],
                impact=Impact(
                    basis="estimated",
                    text=(
                        f"Copies between host and GPU at most {ratio:.0%} of full link speed."
                        if ratio
                        else "Copies between host and GPU are slower than the link allows."
                    ),
                ),
                fix=fix(
                    "Reseat the GPU or riser, check the BIOS slot settings (link speed, "
                    "bifurcation), then read the link again under load.",
                    "nvidia.pcie_link",
                    index=g.index,
                ),
                gpu_index=g.index,
            ),
        )
        return
    detail = None
    if slow_gen:
        detail = (
            f"Gen{g.pcie_gen} now, Gen{g.pcie_max_gen} possible: an idle GPU drops its link to a "
            "lower generation to save power and speeds up when copies start, so this is "
            "expected at rest"
        )
        value += f" now, idle (max Gen{g.pcie_max_gen} x{g.pcie_max_width}"
        value += f": {full:g} GB/s)" if full is not None else ")"
    if slot_limited:
        out.check(
            p,
            label,
            "info",
            value,
            finding=Finding(
                id="env.pcie_degraded",
                severity="info",
                title=(
                    f"GPU {g.index} supports PCIe Gen{g.pcie_gpu_max_gen} but its slot allows "
                    f"Gen{g.pcie_max_gen}"
                ),
                detail=(
                    "The slot or platform limits the link below what the GPU can do; host-device "
                    "copies top out at the slot's speed." + (f" {detail}." if detail else "")
                ),
                evidence=[
                    _ev("GPU max generation", g.pcie_gpu_max_gen),
                    _ev("link max generation", g.pcie_max_gen),
                    _ev("theoretical at link max", full, "GB/s"),
                ],
                impact=Impact(basis="estimated", text="Lower ceiling for host-device copies."),
                fix=fix(
                    "Use a slot of the GPU's generation if copies matter to the job.",
                    "nvidia.pcie_link",
                    index=g.index,
                ),
                gpu_index=g.index,
            ),
        )
        return
    out.check(p, label, "info" if slow_gen else "pass", value, detail)
