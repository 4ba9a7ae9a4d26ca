"""NVML probe: this machine has no NVIDIA driver, the real case of NVML failing to start."""

from __future__ import annotations

import subprocess
import sys

import pynvml
import pytest
from gpusight.probes import nvml_info


def _nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


HAS_NVML = _nvml_works()


@pytest.mark.skipif(HAS_NVML, reason="NVML works here")
def test_no_driver_is_not_checked_with_reason() -> None:
    facts = nvml_info.probe()
    assert facts.available is False and facts.gpus == []
    assert facts.why is not None and "libnvidia-ml.so.1 not found" in facts.why
    assert "--gpus all" in facts.why


@pytest.mark.skipif(not HAS_NVML, reason="no NVIDIA driver here")
def test_gpus_are_read() -> None:
    facts = nvml_info.probe()
    assert facts.available and facts.driver_version and facts.cuda_driver_version
    assert facts.gpus and all(g.name != "?" for g in facts.gpus)


def test_missing_nvidia_ml_py_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pynvml':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from gpusight.probes import nvml_info\n"
        "print(nvml_info.probe().why)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "nvidia-ml-py is not installed (pip install nvidia-ml-py)"


def test_clock_reason_bits_match_nvml() -> None:
    names = {
        "GpuIdle": "gpu_idle",
        "ApplicationsClocksSetting": "applications_clocks_setting",
        "SwPowerCap": "sw_power_cap",
        "HwSlowdown": "hw_slowdown",
        "SyncBoost": "sync_boost",
        "SwThermalSlowdown": "sw_thermal_slowdown",
        "HwThermalSlowdown": "hw_thermal_slowdown",
        "HwPowerBrakeSlowdown": "hw_power_brake_slowdown",
        "DisplayClockSetting": "display_clock_setting",
    }
    for nvml_name, ours in names.items():
        bit = getattr(pynvml, f"nvmlClocksEventReason{nvml_name}")
        assert nvml_info.CLOCK_EVENT_REASONS[bit] == ours
        assert getattr(pynvml, f"nvmlClocksThrottleReason{nvml_name}") == bit


def test_decode_clock_reasons() -> None:
    mask = pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonSwThermalSlowdown
    assert nvml_info.decode_clock_reasons(mask) == ["gpu_idle", "sw_thermal_slowdown"]
    assert nvml_info.decode_clock_reasons(0) == []
    assert nvml_info.decode_clock_reasons(0x1000 | 0x4) == ["sw_power_cap", "0x1000"]


def test_compute_modes_and_error_codes_match_nvml() -> None:
    assert nvml_info.COMPUTE_MODES[pynvml.NVML_COMPUTEMODE_DEFAULT] == "default"
    assert nvml_info.COMPUTE_MODES[pynvml.NVML_COMPUTEMODE_PROHIBITED] == "prohibited"
    assert nvml_info.COMPUTE_MODES[pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS] == "exclusive_process"
    assert "not loaded" in nvml_info.init_failure(pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "")
    assert "reboot" in nvml_info.init_failure(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "")
    assert "not found" in nvml_info.init_failure(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "")
    assert (
        nvml_info.init_failure(999, "Unknown Error") == "NVML failed to initialise: Unknown Error"
    )


def test_cuda_driver_version_decoding() -> None:
    assert nvml_info.decode_cuda_version(12080) == (12, 8)
    assert nvml_info.decode_cuda_version(12040) == (12, 4)
    assert nvml_info.decode_cuda_version(13000) == (13, 0)
    assert nvml_info.decode_cuda_version(11080) == (11, 8)
