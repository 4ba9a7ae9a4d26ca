"""The sidebar's kernel side: the live Sampler (a real sampler process) and the comm Hub's handlers.

The Hub is driven with plain message dicts and a list as its "comm"; one test starts a real
ipykernel and checks that samples keep streaming over the comm while a cell keeps it busy.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gpusight.jupyter import comm as gs_comm
from gpusight.jupyter.comm import Hub
from gpusight.jupyter.monitor import MAX_CAPACITY, MIN_CAPACITY, Sampler, to_tick
from gpusight.report_schema import validate
from gpusight.watch.sampler_process import ENV

ROOT = Path(__file__).resolve().parents[2]
Msg = dict[str, Any]


def sampler_threads() -> list[threading.Thread]:
    """The monitor's threads in this process: the reader of the sampler process's ticks, or
    (the fallback) the sampling thread itself."""
    return [t for t in threading.enumerate() if t.name in ("gpusight-monitor", "gpusight-nvml")]


def wait_for(cond: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


@pytest.fixture
def sampler() -> Iterator[Sampler]:
    s = Sampler(hz=10, capacity=60)
    yield s
    s.stop()


# --- Sampler ----------------------------------------------------------------------------------


def test_sampler_streams_ticks_from_a_thread(sampler: Sampler) -> None:
    got: list[Msg] = []
    sampler.on_tick = got.append
    sampler.start()
    assert wait_for(lambda: len(got) >= 5), "no ticks within 5 s at 10 Hz"
    sampler.stop()
    ts = [t["t"] for t in got]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    # 10 Hz: successive ticks about 0.1 s apart (generous bounds: 2 shared CPUs).
    gaps = [b - a for a, b in itertools.pairwise(ts)]
    assert 0.05 < sorted(gaps)[len(gaps) // 2] < 0.3
    gpus, reason = sampler.inventory()
    for tick in got:
        host = tick["host"]
        assert 0.0 <= host["host_cpu_pct"] <= 100.0
        assert host["host_mem_used_bytes"] > 0 and 0.0 < host["host_mem_pct"] <= 100.0
        assert [g["gpu"] for g in tick["gpus"]] == [g["index"] for g in gpus]
    if not gpus:
        # No NVML here: the sampler says why and samples the host instead.
        assert sampler.source == "host"
        assert reason and ("NVML" in reason or "GPU" in reason)


def test_sampler_ring_is_bounded_and_keeps_the_newest() -> None:
    s = Sampler(hz=10, capacity=100)
    for i in range(1000):
        s.record([{"t": float(i), "gpu": 0, "util_pct": float(i % 100), "cpu_pct": 1.0}])
    assert len(s) == 100 == s.capacity
    ticks = s.ticks()
    assert [t["t"] for t in ticks] == [float(i) for i in range(900, 1000)]
    assert [t["t"] for t in s.ticks(since=997.0)] == [998.0, 999.0]
    # samples(): the report's flat Sample rows, which the schema accepts in a run timeline.
    rows = s.samples()
    assert rows[-1] == {"t": 999.0, "gpu": 0, "util_pct": 99.0, "cpu_pct": 1.0}
    assert len(rows) == 100


def test_capacity_and_rate_are_clamped_to_the_settings_range() -> None:
    s = Sampler(hz=50, capacity=10)
    assert s.hz == 10.0 and s.capacity == MIN_CAPACITY
    s.configure(hz=0.5, capacity=10**9)
    assert s.hz == 2.0 and s.capacity == MAX_CAPACITY


def test_start_and_stop_are_idempotent_and_leave_no_thread(sampler: Sampler) -> None:
    before = len(sampler_threads())
    sampler.stop()  # stop before start: nothing to do
    sampler.start()
    sampler.start()
    assert sampler.running
    if sampler.source != "none":
        assert len(sampler_threads()) == before + 1
    sampler.stop()
    sampler.stop()
    assert not sampler.running
    assert len(sampler_threads()) == before
    kept = len(sampler)
    sampler.start()  # resume after a pause: the ring and the clock carry on
    assert wait_for(lambda: len(sampler) > kept)
    sampler.stop()
    assert len(sampler_threads()) == before


def test_rate_change_while_running_restarts_at_the_new_rate(sampler: Sampler) -> None:
    sampler.start()
    assert wait_for(lambda: len(sampler) >= 2)
    sampler.configure(hz=2)
    n = len(sampler)
    time.sleep(1.6)
    added = len(sampler) - n
    assert 1 <= added <= 5, added  # ~3 at 2 Hz, not ~16 at 10 Hz
    assert len(sampler_threads()) == 1
    sampler.stop()
    assert sampler_threads() == []


def test_a_failing_listener_does_not_stop_the_stream(sampler: Sampler) -> None:
    def boom(tick: Msg) -> None:
        raise RuntimeError("listener bug")

    sampler.on_tick = boom
    sampler.start()
    assert wait_for(lambda: sampler.errors >= 3)
    assert len(sampler) >= 3


def test_stop_waits_for_a_slow_on_tick(sampler: Sampler) -> None:
    """stop() returns only once on_tick is over, even one slower than the thread join's 2 s."""
    state = {"in": 0, "done": 0}

    def slow(tick: Msg) -> None:
        state["in"] += 1
        time.sleep(2.5)
        state["done"] += 1

    sampler.on_tick = slow
    sampler.start()
    assert wait_for(lambda: state["in"] >= 1)
    sampler.stop()
    assert state["done"] == state["in"] == 1
    time.sleep(0.3)
    assert state["in"] == 1  # no tick after stop()


def test_configure_and_stop_from_inside_on_tick(sampler: Sampler) -> None:
    got: list[Msg] = []

    def retime(tick: Msg) -> None:
        got.append(tick)
        if len(got) == 2:
            sampler.configure(hz=2)  # used to stop the stream (the thread joined itself)

    sampler.on_tick = retime
    sampler.start()
    assert wait_for(lambda: len(got) >= 4), "sampling stopped after configure() in on_tick"
    assert sampler.hz == 2.0 and sampler.running and sampler.errors == 0
    assert len(sampler_threads()) == 1

    def stop_here(tick: Msg) -> None:
        got.append(tick)
        sampler.stop()

    got.clear()
    sampler.configure(hz=10)
    sampler.on_tick = stop_here
    assert wait_for(lambda: len(got) >= 1)
    assert wait_for(lambda: sampler_threads() == [])
    assert not sampler.running and sampler.errors == 0
    time.sleep(0.3)
    assert len(got) == 1


# --- the sampler process: the kernel only reads its lines ------------------------------------


def _gone(pid: int) -> bool:
    """No such process, or a zombie: it has exited."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gaps(ticks: list[Msg]) -> list[float]:
    return [b["t"] - a["t"] for a, b in itertools.pairwise(ticks)]


needs_proc = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


@needs_proc
def test_ticks_come_from_a_child_process_on_this_clock(sampler: Sampler) -> None:
    got: list[Msg] = []
    sampler.on_tick = got.append
    sampler.start()
    pid = sampler.child_pid
    assert pid is not None and pid != os.getpid() and _parent_of(pid) == os.getpid()
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"gpusight.watch.sampler_process" in cmdline
    assert wait_for(lambda: len(got) >= 2)
    assert sampler.fallback is None
    assert 0 < got[0]["t"] < got[-1]["t"] <= sampler.now()  # the child times on our clock
    assert got[-1]["host"]["host_mem_used_bytes"] > 0  # read in the child
    sampler.stop()
    assert sampler.child_pid is None and _gone(pid)
    # Resumed: a new child, the same clock.
    last = got[-1]["t"]
    sampler.start()
    assert sampler.child_pid not in (None, pid)
    assert wait_for(lambda: len(got) >= 3 and got[-1]["t"] > last)


def test_one_reader_thread_while_running_none_after_stop(sampler: Sampler) -> None:
    before = set(threading.enumerate())
    sampler.start()
    assert wait_for(lambda: len(sampler) >= 1)
    added = set(threading.enumerate()) - before
    assert [t.name for t in added] == ["gpusight-monitor"]
    sampler.stop()
    assert set(threading.enumerate()) - before == set()


def test_configure_retimes_the_running_child(sampler: Sampler) -> None:
    got: list[Msg] = []
    sampler.on_tick = got.append
    sampler.start()
    pid = sampler.child_pid
    assert wait_for(lambda: len(got) >= 4)
    sampler.configure(hz=2)
    n = len(got)
    # The sample the child was waiting for comes at the old rate, the next ones at 2 Hz.
    assert wait_for(lambda: len(got) >= n + 3)
    assert sampler.child_pid == pid  # retimed, not restarted
    fast, slow = _gaps(got[:n]), _gaps(got[n:])
    assert sorted(fast)[len(fast) // 2] < 0.2
    assert 0.35 < slow[-1] < 0.8, slow


@needs_proc
def test_stop_answers_while_a_forked_worker_holds_the_pipes(sampler: Sampler) -> None:
    """DataLoader workers are forks of the kernel: they hold the child's stdin too, so closing
    ours would not reach the child; the "stop" line does."""
    sampler.start()
    pid = sampler.child_pid
    assert pid is not None and wait_for(lambda: len(sampler) >= 1)
    worker = os.fork()
    if worker == 0:  # outlives the stop below
        time.sleep(3)
        os._exit(0)
    try:
        began = time.perf_counter()
        sampler.stop()
        assert time.perf_counter() - began < 1.0
        assert _gone(pid) and sampler_threads() == [] and sampler.fallback is None
    finally:
        os.kill(worker, signal.SIGKILL)
        os.waitpid(worker, 0)


@needs_proc
def test_stop_from_inside_on_tick_ends_the_child(sampler: Sampler) -> None:
    pids: list[int | None] = []

    def stop_here(tick: Msg) -> None:
        pids.append(sampler.child_pid)
        sampler.stop()

    sampler.on_tick = stop_here
    sampler.start()
    assert wait_for(lambda: len(pids) >= 1)
    (pid,) = pids
    assert pid is not None
    assert wait_for(lambda: sampler_threads() == [] and _gone(pid))
    assert not sampler.running and sampler.errors == 0
    time.sleep(0.3)
    assert len(pids) == 1 and len(sampler) == 1


def test_a_child_that_dies_leaves_the_sampling_to_a_thread(sampler: Sampler) -> None:
    got: list[Msg] = []
    sampler.on_tick = got.append
    sampler.start()
    assert wait_for(lambda: len(got) >= 1)
    pid = sampler.child_pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: sampler.fallback is not None)
    assert "killed by signal 9" in (sampler.fallback or "")
    assert sampler.running and sampler.child_pid is None
    n = len(got)
    assert wait_for(lambda: len(got) >= n + 2)  # the thread carries on, on the same clock
    assert got[n]["t"] > got[n - 1]["t"] and "host_cpu_pct" in got[-1]["host"]
    assert [t.name for t in sampler_threads()] == ["gpusight-nvml"]
    sampler.stop()
    assert sampler_threads() == []


@pytest.mark.parametrize(
    "executable, why",
    [
        ("missing", "no process could start"),  # Popen raises
        ("false", "the sampler process ended (exit 1)"),  # starts, then fails
    ],
)
def test_a_child_that_cannot_sample_leaves_it_to_a_thread(
    sampler: Sampler,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    executable: str,
    why: str,
) -> None:
    path = shutil.which("false") if executable == "false" else str(tmp_path / "no-python")
    monkeypatch.setattr(sys, "executable", path)
    sampler.start()
    assert wait_for(lambda: sampler.fallback is not None)
    assert why in (sampler.fallback or ""), sampler.fallback
    assert wait_for(lambda: len(sampler) >= 2)
    assert sampler.child_pid is None
    assert [t.name for t in sampler_threads()] == ["gpusight-nvml"]


def test_asking_for_the_thread(sampler: Sampler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "thread")
    sampler.start()
    assert sampler.child_pid is None and sampler.fallback is None
    assert [t.name for t in sampler_threads()] == ["gpusight-nvml"]
    assert wait_for(lambda: len(sampler) >= 1)


def test_to_tick_keeps_gpu_fields_and_host_figures() -> None:
    group: list[dict[str, float | int | None]] = [
        {"t": 1.5, "gpu": 0, "util_pct": 97.0, "mem_used_bytes": 1e9, "cpu_pct": 12.0},
        {"t": 1.5, "gpu": 1, "util_pct": None, "pcie_rx_bps": 2e9, "cpu_pct": 12.0},
    ]
    tick = to_tick(group, {"host_cpu_pct": 40.0})
    assert tick == {
        "t": 1.5,
        "gpus": [
            {"gpu": 0, "util_pct": 97.0, "mem_used_bytes": 1e9},
            {"gpu": 1, "util_pct": None, "pcie_rx_bps": 2e9},
        ],
        "host": {"cpu_pct": 12.0, "host_cpu_pct": 40.0},
    }
    assert to_tick([{"t": 2.0, "cpu_pct": None}], {})["gpus"] == []


def test_monitor_imports_without_ipython_comm_or_ipykernel() -> None:
    # benchmarks/gpu_monitor.py runs on a machine without them.
    code = (
        "import sys\n"
        "for name in ('IPython', 'ipykernel', 'comm', 'ipywidgets', 'jsonschema'):\n"
        "    sys.modules[name] = None\n"
        "import time\n"
        "from gpusight.jupyter.monitor import Sampler\n"
        "s = Sampler(hz=10, capacity=60).start(); end = time.monotonic() + 20\n"
        # Two samples (0.2 s at 10 Hz), however long a loaded machine keeps the thread waiting.
        "while len(s) < 2 and time.monotonic() < end: time.sleep(0.05)\n"
        "s.stop()\n"
        "print(len(s), s.source)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python_pkg")}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    n, source = out.stdout.split()
    assert int(n) >= 2 and source in ("nvml", "host")


def test_soak_an_hour_at_10_hz_stays_within_the_ring() -> None:
    # 36,000 ticks (an hour at 10 Hz) through the ring that holds 3,000: memory stops growing
    # once the ring is full. Figures: benchmarks/monitor_soak.py -> results/monitor-soak.json.
    s = Sampler(hz=10, capacity=3000)

    def feed(start: int, n: int) -> None:
        for i in range(start, start + n):
            s.record(
                [
                    {
                        "t": i / 10,
                        "gpu": 0,
                        "util_pct": 50.0,
                        "mem_used_bytes": 1e9,
                        "power_w": 300.0,
                        "sm_clock_mhz": 1980.0,
                        "cpu_pct": 10.0,
                    }
                ]
            )

    tracemalloc.start()
    try:
        feed(0, 3000)  # fill the ring
        full, _ = tracemalloc.get_traced_memory()
        feed(3000, 33_000)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(s) == 3000
    assert s.ticks()[-1]["t"] == pytest.approx(3599.9)
    # 33,000 more ticks add (almost) nothing: under 2 % of what the full ring holds.
    assert after - full < 0.02 * full, (full, after)


# --- Hub (the comm handlers) ------------------------------------------------------------------


class Wire:
    """A client's end of the comm: what the hub sent it, in order (thread-safe)."""

    def __init__(self) -> None:
        self.messages: list[Msg] = []
        self._lock = threading.Lock()

    def __call__(self, message: Msg) -> None:
        json.dumps(message, allow_nan=False)  # what the comm would have to serialise
        with self._lock:
            self.messages.append(message)

    def of(self, kind: str) -> list[Msg]:
        with self._lock:
            return [m for m in self.messages if m["type"] == kind]


@pytest.fixture
def hub() -> Iterator[Hub]:
    h = Hub(shell=None, sampler=Sampler(hz=10, capacity=60))
    yield h
    h.sampler.stop()


def test_hello_says_what_this_kernel_can_do(hub: Hub) -> None:
    wire = Wire()
    client = hub.connect(wire)
    hub.handle(client, {"type": "hello", "protocol": 1})
    (hello,) = wire.of("hello")
    assert hello["executable"] == sys.executable and hello["pid"] == os.getpid()
    assert hello["protocol"] == gs_comm.PROTOCOL and hello["reports"] == []
    caps = hello["capabilities"]
    assert caps["check"] and caps["bench"]
    assert caps["watch"] is False  # no IPython shell: nothing to watch
    assert caps["export"] == gs_comm.has_html_export()


@pytest.mark.parametrize(
    "data, expected",
    [
        ("not a dict", "malformed message"),
        ({"no": "type"}, "malformed message"),
        ({"type": "frobnicate", "request": "x-1"}, "unknown message type 'frobnicate'"),
        ({"type": "report.get", "request": "r-1", "report_id": "r99"}, "no report 'r99'"),
        ({"type": "export", "request": "e-1", "report_id": 7}, "report"),
    ],
)
def test_bad_messages_get_an_error_reply(hub: Hub, data: Any, expected: str) -> None:
    wire = Wire()
    hub.handle(hub.connect(wire), data)
    (error,) = wire.of("error")
    assert expected in error["message"]
    if isinstance(data, dict) and "request" in data:
        assert error["request"] == data["request"]


def test_monitor_start_streams_to_monitoring_clients_only(hub: Hub) -> None:
    watching, idle = Wire(), Wire()
    a, b = hub.connect(watching), hub.connect(idle)
    hub.handle(a, {"type": "monitor.start", "hz": 10, "capacity": 100})
    (status,) = watching.of("monitor.status")
    assert status["running"] and status["hz"] == 10 and status["capacity"] == 100
    assert status["source"] in ("nvml", "host")
    assert wait_for(lambda: len(watching.of("tick")) >= 3)
    assert idle.of("tick") == []
    # A second client joining gets the backlog first, then live ticks.
    hub.handle(b, {"type": "monitor.start", "hz": 10, "capacity": 100, "since": None})
    assert idle.messages[0]["type"] == "ticks" and len(idle.messages[0]["ticks"]) >= 3
    assert wait_for(lambda: len(idle.of("tick")) >= 1)
    # One client pausing keeps the sampler running for the other; both pausing stops it.
    hub.handle(a, {"type": "monitor.stop"})
    assert hub.sampler.running
    hub.handle(b, {"type": "monitor.stop"})
    assert not hub.sampler.running and sampler_threads() == []
    assert watching.of("monitor.status")[-1]["running"] is True  # b still watched then
    assert idle.of("monitor.status")[-1]["running"] is False


def test_resuming_sends_only_the_ticks_the_client_lacks(hub: Hub) -> None:
    wire = Wire()
    client = hub.connect(wire)
    for i in range(10):
        hub.sampler.record([{"t": float(i), "cpu_pct": 0.0}])
    hub.handle(client, {"type": "monitor.start", "since": 6.0})
    (backlog,) = wire.of("ticks")
    assert [t["t"] for t in backlog["ticks"]] == [7.0, 8.0, 9.0]


def test_disconnect_stops_the_sampler(hub: Hub) -> None:
    client = hub.connect(Wire())
    hub.handle(client, {"type": "monitor.start"})
    assert hub.sampler.running
    hub.disconnect(client)
    assert not hub.sampler.running and sampler_threads() == []


def test_a_client_that_cannot_be_sent_to_is_dropped(hub: Hub) -> None:
    def broken(message: Msg) -> None:
        raise OSError("comm gone")

    client = hub.connect(broken)
    hub.handle(client, {"type": "monitor.start"})
    assert wait_for(lambda: not hub.clients())
    assert wait_for(lambda: not hub.sampler.running)


@pytest.fixture(scope="module")
def check_report() -> Any:
    from gpusight import check

    return check()


def test_check_streams_progress_then_a_valid_report(hub: Hub) -> None:
    wire, other = Wire(), Wire()
    client = hub.connect(wire)
    hub.connect(other)
    hub.handle(client, {"type": "check", "request": "check-1"})
    (progress,) = wire.of("progress")
    assert progress["request"] == "check-1" and progress["fraction"] is None
    (report,) = wire.of("report")
    assert report["request"] == "check-1" and report["entry"]["origin"] == "check"
    assert report["entry"]["kind"] == "check" == report["report"]["kind"]
    validate(report["report"])
    # Every panel of the kernel lists the new report; a late one gets it in its hello.
    assert other.of("report")[0]["entry"] == report["entry"]
    late = Wire()
    hub.handle(hub.connect(late), {"type": "hello"})
    assert late.of("hello")[0]["reports"] == [report["entry"]]
    # ... and can fetch it.
    hub.handle(hub.connect(late), {"type": "report.get", "request": "g-1", "report_id": "r1"})
    assert late.of("report")[0]["report"] == report["report"]


def test_bench_streams_progress_within_its_budget(hub: Hub) -> None:
    wire = Wire()
    client = hub.connect(wire)
    began = time.monotonic()
    hub.handle(client, {"type": "bench", "request": "bench-1", "budget_s": 1})
    elapsed = time.monotonic() - began
    progress = wire.of("progress")
    assert len(progress) >= 2 and all(p["request"] == "bench-1" for p in progress)
    fractions = [p["fraction"] for p in progress]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    (report,) = wire.of("report")
    assert report["report"]["kind"] == "bench" and report["report"]["benchmarks"]
    validate(report["report"])
    assert elapsed < 30


def test_reports_kept_are_bounded(hub: Hub, check_report: Any) -> None:
    wire = Wire()
    client = hub.connect(wire)
    for _ in range(gs_comm.MAX_REPORTS + 5):
        hub._publish_report(None, "check", check_report)
    hub.handle(client, {"type": "hello"})
    entries = wire.of("hello")[0]["reports"]
    assert len(entries) == gs_comm.MAX_REPORTS
    assert entries[0]["id"] == "r6" and entries[-1]["id"] == f"r{gs_comm.MAX_REPORTS + 5}"


def test_reports_the_notebook_shows_are_listed_once_with_the_panels_own(
    hub: Hub, check_report: Any
) -> None:
    # Issue #36: after six reports in the notebook the sidebar listed none.
    wire = Wire()
    client = hub.connect(wire)
    hub.shown(check_report)  # a cell displayed it
    hub.shown(check_report)  # and again (re-run of the display)
    (listed,) = wire.of("report")
    assert listed["request"] is None and listed["entry"]["kind"] == "check"
    assert listed["entry"]["origin"] == "check"
    # The panel's own report (a watched cell it armed), then shown by that cell: one entry.
    other = copy.deepcopy(check_report)
    hub._publish_report("watch.arm-1", "watch", other)
    hub.shown(other)
    assert len(wire.of("report")) == 2
    # A panel that connects later gets the kernel's reports in its hello.
    late = Wire()
    hub.handle(hub.connect(late), {"type": "hello"})
    assert [e["id"] for e in late.of("hello")[0]["reports"]] == ["r1", "r2"]
    del client


def test_export_writes_html_or_says_what_is_missing(
    hub: Hub, check_report: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wire = Wire()
    client = hub.connect(wire)
    hub._publish_report(None, "check", check_report)
    hub.handle(client, {"type": "export", "request": "e-1", "report_id": "r1"})
    if not gs_comm.has_html_export():
        (error,) = wire.of("error")
        assert "html_export" in error["message"]
        return
    (done,) = wire.of("exported")
    path = Path(done["path"])
    assert path.parent == tmp_path and path.name.startswith("gpusight-check-")
    text = path.read_text("utf-8")
    assert text.lstrip().lower().startswith("<!doctype html")


# --- cells and "watch next cell", through a real IPython shell --------------------------------


@pytest.fixture
def shell_hub() -> Iterator[tuple[Hub, Any]]:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    h = Hub(shell=shell, sampler=Sampler(hz=10, capacity=60))
    yield h, shell
    h.sampler.stop()
    for event, fn in (("pre_run_cell", h.pre_run_cell), ("post_run_cell", h.post_run_cell)):
        if fn in shell.events.callbacks[event]:
            shell.events.unregister(event, fn)
    if h.transform in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(h.transform)


def test_cells_are_marked_on_the_monitor_clock(shell_hub: tuple[Hub, Any]) -> None:
    hub, shell = shell_hub
    wire = Wire()
    client = hub.connect(wire)
    hub.handle(client, {"type": "monitor.start"})
    shell.run_cell("import time; time.sleep(0.3)")
    shell.run_cell("1 / 0")
    shell.run_cell("x = 1", silent=True)  # silent: no marks
    cells = wire.of("cell")
    assert [c["event"] for c in cells] == ["start", "end", "start", "end"]
    assert cells[1]["t"] - cells[0]["t"] >= 0.29
    assert cells[1]["success"] is True and cells[3]["success"] is False
    assert 0 <= cells[0]["t"] <= hub.sampler.now()


def test_reports_are_listed_with_the_cell_that_made_them(
    shell_hub: tuple[Hub, Any], check_report: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #48: the sidebar's list read "watch", "watch", "watch": each entry now names its
    cell after its title, or its kind where it has none; a report no cell showed keeps its
    title alone."""
    hub, shell = shell_hub
    wire = Wire()
    hub.connect(wire)
    untitled = copy.deepcopy(check_report)
    untitled.title = None
    shell.user_ns.update(_hub=hub, rep=check_report, untitled=untitled)
    result = shell.run_cell("_hub.shown(rep)", store_history=True)
    result.raise_error()
    count = result.execution_count  # the cell's number, as the notebook shows it
    shell.run_cell("_hub.shown(untitled)", store_history=True).raise_error()
    first, second = (m["entry"] for m in wire.of("report"))
    assert first["title"] == f"{check_report.title}, cell [{count}]"
    assert second["title"] == f"check, cell [{count + 1}]" and second["kind"] == "check"
    alone = copy.deepcopy(check_report)
    hub._publish_report(None, "check", alone)
    assert wire.of("report")[-1]["entry"]["title"] == check_report.title
    # A report displayed before any panel connected keeps the cell that displayed it, which a
    # hub made later lists it with (not the cell running when the panel connects).
    from collections import deque

    from gpusight.jupyter import display

    # The kernel's list of displayed reports is this process's: the test's own, then gone.
    monkeypatch.setattr(display, "_shown", deque(maxlen=display.SHOWN_KEPT))
    monkeypatch.setattr(display, "_cells", {})
    late = copy.deepcopy(check_report)
    shell.user_ns["late"] = late
    shown = shell.run_cell(
        "from gpusight.jupyter import display\ndisplay._tell_panels(late, {})", store_history=True
    )
    shown.raise_error()
    shell.run_cell("pass", store_history=True)
    assert display.shown_cell(late) == shown.execution_count


def test_watch_next_cell_wraps_exactly_one_cell_in_the_cell_magic(
    shell_hub: tuple[Hub, Any],
) -> None:
    hub, shell = shell_hub
    wire = Wire()
    client = hub.connect(wire)
    hub.handle(client, {"type": "watch.arm", "request": "watch.arm-1"})
    assert hub.capabilities()["watch"] is gs_comm.has_cell_magic()
    if not gs_comm.has_cell_magic():
        assert "needs %%gpusight" in wire.of("error")[0]["message"]
        return
    assert wire.of("watch.status")[-1] == {
        "type": "watch.status",
        "armed": True,
        "request": "watch.arm-1",
    }
    assert shell.find_cell_magic("gpusight") is not None
    # Typing in a console (check_complete) must not consume the arming.
    shell.input_transformer_manager.check_complete("x = 1\n")
    assert hub.armed == "watch.arm-1"
    # The next cell runs under %%gpusight (a CPU loop here: a real, if GPU-less, watch).
    shell.run_cell("total = 0\nfor i in range(200):\n    total += i\n")
    assert shell.user_ns["total"] == sum(range(200))
    reports = wire.of("report")
    errors = wire.of("error")
    assert reports or errors, wire.messages
    if reports:
        (report,) = reports
        assert report["request"] == "watch.arm-1" and report["entry"]["origin"] == "watch"
        validate(report["report"])
    else:
        assert errors[0]["request"] == "watch.arm-1"
    assert wire.of("watch.status")[-1]["armed"] is False
    # Only one cell: the next runs as it is.
    n = len(wire.messages)
    shell.run_cell("y = 2")
    assert shell.user_ns["y"] == 2 and not wire.of("report")[1:] and len(wire.messages) == n


def test_disarm_leaves_the_next_cell_alone(shell_hub: tuple[Hub, Any]) -> None:
    hub, _shell = shell_hub
    hub.armed = "w-1"
    hub.handle(hub.connect(Wire()), {"type": "watch.disarm"})
    assert hub.armed is None
    assert hub.transform(["x = 1\n"]) == ["x = 1\n"]
    hub.armed = "w-2"
    assert hub.transform(["\n", "%%gpusight --steps 3\n", "train()\n"])[1].startswith("%%gpusight")
    assert hub.watching == "w-2" and hub.armed is None


# --- a real kernel: the comm keeps streaming while a cell runs; "watch next cell" -------------


class RealKernel:
    """An ipykernel with gpusight's comm open, as the sidebar opens it."""

    def __init__(self, km: Any, kc: Any) -> None:
        self.km, self.kc = km, kc
        self.comm_id = uuid.uuid4().hex

    def to_kernel(self, kind: str, content: Msg) -> None:
        self.kc.shell_channel.send(self.kc.session.msg(kind, {"comm_id": self.comm_id, **content}))

    def send(self, data: Msg) -> None:
        self.to_kernel("comm_msg", {"data": data})

    def drain(self, until: Callable[[Msg], bool], timeout: float = 30) -> list[Msg]:
        """iopub messages until ``until(msg)`` holds (included) or the time runs out."""
        got: list[Msg] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                msg = self.kc.get_iopub_msg(timeout=0.5)
            except Exception:
                continue
            msg["received"] = time.monotonic()
            got.append(msg)
            if until(msg):
                break
        return got


def comm_data(msgs: list[Msg], kind: str) -> list[Msg]:
    return [
        m["content"]["data"]
        for m in msgs
        if m["msg_type"] == "comm_msg" and m["content"]["data"]["type"] == kind
    ]


@pytest.fixture(scope="module")
def real_kernel() -> Iterator[RealKernel]:
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    k = RealKernel(km, kc)
    try:
        reply = kc.execute_interactive(
            '__import__("gpusight.jupyter.comm", fromlist=["x"]).register_target()',
            silent=True,
            store_history=False,
            timeout=60,
        )
        assert reply["content"]["status"] == "ok"
        k.to_kernel("comm_open", {"target_name": "gpusight", "data": {"type": "hello"}})
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def idle_after(msg_id: str) -> Callable[[Msg], bool]:
    def done(msg: Msg) -> bool:
        return (
            msg["msg_type"] == "status"
            and msg["parent_header"].get("msg_id") == msg_id
            and msg["content"]["execution_state"] == "idle"
        )

    return done


@pytest.mark.slow
def test_a_real_kernel_streams_samples_during_a_busy_cell(real_kernel: RealKernel) -> None:
    k = real_kernel
    k.send({"type": "monitor.start", "hz": 10, "capacity": 600})
    cell = k.kc.execute("import time\nfor _ in range(20):\n    time.sleep(0.1)\n")
    msgs = k.drain(idle_after(cell))
    busy = [
        m["received"]
        for m in msgs
        if m["msg_type"] == "status" and m["parent_header"].get("msg_id") == cell
    ]
    assert len(busy) == 2, "the cell never finished"
    ticks = [
        m["received"]
        for m in msgs
        if m["msg_type"] == "comm_msg" and m["content"]["data"]["type"] == "tick"
    ]
    during = [t for t in ticks if busy[0] <= t <= busy[1]]
    # ~2 s busy at 10 Hz: ~20 ticks; at least half must arrive while the cell runs.
    assert len(during) >= 10, (len(during), busy[1] - busy[0])
    assert [c["event"] for c in comm_data(msgs, "cell")] == ["start", "end"]
    k.send({"type": "monitor.stop"})


@pytest.mark.slow
def test_a_real_kernel_watches_exactly_the_next_cell(real_kernel: RealKernel) -> None:
    # ipykernel transforms a cell twice (async check, then run) and %%gpusight transforms its
    # body once more: the cell must run under the magic exactly once, not zero times or nested.
    k = real_kernel
    k.send({"type": "watch.arm", "request": "watch.arm-7"})
    code = "total = 0\nfor i in range(10_000):\n    total += i\ntotal"
    cell = k.kc.execute(code)
    msgs = k.drain(idle_after(cell))
    assert [e["message"] for e in comm_data(msgs, "error")] == []
    (report,) = comm_data(msgs, "report")
    assert report["request"] == "watch.arm-7" and report["entry"]["origin"] == "watch"
    assert report["report"]["kind"] == "watch"
    validate(report["report"])
    assert comm_data(msgs, "watch.status")[-1]["armed"] is False
    # The cell still did its work, and the next one runs as it is.
    again = k.kc.execute("total")
    msgs = k.drain(idle_after(again))
    assert comm_data(msgs, "report") == []
    (result,) = [m for m in msgs if m["msg_type"] == "execute_result"]
    assert result["content"]["data"]["text/plain"] == str(sum(range(10_000)))
