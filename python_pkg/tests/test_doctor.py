"""check() on this machine (CPU torch, no NVIDIA driver, a CUDA 13.0 toolkit), in-process and in
subprocesses where torch cannot be imported; the %gpusight line magic in a real IPython."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import gpusight
import pynvml
import pytest
import torch
from gpusight.probes.torch_info import read_settings
from gpusight.report import Report

# Run before gpusight in a child: `import torch` then fails as if torch were not installed.
BLOCK_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _NoTorch())
"""


def _nvml_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.fixture(scope="module")
def report() -> Report:
    return gpusight.check()


def test_report_validates(report: Report) -> None:
    report.validate()
    assert report.kind == "check"
    assert report.verdict.gpu_busy_pct is None
    assert report.to_dict()["machine"]["torch"]["version"] == torch.__version__


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs the CPU build of torch")
def test_cpu_build_is_named(report: Report) -> None:
    f = report.finding("env.cpu_only_build")
    assert f is not None and f.severity == "critical"
    assert report.verdict.bottleneck == "environment"
    assert "CPU-only build" in report.verdict.summary
    assert report.verdict.summary.count(".") >= 1 and "\n" not in report.verdict.summary


@pytest.mark.skipif(_nvml_works(), reason="NVML works here")
def test_nvml_absent_is_not_checked(report: Report) -> None:
    nvml = next(c for c in report.checks if c.id == "nvml")
    assert nvml.status == "not_checked" and "libnvidia-ml.so.1" in nvml.value
    assert any("GPU details not checked" in n for n in report.notes)
    assert report.to_dict()["machine"]["gpus"] == []


def test_every_check_has_a_known_status(report: Report) -> None:
    ids = [c.id for c in report.checks]
    assert len(ids) == len(set(ids)), "check ids are unique"
    for expected in ("torch.import", "torch.build", "cuda.available", "system.shm", "torch.tf32"):
        assert expected in ids


@pytest.fixture
def user_flags() -> Iterator[None]:
    prev = (torch.backends.cudnn.benchmark, torch.is_anomaly_enabled())
    torch.backends.cudnn.benchmark = True
    torch.autograd.set_detect_anomaly(True)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = prev[0]
        torch.autograd.set_detect_anomaly(prev[1])
        torch.use_deterministic_algorithms(False)


def test_check_leaves_flags_and_warning_filters_as_found(user_flags: None) -> None:
    flags = read_settings(torch)
    filters = list(warnings.filters)
    report = gpusight.check()
    assert read_settings(torch) == flags
    assert list(warnings.filters) == filters
    assert {"cfg.deterministic", "cfg.anomaly_detection"} <= set(report.finding_ids)
    report.validate()


def _child(prelude: str, tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    out = tmp_path / "r.json"
    code = (
        prelude
        + "\nimport sys\nfrom gpusight.cli import main\n"
        + f"sys.exit(main(['check', '--no-color', '--json', {str(out)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, object] = gpusight.load_report(out)
    return data


def test_no_torch_in_a_real_subprocess(tmp_path: Path) -> None:
    data = _child(BLOCK_TORCH, tmp_path)
    findings = data["findings"]
    assert isinstance(findings, list)
    f = findings[0]
    assert f["id"] == "env.no_torch" and f["severity"] == "critical"
    assert "No module named 'torch'" in json.dumps(f["evidence"])
    assert "pip install torch --index-url https://download.pytorch.org/whl/" in f["fix"]["code"]
    assert data["verdict"]["bottleneck"] == "environment"  # type: ignore[index]
    assert data["machine"]["torch"] is None  # type: ignore[index]


def test_line_magic_returns_the_report() -> None:
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.lib.pretty import pretty

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpusight")
    # Bare `%gpusight` adds the benchmarks (test_line_magic.py); `check` is the doctor alone.
    result = shell.run_line_magic("gpusight", "check")
    assert isinstance(result, Report) and result.kind == "check"
    result.validate()
    text = pretty(result)  # type: ignore[no-untyped-call]
    assert text.startswith("Environment check") and "Checklist" in text
    with pytest.raises(UsageError, match="unknown command 'frobnicate'"):
        shell.run_line_magic("gpusight", "frobnicate")
