"""torch probe on the real CPU torch: build facts, flags as found; reading changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
from gpusight.probes import torch_info
from gpusight.rules.environment import tf32_cudnn, tf32_matmul


@pytest.fixture
def non_default_flags() -> Iterator[None]:
    """Flags a user might have set; put back afterwards."""
    before = (
        torch.backends.cudnn.benchmark,
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.is_anomaly_enabled(),
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cudnn.benchmark = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.autograd.set_detect_anomaly(True)
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before[0]
        torch.use_deterministic_algorithms(before[1], warn_only=before[2])
        torch.autograd.set_detect_anomaly(before[3])
        torch.set_float32_matmul_precision(before[4])


def test_build_facts_of_the_cpu_wheel() -> None:
    facts = torch_info.probe()
    assert facts.importable and facts.version == torch.__version__
    assert facts.cuda == torch.version.cuda
    assert facts.hip == torch.version.hip
    if torch.version.cuda is None and torch.version.hip is None:
        assert facts.cuda_available is False and facts.devices == []
        assert facts.cudnn is None


def test_flags_are_read_as_set(non_default_flags: None) -> None:
    s = torch_info.probe().settings
    assert s["cudnn.benchmark"] is True
    assert s["deterministic_algorithms"] is True and s["deterministic_warn_only"] is True
    assert s["anomaly_enabled"] is True
    assert s["float32_matmul_precision"] == "high"
    assert tf32_matmul(s) is True


def test_reading_changes_no_flag(non_default_flags: None) -> None:
    before = torch_info.read_settings(torch)
    torch_info.probe()
    torch_info.probe()
    assert torch_info.read_settings(torch) == before


def test_mixed_tf32_apis_do_not_break_the_probe() -> None:
    """torch >= 2.9 raises from some getters once old and new TF32 APIs are mixed."""
    code = (
        "import json, torch\n"
        "from gpusight.probes.torch_info import read_settings\n"
        "torch.set_float32_matmul_precision('highest')\n"
        "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"
        "torch.backends.cudnn.conv.fp32_precision = 'ieee'\n"
        "print(json.dumps(read_settings(torch)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    values, errors = json.loads(out.stdout)
    assert "cuda.matmul.allow_tf32" in errors and values["cuda.matmul.allow_tf32"] is None
    assert "RuntimeError" in errors["cuda.matmul.allow_tf32"]
    assert tf32_matmul(values) is True
    assert tf32_cudnn(values) is False


def test_check_from_several_threads_leaves_the_warning_filters_as_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """catch_warnings saves and restores the process-wide filter list: thread B entering while
    A is inside saves A's 'ignore everything', and puts it back after A has restored the
    original. Forced here: A waits (up to 1 s) for B to be inside too."""
    import threading
    import warnings

    a_inside, b_inside, a_done = threading.Event(), threading.Event(), threading.Event()

    def reader_a() -> bool:
        a_inside.set()
        b_inside.wait(1.0)  # with the lock B cannot get in: A goes on after the timeout
        return True

    def reader_b() -> bool:
        b_inside.set()
        a_done.wait(1.0)
        return True

    def thread_a() -> None:
        monkeypatch.setattr(torch_info, "_setting_readers", lambda t: {"a": reader_a})
        torch_info.read_settings(torch)
        a_done.set()

    def thread_b() -> None:
        a_inside.wait(1.0)
        torch_info._setting_readers = lambda t: {"b": reader_b}  # type: ignore[assignment]
        torch_info.read_settings(torch)

    before = list(warnings.filters)
    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert warnings.filters == before
