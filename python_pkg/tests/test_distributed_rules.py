"""Merging ranks and judging links: pure rules on plain data (report dicts, NVML facts)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from gpusight.bench.allreduce import (
    alg_bandwidth,
    bus_bandwidth,
    row_from_result,
    skip_reason,
)
from gpusight.bench.allreduce import run as allreduce_run
from gpusight.probes.topology import GpuLinks, GpuPair, TopologyFacts, bus_key
from gpusight.report import Benchmark, Check, Report, Verdict
from gpusight.report_schema import validate
from gpusight.rules import distributed as rd
from gpusight.rules.topology import (
    collective_ceiling,
    nvlink_link_gbps,
    pair_link,
    topology_checks,
    with_topology,
)
from gpusight.watch import ranks

MACHINE: dict[str, Any] = {
    "platform": "Linux",
    "python": "3.12.3",
    "cpu_count": 32,
    "hostname": "node0",
    "gpus": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}],
    "torch": {"version": "2.11.0", "cuda_available": True, "device_count": 2},
}


def rank_report(
    rank: int,
    step_ms: float,
    *,
    comm_ms: float = 0.0,
    nccl_ms: float | None = None,
    world: int = 2,
    device: int | None = None,
    timeline: list[dict[str, Any]] | None = None,
    notes: tuple[str, ...] = (),
    bottleneck: str = "compute",
    run_id: str = "run-1",
    finished_at: float = 1000.0,
) -> dict[str, Any]:
    """A schema-valid rank report, as ``gpusight run`` under torchrun writes it."""
    steps = [step_ms * f for f in (0.98, 1.0, 1.02, 1.0, 0.99, 1.01)]
    kernels: dict[str, Any] = {
        "dist_rank": rank,
        "dist_world_size": world,
        "dist_local_rank": rank,
        "dist_host": "node0",
        "dist_cuda_device": rank if device is None else device,
        "dist_run_id": run_id,
        "dist_finished_at": finished_at,
        "dist_backend": "nccl",
    }
    if nccl_ms is not None:
        kernels["nccl_ms_per_step"] = nccl_ms
    rest = step_ms - comm_ms
    report = Report(
        kind="watch",
        machine=MACHINE,
        run={
            "steps": len(steps),
            "step_time_ms": step_ms,
            "step_times_ms": steps,
            "step_starts_s": [1.0 + i * step_ms / 1000 for i in range(len(steps))],
            "breakdown_ms": {
                "compute": rest * 0.8,
                "other_cpu": rest * 0.2,
                "communication": comm_ms,
            },
            "gpu_busy_pct": 80.0 * rest / step_ms,
            "kernels": kernels,
            "timeline": timeline or [],
        },
        verdict=Verdict(bottleneck=bottleneck, gpu_busy_pct=50.0, summary="."),
        notes=list(notes),
        title=f"train.py (rank {rank} of {world})",
    )
    data = report.to_dict()
    validate(data)
    return data


# --- stragglers, imbalance, communication ------------------------------------------------------


def test_straggler_is_the_rank_with_most_own_work() -> None:
    # Lockstep: equal steps; rank 1 works 30 ms, rank 0 works 20 ms and waits 10 ms in NCCL.
    r0 = rd.rank_evidence(rank_report(0, 30.0, comm_ms=11.0, nccl_ms=14.0))
    r1 = rd.rank_evidence(rank_report(1, 30.0, comm_ms=1.0, nccl_ms=4.0))
    assert r0.work_ms == pytest.approx(19.0) and r1.work_ms == pytest.approx(29.0)
    assert rd.stragglers([r0, r1]) == [1]
    assert rd.wait_pct([r0, r1]) == pytest.approx(100 * 10 / 30)
    assert r1.overlap_pct == pytest.approx(75.0)
    f = rd.imbalance_finding([r0, r1])
    assert f is not None and f.id == "dist.imbalance" and "Rank 1" in f.title
    assert f.severity == "critical"  # a third of each step spent waiting
    assert f.impact.recoverable_pct == pytest.approx(33.3, abs=0.1)


def test_balanced_ranks_raise_no_imbalance() -> None:
    rs = [rd.rank_evidence(rank_report(r, 30.0, comm_ms=2.0, nccl_ms=6.0)) for r in range(4)]
    assert rd.stragglers(rs) == [] and rd.imbalance_finding(rs) is None


def test_comm_bound_is_judged_on_the_slowest_rank() -> None:
    # Rank 0 waits 12 ms for rank 1 (its NCCL kernels spin): that is imbalance, not the network.
    r0 = rd.rank_evidence(rank_report(0, 40.0, comm_ms=14.0, nccl_ms=15.0))
    r1 = rd.rank_evidence(rank_report(1, 40.0, comm_ms=2.0, nccl_ms=8.0))
    assert rd.comm_finding([r0, r1]) is None
    # Both ranks wait 20 ms on the wire: communication-bound.
    c0 = rd.rank_evidence(rank_report(0, 40.0, comm_ms=20.0, nccl_ms=25.0))
    c1 = rd.rank_evidence(rank_report(1, 40.0, comm_ms=21.0, nccl_ms=25.0))
    f = rd.comm_finding([c0, c1])
    assert f is not None and f.id == "dist.comm_bound" and f.severity == "critical"
    overlap = next(e.value for e in f.evidence if e.label.startswith("overlapped"))
    assert overlap == pytest.approx(100 * (1 - 20 / 25), abs=0.1)
    assert f.fix.snippet_id == "dist.overlap" and "no_sync" in (f.fix.code or "")


def test_without_a_gpu_trace_waiting_is_not_called_work() -> None:
    # CPU/gloo: lockstep medians differ by where each puts the step's end; the means agree.
    a = rank_report(0, 13.3)
    b = rank_report(1, 12.0)
    b["run"]["step_times_ms"] = [13.3, 11.0, 12.0, 12.0, 15.5, 16.0]
    ranks_ = [rd.rank_evidence(a), rd.rank_evidence(b)]
    assert all(r.nccl_ms is None for r in ranks_)
    assert rd.imbalance_finding(ranks_) is None


# --- idle GPUs --------------------------------------------------------------------------------


def _timeline(utils: dict[int, float]) -> list[dict[str, Any]]:
    return [
        {"t": 1.0 + k * 0.01, "gpu": g, "util_pct": u} for k in range(3) for g, u in utils.items()
    ]


def test_idle_gpu_from_world_size_and_nvml() -> None:
    node = rd.NodeGpus(visible=4, util_pct={0: 90.0, 1: 88.0, 2: 0.0, 3: 1.0})
    rs = [rd.RankEvidence(rank=r, step_times_ms=[10.0], device=r) for r in range(2)]
    used, idle = rd.gpu_usage(node, rs)
    assert (used, idle) == ([0, 1], [2, 3])
    f = rd.idle_finding(node, rs, used, idle)
    assert f is not None and f.severity == "critical" and "2 of 4" in f.title
    assert "--nproc-per-node=4" in (f.fix.code or "")


def test_every_rank_on_gpu0_leaves_gpu1_idle() -> None:
    # The classic: no torch.cuda.set_device(LOCAL_RANK), both ranks land on GPU 0.
    node = rd.NodeGpus(visible=2, util_pct={0: 95.0, 1: 0.0})
    rs = [rd.RankEvidence(rank=r, step_times_ms=[10.0], device=0) for r in range(2)]
    used, idle = rd.gpu_usage(node, rs)
    f = rd.idle_finding(node, rs, used, idle)
    assert idle == [1] and f is not None and "set_device" in (f.detail or "")


def test_no_idle_gpu_when_all_work_or_none_is_known() -> None:
    node = rd.NodeGpus(visible=2, util_pct={0: 60.0, 1: 55.0})
    rs = [rd.RankEvidence(rank=r, step_times_ms=[10.0], device=r) for r in range(2)]
    assert rd.gpu_usage(node, rs)[1] == []
    # Host-bound run: both GPUs nearly idle, but both in use: not an idle-GPU problem.
    quiet = rd.NodeGpus(visible=2, util_pct={0: 2.0, 1: 3.0})
    assert rd.gpu_usage(quiet, rs)[1] == []
    # Without NVML, the ranks' devices tell.
    blind = rd.NodeGpus(visible=3)
    assert rd.gpu_usage(blind, rs) == ([0, 1], [2])


def test_single_process_on_two_gpus() -> None:
    data = rank_report(0, 10.0, world=1, timeline=_timeline({0: 70.0, 1: 0.0}))
    f = rd.single_process_idle(data, device=0)
    assert f is not None and f.id == "dist.idle_gpus" and "1 of 2" in f.title
    # DataParallel over both GPUs uses them both.
    dp = rank_report(0, 10.0, world=1, timeline=_timeline({0: 70.0, 1: 65.0}))
    assert rd.single_process_idle(dp, device=0) is None
    # One GPU: nothing to say.
    one = json.loads(json.dumps(data))
    one["machine"]["torch"]["device_count"] = 1
    assert rd.single_process_idle(one, device=0) is None


# --- the merged report -------------------------------------------------------------------------


def test_merge_is_schema_valid_and_names_the_straggler() -> None:
    reports = [
        rank_report(1, 30.0, comm_ms=1.0, nccl_ms=4.0, notes=("stopped after 6 steps",)),
        rank_report(
            0,
            30.0,
            comm_ms=11.0,
            nccl_ms=14.0,
            notes=("stopped after 6 steps",),
            timeline=_timeline({0: 90.0, 1: 85.0}),
        ),
    ]
    merged = rd.merge_reports(reports, label="train.py")
    data = merged.to_dict()
    validate(data)
    assert data["kind"] == "distributed" and data["title"] == "train.py: 2 of 2 ranks"
    k = data["run"]["kernels"]
    assert k["dist_world_size"] == 2 and k["dist_ranks_reported"] == 2
    assert k["dist_slowest_rank"] == 1 and k["dist_stragglers"] == "1"
    assert k["rank0_comm_ms"] == 11.0 and k["rank1_work_ms"] == pytest.approx(29.0)
    assert data["run"]["timeline"]  # rank 0's, though rank 1 is the representative one
    assert "step_starts_s" not in data["run"]
    assert sum(data["run"]["breakdown_ms"].values()) == pytest.approx(30.0, abs=0.01)
    steps = next(b for b in data["benchmarks"] if b["id"] == "dist.step_time")
    assert [p["x"] for p in steps["series"]] == [0, 1]
    assert data["findings"][0]["id"] == "dist.imbalance"
    assert "ranks 0, 1: stopped after 6 steps" in data["notes"]
    assert "slowest rank 1" in data["verdict"]["summary"]


def test_merge_names_missing_ranks_and_keeps_the_latest_file() -> None:
    old = rank_report(0, 50.0, finished_at=10.0)
    new = rank_report(0, 20.0, finished_at=20.0)
    merged = rd.merge_reports([new, old], world_size=3).to_dict()
    validate(merged)
    assert merged["run"]["step_time_ms"] == 20.0
    assert any("no report from rank(s) 1, 2" in n for n in merged["notes"])
    assert any("communication was not measured" in n for n in merged["notes"])
    with pytest.raises(ValueError, match="no rank reports"):
        rd.merge_reports([])


def test_ranks_of_different_jobs_are_not_merged() -> None:
    """Two files that disagree on the world size come from two runs: no merged report names
    ranks missing that neither job had."""
    reports = [rank_report(0, 20.0, world=2), rank_report(1, 20.0, world=4)]
    with pytest.raises(
        ValueError, match=r"disagree on the job's world size \(rank 0: 2, rank 1: 4\)"
    ):
        rd.merge_reports(reports)
    # Said by the user, it stands.
    assert rd.merge_reports(reports, world_size=4).title.endswith("2 of 4 ranks")


def test_comm_bound_merge_names_communication() -> None:
    reports = [rank_report(r, 40.0, comm_ms=20.0 + r, nccl_ms=25.0) for r in range(2)]
    merged = rd.merge_reports(reports)
    assert merged.verdict.bottleneck == "communication"
    assert merged.finding_ids[0] == "dist.comm_bound"


def test_rank_findings_come_back_whole() -> None:
    data = rank_report(0, 10.0)
    data["findings"] = [
        {
            "id": "load.input_bound",
            "severity": "warn",
            "title": "The input pipeline starves the step",
            "evidence": [
                {"label": "wait", "value": 3.0, "unit": "ms", "source": {"file": "a.py", "line": 3}}
            ],
            "impact": {
                "basis": "estimated",
                "text": "t",
                "recoverable_pct": 30.0,
                "speedup_range": [1.2, 1.5],
            },
            "fix": {
                "text": "workers",
                "snippet_id": "loader.workers",
                "code": "x = 1\n",
                "patch": "--- a/a.py\n+++ b/a.py\n",
                "patch_files": [{"path": "a.py", "sha256": "0" * 64}],
            },
        }
    ]
    f = rd.finding_from_dict(data["findings"][0])
    again = Report(kind="watch", machine=MACHINE, findings=[f]).to_dict()["findings"][0]
    assert again == data["findings"][0]


# --- rank environment and files ----------------------------------------------------------------


def test_rank_env_reads_torchrun_variables() -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    env |= {"TORCHELASTIC_RUN_ID": "abc", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}
    r = ranks.rank_env(env)
    assert r is not None and (r.rank, r.world_size, r.local_rank) == (1, 2, 1)
    assert "abc" in r.run_id and "29500" in r.run_id
    assert ranks.rank_env({"RANK": "0", "WORLD_SIZE": "1"}) is None  # one process: plain run
    assert ranks.rank_env({"RANK": "x", "WORLD_SIZE": "2"}) is None
    assert ranks.rank_env({}) is None


def test_rank_paths() -> None:
    r = ranks.RankEnv(0, 2, 0, 2, "id|h|1|0")
    assert ranks.rank_paths(r, "out/r{rank}.json", {}) == ("out/r{rank}.json", "out/rmerged.json")
    assert ranks.rank_paths(r, "out/a.json", {}) == ("out/a.rank{rank}.json", "out/a.json")
    shared = ranks.rank_paths(r, "a.json", {ranks.ENV_DIR: "/shared/x"})
    assert shared == ("/shared/x/rank{rank}.json", "a.json")
    pattern, merged = ranks.rank_paths(r, None, {})
    assert merged is None and "gpusight-ranks-id_h_1_0" in pattern


def test_collect_takes_only_this_runs_files(tmp_path: Path) -> None:
    env = ranks.RankEnv(0, 2, 0, 2, "run-2")
    pattern = str(tmp_path / "rank{rank}.json")
    (tmp_path / "rank0.json").write_text(json.dumps(rank_report(0, 10.0, run_id="run-2")))
    (tmp_path / "rank1.json").write_text(json.dumps(rank_report(1, 10.0, run_id="run-1")))
    slept: list[float] = []
    got = ranks.collect(pattern, env, timeout_s=0.0, sleep=slept.append)
    assert sorted(got) == [0]  # rank 1's file is an earlier run's
    (tmp_path / "rank1.json").write_text(json.dumps(rank_report(1, 10.0, run_id="run-2")))
    assert sorted(ranks.collect(pattern, env, timeout_s=5.0)) == [0, 1]


def test_begin_removes_this_ranks_old_file(tmp_path: Path) -> None:
    env = ranks.RankEnv(1, 2, 1, 2, "r")
    old = tmp_path / "out.rank1.json"
    old.write_text("{}")
    (tmp_path / "out.rank0.json").write_text("{}")
    ranks.begin(env, str(tmp_path / "out.json"))
    assert not old.exists() and (tmp_path / "out.rank0.json").exists()


# --- all-reduce bandwidth --------------------------------------------------------------------


def test_busbw_is_nccl_tests_formula() -> None:
    gib = 1 << 30
    assert alg_bandwidth(gib, 0.01) == pytest.approx(gib / 0.01 / 1e9)
    assert bus_bandwidth(gib, 0.01, 2) == pytest.approx(alg_bandwidth(gib, 0.01))  # 2(n-1)/n = 1
    assert bus_bandwidth(gib, 0.01, 8) == pytest.approx(alg_bandwidth(gib, 0.01) * 14 / 8)
    assert bus_bandwidth(gib, 0.01, 1) == 0.0
    with pytest.raises(ValueError):
        bus_bandwidth(gib, 0.0, 2)


def test_allreduce_skips_without_cuda_with_a_reason() -> None:
    reason = skip_reason()
    if reason is None:
        pytest.skip("this machine can run the NCCL all-reduce")
    rows = allreduce_run(budget_s=1.0)
    assert len(rows) == 1 and rows[0].value is None and rows[0].skipped == reason
    assert "CUDA" in reason or "GPU" in reason or "torch" in reason
    Report(kind="bench", machine=MACHINE, benchmarks=rows).validate()


def test_row_and_nccl_slow() -> None:
    result = {
        "world_size": 2,
        "dtype": "float32",
        "correct": True,
        "nccl_version": "2.27.7",
        "sizes": [
            {"bytes": 1 << 20, "median_s": 40e-6, "p10_s": 38e-6, "p90_s": 45e-6, "repeats": 200},
            {"bytes": 1 << 30, "median_s": 0.0030, "p10_s": 0.0029, "p90_s": 0.0031, "repeats": 50},
        ],
    }
    row = row_from_result(result, 450.0, "NVLink 18 x 25")
    assert row.value == pytest.approx((1 << 30) / 0.003 / 1e9, rel=1e-3)
    assert row.series is not None and [p["x"] for p in row.series] == [1 << 20, 1 << 30]
    assert row.spread is not None and row.spread[0] < row.value < row.spread[1]
    assert rd.nccl_slow([row]) is None  # 358 GB/s of 450: healthy
    slow = row_from_result(
        {**result, "sizes": [{**result["sizes"][1], "median_s": 0.05}]}, 450.0, ""
    )
    f = rd.nccl_slow([slow])
    assert f is not None and f.id == "dist.nccl_slow" and "NCCL_DEBUG=INFO" in (f.fix.code or "")
    assert rd.nccl_slow([Benchmark("allreduce.busbw", "x", None, "GB/s", skipped="no")]) is None


# --- topology ------------------------------------------------------------------------------------


def _h200(i: int, remote: str = "switch") -> GpuLinks:
    return GpuLinks(
        index=i,
        name="NVIDIA H200",
        bus_id=f"00000000:{0x18 + i:02x}:00.0",
        capability=(9, 0),
        links_active=18,
        link_version=6,
        remote=[(remote, f"00000000:{0xA0 + k:02x}:00.0") for k in range(18)],
    )


def test_bus_ids_compare_whatever_the_padding() -> None:
    assert bus_key("00000000:18:00.0") == bus_key(b"0000:18:00.0") == (0, 0x18, 0, 0)
    assert bus_key("garbage") is None and bus_key(None) is None


def test_nvswitch_pair_and_ceiling() -> None:
    topo = TopologyFacts(True, gpus=[_h200(0), _h200(1)], pairs=[GpuPair(0, 1, "system", True)])
    link = pair_link(topo.pairs[0], topo.gpus)
    assert (link.kind, link.links, link.gbps) == ("nvswitch", 18, 450.0)
    checks = topology_checks(topo)
    assert [(c.label, c.status) for c in checks] == [("GPU 0 ↔ 1", "pass")]
    assert checks[0].value == "NVLink x18 (NVSwitch), 450 GB/s per direction"
    ceiling, source = collective_ceiling(topo)
    assert ceiling == 450.0 and "18 active links x 25 GB/s" in source


def test_direct_nvlink_pcie_and_one_gpu() -> None:
    a = GpuLinks(0, "A100", "0000:07:00.0", (8, 0), 12, 4, [("gpu", "0000:0b:00.0")] * 12)
    b = GpuLinks(1, "A100", "0000:0b:00.0", (8, 0), 12, 4, [("gpu", "0000:07:00.0")] * 12)
    pair = GpuPair(0, 1, "hostbridge", True, direct_links=12)
    assert pair_link(pair, [a, b]).text == "NVLink x12" and pair_link(pair, [a, b]).gbps == 300.0
    pcie = [GpuLinks(i, "L4", f"0000:0{i}:00.0", (8, 9), 0, why="no NVLink") for i in range(2)]
    for ancestor, status in (("hostbridge", "info"), ("system", "warn")):
        topo = TopologyFacts(True, gpus=pcie, pairs=[GpuPair(0, 1, ancestor, False)])
        (row,) = topology_checks(topo)
        assert row.status == status and row.value.startswith("PCIe (")
        assert collective_ceiling(topo)[0] is None
    one = TopologyFacts(True, gpus=[_h200(0)])
    assert [c.id for c in topology_checks(one)] == ["topo.gpus"]
    assert topology_checks(TopologyFacts(False, "no NVML")) == []


def test_eight_alike_gpus_collapse_to_one_row_after_the_gpu_rows() -> None:
    gpus = [_h200(i) for i in range(8)]
    pairs = [GpuPair(i, j, "system", True) for i in range(8) for j in range(i + 1, 8)]
    rows = topology_checks(TopologyFacts(True, gpus=gpus, pairs=pairs))
    assert [c.id for c in rows] == ["topo.all"] and rows[0].label == "GPUs 0-7 (every pair)"
    checks = [Check("torch.import", "t", "pass", "ok"), Check("gpu0.name", "g", "info", "x")]
    checks.append(Check("shm", "s", "pass", "ok"))
    merged = with_topology(checks, TopologyFacts(True, gpus=gpus, pairs=pairs))
    assert [c.id for c in merged] == ["torch.import", "gpu0.name", "topo.all", "shm"]


def test_nvlink_rates() -> None:
    assert nvlink_link_gbps((9, 0), None) == 25.0
    assert nvlink_link_gbps((10, 0), None) == 50.0
    assert nvlink_link_gbps((8, 6), None) == pytest.approx(14.0625)
    assert nvlink_link_gbps(None, 7) == 50.0 and nvlink_link_gbps(None, None) is None
    assert math.isclose(18 * nvlink_link_gbps((9, 0), 6) or 0, 450.0)


class _FakeNvml:
    """Just the NVML calls the topology probe makes, for two GPUs on one NVSwitch fabric; the
    real pynvml error type for what a GPU does not support."""

    NVML_NVLINK_MAX_LINKS = 36

    def __init__(self, nvlink: bool) -> None:
        import pynvml

        self.err = pynvml.NVMLError
        self.nvlink = nvlink

    def _unsupported(self) -> Exception:
        return self.err(3)  # NVML_ERROR_NOT_SUPPORTED

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        if not self.nvlink or link >= 18:
            raise self._unsupported()
        return 1

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:
        return 6

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        return 2

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: int, link: int) -> Any:
        return type("Pci", (), {"busId": b"00000000:A0:00.0"})()


def test_topology_probe_reads_links_and_says_why_without() -> None:
    from gpusight.probes import topology

    g = GpuLinks(0, "H200", capability=(9, 0))
    topology._links(_FakeNvml(nvlink=True), 0, g)
    assert g.links_active == 18 and g.link_version == 6 and g.remote[0][0] == "switch"
    bare = GpuLinks(0, "L4")
    topology._links(_FakeNvml(nvlink=False), 0, bare)
    assert bare.links_active == 0 and bare.why is not None and bare.why.startswith("no NVLink")


def test_topology_probe_without_a_driver() -> None:
    from gpusight.probes import topology

    facts = topology.probe()
    if facts.available:
        pytest.skip("NVML works here")
    assert facts.why and facts.gpus == [] and topology_checks(facts) == []


def test_doctor_shows_the_links() -> None:
    from gpusight.doctor import report_from_facts
    from gpusight.probes import collect

    facts = collect()
    facts.topology = TopologyFacts(True, gpus=[_h200(0), _h200(1)], pairs=[GpuPair(0, 1)])
    report = report_from_facts(facts)
    report.validate()
    row = next(c for c in report.checks if c.id == "topo.gpu0_gpu1")
    assert row.label == "GPU 0 ↔ 1" and row.value.startswith("NVLink x18 (NVSwitch)")
