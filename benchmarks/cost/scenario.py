"""The watch's steady cost on each public scenario's own script: bare and watched in one process,
taking turns every few steps, timed by the script's own step clock.

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method scenario --out "$OUT/si"
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method scenario --only tiny_batch \\
        --core 6 --control --out "$OUT/si-control"

Issue #20 asks for each scenario run bare and watched end to end, alternating, read by a clock
inside the script. Separate processes (``--method process``) do that, but on the H200's host two
processes of one launch-bound script differ by 9 % (coefficient of variation) and the pace
changes within a process over seconds (``--method spread``): a few percent is lost in that.
So here the scenario's unmodified ``main()`` runs twice in one process, each in a thread of
its own with its own model: one inside ``gpusight.watch()`` with the defaults ``gpusight run``
uses (warm-up, profiler window, sampler process, sync-debug mode, copy hooks), one bare. The
two take turns at the script's own step clock (``Steps.mark()`` in ``scenarios/_common.py``):
after its warm-up alone, each thread runs blocks of ``block`` steps in the order W B B W, so a
pace that drifts between blocks cancels. A thread waits for its turn inside ``mark()``; the
GPU is drained at the end of every block, and a block is timed from the moment its thread
resumes to the end of its drain, so neither thread's time includes the other's, and a step
that the GPU bounds is counted whole (its host marks it with the work still queued). Nothing
here reads the watch's clocks for the figure.

Per scenario: the median over adjacent (W, B) pairs of W's mean step (the block's time over
its steps) over B's, minus 1, with its 95 % interval (order statistics): the throughput the
watch costs. Beside it, the watch's
own figure for the same steps: its clocks' overhead a step x its unseen factor over W's mean
step (the report's ``overhead_pct`` is that over the watch's step times, which here include
the waits for the turn). ``--control`` runs W bare too: the two threads' own difference, which
a figure is read against.

What it leaves out, and which way: the sampler process runs through both threads' turns (its
cost is in neither: ``--method sampler`` measures it), and the bare thread passes through the
watch's wrappers (about 0.3 us each); sync-debug mode is switched off for the bare turns. Each
makes the figure a little low. A loader with workers keeps prefetching while its thread waits,
for both threads alike; the turn-taking is not how such a script runs, so loader-bound
scenarios are better read from ``--method process``'s separate processes, where their long steps
leave little to resolve.

Writes ``OUT/scenario-interleaved.json`` and ``OUT/scenario-interleaved.txt`` (printed last).
Exit code 1 when a scenario failed or the watch left torch changed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import statistics
import sys
import threading
import time
from typing import Any

from harness.cli import Parser
from harness.order import WBBW, pair_ratios
from harness.paths import scenarios_on_path
from harness.record import write_results
from harness.stats import ci_pct, median_ci, pct
from harness.table import aligned

from cost.interleaved import pin
from cost.process import DEFAULT_ONLY

scenarios_on_path()

MIN_WARM = 40  # past the watch's warm-up (3 + up to 3), window (3), switch and census (16)


class Aborted(BaseException):
    """Ends a thread's script from inside ``mark()`` when the other thread failed."""


class Turns:
    """Who runs now: ``W`` and ``B`` take turns at the script's ``mark()``, and every step's
    time is kept per block (from the previous mark, or from the thread's resume)."""

    def __init__(
        self,
        warm: int,
        block: int | None,
        pairs: int | None,
        torch: Any,
        sizing: tuple[float, float, int] = (0.05, 20.0, 300),
    ) -> None:
        self.warm = warm
        self.sizing = sizing
        """``size_from_warmup``'s block seconds, budget seconds and most pairs."""
        self.block = block
        self.pairs = pairs
        self.torch = torch
        self.cond = threading.Condition()
        self.role = threading.local()
        self.owner = "W"
        self.turn = 0  # index into the schedule: W's warm-up, B's, then the blocks
        self.count = 0  # marks in the current turn
        self.last: dict[str, float] = {}  # each thread's last mark, or its resume
        self.start: dict[str, float] = {}  # each thread's resume: its block's start
        self.steps: list[float] = []  # the current turn's step times (ms)
        self.blocks: list[dict[str, Any]] = []
        self.warm_ms: dict[str, list[float]] = {"W": [], "B": []}
        self.done = False
        self.failed: str | None = None
        self.mode_saved = 0
        self.sized = block is not None and pairs is not None

    # -- the schedule ------------------------------------------------------------------------
    def who(self, turn: int) -> str | None:
        if turn == 0:
            return "W"
        if turn == 1:
            return "B"
        assert self.pairs is not None
        k = turn - 2
        return WBBW[k % len(WBBW)] if k < 2 * self.pairs else None

    def length(self, turn: int) -> int:
        return self.warm if turn < 2 else int(self.block or 1)

    def size_from_warmup(self, block_s: float, budget_s: float, max_pairs: int) -> None:
        """Blocks of about ``block_s`` and pairs to fill ``budget_s``, from W's warm-up pace."""
        if self.sized:
            return
        tail = self.warm_ms["W"][len(self.warm_ms["W"]) // 2 :] or [1.0]
        step_s = max(statistics.median(tail) / 1000, 1e-5)
        self.block = self.block or max(2, min(400, round(block_s / step_s)))
        self.pairs = self.pairs or max(8, min(max_pairs, int(budget_s / (2 * self.block * step_s))))
        self.sized = True

    # -- called by the threads ---------------------------------------------------------------
    def enter(self, role: str) -> None:
        """The thread's role; waits for its first turn before the script starts."""
        self.role.name = role
        with self.cond:
            self._wait_for(role)
            self.last[role] = self.start[role] = time.perf_counter()

    def marked(self, t: float) -> None:
        role = self.role.name
        ms = (t - self.last[role]) * 1000
        self.last[role] = t
        with self.cond:
            if self.failed:
                raise Aborted(self.failed)
            if self.turn < 2:
                self.warm_ms[role].append(ms)
            else:
                self.steps.append(ms)
            self.count += 1
            if self.count < self.length(self.turn):
                return
            # Every block ends with the GPU's queue drained, and its mean step counts the drain:
            # a step that the GPU bounds leaves its work queued when the host marks it.
            self._drain()
            if self.turn >= 2:
                wall_ms = (time.perf_counter() - self.start[role]) * 1000
                self.blocks.append({"who": role, **block_figures(self.steps, wall_ms)})
            if self.turn == 0:
                self.size_from_warmup(*self.sizing)
            self.steps = []
            self.count = 0
            self.turn += 1
            nxt = self.who(self.turn)
            if nxt is None:
                self.done = True
                self.cond.notify_all()
                return
            if nxt != role:
                self._hand_to(nxt)
            if not self._has_more(role):
                # This thread's blocks are over: it waits (not ending its script, or its
                # watch's report, beside the other thread's last blocks) until all are.
                while not self.done and not self.failed:
                    self.cond.wait()
                raise_if(self.failed)
                return
            self._wait_for(role)
        self.last[role] = self.start[role] = time.perf_counter()

    def fail(self, why: str) -> None:
        with self.cond:
            self.failed = self.failed or why
            self.cond.notify_all()

    # -- inside the condition ----------------------------------------------------------------
    def _has_more(self, role: str) -> bool:
        t = self.turn
        while (w := self.who(t)) is not None:
            if w == role:
                return True
            t += 1
        return False

    def _wait_for(self, role: str) -> None:
        while self.owner != role and not self.failed:
            self.cond.wait()
        raise_if(self.failed)

    def _hand_to(self, nxt: str) -> None:
        """Sync-debug mode (the watch's, on its detail steps) is off while B runs."""
        torch = self.torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            if nxt == "B":
                self.mode_saved = int(torch.cuda.get_sync_debug_mode())
                if self.mode_saved:
                    torch.cuda.set_sync_debug_mode(0)
            elif self.mode_saved:
                torch.cuda.set_sync_debug_mode(self.mode_saved)
                self.mode_saved = 0
        self.owner = nxt
        self.cond.notify_all()

    def _drain(self) -> None:
        """The GPU's queue empty before the other thread's turn: an event's wait, which
        sync-debug mode and the watch's ``synchronize`` wrapper do not see as a sync."""
        torch = self.torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            ev = torch.cuda.Event()
            ev.record()
            ev.synchronize()


def raise_if(failed: str | None) -> None:
    if failed:
        raise Aborted(failed)


def block_figures(ms: list[float], wall_ms: float) -> dict[str, float]:
    """A block's mean step: its wall time from the thread's resume to the drained GPU, over its
    steps; its median step: of the times between the script's marks (the host's pace)."""
    return {
        "n": len(ms),
        "mean_ms": round(wall_ms / len(ms), 5),
        "median_ms": round(statistics.median(ms), 5),
    }


@contextlib.contextmanager
def marks_passed_to(turns: Turns) -> Any:
    """``Steps.mark`` as the scripts call it, then the turn-taking; put back after. Once the
    schedule is over, the mark raises ``StopWatch`` and the script ends, as under
    ``gpusight run --steps``."""
    import _common
    from gpusight.watch.session import StopWatch

    orig = _common.Steps.mark

    def mark(steps: Any) -> None:
        orig(steps)
        turns.marked(steps.ends[-1])
        if turns.done:
            raise StopWatch("the schedule is over")

    _common.Steps.mark = mark  # type: ignore[method-assign]
    try:
        yield
    finally:
        _common.Steps.mark = orig  # type: ignore[method-assign]


def run_scenario(name: str, args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    import gpusight
    from gpusight.watch.calibration import unseen_factor

    from cost.overhead import Flags, changed, restorable
    from cost.parts import watch_figures

    mod = importlib.import_module(name)
    cuda = bool(torch.cuda.is_available())
    flags = Flags(torch)
    warm = max(MIN_WARM, args.warm_steps)
    sizing = (args.block_s, args.budget_s, args.max_pairs)
    turns = Turns(warm, args.block_steps, args.pairs, torch, sizing)
    # Generous: the script stops from mark() when its blocks are over (StopWatch, as
    # ``gpusight run --steps`` stops it).
    argv = [f"{name}.py", "--iters", str(10**7), "--warmup", "0"]
    if not cuda:
        argv += ["--device", "cpu"]
    errors: dict[str, str] = {}
    watches: dict[str, Any] = {}

    def thread_main(role: str) -> None:
        from gpusight.watch.session import StopWatch

        try:
            turns.enter(role)
            watched = role == "W" and not args.control
            watch: Any = gpusight.watch() if watched else contextlib.nullcontext()
            with watch as w:
                watches[role] = w
                pin(args.core)  # after the watch's sampler process started: it keeps the rest
                try:
                    mod.main()
                except StopWatch:
                    pass
        except Aborted:
            pass
        except BaseException as exc:
            errors[role] = f"{type(exc).__name__}: {exc}"
            turns.fail(f"{role} failed")

    flags.reset()
    before = restorable(torch)
    saved_argv = sys.argv
    sys.argv = argv
    t0 = time.perf_counter()
    try:
        with marks_passed_to(turns), contextlib.redirect_stdout(io.StringIO()):
            threads = [
                threading.Thread(target=thread_main, args=(r,), name=f"scenario-{r}")
                for r in ("W", "B")
            ]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
    finally:
        sys.argv = saved_argv
        flags.reset()
    wall = time.perf_counter() - t0
    problems = changed(before, restorable(torch))
    out: dict[str, Any] = {
        "scenario": name,
        "control": bool(args.control),
        "core": args.core,
        "warm_steps": warm,
        "block_steps": turns.block,
        "pairs": turns.pairs,
        "wall_s": round(wall, 1),
        "errors": errors,
        "restore_problems": problems,
        "blocks": turns.blocks,
    }
    ratios = pair_ratios(turns.blocks, "mean_ms")
    if ratios:
        mid = statistics.median(ratios)
        ci = median_ci(ratios)
        out["steady_pct"] = pct(mid)
        out["steady_ci_pct"] = ci_pct(ci)
        med = pair_ratios(turns.blocks, "median_ms")
        out["steady_median_pct"] = pct(statistics.median(med))
        out["w_ms"] = statistics.median(b["mean_ms"] for b in turns.blocks if b["who"] == "W")
        out["b_ms"] = statistics.median(b["mean_ms"] for b in turns.blocks if b["who"] == "B")
    w = watches.get("W")
    if w is not None and not args.control and out.get("w_ms"):
        seen = watch_figures(w)
        out["self_us"] = round(seen["self_us"], 3)
        out["measured_steps"] = seen["measured_steps"]
        factor = unseen_factor(w.recorder.kind if w.recorder is not None else None)
        out["unseen_factor"] = factor
        out["report_pct"] = round(factor * seen["self_us"] / 10 / out["w_ms"], 3)
        run = (w.report.run or {}) if w.report is not None else {}
        out["outcome"] = w.outcome
        # Past the watch's bound on measured steps its hooks come off: W would run bare.
        out["capped"] = bool(w.recorder is not None and w.recorder.capped)
        out["report_overhead_pct"] = run.get("overhead_pct")
        out["bottleneck"] = w.report.verdict.bottleneck if w.report is not None else None
        kern = run.get("kernels") or {}
        out["window_steps"] = kern.get("window_steps")
        out["notes"] = list(w.report.notes) if w.report is not None else []
    return out


def table(results: list[dict[str, Any]], control: bool, core: int | None, dev: str) -> str:
    head = ("scenario", "W / B %", "95 % interval", "median %", "B ms", "block", "pairs")
    head += () if control else ("its clocks x f %", "pp off")
    rows: list[tuple[str, ...]] = [head]
    for r in results:
        if "steady_pct" not in r:
            why = "; ".join(f"{k}: {v}" for k, v in r.get("errors", {}).items()) or "no pairs"
            rows.append((r["scenario"], why[:90], *[""] * (len(head) - 2)))
            continue
        ci = r.get("steady_ci_pct")
        row = (
            r["scenario"],
            f"{r['steady_pct']:+.1f}",
            f"{ci[0]:+.1f}..{ci[1]:+.1f}" if ci else "-",
            f"{r['steady_median_pct']:+.1f}",
            f"{r['b_ms']:.3f}",
            str(r["block_steps"]),
            str(r["pairs"]),
        )
        if not control:
            rep = r.get("report_pct")
            off = rep - r["steady_pct"] if rep is not None else None
            row += (
                f"{rep:.2f}" if rep is not None else "-",
                f"{off:+.1f}" if off is not None else "-",
            )
        rows.append(row)
    lines = [aligned(rows)]
    what = (
        "W ran bare too (control: the threads' own difference)"
        if control
        else ("W: the scenario inside gpusight.watch() as `gpusight run` runs it")
    )
    notes = [
        "",
        f"scenario_interleaved on {dev}"
        + (f", both threads on core {core}" if core is not None else "")
        + f": {what}; B: the same script bare.",
        "W / B: median over adjacent pairs of blocks (order W B B W) of W's mean step over B's,",
        "each step timed by the script's own Steps.mark(); median: the same of the blocks'",
        "median steps; its clocks: the watch's self-measured cost a step x its unseen factor over",
        "W's mean step (what the report's overhead_pct says); pp off: that - W / B.",
    ]
    capped = [r["scenario"] for r in results if r.get("capped")]
    if capped:
        notes.append("THE WATCH STOPPED MEASURING (its step bound) in: " + ", ".join(capped))
    bad = [r["scenario"] for r in results if r.get("restore_problems")]
    if bad:
        notes.append("LEFT CHANGED after: " + ", ".join(bad))
    return "\n".join(lines + notes)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).only(help="scenario names (default: all)")
    ap.add_argument("--control", action="store_true", help="W bare too: the threads' bias")
    ap.add_argument("--core", type=int, default=None, help="both threads on this core")
    ap.add_argument("--warm-steps", type=int, default=MIN_WARM, help="each thread's, alone")
    ap.add_argument("--block-steps", type=int, default=None, help="default: about --block-s")
    ap.add_argument("--block-s", type=float, default=0.05, help="a block's length (seconds)")
    ap.add_argument("--pairs", type=int, default=None, help="default: to fill --budget-s")
    ap.add_argument("--budget-s", type=float, default=20.0, help="block time per scenario")
    ap.add_argument("--max-pairs", type=int, default=300)
    ap.out()
    args = ap.parse_args(argv)
    import torch

    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    results = []
    for name in args.only or DEFAULT_ONLY:
        print(f"scenario_interleaved: {name} ...", file=sys.stderr, flush=True)
        try:
            results.append(run_scenario(name, args, torch))
        except Exception as exc:
            results.append({"scenario": name, "errors": {"run": f"{type(exc).__name__}: {exc}"}})
        write_results(args.out, "scenario-interleaved", {"device": dev, "results": results})
    text = table(results, args.control, args.core, dev)
    print("\n" + text, flush=True)
    write_results(args.out, "scenario-interleaved", {"device": dev, "results": results}, text)
    bad = [
        r for r in results if "steady_pct" not in r or r.get("errors") or r.get("restore_problems")
    ]
    return 1 if bad else 0
