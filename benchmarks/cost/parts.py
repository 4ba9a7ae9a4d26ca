"""Which part of the watch costs the time: one model, one loop, the watch's parts one at a time.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method parts --out "$OUT/parts"

``--method overhead --ablate`` runs each variant as a whole scenario ``main()``, which builds
its model anew, and whole runs of the shortest step differ by more than the effect looked for.
Here one model serves blocks of steps, each block under one variant, the order rotated from round
to round: ``--workload unbatched_inference`` (default; the shortest, most launch-bound step of the
suite, one copy in and one ``.cpu()`` out), ``tiny_batch`` (an MLP trained 8 samples a step:
optimizer and backward hooks, no copy, no sync) or ``mlp_adam`` (19 modules, Adam, batch 32). A
variant's figure is the median over rounds of its block's median step over that round's bare
block. Variants:

* ``bare``;
* ``mode_ignored``: torch's sync-debug mode on, its warnings filtered out (torch's own cost);
* ``mode_relay``: the mode on, its warnings shown to a ``showwarning`` that does nothing
  (adds Python's warnings machinery);
* ``sampler``: the NVML sampler as a thread of this process, alone, no watch;
* ``sampler_process``: the NVML sampler in a process of its own (the watch's), alone;
* the watch: ``minimal`` (step and module hooks only), ``no_sync_mode``, ``no_copy_hook``,
  ``no_sampler``, ``thread_sampler`` (its sampler a thread of this process, as before the
  sampler process), ``all_detail`` (copies and syncs recorded on every step: no sampling, see
  ``gpusight/watch/detail.py``), ``all_hooks`` (the module hooks and framework clocks on every
  step: no light steps), ``watched`` (the watch as it is), as ``--method overhead --ablate``
  switches them off.

Each block also records the garbage collections it saw and, for the watch, the syncs and copies
it recorded per step and its self-measured overhead. Last, a bare and a watched block under
``cProfile``: the Python functions whose calls or time per step differ. Writes
``OUT/watch-parts.json`` and ``OUT/watch-parts.txt`` (printed last).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.order import rotated
from harness.paths import scenarios_on_path
from harness.record import write_results
from harness.stats import lower_quartile, median_ci, pct

scenarios_on_path()

PARTS = (
    "bare",
    "mode_ignored",
    "mode_relay",
    "sampler",
    "sampler_process",
    "minimal",
    "no_sync_mode",
    "no_copy_hook",
    "no_sampler",
    "thread_sampler",
    "all_detail",
    "all_hooks",
    "watched",
)
# Past the watch's warm-up (3) and its census (16 measured steps, gpusight/watch/detail.py),
# after which a long run's steps are what they will be for the rest of it.
WARM_STEPS = 24
# The H200 host has phases of a second or more where the same step takes 1.5-2x as long (any
# variant; DVFS?): a round whose two blocks differ by more than this straddles two of them.
SAME_STATE = 1.2  # the watch's 3 warm-up steps and its hook switch happen before the timed ones
FULL_CLOCK = 0.97
"""A block ran at the GPU's full clock when its SM clock, read before and after its timed steps,
was within this of the highest read in the run (``SmClock``)."""


class Workload:
    """``unbatched_inference``: one request per forward, its answer copied back."""

    clock: Any = None
    """An ``SmClock`` set by ``run``: ``block`` reads it around the timed steps."""

    def __init__(self, torch: Any) -> None:
        import unbatched_inference

        self.torch = torch
        self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.gpu = self.dev.type == "cuda"
        self.model, self.requests = unbatched_inference.build(self.dev)
        self.answers: list[Any] = []
        self.i = 0

    def step(self) -> None:
        # The scenario's loop body, here so that the user's line is in this file.
        torch = self.torch
        start = self.i % len(self.requests)
        self.i += 1
        batch = torch.stack(self.requests[start : start + 1]).to(self.dev)
        with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=self.gpu):
            out = self.model(batch)
        self.answers.append(out[:, 0].argmax(-1).cpu())
        if len(self.answers) > 1024:
            self.answers.clear()

    def sync(self) -> None:
        if self.gpu:
            self.torch.cuda.synchronize()

    def mode(self) -> contextlib.AbstractContextManager[Any]:
        return self.torch.inference_mode()  # type: ignore[no-any-return]


class TrainWorkload(Workload):
    """``tiny_batch``: an MLP trained 8 samples a step, never synchronised (launch-bound)."""

    def __init__(self, torch: Any) -> None:
        import tiny_batch

        self.torch = torch
        self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.gpu = self.dev.type == "cuda"
        self.model, self.opt, self.xs, self.ys = tiny_batch.build(self.dev)
        self.i = 0

    def step(self) -> None:
        f = self.torch.nn.functional
        i = self.i % len(self.xs)
        self.i += 1
        loss = f.cross_entropy(self.model(self.xs[i]), self.ys[i])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()

    def mode(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


class MlpAdamWorkload(TrainWorkload):
    """``mlp_adam``: an MLP of 19 small modules (residual blocks) trained with Adam at batch 32,
    as that scenario's ``main`` builds it."""

    def __init__(self, torch: Any) -> None:
        import mlp_adam

        self.torch = torch
        self.dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.gpu = self.dev.type == "cuda"
        width = 512 if self.gpu else 64
        self.model = mlp_adam.Net(width).to(self.dev)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.xs = torch.randn(8, 32, width, device=self.dev)
        self.ys = torch.randint(0, 10, (8, 32), device=self.dev)
        self.i = 0


WORKLOADS = {
    "unbatched_inference": Workload,
    "tiny_batch": TrainWorkload,
    "mlp_adam": MlpAdamWorkload,
}


class SmClock:
    """The GPU's SM clock (MHz) by NVML, read before and after a block's timed steps (outside
    them): a step that waits for the GPU (inference's ``.cpu()``) runs at the GPU's clock, which
    the driver lowers while the GPU idles and raises under load. None without NVML."""

    def __init__(self, gpu: bool) -> None:
        self._nv: Any = None
        self._h: Any = None
        if not gpu:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self._h = pynvml.nvmlDeviceGetHandleByIndex(0)
            self._nv = pynvml
        except Exception:  # no NVML: blocks carry no clock
            self._nv = None

    def read(self) -> int | None:
        if self._nv is None:
            return None
        try:
            return int(self._nv.nvmlDeviceGetClockInfo(self._h, self._nv.NVML_CLOCK_SM))
        except Exception:
            return None


@contextlib.contextmanager
def sync_mode(torch: Any, relay: bool) -> Iterator[dict[str, Any]]:
    from gpusight.watch.session import SYNC_MESSAGE

    info: dict[str, Any] = {"warnings": 0}
    with warnings.catch_warnings():
        if relay:
            warnings.filterwarnings("always", message=SYNC_MESSAGE)

            def showwarning(*a: Any, **k: Any) -> None:
                info["warnings"] += 1

            warnings.showwarning = showwarning
        else:
            warnings.filterwarnings("ignore", message=SYNC_MESSAGE)
        before = torch.cuda.get_sync_debug_mode() if torch.cuda.is_available() else None
        if before is not None:
            torch.cuda.set_sync_debug_mode(1)
        try:
            yield info
        finally:
            if before is not None:
                torch.cuda.set_sync_debug_mode(before)


@contextlib.contextmanager
def sampler_only(process: bool) -> Iterator[dict[str, Any]]:
    from gpusight.watch.nvml_sampler import NvmlSampler
    from gpusight.watch.sampler_process import ProcessSampler, WatchSampler

    kind = ProcessSampler if process else NvmlSampler
    sampler: WatchSampler = kind((0,), t0=time.perf_counter())
    sampler.start()
    try:
        yield {"nvml": sampler.available}
    finally:
        sampler.stop()


@contextlib.contextmanager
def watch_part(part: str) -> Iterator[dict[str, Any]]:
    import gpusight

    from cost.overhead import ablated

    info: dict[str, Any] = {}
    with ablated(part):
        w = gpusight.watch(warmup=3, profile_steps=0, stop_after_steps=False)
        with w:
            info["watch"] = w
            yield info


def variant(torch: Any, part: str) -> contextlib.AbstractContextManager[dict[str, Any]]:
    if part == "bare":
        return contextlib.nullcontext({})
    if part in ("mode_ignored", "mode_relay"):
        return sync_mode(torch, relay=part == "mode_relay")
    if part in ("sampler", "sampler_process"):
        return sampler_only(process=part == "sampler_process")
    return watch_part(part)


def timed_steps(work: Any, n: int) -> dict[str, float]:
    """``n`` steps of ``work``, each on the wall clock: their median and mean (ms), and the
    thread's CPU time a step (what the host's other tenants take from the thread, time it waits
    to run, is not in it; the wall clock's figures have it)."""
    cpu0 = time.thread_time_ns()
    ends = [time.perf_counter_ns()]
    for _ in range(n):
        work.step()  # inference ends in .cpu(), a sync; training is never synchronised
        ends.append(time.perf_counter_ns())
    cpu = time.thread_time_ns() - cpu0
    steps = [(b - a) / 1e6 for a, b in pairwise(ends)]
    return {
        "median_ms": statistics.median(steps),
        "mean_ms": (ends[-1] - ends[0]) / n / 1e6,
        "cpu_ms": cpu / n / 1e6,
    }


def watch_figures(w: Any) -> dict[str, Any]:
    """What a watch saw of its measured steps: its own clocks' cost a step (us), the steps that
    ran the module hooks, the syncs and copies a step, and how often the detail was recorded."""
    rec = w.recorder
    measured = [r for r in rec.records if r.phase == "measure"] if rec is not None else []
    k = max(1, len(measured))
    return {
        "self_us": sum(r.overhead_ns for r in measured) / k / 1e3,
        "measured_steps": len(measured),
        "full_steps": sum(r.full for r in measured),  # the module hooks on (detail.py)
        "syncs_per_step": sum(a.measured for a in w.collected.syncs.values()) / k,
        "copies_per_step": sum(a.measured for a in w.collected.copies.values()) / k,
        "detail_every": w.detail.every,
    }


def block(
    work: Workload, part: str, n: int, settle_s: float = 0.0, warm: int = WARM_STEPS
) -> dict[str, Any]:
    """``settle_s`` idle, ``warm`` steps, then ``n`` timed ones, under ``part``.

    The pause lets the watch's sampler process start (a Python start-up on another core) before
    the timed steps, as it does once at the start of a real run; every variant pauses alike."""
    gc.collect()
    work.sync()
    with variant(work.torch, part) as info:
        if settle_s:
            time.sleep(settle_s)
        for _ in range(warm):
            work.step()
        work.sync()
        clock = getattr(work, "clock", None)  # the hook method's CPU workloads have none
        mhz0 = clock.read() if clock is not None else None
        gc_before = sum(s["collections"] for s in gc.get_stats())
        out: dict[str, Any] = timed_steps(work, n)
        gcs = sum(s["collections"] for s in gc.get_stats()) - gc_before
        mhz1 = clock.read() if clock is not None else None
    out["gc_per_1000_steps"] = round(1000 * gcs / n, 2)
    if mhz0 is not None and mhz1 is not None:
        out["sm_mhz"] = [mhz0, mhz1]
    w = info.get("watch")
    if w is not None:
        out.update(watch_figures(w))
    if "warnings" in info:
        out["warnings_per_step"] = info["warnings"] / (n + warm)
    return out


def profile(work: Workload, part: str, n: int) -> dict[str, tuple[float, float]]:
    """Per step: calls and own time (us) of each Python function, under ``cProfile``."""
    prof = cProfile.Profile()
    with variant(work.torch, part):
        for _ in range(WARM_STEPS):
            work.step()
        work.sync()
        prof.enable()
        for _ in range(n):
            work.step()
        prof.disable()
    stats: dict[Any, Any] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    table: dict[str, tuple[float, float]] = {}
    for (file, line, name), (_cc, ncalls, tottime, _ct, _callers) in stats.items():
        key = f"{Path(file).name}:{line}:{name}" if line else name
        calls, own = table.get(key, (0.0, 0.0))
        table[key] = (calls + ncalls / n, own + tottime / n * 1e6)
    return table


def profile_diff(
    bare: dict[str, tuple[float, float]], watched: dict[str, tuple[float, float]], top: int
) -> list[str]:
    keys = set(bare) | set(watched)
    rows = []
    for k in keys:
        cb, tb = bare.get(k, (0.0, 0.0))
        cw, tw = watched.get(k, (0.0, 0.0))
        rows.append((tw - tb, cw - cb, cb, cw, k))
    rows.sort(key=lambda r: -abs(r[0]))
    lines = [f"{'own us/step +':>14} {'calls/step':>18}  function"]
    for dt, _dc, cb, cw, k in rows[:top]:
        lines.append(f"{dt:>+14.2f} {cb:>8.2f} -> {cw:<8.2f}  {k}")
    extra = [r for r in rows[top:] if abs(r[1]) >= 0.5]
    if extra:
        lines.append("functions called more or less often (not above):")
        for dt, _dc, cb, cw, k in sorted(extra, key=lambda r: -abs(r[1]))[:top]:
            lines.append(f"{dt:>+14.2f} {cb:>8.2f} -> {cw:<8.2f}  {k}")
    return lines


def full_clock_rounds(bare: list[dict[str, Any]], bs: list[dict[str, Any]]) -> list[float]:
    """Block / bare block over the rounds where both ran at the GPU's full clock (both reads,
    before and after, within ``FULL_CLOCK`` of the highest seen); empty without clocks."""
    top = max((max(b["sm_mhz"]) for b in (*bare, *bs) if "sm_mhz" in b), default=0)
    if not top:
        return []

    def full(b: dict[str, Any]) -> bool:
        return "sm_mhz" in b and min(b["sm_mhz"]) >= FULL_CLOCK * top

    return [b["median_ms"] / a["median_ms"] for a, b in zip(bare, bs, strict=True)
            if full(a) and full(b)]  # fmt: skip


def summary(
    per: dict[str, list[dict[str, Any]]],
    n: int,
    rounds: int,
    dev: str,
    version: str,
    workload: str = "unbatched_inference",
) -> tuple[list[str], dict[str, Any]]:
    """Per variant: the lower quartile of its blocks' median steps vs bare's (the machine has
    slow phases of a second or more that take whole blocks, of any variant: the lower quartile
    is its fast state), and the median over rounds of block / bare block of the same round."""
    bare = per.get("bare") or []
    base_q = lower_quartile([b["median_ms"] for b in bare]) if bare else None
    lines = [
        f"watch parts on {dev} ({version}): {workload}'s model, blocks of {n} steps, "
        f"{rounds} rounds, order rotated",
        "q1: lower quartile of the blocks' median steps, vs bare's; paired: median over rounds "
        "of block / that round's bare block; same state: the same over the rounds where the two "
        f"are within {100 * (SAME_STATE - 1):.0f} % of each other (their count); 95 % CI: of "
        "paired's median (order statistics); full clock: as paired, over the rounds where both "
        f"blocks ran within {100 * (1 - FULL_CLOCK):.0f} % of the GPU's highest SM clock (their "
        "count); cpu paired: as paired, of the loop thread's CPU time a step (time the thread "
        "waited to run left out)",
        f"{'variant':<14} {'q1 ms':>8} {'q1 vs bare':>10} {'paired':>8} {'95 % CI':>15} "
        f"{'same state':>12} {'full clock':>12} {'cpu paired':>10} "
        f"{'gc/1k':>6} "
        f"{'syncs':>6} {'copies':>6} {'self us':>8} {'1 in':>5}",
    ]
    result: dict[str, Any] = {
        "device": dev,
        "torch": version,
        "workload": workload,
        "steps_per_block": n,
        "rounds": rounds,
        "variants": {},
    }
    keys = (
        "gc_per_1000_steps",
        "syncs_per_step",
        "warnings_per_step",
        "copies_per_step",
        "detail_every",
    )
    for part, bs in per.items():
        q = lower_quartile([b["median_ms"] for b in bs])
        row: dict[str, Any] = {"q1_ms": round(q, 4), "blocks": bs}
        if part != "bare" and base_q and len(bs) == len(bare):
            row["q1_pct"] = pct(q / base_q)
            ratios = [b["median_ms"] / a["median_ms"] for a, b in zip(bare, bs, strict=True)]
            row["paired_pct"] = pct(statistics.median(ratios))
            ci = median_ci(ratios)
            if ci is not None:
                row["paired_ci_pct"] = [pct(x) for x in ci]
            full = full_clock_rounds(bare, bs)
            if full:
                row["full_clock_pct"] = pct(statistics.median(full))
                row["full_clock_rounds"] = len(full)
            cpu = [b["cpu_ms"] / a["cpu_ms"] for a, b in zip(bare, bs, strict=True)
                   if a.get("cpu_ms") and b.get("cpu_ms")]  # fmt: skip
            if cpu:
                row["cpu_paired_pct"] = pct(statistics.median(cpu))
            same = [x for x in ratios if 1 / SAME_STATE < x < SAME_STATE]
            if same:
                row["same_state_pct"] = pct(statistics.median(same))
                row["same_state_rounds"] = len(same)
        mid = {}
        for key in (*keys, "self_us"):
            vals = [b[key] for b in bs if key in b]
            mid[key] = f"{statistics.median(vals):.2f}" if vals else ""
        qp = f"{row['q1_pct']:+.1f}%" if "q1_pct" in row else ""
        pp = f"{row['paired_pct']:+.1f}%" if "paired_pct" in row else ""
        ss = (
            f"{row['same_state_pct']:+.1f}% ({row['same_state_rounds']})"
            if "same_state_pct" in row
            else ""
        )
        syncs = mid["syncs_per_step"] or mid["warnings_per_step"]
        cp = f"{row['cpu_paired_pct']:+.1f}%" if "cpu_paired_pct" in row else ""
        ci_s = "{:+.1f}..{:+.1f}%".format(*row["paired_ci_pct"]) if "paired_ci_pct" in row else ""
        fc = (
            f"{row['full_clock_pct']:+.1f}% ({row['full_clock_rounds']})"
            if "full_clock_pct" in row
            else ""
        )
        lines.append(
            f"{part:<14} {q:>8.4f} {qp:>10} {pp:>8} {ci_s:>15} {ss:>12} {fc:>12} {cp:>10} "
            f"{mid['gc_per_1000_steps']:>6} "
            f"{syncs:>6} {mid['copies_per_step']:>6} {mid['self_us']:>8} {mid['detail_every']:>5}"
        )
        result["variants"][part] = row
    return lines, result


def run(args: argparse.Namespace) -> int:
    import torch

    from cost.overhead import changed, restorable

    work = WORKLOADS[args.workload](torch)
    work.clock = SmClock(work.gpu)
    parts = tuple(args.parts or PARTS)
    with work.mode():
        for _ in range(30):
            work.step()
        sizing = block(work, "bare", 50)
        n = max(20, int(args.block_s * 1000 / sizing["median_ms"]))
        print(
            f"{work.dev}: bare step {sizing['median_ms']:.3f} ms; {n} steps a block",
            file=sys.stderr,
            flush=True,
        )
        per: dict[str, list[dict[str, Any]]] = {p: [] for p in parts}
        problems: list[str] = []
        for r in range(-1, args.rounds):  # round -1: warm-up, discarded
            for part in rotated(parts, max(r, 0)):
                before = restorable(torch)
                b = block(work, part, n, args.settle_s, args.warm_steps)
                problems += [f"{part}: {c}" for c in changed(before, restorable(torch))]
                print(
                    f"  round {r:>2} {part:<13} {b['median_ms']:.4f} ms",
                    file=sys.stderr,
                    flush=True,
                )
                if r >= 0:
                    per[part].append(b)
        prof_bare = profile(work, "bare", args.profile_steps)
        prof_watched = profile(work, "watched", args.profile_steps)

    lines, result = summary(
        per, n, args.rounds, str(work.dev), torch.__version__, workload=args.workload
    )
    lines.append("")
    lines.append(
        f"cProfile, {args.profile_steps} steps each, watched vs bare (own time is "
        "cProfile's, inflated; the calls are exact):"
    )
    lines += profile_diff(prof_bare, prof_watched, args.top)
    if problems:
        lines.append("LEFT CHANGED: " + "; ".join(problems))
    result["restore_problems"] = problems
    result["warm_steps"] = args.warm_steps
    result["settle_s"] = args.settle_s
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    write_results(args.out, "watch-parts", result, text)
    return 1 if problems else 0


def parser(doc: str | None) -> Parser:
    """The argparse base of the methods that step one of ``WORKLOADS``: ``--workload``."""
    ap = Parser(doc)
    ap.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        default="unbatched_inference",
        help="the scenario whose model and loop body run (all launch-bound, short steps)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__).out().rounds(16)
    ap.add_argument("--block-s", type=float, default=0.4, help="seconds of timed steps a block")
    ap.add_argument("--parts", nargs="*", choices=PARTS)
    ap.add_argument(
        "--settle-s",
        type=float,
        default=0.3,
        help="idle seconds at the start of each block (the sampler process starts meanwhile)",
    )
    ap.add_argument(
        "--warm-steps",
        type=int,
        default=WARM_STEPS,
        help="untimed steps at the start of each block, under its part: past the watch's census "
        "by default; a few hundred also past what it learns once per line (is a copy's source "
        "pinned: its first 32 copies), as in a long run",
    )
    ap.add_argument("--profile-steps", type=int, default=300)
    ap.add_argument("--top", type=int, default=25)
    return run(ap.parse_args(argv))
