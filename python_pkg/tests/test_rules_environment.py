"""Environment rules on plain-data facts: an H200 (PCIe Gen5 x16) healthy, power-capped,
throttling, shared, split by MIG, with a build that lacks its kernels, a driver that is too old.

Rules take plain data, so this is the real judgement on a described machine, not a mocked torch.
The torch defaults used here are checked against the real torch in test_h200_settings_are_real.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from gpusight.doctor import report_from_facts
from gpusight.probes.facts import (
    Facts,
    GpuProcessFact,
    NvmlFacts,
    NvmlGpu,
    SystemFacts,
    TensorFlowFacts,
    ToolkitFacts,
    TorchDevice,
    TorchFacts,
)
from gpusight.report import Report
from gpusight.rules.environment import (
    arch_support,
    driver_support,
    index_for_driver,
    launch_blocking_on,
    parse_arch,
    pcie_gbps,
    tf32_cudnn,
    tf32_matmul,
    visible_devices_hide_all,
)

GIB = 1 << 30
OWN_PID = 4242
UUID = "6ba4f4b8-7d3c-2b7e-8f5d-1c9e0a2b3c4d"

# What a fresh torch reports (test_h200_settings_are_real proves it against the real one).
DEFAULT_SETTINGS: dict[str, str | bool] = {
    "cuda.matmul.allow_tf32": False,
    "cuda.matmul.fp32_precision": "none",
    "cuda.fp32_precision": "none",
    "fp32_precision": "none",
    "float32_matmul_precision": "highest",
    "cudnn.allow_tf32": True,
    "cudnn.fp32_precision": "none",
    "cudnn.conv.fp32_precision": "tf32",
    "cudnn.enabled": True,
    "cudnn.benchmark": False,
    "cudnn.deterministic": False,
    "deterministic_algorithms": False,
    "deterministic_warn_only": False,
    "anomaly_enabled": False,
    "anomaly_check_nan": True,
}

H200_ARCH = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


def h200(**gpu: object) -> Facts:
    """A healthy, idle H200 SXM with torch 2.11+cu128 at default settings."""
    nvml_gpu = NvmlGpu(
        index=0,
        name="NVIDIA H200",
        uuid=f"GPU-{UUID}",
        capability=(9, 0),
        memory_total_bytes=150_754_820_096,
        memory_used_bytes=580 << 20,
        persistence_mode=True,
        power_limit_w=700.0,
        power_default_limit_w=700.0,
        power_draw_w=76.0,
        temperature_c=29.0,
        sm_clock_mhz=345.0,
        sm_clock_max_mhz=1980.0,
        clock_event_reasons=["gpu_idle"],
        pcie_gen=5,
        pcie_width=16,
        pcie_max_gen=5,
        pcie_max_width=16,
        pcie_gpu_max_gen=5,
        mig_mode=False,
        compute_mode="default",
        utilization_pct=0.0,
        processes=[],
    )
    nvml_gpu = dataclasses.replace(nvml_gpu, **gpu)  # type: ignore[arg-type]
    return Facts(
        system=SystemFacts(
            platform="Linux-5.15-x86_64",
            python="3.11.9",
            executable="/usr/bin/python3",
            pid=OWN_PID,
            hostname="h200-node",
            cpu_count=16,
            cpu_affinity=16,
            memory_total_bytes=128 * GIB,
            shm_bytes=64 * GIB,
            env={"CUDA_VISIBLE_DEVICES": None, "CUDA_LAUNCH_BLOCKING": None},
        ),
        torch=TorchFacts(
            importable=True,
            version="2.11.0+cu128",
            cuda="12.8",
            cudnn=91002,
            cuda_available=True,
            device_count=1,
            arch_list=list(H200_ARCH),
            devices=[TorchDevice(0, "NVIDIA H200", (9, 0), 150_754_820_096, 132, UUID)],
            settings=dict(DEFAULT_SETTINGS),
        ),
        nvml=NvmlFacts(
            available=True,
            driver_version="570.133.20",
            cuda_driver_version=(12, 8),
            gpus=[nvml_gpu],
        ),
        toolkit=ToolkitFacts(nvcc_why="nvcc not found"),
        tensorflow=TensorFlowFacts(installed=False, why="TensorFlow is not installed"),
    )


def judged(facts: Facts) -> Report:
    report = report_from_facts(facts)
    report.validate()
    return report


def ids(report: Report) -> set[str]:
    return {f.id for f in report.findings}


def check(report: Report, check_id: str) -> dict[str, object]:
    found: list[dict[str, object]] = [c for c in report.to_dict()["checks"] if c["id"] == check_id]
    assert found, f"no check {check_id}: {[c.id for c in report.checks]}"
    return found[0]


def evidence(report: Report, finding_id: str) -> dict[str, object]:
    f = report.finding(finding_id)
    assert f is not None, f"{finding_id} not in {ids(report)}"
    return {e.label: e.value for e in f.evidence}


# --- the healthy H200 -------------------------------------------------------------------------


def test_h200_settings_are_real() -> None:
    """DEFAULT_SETTINGS is what a fresh torch process reads, key for key."""
    code = (
        "import json, torch\n"
        "from gpusight.probes.torch_info import read_settings\n"
        "print(json.dumps(read_settings(torch)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    values, errors = json.loads(out.stdout)
    assert errors == {}
    assert values == DEFAULT_SETTINGS


def test_healthy_h200_with_default_settings_raises_tf32() -> None:
    report = judged(h200())
    assert ids(report) == {"cfg.tf32_disabled", "cfg.cudnn_benchmark_off"}
    tf32 = report.finding("cfg.tf32_disabled")
    assert tf32 is not None and tf32.severity == "warn"
    assert "NVIDIA H200" in tf32.title and "sm_90" in tf32.title
    assert tf32.fix.snippet_id == "torch.enable_tf32"
    assert tf32.impact.basis == "estimated"
    assert report.verdict.bottleneck == "none"
    assert report.verdict.summary.startswith("Usable:")
    assert check(report, "cuda.arch.90")["status"] == "pass"
    assert check(report, "driver.version")["value"] == "570.133.20 (CUDA up to 12.8)"


def test_h200_machine_section() -> None:
    m = judged(h200()).to_dict()["machine"]
    gpu = m["gpus"][0]
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["capability"] == "9.0"
    assert gpu["sm_count"] == 132  # from torch, matched to NVML by UUID
    assert gpu["pcie"] == {
        "gen": 5,
        "width": 16,
        "max_gen": 5,
        "max_width": 16,
        "theoretical_gbps": 63.02,
    }
    assert gpu["power_limit_w"] == 700.0
    assert m["driver_version"] == "570.133.20"
    assert m["driver_cuda_version"] == "12.8"
    assert m["torch"]["cuda"] == "12.8"


def test_tf32_enabled_is_quiet() -> None:
    facts = h200()
    facts.torch.settings.update(
        {
            "float32_matmul_precision": "high",
            "cuda.matmul.allow_tf32": True,
            "cuda.matmul.fp32_precision": "tf32",
        }
    )
    report = judged(facts)
    assert "cfg.tf32_disabled" not in ids(report)
    assert check(report, "torch.tf32")["status"] == "pass"


def test_tf32_off_for_convolutions_only() -> None:
    facts = h200()
    facts.torch.settings.update(
        {"float32_matmul_precision": "high", "cuda.matmul.fp32_precision": "tf32"}
    )
    facts.torch.settings["cudnn.conv.fp32_precision"] = "ieee"
    f = judged(facts).finding("cfg.tf32_disabled")
    assert f is not None and "convolutions" in f.title and "matmuls" not in f.title


def test_tf32_not_raised_before_ampere() -> None:
    facts = h200(name="Tesla T4", capability=(7, 5))
    facts.torch.devices = [TorchDevice(0, "Tesla T4", (7, 5), 15 * GIB, 40, UUID)]
    report = judged(facts)
    assert "cfg.tf32_disabled" not in ids(report)
    assert check(report, "torch.tf32")["status"] == "info"


def test_tf32_resolution() -> None:
    assert tf32_matmul(DEFAULT_SETTINGS) is False
    assert tf32_cudnn(DEFAULT_SETTINGS) is True
    # Mixed legacy/new API: the legacy getter raised (None), the new one answers.
    mixed = DEFAULT_SETTINGS | {
        "cuda.matmul.allow_tf32": None,
        "cuda.matmul.fp32_precision": "tf32",
    }
    assert tf32_matmul(mixed) is True
    assert tf32_matmul(DEFAULT_SETTINGS | {"fp32_precision": "tf32"}) is True  # inherited
    assert tf32_matmul(DEFAULT_SETTINGS | {"cuda.matmul.fp32_precision": "ieee"}) is False
    assert tf32_matmul({"float32_matmul_precision": "medium"}) is True  # older torch
    assert tf32_matmul({}) is None


# --- power, clocks, PCIe, MIG, processes -------------------------------------------------------


def test_power_capped() -> None:
    report = judged(h200(power_limit_w=500.0))
    f = report.finding("env.power_capped")
    assert f is not None and f.severity == "warn" and f.gpu_index == 0
    ev = evidence(report, "env.power_capped")
    assert ev["power limit"] == 500.0 and ev["default power limit"] == 700.0
    assert "71%" in f.title
    assert f.fix.code is not None and "-pl 700" in f.fix.code
    assert check(report, "gpu0.power")["status"] == "warn"


def test_power_limit_slightly_below_default_is_not_a_cap() -> None:
    assert "env.power_capped" not in ids(judged(h200(power_limit_w=650.0)))


def test_at_power_limit_under_load_is_normal() -> None:
    report = judged(h200(clock_event_reasons=["sw_power_cap"], utilization_pct=100.0))
    assert "env.power_capped" not in ids(report)
    assert "at the limit now" in str(check(report, "gpu0.power")["value"])


def test_power_brake_is_reported() -> None:
    f = judged(h200(clock_event_reasons=["hw_power_brake_slowdown"])).finding("env.power_capped")
    assert f is not None and "power brake" in f.title


@pytest.mark.parametrize("reason", ["sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"])
def test_thermal_throttle(reason: str) -> None:
    report = judged(h200(clock_event_reasons=[reason], temperature_c=88.0, sm_clock_mhz=1200.0))
    f = report.finding("env.thermal_throttle")
    assert f is not None and "88 C" in f.title
    assert evidence(report, "env.thermal_throttle")["SM clock"] == 1200.0


def test_idle_and_app_clocks_reasons_are_not_problems() -> None:
    report = judged(h200(clock_event_reasons=["gpu_idle", "applications_clocks_setting"]))
    assert not {"env.thermal_throttle", "env.power_capped"} & ids(report)
    assert check(report, "gpu0.clocks")["status"] == "pass"


def test_other_processes_exclude_this_one() -> None:
    procs = [
        GpuProcessFact(pid=OWN_PID, name="python", used_memory_bytes=2 * GIB),
        GpuProcessFact(pid=999, name="/usr/bin/python3 train.py", used_memory_bytes=40 * GIB),
    ]
    report = judged(h200(processes=procs))
    f = report.finding("env.other_processes")
    assert f is not None and f.severity == "warn" and "1 other" in f.title
    assert "40.0 GiB" in f.title
    assert [e.label for e in f.evidence] == ["pid 999 /usr/bin/python3 train.py"]
    alone = judged(h200(processes=procs[:1]))
    assert "env.other_processes" not in ids(alone)


def test_other_process_on_exclusive_gpu_is_critical() -> None:
    procs = [GpuProcessFact(pid=999, name=None, used_memory_bytes=None)]
    report = judged(h200(processes=procs, compute_mode="exclusive_process"))
    f = report.finding("env.other_processes")
    assert f is not None and f.severity == "critical"
    assert report.verdict.bottleneck == "environment"


def test_mig_enabled() -> None:
    report = judged(h200(mig_mode=True))
    f = report.finding("env.mig_enabled")
    assert f is not None and f.gpu_index == 0
    assert f.fix.code is not None and "-mig 0" in f.fix.code


def test_pcie_gen5_x16_healthy() -> None:
    report = judged(h200())
    c = check(report, "gpu0.pcie")
    assert c["status"] == "pass" and c["value"] == "Gen5 x16, 63.02 GB/s per direction"


def test_pcie_narrow_link_is_degraded() -> None:
    report = judged(h200(pcie_width=8))
    f = report.finding("env.pcie_degraded")
    assert f is not None and f.severity == "warn"
    assert evidence(report, "env.pcie_degraded")["theoretical now"] == 31.51


def test_pcie_idle_downshift_is_not_degraded() -> None:
    report = judged(h200(pcie_gen=1))
    assert "env.pcie_degraded" not in ids(report)
    c = check(report, "gpu0.pcie")
    assert c["status"] == "info" and "idle" in str(c["value"])


def test_pcie_low_generation_while_busy_is_degraded() -> None:
    report = judged(h200(pcie_gen=3, utilization_pct=95.0, clock_event_reasons=[]))
    f = report.finding("env.pcie_degraded")
    assert f is not None and "while busy" in str(f.detail)


def test_pcie_slot_below_gpu() -> None:
    f = judged(h200(pcie_gen=1, pcie_max_gen=4)).finding("env.pcie_degraded")
    assert f is not None and f.severity == "info" and "slot" in f.title


def test_pcie_bandwidth() -> None:
    assert pcie_gbps(1, 1) == 0.25  # 2.5 GT/s, 8b/10b
    assert pcie_gbps(2, 8) == 4.0
    assert pcie_gbps(3, 16) == 15.75  # 8 GT/s, 128b/130b
    assert pcie_gbps(4, 16) == 31.51
    assert pcie_gbps(5, 16) == 63.02
    assert pcie_gbps(None, 16) is None and pcie_gbps(9, 16) is None


# --- build, driver, kernels ---------------------------------------------------------------------


def test_arch_rules() -> None:
    assert parse_arch("sm_90a") == ("sm", (9, 0), "a")
    assert parse_arch("compute_120") == ("compute", (12, 0), "")
    assert arch_support((9, 0), H200_ARCH) == ("sass", "sm_90")
    assert arch_support((8, 6), ["sm_80"]) == ("sass", "sm_80")  # same major, newer minor
    assert arch_support((8, 0), ["sm_86"]) == (None, None)  # older minor: no
    assert arch_support((9, 0), ["sm_80", "compute_80"]) == ("ptx", "compute_80")  # PTX JITs up
    assert arch_support((7, 5), ["sm_80", "compute_80"]) == (None, None)  # not down
    assert arch_support((9, 0), ["sm_90a"]) == ("sass", "sm_90a")
    assert arch_support((10, 0), ["sm_90a", "compute_90a"]) == (None, None)  # arch-specific
    assert arch_support((10, 3), ["sm_100f"]) == ("sass", "sm_100f")  # family


def test_arch_unsupported() -> None:
    facts = h200()
    facts.torch.arch_list = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]
    report = judged(facts)
    f = report.finding("env.arch_unsupported")
    assert f is not None and f.severity == "critical"
    assert evidence(report, "env.arch_unsupported")["compute capability"] == "9.0"
    assert report.verdict.bottleneck == "environment"


def test_ptx_covers_newer_gpu() -> None:
    facts = h200()
    facts.torch.arch_list = ["sm_70", "sm_80", "compute_80"]
    report = judged(facts)
    assert "env.arch_unsupported" not in ids(report)
    c = check(report, "cuda.arch.90")
    assert c["status"] == "warn" and "compute_80 PTX" in str(c["value"])


def test_driver_support() -> None:
    assert driver_support((12, 8), (12, 8)) == "ok"
    assert driver_support((13, 0), (12, 8)) == "ok"
    assert driver_support((12, 4), (12, 8)) == "minor_compat"
    assert driver_support((11, 8), (12, 1)) == "too_old"
    assert driver_support((10, 1), (10, 2)) == "too_old"  # before CUDA 11: exact or newer


def test_driver_too_old() -> None:
    facts = h200()
    facts.nvml.driver_version, facts.nvml.cuda_driver_version = "520.61.05", (11, 8)
    facts.torch = dataclasses.replace(
        facts.torch,
        cuda_available=False,
        device_count=0,
        devices=[],
        cuda_error="The NVIDIA driver on your system is too old (found version 11080).",
    )
    report = judged(facts)
    f = report.finding("env.driver_too_old")
    assert f is not None and f.severity == "critical"
    assert "env.cuda_unavailable" not in ids(report)
    ev = evidence(report, "env.driver_too_old")
    assert ev["driver supports CUDA up to"] == "11.8" and ev["torch.version.cuda"] == "12.8"
    assert "minor-version compatibility" in str(f.detail)
    assert f.fix.code is not None and "whl/cu118" in f.fix.code
    # NVML still knows the GPU, so the arch check still runs.
    assert check(report, "cuda.arch.90")["status"] == "pass"


def test_older_minor_driver_runs_by_minor_version_compatibility() -> None:
    facts = h200()
    facts.nvml.cuda_driver_version = (12, 4)
    report = judged(facts)
    assert "env.driver_too_old" not in ids(report)
    assert "minor-version" in str(check(report, "driver.version")["detail"])


def test_older_minor_driver_cannot_jit_newer_ptx() -> None:
    facts = h200()
    facts.nvml.cuda_driver_version = (12, 4)
    facts.torch.arch_list = ["sm_80", "compute_80"]
    f = judged(facts).finding("env.driver_too_old")
    assert f is not None and "PTX" in str(f.detail)


def test_index_for_driver() -> None:
    assert index_for_driver((12, 8)) == "cu128"
    assert index_for_driver((12, 7)) == "cu126"
    assert index_for_driver((13, 1)) == "cu130"
    assert index_for_driver(None) == "cu128"


def test_cpu_only_build_on_a_gpu_machine() -> None:
    facts = h200()
    facts.torch = TorchFacts(importable=True, version="2.11.0+cpu", settings=dict(DEFAULT_SETTINGS))
    report = judged(facts)
    f = report.finding("env.cpu_only_build")
    assert f is not None and f.severity == "critical"
    assert "NVIDIA H200" in str(f.detail)
    assert f.fix.code is not None and "whl/cu128" in f.fix.code and "uninstall" in f.fix.code
    assert report.verdict.bottleneck == "environment"
    assert report.verdict.summary.startswith("Not ready: torch 2.11.0+cpu is a CPU-only build")


def test_no_torch() -> None:
    facts = h200()
    facts.torch = TorchFacts(
        importable=False, import_error="ModuleNotFoundError: No module named 'torch'"
    )
    report = judged(facts)
    f = report.finding("env.no_torch")
    assert f is not None and f.severity == "critical"
    assert f.fix.code is not None and "/usr/bin/python3 -m pip install torch" in f.fix.code
    assert check(report, "torch.tf32")["status"] == "not_checked"
    assert report.to_dict()["machine"]["torch"] is None


def test_cuda_unavailable_without_driver() -> None:
    facts = h200()
    facts.nvml = NvmlFacts(available=False, why="NVML library libnvidia-ml.so.1 not found")
    facts.torch = dataclasses.replace(
        facts.torch, cuda_available=False, device_count=0, devices=[], cuda_error=None
    )
    report = judged(facts)
    f = report.finding("env.cuda_unavailable")
    assert f is not None and "no NVIDIA driver" in f.title
    assert not [c for c in report.checks if c.id.startswith("gpu0.")]


@pytest.mark.parametrize("value", ["", "-1", "5", "none"])
def test_visible_devices_hiding_all(value: str) -> None:
    facts = h200()
    facts.system.env["CUDA_VISIBLE_DEVICES"] = value
    facts.torch = dataclasses.replace(facts.torch, cuda_available=False, device_count=0, devices=[])
    report = judged(facts)
    f = report.finding("env.visible_devices")
    assert f is not None and f.severity == "critical"
    assert "env.cuda_unavailable" not in ids(report)
    assert f.fix.code is not None and "CUDA_VISIBLE_DEVICES'] = '0'" in f.fix.code


def test_visible_devices_parsing() -> None:
    assert visible_devices_hide_all(None, 8) is False
    assert visible_devices_hide_all("0,1", 8) is False
    assert visible_devices_hide_all("GPU-6ba4f4b8", 8) is False
    assert visible_devices_hide_all("MIG-1234", 1) is False
    assert visible_devices_hide_all(" ", 8) is True
    assert visible_devices_hide_all("8", 8) is True
    assert visible_devices_hide_all("8", None) is False  # count unknown: trust it


def test_launch_blocking() -> None:
    facts = h200()
    facts.system.env["CUDA_LAUNCH_BLOCKING"] = "1"
    report = judged(facts)
    f = report.finding("env.launch_blocking")
    assert f is not None and f.severity == "critical"
    assert report.verdict.bottleneck == "environment"
    assert launch_blocking_on("0") is False and launch_blocking_on("yes") is False
    assert launch_blocking_on(" 1 ") is True


def test_shm_small() -> None:
    facts = h200()
    facts.system.shm_bytes = 64 << 20
    report = judged(facts)
    f = report.finding("env.shm_small")
    assert f is not None and "64 MiB" in f.title
    assert f.fix.code is not None and "--shm-size=16g" in f.fix.code and "--ipc=host" in f.fix.code


def test_toolkit_mismatch_is_informational() -> None:
    facts = h200()
    facts.toolkit = ToolkitFacts(nvcc_path="/usr/local/cuda/bin/nvcc", nvcc_version=(13, 0))
    report = judged(facts)
    f = report.finding("env.toolkit_mismatch")
    assert f is not None and f.severity == "info"
    assert "ships its own CUDA runtime" in str(f.detail)
    assert "refuses" in str(f.detail)  # major versions differ
    facts.toolkit.nvcc_version = (12, 8)
    assert "env.toolkit_mismatch" not in ids(judged(facts))


def test_deterministic_and_anomaly() -> None:
    facts = h200()
    facts.torch.settings.update({"deterministic_algorithms": True, "anomaly_enabled": True})
    report = judged(facts)
    assert {"cfg.deterministic", "cfg.anomaly_detection"} <= ids(report)
    assert report.finding("cfg.deterministic").severity == "warn"  # type: ignore[union-attr]


def test_everything_wrong_at_once_still_validates() -> None:
    facts = h200(
        power_limit_w=400.0,
        clock_event_reasons=["sw_thermal_slowdown", "sw_power_cap"],
        pcie_width=4,
        mig_mode=True,
        processes=[GpuProcessFact(pid=1, name="x", used_memory_bytes=1)],
    )
    facts.system.shm_bytes = 64 << 20
    facts.system.env["CUDA_LAUNCH_BLOCKING"] = "1"
    report = judged(facts)
    assert {
        "env.power_capped",
        "env.thermal_throttle",
        "env.pcie_degraded",
        "env.mig_enabled",
        "env.other_processes",
        "env.shm_small",
        "env.launch_blocking",
        "cfg.tf32_disabled",
    } <= ids(report)
    # Critical first in the report.
    assert report.to_dict()["findings"][0]["severity"] == "critical"


_UNREADABLE = [
    f.name for f in dataclasses.fields(NvmlGpu) if f.name not in ("index", "name", "errors")
]


@pytest.mark.parametrize("field", [*_UNREADABLE, "all"])
def test_any_unreadable_gpu_field_still_gives_a_valid_report(field: str) -> None:
    """Old drivers and some GPUs answer 'Not Supported' for any one field, or for all of them."""
    names = _UNREADABLE if field == "all" else [field]
    facts = h200(pcie_gen=1, clock_event_reasons=["sw_thermal_slowdown"], power_limit_w=300.0)
    gpu = facts.nvml.gpus[0]
    for name in names:
        setattr(gpu, name, None)
        gpu.errors[name] = "Not Supported"
    report = judged(facts)
    assert report.checks and report.verdict.summary


def test_a_crashing_probe_costs_only_its_facts() -> None:
    from gpusight.probes import _guard

    assert _guard(lambda: 1 // 0, lambda why: why) == (
        "probe failed: ZeroDivisionError: integer division or modulo by zero"
    )
    facts = h200()
    facts.torch = TorchFacts(importable=False, probe_error="probe failed: RuntimeError: boom")
    report = judged(facts)
    assert "env.no_torch" not in ids(report)  # unknown is not 'missing'
    assert check(report, "torch.import")["status"] == "not_checked"
