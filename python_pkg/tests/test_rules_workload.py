"""rules.workload on plain-data evidence: one case per bottleneck category, no torch involved."""

from __future__ import annotations

import ast
import math

import pytest
from gpusight.report import Finding, Report
from gpusight.report_schema import bottlenecks, finding_ids
from gpusight.rules.workload import (
    BREAKDOWN_KEYS,
    CopySite,
    GpuWindow,
    LoaderInfo,
    Placement,
    SyncSite,
    WorkloadEvidence,
    analyse,
    breakdown,
    no_trace_weights,
)

GIB = 1024**3


def gpu_window(**split: float) -> GpuWindow:
    base = dict.fromkeys(BREAKDOWN_KEYS, 0.0)
    base.update(split)
    return GpuWindow(steps=3, gpu=True, split_ms=base)


def evidence(step_ms: float = 100.0, n: int = 6, **kw: object) -> WorkloadEvidence:
    ev = WorkloadEvidence(
        step_mode="optimizer", step_times_ms=[step_ms] * n, cuda_available=True, cuda_devices=1
    )
    for k, v in kw.items():
        setattr(ev, k, v)
    return ev


def report_of(ev: WorkloadEvidence) -> Report:
    res = analyse(ev)
    rep = Report(kind="watch", machine={"platform": "x", "python": "3", "cpu_count": 2, "gpus": []})
    rep.verdict = res.verdict
    rep.findings = res.findings
    rep.run = {
        "steps": len(ev.step_times_ms),
        "step_time_ms": res.step_time_ms,
        "breakdown_ms": res.breakdown_ms,
        "gpu_busy_pct": res.gpu_busy_pct,
    }
    rep.validate()  # every finding, evidence and fix fits the schema
    return rep


def ids(rep: Report) -> list[str]:
    return rep.finding_ids


def assert_counted_once(ev: WorkloadEvidence) -> None:
    split = breakdown(ev)
    assert all(v >= 0 for v in split.values())
    assert math.isclose(sum(split.values()), analyse(ev).step_time_ms, rel_tol=1e-9)


def test_input_pipeline_on_gpu() -> None:
    ev = evidence(
        data_wait_ms=[60.0] * 6,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={
                "compute": 30.0,
                "data_wait": 55.0,
                "launch_overhead": 5.0,
                "other_cpu": 10.0,
            },
            data_wait_host_ms=60.0,
        ),
        loader=LoaderInfo(num_workers=0, pin_memory=False, batch_size=32),
        cpu_count=16,
    )
    assert_counted_once(ev)
    split = breakdown(ev)
    # 55 of the 60 ms waited in the window left the GPU idle: the same share on clean steps.
    assert split["data_wait"] == pytest.approx(55.0)
    assert split["compute"] == pytest.approx(30.0)
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "input_pipeline"
    assert rep.verdict.gpu_busy_pct == pytest.approx(30.0)
    top = rep.findings and sorted(rep.findings, key=lambda f: -(f.impact.recoverable_pct or 0))[0]
    assert top and top.id == "load.input_bound" and top.severity == "critical"
    # 60 ms per batch in the main process against a 45 ms step without the wait: two workers
    # would keep up; four (the floor) with half again to spare, far below the 15 cores.
    assert "num_workers=4" in (top.fix.code or "")
    assert top.impact.speedup == pytest.approx(100.0 / 45.0, rel=0.01)
    ast.parse(top.fix.code or "")


def test_input_pipeline_cpu_only_run() -> None:
    # No CUDA: compute is host time in forward/backward/optimizer, the rest is measured.
    n = 20
    ev = WorkloadEvidence(
        step_mode="optimizer",
        step_times_ms=[50.0, 52.0, 48.0, 300.0] + [50.0] * (n - 4),
        data_wait_ms=[40.0, 41.0, 39.0, 40.0] + [40.0] * (n - 4),
        framework_ms=[8.0, 9.0, 7.0, 250.0] + [8.0] * (n - 4),
        cuda_available=False,
    )
    assert_counted_once(ev)
    split = breakdown(ev)
    # The whole window counts: the 300 ms step is in the mean step and in the compute mean.
    assert sum(split.values()) == pytest.approx((50 + 52 + 48 + 300 + 50 * (n - 4)) / n)
    assert split["data_wait"] == pytest.approx(40.0, rel=0.01)
    assert split["compute"] == pytest.approx((8 + 9 + 7 + 250 + 8 * (n - 4)) / n)
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "input_pipeline"
    assert rep.verdict.gpu_busy_pct is None
    assert ids(rep)[0] == "load.input_bound"


def test_host_cpu_augmentation_in_loop() -> None:
    w = gpu_window(compute=20.0, other_cpu=70.0, launch_overhead=10.0)
    w.cpu_op_loop_ms = 60.0
    w.top_cpu_ops = [("aten::conv2d", 40.0), ("aten::flip", 20.0)]
    ev = evidence(window=w)
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "host_cpu"
    f = rep.finding("load.cpu_preprocessing")
    assert f is not None and f.severity == "critical"
    assert any(e.label == "CPU op aten::conv2d" for e in f.evidence)


def test_host_sync_with_source_line() -> None:
    ev = evidence(
        window=gpu_window(compute=55.0, sync_stall=40.0, launch_overhead=5.0),
        syncs=[
            SyncSite(
                kind="item",
                count=6,
                file="train.py",
                line=42,
                code="total += loss.item()",
                idle_ms=110.0,
            ),
            SyncSite(
                kind="nonzero",
                count=1,
                file="train.py",
                line=50,
                code="idx = m.nonzero()",
                idle_ms=5.0,
            ),
        ],
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "host_sync"
    f = rep.finding("code.host_sync")
    assert f is not None and f.severity == "critical"
    sources = [e.source for e in f.evidence if e.source is not None]
    assert sources[0].file == "train.py" and sources[0].line == 42 and sources[0].count == 6
    assert "train.py:42" in (f.fix.code or "") and "loss.item()" in (f.fix.code or "")
    assert f.impact.recoverable_pct == pytest.approx(40.0)
    ast.parse(f.fix.code or "")


def test_a_sync_in_a_librarys_line_gets_that_libraries_fix_not_a_loop_to_write() -> None:
    """hf_trainer_defaults on the H100 (h100-run38): the first sync was Hugging Face's
    nan/inf check of every step's loss, and the fix was a loop reading the loss every 50
    steps, to write into the library's file."""
    lib = "/opt/torch/.venv/lib/python3.12/site-packages"
    hf = SyncSite(kind="sync", count=170, file=f"{lib}/transformers/trainer.py", line=1847,
                  code="and (torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step))",
                  idle_ms=25.3)  # fmt: skip
    other = SyncSite(kind="sync", count=85, file=f"{lib}/transformers/masking_utils.py",
                     line=331, code="and (padding_mask is None or padding_mask.all())",
                     idle_ms=9.0)  # fmt: skip
    window = gpu_window(compute=55.0, sync_stall=40.0, launch_overhead=5.0)
    f = report_of(evidence(window=window, syncs=[hf, other])).finding("code.host_sync")
    assert f is not None
    assert "logging_nan_inf_filter=False" in f.fix.text
    assert f.fix.code == "TrainingArguments(..., logging_nan_inf_filter=False)"
    other.idle_ms = 50.0  # the model's check of its mask for padding, first now
    g = report_of(evidence(window=window, syncs=[hf, other])).finding("code.host_sync")
    assert g is not None and g.fix.code is not None and "attention_mask" in g.fix.code
    assert "padding_mask.all()" in g.fix.text and "group_by_length=True" in g.fix.text
    unknown = SyncSite(kind="sync", count=85, file=f"{lib}/transformers/generation/utils.py",
                       line=2504, code="if unfinished_sequences.max() == 0:",
                       idle_ms=60.0)  # fmt: skip
    u = report_of(evidence(window=window, syncs=[hf, unknown])).finding("code.host_sync")
    assert u is not None and u.fix.code is None  # no known option: named as the library's
    assert u.fix.text.startswith("The wait is in the code of transformers at")
    assert "unfinished_sequences.max()" in u.fix.text and "not a line of yours" in u.fix.text


def test_lightnings_read_of_its_progress_bar_values_gets_the_bars_option() -> None:
    """Lightning's ``convert_tensors_to_scalars`` reads every ``prog_bar=True`` value at each
    redraw of the bar; in Lightning and in the standalone lightning_fabric alike."""
    window = gpu_window(compute=55.0, sync_stall=40.0, launch_overhead=5.0)
    for pkg in ("lightning/fabric", "lightning_fabric"):
        site = SyncSite(kind="sync", count=120,
                        file=f"/venv/lib/python3.12/site-packages/{pkg}/utilities/apply_func.py",
                        line=134, code="return value.item()", idle_ms=30.0)  # fmt: skip
        f = report_of(evidence(window=window, syncs=[site])).finding("code.host_sync")
        assert f is not None
        assert f.fix.code == "Trainer(..., callbacks=[TQDMProgressBar(refresh_rate=50)])", pkg
        assert "prog_bar=True" in f.fix.text


def test_memory_transfer_pageable_copy() -> None:
    w = gpu_window(compute=30.0, copy=60.0, other_cpu=10.0)
    w.memcpy_h2d_pageable = 3
    ev = evidence(
        window=w,
        copies=[
            CopySite(
                kind="pageable_async",
                count=6,
                bytes=6 * 64_000_000,
                host_ms=6 * 13.0,
                file="train.py",
                line=17,
                code="x = x.to(dev, non_blocking=True)",
            )
        ],
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "memory_transfer"
    f = rep.finding("code.pageable_copy")
    assert f is not None and f.severity == "critical"
    src = next(e.source for e in f.evidence if e.source is not None)
    assert (src.file, src.line) == ("train.py", 17)
    assert any(e.label == "copied per step" and e.value == pytest.approx(64.0) for e in f.evidence)
    # The step becomes max(host 10, GPU 30 + copy): 60 ms copy today -> 1.1x, none -> 3.3x;
    # with the link unknown the copy is taken twice as fast: 100 / 60 -> 1.7x.
    assert f.impact.speedup_range == (pytest.approx(1.11, abs=0.01), pytest.approx(3.33, abs=0.01))
    assert f.impact.speedup == pytest.approx(100 / 60, abs=0.01)
    assert "unknown" in f.impact.text


def test_a_pageable_copy_estimate_uses_the_pcie_link() -> None:
    # pageable_copy on the H200 (h200-run12/c): 11.5 ms steps, 8.56 ms of them copying 77 MB,
    # 2.0 ms of other host work, 0.98 ms of kernels; pinned, the script ran 4.45x faster. The
    # estimate was 2.47x (a share of the copy time); from Gen5 x16 (63 GB/s) it is 4.8x.
    w = gpu_window(compute=0.975, copy=8.561, launch_overhead=1.648, other_cpu=0.317)
    site = CopySite("pageable_async", 6, 6 * 77_070_000, 6 * 8.5, "t.py", 9, "x.to(d)")
    ev = evidence(step_ms=11.501, window=w, copies=[site], h2d_link_gbps=63.02)
    f = report_of(ev).finding("code.pageable_copy")
    assert f is not None and f.impact.basis == "estimated"
    assert f.impact.speedup == pytest.approx(4.45, rel=0.10)
    lo, hi = f.impact.speedup_range or (0, 0)
    assert lo < 4.45 < hi
    assert "63 GB/s" in f.impact.text


def test_launch_overhead_small_batch() -> None:
    w = gpu_window(compute=15.0, launch_overhead=70.0, other_cpu=15.0)
    w.launches_per_step = 420
    w.median_kernel_us = 4.0
    ev = evidence(
        step_ms=2.0,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 0.3, "launch_overhead": 1.4, "other_cpu": 0.3},
            launches_per_step=420,
            median_kernel_us=4.0,
        ),
        placement=Placement(
            module="MLP", param_devices=["cuda"], input_devices=["cuda"], batch_size=4
        ),
        peak_memory_bytes=1 * GIB,
        memory_capacity_bytes=141 * GIB,
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "launch_overhead"
    assert {"load.launch_bound", "load.small_batch", "load.memory_headroom"} <= set(ids(rep))
    assert rep.finding("load.memory_headroom").severity == "info"  # type: ignore[union-attr]


def test_the_launch_finding_says_where_the_idle_fell_and_leads_with_the_optimizer() -> None:
    def launch_finding(by_phase: dict[str, float]) -> Finding:
        window = GpuWindow(steps=3, gpu=True, launches_per_step=2400, median_kernel_us=3.0,
                           split_ms={"compute": 10.0, "launch_overhead": 40.0, "other_cpu": 5.0},
                           launch_by_phase_ms=by_phase)  # fmt: skip
        place = Placement(module="Net", param_devices=["cuda"], input_devices=["cuda"],
                          batch_size=512)  # fmt: skip
        f = report_of(evidence(step_ms=55.0, window=window, placement=place)).finding(
            "load.launch_bound"
        )
        assert f is not None
        return f

    # 800 parameter tensors under Adam(foreach=False): the optimizer's kernels are the idle.
    f = launch_finding({"forward": 6.0, "backward": 8.0, "optimizer": 26.0})
    rows = {e.label: e.value for e in f.evidence}
    assert rows["of it in optimizer.step()"] == 26.0 and rows["of it in forward"] == 6.0
    assert f.fix.text.startswith("Most of the idle is inside optimizer.step(): build the")
    f = launch_finding({"forward": 20.0, "backward": 18.0, "optimizer": 2.0})
    assert f.fix.text == "Compile the model with CUDA graphs (or grow the batch)."
    assert not any(e.label.startswith("of it") for e in launch_finding({}).evidence)


def test_a_graph_batch_is_counted_in_graphs_not_nodes() -> None:
    # One graph of 30 nodes a step: the model sees 30 node rows beside a 2-row edge index (not
    # batch-first); the loader's batch of 1 graph is what the script counts and what grows.
    window = GpuWindow(
        steps=3,
        gpu=True,
        launches_per_step=300,
        median_kernel_us=4.0,
        split_ms={"compute": 0.4, "launch_overhead": 2.4, "other_cpu": 0.2},
    )
    nodes = Placement(module="GCN", param_devices=["cuda"], input_devices=["cuda"],
                      batch_size=30, batch_first=False)  # fmt: skip
    rep = report_of(evidence(step_ms=3.0, window=window, placement=nodes,
                             loader=LoaderInfo(num_workers=0, batch_size=1)))  # fmt: skip
    small = rep.finding("load.small_batch")
    assert small is not None and small.title == "Batch size 1 is too small to keep the GPU busy"
    assert small.impact.text.startswith("At batch 256 instead of 1 each step")
    # Batch-first inputs keep the model's own batch (a loop that splits the loader's batch).
    split = Placement(module="MLP", param_devices=["cuda"], input_devices=["cuda"],
                      batch_size=16, batch_first=True)  # fmt: skip
    rep = report_of(evidence(step_ms=3.0, window=window, placement=split,
                             loader=LoaderInfo(num_workers=0, batch_size=64)))  # fmt: skip
    again = rep.finding("load.small_batch")
    assert again is not None and again.title.startswith("Batch size 16 ")


def test_a_small_collate_in_the_main_process_is_no_input_pipeline_problem() -> None:
    # A graph network at one graph a batch: 3 ms launch-bound steps, 0.35 ms of it building the
    # batch in the main process (12 %). A worker's handoff would cost a good part of that.
    window = GpuWindow(
        steps=3,
        gpu=True,
        split_ms={"compute": 0.4, "launch_overhead": 2.2, "data_wait": 0.35},
        launches_per_step=300,
        median_kernel_us=4.0,
    )
    placement = Placement(
        module="GCN", param_devices=["cuda"], input_devices=["cuda"], batch_size=30
    )
    small = evidence(
        step_ms=3.0, data_wait_ms=[0.35] * 6, window=window, placement=placement,
        loader=LoaderInfo(num_workers=0, batch_size=1), cpu_count=16,
    )  # fmt: skip
    rep = report_of(small)
    assert rep.verdict.bottleneck == "launch_overhead"
    f = rep.finding("load.input_bound")
    assert f is not None and f.severity == "info" and "handing a batch over" in f.impact.text
    # The same share from a slow collate (12 ms of a 100 ms step) still warns.
    window_slow = GpuWindow(
        steps=3, gpu=True, split_ms={"compute": 30.0, "launch_overhead": 58.0, "data_wait": 12.0}
    )
    slow = evidence(
        step_ms=100.0, data_wait_ms=[12.0] * 6, window=window_slow, placement=placement,
        loader=LoaderInfo(num_workers=0, batch_size=1), cpu_count=16,
    )  # fmt: skip
    g = report_of(slow).finding("load.input_bound")
    assert g is not None and g.severity == "warn"


def test_unbatched_inference() -> None:
    ev = evidence(
        step_ms=1.0,
        step_mode="forward",
        window=gpu_window(compute=0.2, launch_overhead=0.7, other_cpu=0.1),
        placement=Placement(
            module="Net",
            param_devices=["cuda"],
            input_devices=["cuda"],
            batch_size=1,
            grad_enabled=True,
        ),
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "launch_overhead"
    assert "infer.unbatched" in ids(rep) and "infer.grad_enabled" in ids(rep)
    assert "load.small_batch" not in ids(rep)  # inference says it with its own id


def test_precision_fp32_without_tensor_cores() -> None:
    w = gpu_window(compute=92.0, launch_overhead=5.0, other_cpu=3.0)
    w.matmul_fp32_ms = 70.0
    ev = evidence(window=w, tf32_matmul=False)
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "precision"
    f = rep.finding("load.amp_unused")
    assert f is not None
    assert f.impact.recoverable_pct == pytest.approx(52.5)  # 0.75 x 70 ms of a 100 ms step
    assert "autocast" in (f.fix.code or "")
    assert "pad_to_multiple_of" not in f.fix.text  # one batch shape
    # Text padded to each batch's longest sequence: many shapes, each a cuDNN plan in bf16.
    ev.batch_shapes = 40
    g = report_of(ev).finding("load.amp_unused")
    assert g is not None and "The batches came in 40 shapes: pad them to a multiple of 64" in (
        g.fix.text
    )
    assert any(e.label == "batch shapes seen" and e.value == 40 for e in g.evidence)


def test_compute_bound_conv_without_channels_last() -> None:
    w = gpu_window(compute=90.0, launch_overhead=6.0, other_cpu=4.0)
    w.conv_ms = w.conv_lowp_ms = 60.0
    w.layout_transform_ms = 12.0
    ev = evidence(
        window=w,
        placement=Placement(
            module="ResNet",
            param_devices=["cuda"],
            input_devices=["cuda"],
            has_conv=True,
            input_channels_last=False,
            model_channels_last=False,
            autocast=True,
        ),
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "compute"
    f = rep.finding("load.channels_last")
    assert f is not None and f.impact.recoverable_pct == pytest.approx(12.0)


def test_healthy_gpu_bound_run_has_no_warnings() -> None:
    w = gpu_window(compute=96.0, launch_overhead=3.0, other_cpu=1.0)
    w.matmul_tensor_core_ms = 80.0
    ev = evidence(
        window=w,
        placement=Placement(
            module="Net", param_devices=["cuda"], input_devices=["cuda"], batch_size=256
        ),
        peak_memory_bytes=40 * GIB,
        memory_capacity_bytes=141 * GIB,
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "compute"
    assert rep.verdict.gpu_busy_pct == pytest.approx(96.0)
    assert [f.id for f in rep.findings if f.severity != "info"] == []


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        (Placement(module="Net", param_devices=["cpu"], input_devices=["cpu"]), "code.cpu_model"),
        (
            Placement(module="Net", param_devices=["cpu", "cuda"], input_devices=["cuda"]),
            "code.device_mismatch",
        ),
        (
            Placement(
                module="DataParallel",
                param_devices=["cuda"],
                input_devices=["cuda"],
                dataparallel=True,
                dataparallel_devices=1,
            ),
            "code.dataparallel",
        ),
    ],
)
def test_device_placement(placement: Placement, expected: str) -> None:
    ev = evidence(
        window=gpu_window(compute=60.0, launch_overhead=20.0, other_cpu=20.0),
        framework_ms=[90.0] * 6,
        placement=placement,
    )
    rep = report_of(ev)
    assert rep.verdict.bottleneck == "device_placement"
    assert expected in ids(rep)
    if expected == "code.cpu_model":
        f = rep.finding(expected)
        assert f is not None and f.severity == "critical" and ids(rep)[0] == expected


def test_oom_risk() -> None:
    ev = evidence(
        window=gpu_window(compute=95.0, other_cpu=5.0),
        peak_reserved_bytes=138 * GIB,
        memory_capacity_bytes=141 * GIB,
    )
    f = report_of(ev).finding("load.oom_risk")
    assert f is not None and f.severity == "critical"


def test_no_steps() -> None:
    rep = report_of(WorkloadEvidence(step_mode="block", step_times_ms=[]))
    assert rep.verdict.bottleneck == "none"
    assert rep.findings == []


def test_ids_and_categories_are_in_the_catalogue() -> None:
    from gpusight.rules import workload, workload_findings

    src = open(workload_findings.__file__, encoding="utf-8").read()
    for fid in ("load.input_bound", "code.pageable_copy", "infer.unbatched"):
        assert fid in finding_ids() and fid in src
    assert set(workload.CATEGORY_BOTTLENECK.values()) <= set(bottlenecks())


def test_findings_sorted_by_recoverable_share() -> None:
    w = gpu_window(compute=30.0, data_wait=10.0, sync_stall=40.0, other_cpu=20.0)
    ev = evidence(
        window=w,
        data_wait_ms=[10.0] * 6,
        syncs=[SyncSite(kind="item", count=6, file="t.py", line=3)],
    )
    w.data_wait_host_ms = 10.0
    d = report_of(ev).to_dict()
    shares = [f["impact"].get("recoverable_pct") or 0 for f in d["findings"]]
    assert shares == sorted(shares, reverse=True)
    assert d["findings"][0]["id"] == "code.host_sync"


def test_gpu_without_a_kernel_trace_falls_back_to_nvml() -> None:
    # CUDA in use but the profiler saw no GPU activity: NVML's utilisation is the GPU busy.
    ev = evidence(
        data_wait_ms=[50.0] * 6,
        window=GpuWindow(steps=3, gpu=False, split_ms={}),
        gpu_used=True,
        nvml_util_pct=35.0,
    )
    assert_counted_once(ev)
    rep = report_of(ev)
    assert rep.verdict.gpu_busy_pct == pytest.approx(35.0)
    assert breakdown(ev)["compute"] == pytest.approx(35.0)
    assert rep.verdict.bottleneck == "input_pipeline"


@pytest.mark.parametrize("inside_ms, verdict", [(80.0, "launch_overhead"), (10.0, "host_cpu")])
def test_without_a_kernel_trace_the_idle_time_follows_the_host_clocks(
    inside_ms: float, verdict: str
) -> None:
    # The trace lost its kernels: NVML says 10 % busy; of the 100 ms step the loader took 5 and
    # the host spent ``inside_ms`` inside forward/backward/optimizer, the rest outside them.
    ev = evidence(
        data_wait_ms=[5.0] * 6,
        host_copy_ms=[0.0] * 6,
        framework_ms=[inside_ms] * 6,
        window=None,
        gpu_used=True,
        nvml_util_pct=10.0,
    )
    assert_counted_once(ev)
    outside = 100.0 - inside_ms - 5.0
    assert no_trace_weights(ev, 100.0) == {
        "launch_overhead": pytest.approx(inside_ms),
        "other_cpu": pytest.approx(outside),
    }
    split = breakdown(ev)
    idle = 100.0 - 10.0 - 5.0
    assert split["compute"] == pytest.approx(10.0)
    assert split["launch_overhead"] == pytest.approx(idle * inside_ms / (inside_ms + outside))
    assert split["other_cpu"] == pytest.approx(idle * outside / (inside_ms + outside))
    assert split["sync_stall"] == 0.0
    assert report_of(ev).verdict.bottleneck == verdict


LOADER_SCRIPT = (
    "from torch.utils.data import DataLoader\n"
    "loader = DataLoader(ds, batch_size=4, shuffle=True)\n"
    "for x, y in loader:\n"
    "    x = x.to('cuda', non_blocking=True)\n"
)


def test_a_small_batch_and_a_pageable_copy_change_the_users_dataloader_call() -> None:
    from gpusight.rules.workload import CodeSource

    ev = evidence(
        step_ms=2.0,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 0.3, "copy": 0.6, "launch_overhead": 0.9, "other_cpu": 0.2},
            launches_per_step=420,
            median_kernel_us=4.0,
            memcpy_h2d_pageable=3,
        ),
        placement=Placement(
            module="MLP", param_devices=["cuda"], input_devices=["cuda"], batch_size=4
        ),
        loader=LoaderInfo(num_workers=0, pin_memory=False, batch_size=4),
        loader_source=CodeSource("train.py", LOADER_SCRIPT, 2),
    )
    rep = report_of(ev)
    small, pinned = rep.finding("load.small_batch"), rep.finding("code.pageable_copy")
    assert small is not None and pinned is not None
    assert "+loader = DataLoader(ds, batch_size=256, shuffle=True)" in (small.fix.patch or "")
    assert "+loader = DataLoader(ds, batch_size=4, shuffle=True, pin_memory=True)" in (
        pinned.fix.patch or ""
    )
    # A loader that pins already, or whose batch is not the model's: the snippet alone.
    ev.loader = LoaderInfo(num_workers=0, pin_memory=True, batch_size=16)
    rep = report_of(ev)
    assert rep.finding("load.small_batch").fix.patch is None  # type: ignore[union-attr]
    assert rep.finding("code.pageable_copy").fix.patch is None  # type: ignore[union-attr]


def test_a_one_gpu_dataparallel_beside_a_slow_loader_is_not_the_verdict() -> None:
    # imagenet_dataparallel on the H200 (h200-run19): the loader took most of the step, the
    # verdict named DataParallel. It stays a warn finding; the verdict is the larger cause.
    dp = Placement(
        module="DataParallel",
        param_devices=["cuda"],
        input_devices=["cuda"],
        dataparallel=True,
        dataparallel_devices=1,
    )
    slow = evidence(
        window=gpu_window(compute=30.0, launch_overhead=5.0, other_cpu=5.0),
        framework_ms=[40.0] * 6,
        data_wait_ms=[60.0] * 6,
        placement=dp,
    )
    rep = report_of(slow)
    assert rep.verdict.bottleneck == "input_pipeline"
    f = rep.finding("code.dataparallel")
    assert f is not None and f.severity == "warn"
    # Its loader a small share: DataParallel is still what to change first.
    quick = evidence(
        window=gpu_window(compute=60.0, launch_overhead=20.0, other_cpu=20.0),
        framework_ms=[90.0] * 6,
        data_wait_ms=[5.0] * 6,
        placement=dp,
    )
    assert report_of(quick).verdict.bottleneck == "device_placement"


def _small_batch_evidence(other_cpu: float, launch: float) -> WorkloadEvidence:
    return evidence(
        step_ms=2.0,
        window=GpuWindow(
            steps=3,
            gpu=True,
            split_ms={"compute": 0.3, "launch_overhead": launch, "other_cpu": other_cpu},
            launches_per_step=420,
            median_kernel_us=4.0,
            memcpy_h2d_pageable=3,
        ),
        placement=Placement(
            module="MLP", param_devices=["cuda"], input_devices=["cuda"], batch_size=4
        ),
        peak_memory_bytes=1 * GIB,
        memory_capacity_bytes=141 * GIB,
    )


def test_a_tensor_fed_loop_gets_no_dataloader_snippet() -> None:
    # No DataLoader was seen: the loop makes or slices its own tensors.
    rep = report_of(_small_batch_evidence(other_cpu=0.3, launch=1.4))
    assert {"load.small_batch", "load.memory_headroom"} <= set(ids(rep))
    for f in rep.findings:
        assert "DataLoader" not in (f.fix.code or ""), (f.id, f.fix.code)
    small = rep.finding("load.small_batch")
    assert small is not None and small.fix.snippet_id == "batch.larger_tensors"
    assert "256 items per step" in (small.fix.code or "")
    # With a DataLoader, its snippet names it.
    ev = _small_batch_evidence(other_cpu=0.3, launch=1.4)
    ev.loader = LoaderInfo(num_workers=0, pin_memory=True, batch_size=16)
    with_loader = report_of(ev).finding("load.small_batch")
    assert with_loader is not None and "DataLoader(" in (with_loader.fix.code or "")


def test_no_batch_advice_where_host_work_not_launches_keeps_the_gpu_waiting() -> None:
    # gc.collect()/empty_cache() every step: host work outside the model is most of the idle.
    rep = report_of(_small_batch_evidence(other_cpu=1.2, launch=0.4))
    assert "load.small_batch" not in ids(rep)
    assert "load.cpu_preprocessing" in ids(rep)


def test_a_sync_on_a_numpy_line_inside_forward_gets_that_lines_fix() -> None:
    from gpusight.rules.host_line_fix import HostLine

    code = "top = np.argpartition(h.detach().cpu().numpy(), -16, axis=1)[:, -16:]"
    ev = evidence(
        window=gpu_window(compute=30.0, sync_stall=60.0, launch_overhead=10.0),
        syncs=[SyncSite(kind="cpu", count=6, file="train.py", line=23, code=code, idle_ms=300.0)],
        host_lines=[
            HostLine("train.py", 23, code, "Net.forward", 6.2, 75.1, in_forward=True),
            HostLine("train.py", 40, "loss.backward()", "<module>", 1.0, 12.0),
        ],
    )
    f = report_of(ev).finding("code.host_sync")
    assert f is not None
    assert f.fix.text.startswith("Do the work of train.py:23 (`top = np.argpartition(")
    assert "torch op on the model's device" in f.fix.text
    # Elsewhere the sync's own fix stays: the value read every few steps.
    ev.host_lines = [HostLine("train.py", 40, "print(loss.item())", "<module>", 1.0, 90.0)]
    g = report_of(ev).finding("code.host_sync")
    assert g is not None and g.fix.text.startswith("Keep values on the GPU")


def test_host_work_outside_the_model_is_put_on_a_line_outside_it_never_one_in_forward() -> None:
    from gpusight.rules.host_line_fix import HostLine

    # As the VAE corpus script on a CPU build: the decoder's line inside forward holds more
    # host time than the loss line in the loop, but forward is the model's time.
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("vae.py", 72, "return torch.sigmoid(self.decoder(z))", "VAE.forward", 24.5,
                 45.0, in_forward=True),
        HostLine("vae.py", 131, "gc.collect()", "main", 16.0, 30.0),
    ]  # fmt: skip
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.title.startswith("vae.py:131 (`gc.collect()`)")
    assert "gc.collect()" in f.fix.text
    lines = [e.source.line for e in f.evidence if e.source is not None]
    assert lines == [131]
    # With only the model's lines timed, no line of the user's holds the time: the finding
    # keeps its own title, as information, and moves no transform that is not there.
    ev.host_lines = ev.host_lines[:1]
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and "vae.py" not in g.title
    assert g.severity == "info" and g.fix.text.startswith("No line of your own code")
    assert "transforms on the GPU" not in g.fix.text
    # Without timed lines (a lean watch), the finding stays as its rule made it.
    ev.host_lines = []
    h = report_of(ev).finding("load.cpu_preprocessing")
    assert h is not None and h.severity != "info" and "transforms" in h.fix.text


def test_a_tokenizer_that_is_most_of_the_host_work_outside_the_model_is_named_with_its_fix() -> (
    None
):
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource

    # bert_infer_batch1 at batch 1: the model's call holds most of the host time, the
    # tokenizer nearly all the rest.
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("infer.py", 126, "out = model(**enc)", "main", 3.58, 83.0),
        HostLine("infer.py", 119, "enc = tokenizer(", "main", 0.60, 14.0),
        HostLine("infer.py", 125, ").to(dev)", "main", 0.06, 2.0),
    ]
    ev.forward_source = CodeSource("infer.py", "out = model(**enc)\n", 126)
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.title.startswith("infer.py:119 (`enc = tokenizer(`) takes 14%")
    assert f.fix.text.startswith("Tokenize once before the loop")
    # A line that is neither the largest part of it (a third) nor a fifth of the host time
    # names nothing.
    ev.host_lines[2:] = [
        HostLine("infer.py", 125, "x = x.float()", "main", 0.45, 12.0),
        HostLine("infer.py", 127, "y = y.float()", "main", 0.40, 11.0),
        HostLine("infer.py", 128, "m = m.float()", "main", 0.40, 10.0),
    ]
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and "infer.py" not in g.title


def test_a_training_frameworks_loop_is_named_as_its_own_not_as_host_work_to_move() -> None:
    from gpusight.rules.host_line_fix import HostLine, kind_of

    # hf_trainer_defaults on a CPU build: the model is the library's, so its time, the update's
    # and the Trainer's own per-step code all sit under the one line that calls train().
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [HostLine("train.py", 141, "trainer.train()", "main", 30.7, 98.0)]
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.title.endswith(
        "inside the training framework's loop at train.py:141 (`trainer.train()`)"
    )
    assert "98%" not in f.title  # that share holds the model's time too
    assert f.fix.text.startswith(
        "The host time at train.py:141 (`trainer.train()`) is the training"
    )
    assert "per-batch transforms" not in f.fix.text
    # Lightning's fit: the same; the mode switch model.train() is never a loop.
    ev.host_lines = [
        HostLine("fit.py", 133, "trainer.fit(model, datamodule=dm)", "main", 5.1, 88.0)
    ]
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and "framework's loop at fit.py:133" in g.title
    # Hugging Face's generate(): the library's decoding loop under one line.
    ev.host_lines = [HostLine("gen.py", 10, "out = model.generate(ids, max_new_tokens=16)",
                              "<module>", 5.1, 100.0)]  # fmt: skip
    h = report_of(ev).finding("load.cpu_preprocessing")
    assert h is not None and "inside the library's generation loop at gen.py:10" in h.title
    assert "a batch of prompts at once" in h.fix.text and "per-batch transforms" not in h.fix.text
    mode = HostLine("fit.py", 20, "model.train(); x = prep(x)", "<module>", 5.1, 88.0)
    fit = HostLine("fit.py", 133, "trainer.fit(model, datamodule=dm)", "main", 5.1, 88.0)
    scaler = HostLine("fit.py", 21, "x = scaler.fit(x).transform(x)", "<module>", 5.1, 88.0)
    assert kind_of(mode) == kind_of(scaler) == "other" and kind_of(fit) == "framework_loop"


EMA_LOOP = """for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    with torch.no_grad():
        for pe, p in zip(ema.parameters(), model.parameters()):
            pe.mul_(decay).add_(p, alpha=1 - decay)
"""


def test_a_loop_over_the_parameters_is_one_piece_of_host_work_and_the_data_loop_is_not() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.host_line_rows import own_lines, step_math_fraction
    from gpusight.rules.workload import CodeSource

    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.forward_source = CodeSource("train.py", EMA_LOOP, 2)
    ev.host_lines = [
        HostLine("train.py", 4, "opt.step()", "<module>", 2.0, 34.0),
        HostLine("train.py", 2, "loss = F.cross_entropy(model(x), y)", "<module>", 1.4, 24.0),
        HostLine("train.py", 1, "for x, y in loader:", "<module>", 0.9, 15.0),
        HostLine("train.py", 6, "for pe, p in zip(ema.parameters(), model.parameters()):",
                 "<module>", 0.76, 12.0),
        HostLine("train.py", 7, "pe.mul_(decay).add_(p, alpha=1 - decay)", "<module>", 0.55, 9.0),
    ]  # fmt: skip
    # The data loop's header is the wait for the next batch; the parameters' loop's is not.
    assert [ln.line for ln in own_lines(ev)] == [6, 7]
    # The loss on the model's call: the line's time is mostly the forward's, not the loss's.
    assert step_math_fraction(ev) == 0.0
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.title.startswith("train.py:6-7 (`for pe, p in zip(ema.parameters(), model.parame")
    assert "21% of the step's host time" in f.title  # the loop's two lines together
    assert f.fix.text.startswith("Update the tensors of the loop at train.py:6-7")
    # A logger inside such a loop keeps its own fix.
    ev.host_lines[4] = HostLine("train.py", 7, "writer.add_histogram(n, p)", "<module>", 0.55, 9.0)
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and g.fix.text.startswith("Log less often at train.py:6-7 (`writer.add")


def test_a_loop_that_reads_each_parameters_value_is_fixed_by_one_read() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource

    text = EMA_LOOP.replace(
        "            pe.mul_(decay).add_(p, alpha=1 - decay)\n",
        "            total += p.grad.norm().item() ** 2\n",
    )
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.forward_source = CodeSource("train.py", text, 2)
    ev.host_lines = [
        HostLine("train.py", 6, "for pe, p in zip(ema.parameters(), model.parameters()):",
                 "<module>", 0.76, 12.0),
        HostLine("train.py", 7, "total += p.grad.norm().item() ** 2", "<module>", 0.55, 9.0),
    ]  # fmt: skip
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.fix.text.startswith("Read one value for all the tensors at train.py:6-7")


def test_a_mask_built_from_python_lists_in_forward_is_named_on_the_launch_finding() -> None:
    from gpusight.rules.host_line_fix import HostLine, kind_of

    mask = (
        "mask = torch.tensor([[j > i for j in range(self.t)] for i in range(self.t)]).to(x.device)"
    )
    ev = _small_batch_evidence(other_cpu=0.1, launch=1.6)
    ev.host_lines = [
        HostLine("gpt.py", 21, mask, "Block.forward", 20.7, 70.0, in_forward=True),
        HostLine("gpt.py", 32, "loss.backward()", "<module>", 4.3, 14.6),
    ]  # fmt: skip
    f = report_of(ev).finding("load.launch_bound")
    assert f is not None
    assert f.title.startswith("gpt.py:21 inside forward (`mask = torch.tensor(")
    assert f.fix.text.startswith("Build the tensor at gpt.py:21 ")
    assert "register_buffer" in f.fix.text and "CUDA graphs" not in f.fix.text
    # The same factory made on the device needs no fix; nor does a module's own call.
    on_device = "m = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)"
    for code in (on_device, "h = self.attn(x, x, x)"):
        assert (
            kind_of(HostLine("gpt.py", 21, code, "Block.forward", 1.0, 70.0, in_forward=True))
            == "other"
        )
    ev.host_lines[0] = HostLine(
        "gpt.py", 21, on_device, "Block.forward", 20.7, 70.0, in_forward=True
    )
    g = report_of(ev).finding("load.launch_bound")
    assert g is not None and g.title == "Kernel launches, not the GPU, set the pace"
    # Outside forward, a batch built from a list is the loop's, not this finding's.
    built = HostLine("train.py", 9, "y = torch.tensor(labels).to(dev)", "<module>", 1.0, 30.0)
    assert kind_of(built) == "other"


def test_host_time_on_no_line_of_the_users_points_at_a_model_line_that_does_more() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource

    # float64 from numpy on a CPU build: the loss and the slicing share the model's line.
    call = "loss = nn.functional.cross_entropy(model(x_all[i : i + 128]), y_all[i : i + 128])"
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("train.py", 21, "loss.backward()", "<module>", 2.2, 38.0),
        HostLine("train.py", 19, call, "<module>", 1.3, 23.0),
        HostLine("train.py", 18, "for i in range(0, 20000, 128):", "<module>", 0.02, 0.3),
    ]
    ev.forward_source = CodeSource("train.py", call + "\n", 19)
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None and f.severity == "info" and f.impact.basis == "none"
    assert "Part of it may be on train.py:19 (`loss = nn.functional" in f.fix.text
    # A model's line that only calls the model points nowhere.
    ev.host_lines[1] = HostLine("train.py", 19, "out = model(x)", "<module>", 1.3, 23.0)
    ev.forward_source = CodeSource("train.py", "out = model(x)\n", 19)
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and g.severity == "info" and "Part of it" not in g.fix.text


def test_a_second_models_call_is_the_steps_computation_and_a_deep_copy_is_named() -> None:
    from gpusight.rules.host_line_fix import HostLine
    from gpusight.rules.workload import CodeSource

    # Distillation with a teacher deep-copied every step: the teacher's call is a model's, the
    # copy is the waste.
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("train.py", 20, "target = teacher(x).softmax(-1)", "<module>", 9.0, 40.0),
        HostLine("train.py", 18, "teacher = copy.deepcopy(model).eval()", "<module>", 5.0, 22.0),
        HostLine("train.py", 21, "out = model(x)", "<module>", 8.0, 30.0),
    ]  # fmt: skip
    ev.forward_source = CodeSource("train.py", "out = model(x)\n", 21)
    ev.model_calls = frozenset({("train.py", 20), ("train.py", 21)})
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is not None
    assert f.title.startswith("train.py:18 (`teacher = copy.deepcopy(model).eval()`)"), f.title
    assert f.fix.text.startswith("Copy the model once, before the loop")
    # Without the watch's record of the teacher's calls, its line would be the one named.
    ev.model_calls = frozenset()
    g = report_of(ev).finding("load.cpu_preprocessing")
    assert g is not None and g.title.startswith("train.py:20 ")


def test_a_with_of_torchs_modes_is_the_steps_own_line_not_a_transform() -> None:
    from gpusight.rules.host_line_fix import HostLine, is_framework

    def line(code: str) -> HostLine:
        return HostLine("train.py", 17, code, "main", 0.02, 4.0)

    # Entering autocast (its cast cache cleared on exit) is the mode's cost, not the user's.
    assert is_framework(line('with torch.autocast("cuda", dtype=torch.bfloat16):'), None)
    assert is_framework(line("with torch.no_grad(), torch.autocast(device_type='cuda'):"), None)
    assert is_framework(line("with accelerator.accumulate(model):"), None)
    # A with of the user's own (a file, a timer of theirs) is their work.
    assert not is_framework(line('with open("log.txt", "a") as fh:'), None)
    assert not is_framework(line("with torch.no_grad(), open('x') as fh:"), None)
    # As a dict-batch script on a CPU build: the autocast line is the only line outside the
    # framework's; it is not named as a transform to move.
    ev = _small_batch_evidence(other_cpu=1.2, launch=0.4)
    ev.host_lines = [
        HostLine("train.py", 20, "opt.zero_grad(); loss.backward(); opt.step()", "<module>",
                 0.89, 53.0),
        HostLine("train.py", 18, "out = model(batch)", "<module>", 0.32, 19.0),
        HostLine("train.py", 17, 'with torch.autocast("cpu", dtype=torch.bfloat16):',
                 "<module>", 0.07, 4.0),
    ]  # fmt: skip
    f = report_of(ev).finding("load.cpu_preprocessing")
    assert f is None or "autocast" not in f.title


def test_dataparallel_without_a_gpu_is_information_not_the_first_fix() -> None:
    # A CPU run of a script that wraps its model in DataParallel (no device ids): the wrapper
    # passes each call through, and the loader's 57 % wait is what to change first.
    dp = Placement(module="DataParallel", param_devices=["cpu"], input_devices=["cpu"],
                   dataparallel=True, dataparallel_devices=0)  # fmt: skip
    ev = evidence(step_ms=2.3, framework_ms=[0.8] * 6, data_wait_ms=[1.3] * 6, placement=dp)
    ev.cuda_available, ev.cuda_devices = False, 0
    rep = report_of(ev)
    f = rep.finding("code.dataparallel")
    assert f is not None and f.severity == "info"
    assert f.impact.text.startswith("Without a GPU it passes each call straight to the model")
    from gpusight.first_fix import first_finding

    first = first_finding(rep)
    assert first is None or first.id != "code.dataparallel"


def test_a_batch_made_on_the_device_by_a_factory_is_the_steps_input_not_a_transform() -> None:
    from gpusight.rules.host_line_fix import HostLine, is_framework

    def line(code: str, function: str = "<module>") -> HostLine:
        return HostLine("train.py", 15, code, function, 0.09, 5.6)

    # A synthetic batch (a benchmark's, a quick test's): the data the step runs on.
    assert is_framework(line("x = torch.randn(256, 64, device=dev)"), None)
    assert is_framework(line("y = torch.randint(0, 100, (256,), device=dev)"), None)
    # Made on the host and copied, or built from Python data: work of the user's to move.
    assert not is_framework(line("x = torch.randn(256, 64).to(dev)"), None)
    assert not is_framework(line("mask = torch.tensor(rows, device=dev)"), None)
    assert not is_framework(line("x = x + torch.randn(256, 64, device=dev)"), None)
