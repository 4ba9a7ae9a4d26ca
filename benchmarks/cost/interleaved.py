"""The watch's cost on a short step, bare and watched blocks interleaved every few steps.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method interleaved \\
        --workload unbatched_inference --pairs 400 --block-steps 25 --out "$OUT/interleaved"

``--method parts`` starts a fresh watch for each block, so its blocks are a second or more
apart, and the H200's host changes pace between seconds (the same bare block took 1.6 to 4.4 ms
a step in one run): a few percent is lost in that. Here one watch runs for the whole benchmark,
in a thread of its own with a model of its own, and a second model of the same workload runs
bare in the main thread. The two threads take turns, a block of ``--block-steps`` steps each
(about 50 ms), in the order W B B W, so a pace that drifts between blocks cancels out. Each
thread times its own steps with ``perf_counter_ns``: the watch's clocks are not used.

The figure is the median over adjacent (W, B) pairs of W's mean step / B's mean step, with a
95 % interval. Means, not medians: the watch records copies and syncs on 1 in k steps
(``gpusight/watch/detail.py``), and a block's median step leaves those out.

What it leaves out, and which way: the watch's sampler process runs through both threads' blocks
(``--method parts``'s ``sampler_process`` part measures it alone). The bare thread passes through
the watch's wrappers (``Tensor.to``, the optimizer hooks, ``backward``), a check of its thread
each (about 0.3 us). Sync-debug mode, which the watch switches on for the steps that record
syncs, is switched off for the bare thread's blocks. What the watch's code leaves in the CPU's
caches reaches the next bare block too. Each of these makes the figure a little low.

The two threads are not alike either: on the H200 (h200-run15/d) the watched thread, running
bare too (``--control``), was 3 % (tiny_batch) to 10 % (unbatched_inference) faster than the
main thread, the two on whichever cores the kernel gave them; on one core (``taskset -c 6``,
h200-run15/e) 1.3 % faster, with an interval of ±0.5 %. So a figure is read against its control:
run each workload with ``--control`` and without, on one core (``--core N`` pins the two
timing threads and leaves the watch's sampler process on the process's other cores; ``taskset``
puts the sampler on that core too, which takes its time from the steps).

Before the pairs, the watched thread runs ``--warm-steps`` alone: the watch's warm-up and its
census of 16 steps (which decides the sampling) see steps without the bare thread's gaps.
Writes ``OUT/watch-interleaved.json`` and ``OUT/watch-interleaved.txt`` (printed last).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import threading
from collections.abc import Callable
from typing import Any

from harness.order import WBBW, pair_ratios
from harness.paths import scenarios_on_path
from harness.record import write_results
from harness.stats import ci_pct, median_ci, pct

scenarios_on_path()

ORDER = WBBW
RAW_HOOKS = "raw_hooks"  # --part: no watch, two do-nothing hooks on W's model


def timed_block(work: Any, n: int) -> dict[str, float]:
    """``n`` steps of ``work``, each timed; the GPU drained before and after (not timed)."""
    from cost.parts import timed_steps

    work.sync()
    out = timed_steps(work, n)
    work.sync()
    return out


class WatchedThread:
    """A thread that runs its workload's steps inside one watch, a block at a time on request."""

    def __init__(
        self,
        work: Any,
        warm_steps: int,
        watched: bool = True,
        core: int | None = None,
        part: str = "watched",
    ) -> None:
        self.work = work
        self.watched = watched
        self.core = core
        self.part = part
        self.warm_steps = warm_steps
        self.watch: Any = None
        self.error: BaseException | None = None
        self._job: Callable[[], Any] | None = None
        self._result: Any = None
        self._go = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="watched", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._done.wait()
        self._done.clear()
        if self.error is not None:
            raise RuntimeError("the watched thread failed to start") from self.error

    def call(self, job: Callable[[], Any]) -> Any:
        """Run ``job`` in the watched thread (inside the watch) and return what it returned."""
        self._job = job
        self._go.set()
        self._done.wait()
        self._done.clear()
        if self.error is not None:
            raise RuntimeError("the watched thread failed") from self.error
        return self._result

    def stop(self) -> None:
        self._job = None
        self._go.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        import gpusight

        from cost.overhead import ablated

        watch: Any = (
            gpusight.watch(warmup=3, profile_steps=0, stop_after_steps=False)
            if self.watched and self.part != RAW_HOOKS
            else contextlib.nullcontext()
        )
        # A part of the watch switched off (--method overhead's), for the whole run; or no watch and
        # the two hooks alone.
        parts: Any = contextlib.nullcontext()
        if self.part == RAW_HOOKS:
            parts = raw_hooks(self.work.model)
        elif self.part != "watched":
            parts = ablated(self.part)
        try:
            with self.work.mode(), parts, watch as w:
                self.watch = w
                # After the watch has started its sampler process, which keeps the cores the
                # process had: only this thread moves.
                pin(self.core)
                for _ in range(self.warm_steps):
                    self.work.step()
                self._done.set()
                while True:
                    self._go.wait()
                    self._go.clear()
                    job = self._job
                    if job is None:
                        break
                    try:
                        self._result = job()
                    finally:
                        self._done.set()
        except BaseException as exc:  # reported by start()/call() in the main thread
            self.error = exc
            self._done.set()


@contextlib.contextmanager
def raw_hooks(model: Any) -> Any:
    """Two hooks that do nothing on the outermost module, registered as the watch registers its
    own (the pre-hook first, the post-hook always called): torch's dispatch through them alone."""

    def pre(module: Any, args: Any) -> None:
        return None

    def post(module: Any, args: Any, output: Any) -> None:
        return None

    handles = [
        model.register_forward_pre_hook(pre, prepend=True),
        model.register_forward_hook(post, always_call=True),
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def pin(core: int | None) -> None:
    """The calling thread (not the process) to ``core``; nothing for None."""
    if core is not None:
        os.sched_setaffinity(0, {core})


def bare_block(work: Any, n: int) -> tuple[dict[str, float], bool]:
    """A bare block in this thread; sync-debug mode off for it if the watch had left it on."""
    torch = work.torch
    mode = torch.cuda.get_sync_debug_mode() if work.gpu else 0
    if mode:
        torch.cuda.set_sync_debug_mode(0)
    try:
        return timed_block(work, n), bool(mode)
    finally:
        if mode:
            torch.cuda.set_sync_debug_mode(mode)


def summarize(
    blocks: list[dict[str, Any]], info: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    result: dict[str, Any] = dict(info)
    lines = [
        f"watch interleaved on {info['device']} ({info['torch']}): {info['workload']}, "
        f"{info['pairs']} pairs of {info['block_steps']}-step blocks, order W B B W"
        + (f", both threads on core {info['core']}" if info.get("core") is not None else ""),
        "W: one watch for the whole run, in a thread with a model of its own; B: the same "
        "workload bare in the main thread; figure: median over adjacent pairs of W / B, its 95 %",
        "interval (order statistics); mean: of the blocks' mean steps (the steps that record "
        "copies and syncs in); median: of their median steps; cpu: the thread's CPU time a step",
        f"{'of':<8} {'W / B':>8} {'95 % interval':>16} {'W ms':>8} {'B ms':>8}",
    ]
    for key, name in (("mean_ms", "mean"), ("median_ms", "median"), ("cpu_ms", "cpu")):
        ratios = pair_ratios(blocks, key)
        if not ratios:
            continue
        mid = statistics.median(ratios)
        ci = median_ci(ratios)
        w_ms = statistics.median(b[key] for b in blocks if b["who"] == "W")
        b_ms = statistics.median(b[key] for b in blocks if b["who"] == "B")
        result[f"{name}_pct"] = pct(mid)
        if ci is not None:
            result[f"{name}_ci_pct"] = ci_pct(ci)
        ci_s = "{:+.1f}..{:+.1f}%".format(*result[f"{name}_ci_pct"]) if ci else ""
        lines.append(f"{name:<8} {100 * (mid - 1):>+7.1f}% {ci_s:>16} {w_ms:>8.4f} {b_ms:>8.4f}")
    if info.get("part") == RAW_HOOKS:
        lines.append("W: no watch; two do-nothing hooks on its model, as the watch registers them")
    elif info.get("part", "watched") != "watched":
        lines.append(f"W: the watch as overhead.py's part {info['part']!r} has it")
    if info.get("control"):
        lines.append("control: W ran bare too (no watch): the figure is the threads' own bias")
    elif info.get("part") != RAW_HOOKS:
        lines.append(
            f"the watch's own clocks: {info['self_us']:.2f} us a measured step "
            f"({info['self_pct']:.2f} % of W's mean step); copies and syncs recorded on 1 in "
            f"{info['detail_every']} steps; bare blocks that found sync-debug mode on: "
            f"{info['mode_was_on']}"
        )
    result["blocks"] = blocks
    return lines, result


def run(args: argparse.Namespace) -> int:
    import torch

    from cost.overhead import changed, restorable
    from cost.parts import WORKLOADS, watch_figures

    make = WORKLOADS[args.workload]
    bare_work, watched_work = make(torch), make(torch)
    before = restorable(torch)  # with CUDA up, as it is after: its sync-debug mode is in it
    watched = WatchedThread(
        watched_work, args.warm_steps, watched=not args.control, core=args.core, part=args.part
    )
    blocks: list[dict[str, Any]] = []
    mode_was_on = 0
    cores = os.sched_getaffinity(0) if args.core is not None else None
    with bare_work.mode():
        pin(args.core)
        for _ in range(args.warm_steps):
            bare_work.step()
        watched.start()
        try:
            n = args.block_steps
            for i in range(2 * args.pairs):
                who = ORDER[i % len(ORDER)]
                if who == "W":
                    b = watched.call(lambda: timed_block(watched_work, n))
                else:
                    b, on = bare_block(bare_work, n)
                    mode_was_on += on
                blocks.append({"who": who, **{k: round(v, 5) for k, v in b.items()}})
        finally:
            watched.stop()
            if cores is not None:
                os.sched_setaffinity(0, cores)
    w = watched.watch
    # Read once the watch has stopped: the light steps of a run still open go into the
    # recorder then.
    seen = watch_figures(w) if w else {"self_us": 0.0, "measured_steps": 0}
    problems = changed(before, restorable(torch))
    # Past the watch's bound on measured steps its hooks come off: W would run bare after it.
    capped = bool(w is not None and w.recorder is not None and w.recorder.capped)
    w_mean = statistics.fmean(b["mean_ms"] for b in blocks if b["who"] == "W")
    info = {
        "device": str(bare_work.dev),
        "torch": torch.__version__,
        "workload": args.workload,
        "pairs": args.pairs,
        "block_steps": args.block_steps,
        "warm_steps": args.warm_steps,
        "core": args.core,
        "part": args.part,
        **seen,
        "self_us": round(seen["self_us"], 3),
        "self_pct": round(100 * seen["self_us"] / 1e3 / w_mean, 3) if w_mean else None,
        "detail_every": seen.get("detail_every"),
        "control": args.control,
        "mode_was_on": mode_was_on,
        "restore_problems": problems,
        "watch_error": repr(watched.error) if watched.error else None,
    }
    lines, result = summarize(blocks, info)
    if capped:
        lines.append("THE WATCH STOPPED MEASURING (its step bound): W ran bare after it")
    if problems:
        lines.append("LEFT CHANGED: " + "; ".join(problems))
    text = "\n".join(lines)
    print("\n" + text, flush=True)
    write_results(args.out, "watch-interleaved", result, text)
    return 1 if problems or capped or watched.error else 0


def main(argv: list[str] | None = None) -> int:
    from cost.overhead import ABLATIONS
    from cost.parts import parser

    ap = parser(__doc__)
    ap.add_argument("--pairs", type=int, default=200, help="(W, B) pairs of blocks")
    ap.add_argument("--block-steps", type=int, default=25)
    ap.add_argument(
        "--warm-steps",
        type=int,
        default=300,
        help="steps each thread runs first, the watched one past the watch's census",
    )
    ap.add_argument(
        "--control", action="store_true", help="W without the watch: the threads' own bias"
    )
    ap.add_argument(
        "--part",
        choices=[*(a for a in ABLATIONS if a != "bare"), RAW_HOOKS],
        default="watched",
        help="the watch with one of its parts switched off (--method overhead's names), or "
        f"{RAW_HOOKS}: no watch, two do-nothing hooks on the model",
    )
    ap.add_argument(
        "--core",
        type=int,
        default=None,
        help="run both timing threads on this core (the sampler process keeps the others)",
    )
    ap.out()
    args = ap.parse_args(argv)
    if args.pairs < 1 or args.block_steps < 1:
        ap.error("--pairs and --block-steps must be at least 1")
    return run(args)
