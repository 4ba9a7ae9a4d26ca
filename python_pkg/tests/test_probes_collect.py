"""probes.collect: the probes that wait on child processes or the driver run in threads beside
the torch probe, after the NVML probe, with the same facts as one after the other; one NVML
session spans them (and the whole of ``%gpusight``)."""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

import pytest
from gpusight import probes
from gpusight.doctor import report_from_facts
from gpusight.probes import (
    nvml_info,
    tensorflow_info,
    toolkit_info,
    topology,
    torch_info,
)
from gpusight.probes.background import Background
from gpusight.probes.facts import NvmlFacts, TensorFlowFacts, ToolkitFacts, TorchFacts
from gpusight.probes.nvml_session import nvml_session

WAIT_S = 10.0


def test_concurrent_and_sequential_probes_find_the_same_facts() -> None:
    sequential = probes.collect(concurrent=False)
    concurrent = probes.collect(concurrent=True)
    assert concurrent == sequential
    # The report built from them too (its checks, findings, verdict and machine).
    a, b = report_from_facts(sequential).to_dict(), report_from_facts(concurrent).to_dict()
    for key in ("checks", "findings", "verdict", "machine", "notes"):
        assert a[key] == b[key], key


class _Timeline:
    """Fake probes that record where and in what order they ran."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.threads: dict[str, str] = {}
        self.toolkit_started = threading.Event()
        self.lock = threading.Lock()

    def note(self, what: str) -> None:
        with self.lock:
            self.events.append(what)
            self.threads[what] = threading.current_thread().name

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def nvml() -> NvmlFacts:
            self.note("nvml")
            return NvmlFacts(available=False, why="fake")

        def torch() -> TorchFacts:
            self.note("torch start")
            # Beside it, the toolkit probe is running: sequentially this waits in vain.
            ran_beside = self.toolkit_started.wait(WAIT_S)
            self.note("torch end" if ran_beside else "torch end alone")
            return TorchFacts(importable=True, version="fake")

        def toolkit() -> ToolkitFacts:
            self.note("toolkit")
            self.toolkit_started.set()
            return ToolkitFacts(nvcc_why="fake")

        def tensorflow() -> TensorFlowFacts:
            self.note("tensorflow")
            return TensorFlowFacts(installed=False, why="fake")

        def topo() -> topology.TopologyFacts:
            self.note("topology")
            return topology.TopologyFacts(False, "fake")

        monkeypatch.setattr(nvml_info, "probe", nvml)
        monkeypatch.setattr(torch_info, "probe", torch)
        monkeypatch.setattr(toolkit_info, "probe", toolkit)
        monkeypatch.setattr(tensorflow_info, "probe", tensorflow)
        monkeypatch.setattr(topology, "probe", topo)


def test_side_probes_run_beside_the_torch_probe_after_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _Timeline()
    t.install(monkeypatch)
    facts = probes.collect()
    main = threading.current_thread().name
    assert t.events[0] == "nvml" and t.threads["nvml"] == main  # before torch could touch a GPU
    assert "torch end" in t.events  # the toolkit probe ran while the torch probe waited
    assert t.threads["torch start"] == main
    for side in ("toolkit", "tensorflow", "topology"):
        assert t.threads[side] != main, side
    assert facts.toolkit.nvcc_why == "fake" and facts.torch.version == "fake"
    assert facts.topology.why == "fake" and facts.tensorflow.why == "fake"


def test_sequential_probes_run_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _Timeline()
    t.install(monkeypatch)
    t.toolkit_started.set()  # nothing to wait for: the order is the point
    probes.collect(concurrent=False)
    assert t.events == ["nvml", "torch start", "torch end", "toolkit", "tensorflow", "topology"]
    assert set(t.threads.values()) == {threading.current_thread().name}


def test_a_tensorflow_imported_here_is_asked_on_this_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = _Timeline()
    t.install(monkeypatch)
    t.toolkit_started.set()
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    assert not tensorflow_info.in_child()
    probes.collect()
    assert t.threads["tensorflow"] == threading.current_thread().name


def test_a_probe_failing_in_its_thread_costs_only_its_facts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken() -> ToolkitFacts:
        raise RuntimeError("boom")

    monkeypatch.setattr(toolkit_info, "probe", broken)
    facts = probes.collect()
    assert facts.toolkit.nvcc_why == "probe failed: RuntimeError: boom"
    assert facts.toolkit.cudart_why == "probe failed: RuntimeError: boom"
    assert facts.system.python and facts.torch.importable  # the others as ever


def test_background_hands_back_value_and_exception() -> None:
    assert Background(lambda: 41 + 1, "t").result() == 42

    def fails() -> int:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Background(fails, "t").result()


class FakeNvml(types.ModuleType):
    """pynvml with NVML's reference-counted init: only the first nvmlInit starts the library,
    only the last nvmlShutdown stops it."""

    class NVMLError(Exception):
        value = 0

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.count = 0
        self.starts = 0
        self.calls_while_stopped = 0

    def nvmlInit(self) -> None:
        if self.count == 0:
            self.starts += 1
        self.count += 1

    def nvmlShutdown(self) -> None:
        self.count -= 1

    def nvmlDeviceGetCount(self) -> int:
        if self.count == 0:
            self.calls_while_stopped += 1
        return 0


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_one_nvml_start_serves_both_nvml_probes(fake_nvml: FakeNvml) -> None:
    facts = probes.collect()
    assert facts.nvml.available and facts.topology.available  # both read NVML
    assert fake_nvml.starts == 1 and fake_nvml.count == 0  # once started, and stopped at the end
    assert fake_nvml.calls_while_stopped == 0


def test_the_session_nests_and_is_a_no_op_without_nvml(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    with nvml_session() as outer:
        with nvml_session() as inner:
            assert outer and inner and fake_nvml.count == 2
        assert fake_nvml.count == 1
    assert fake_nvml.count == 0 and fake_nvml.starts == 1

    def refuses() -> None:
        raise fake_nvml.NVMLError("Driver Not Loaded")

    monkeypatch.setattr(fake_nvml, "nvmlInit", refuses)
    with nvml_session() as held:
        assert held is False
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    with nvml_session() as held:
        assert held is False


def test_gpusight_magic_starts_nvml_once(
    fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpusight.bench import suite
    from gpusight.jupyter.line_magic import check_and_bench

    def gpu_stage(**kwargs: Any) -> list[Any]:  # as the matmul and copy benchmarks open NVML
        fake_nvml.nvmlInit()
        fake_nvml.nvmlShutdown()
        return []

    monkeypatch.setattr(suite, "STAGES", (*suite.STAGES, ("fake", 0.0, gpu_stage)))
    report = check_and_bench(budget_s=0.2)
    assert {c.id for c in report.checks} >= {"nvml", "torch.build"}
    # The check's two probes and the benchmark: one start, stopped at the end.
    assert fake_nvml.starts == 1 and fake_nvml.count == 0
