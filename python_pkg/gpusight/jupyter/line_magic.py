"""``%gpusight``: the environment check and quick hardware benchmarks, as one report.

    %gpusight                      environment check + quick benchmarks (a few seconds)
    %gpusight --budget S           the same, benchmarks within S seconds
    %gpusight check                environment check only
    %gpusight bench [--budget S] [--quick]
                                   hardware benchmarks only (60 s by default)
    %gpusight diagnose MODEL LOADER ...
                                   measure each fix on copies of the model (see its --help)
    %gpusight --help               this text

The report comes back as the cell's value and displays as the report widget. While it runs, a
progress bar shows: the report widget's own in a Jupyter kernel with ipywidgets, a text line
elsewhere. Ctrl-C stops it cleanly: every benchmark frees what it holds and restores torch's
flags on the way out, the bar is removed, and the magic says it was interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

from ..report import Report, Verdict

USAGE = """\
usage:
  %gpusight [--budget S]            environment check + quick hardware benchmarks
  %gpusight check                   environment check only
  %gpusight bench [--budget S] [--quick]
                                    hardware benchmarks only (default budget 60 s)
  %gpusight diagnose MODEL LOADER [--optimizer OPT] [--loss FN] [--steps N] [--budget S] ...
                                    measure each fix on copies of MODEL fed by LOADER
  %gpusight --help                  this help
  %%gpusight [--steps N] ...        (cell magic) watch the training code in the cell
  %%gpusight --what-if [--budget S] re-run the cell once per change, measure each one's gain
  %%gpusight --compare-to N [--finding ID]
                                    watch again, compare with %%gpusight cell [N]'s report"""

TITLE = "Environment check and hardware benchmarks"
INTERRUPTED = (
    "%gpusight: interrupted. Stopped cleanly: buffers freed, torch's flags and RNG as before; "
    "no report."
)

Progress = Callable[[str, float], None]


def _usage_error(message: str) -> Exception:
    from IPython.core.error import UsageError

    return UsageError(f"{message}\n{USAGE}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would exit the kernel
        raise _usage_error(f"{self.prog}: {message}")


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _parser(prog: str, *, quick_flag: bool) -> _Parser:
    p = _Parser(prog=prog, add_help=False)
    p.add_argument("--budget", type=_budget, default=None, metavar="S")
    if quick_flag:
        p.add_argument("--quick", action="store_true")
    return p


# --- what each command does (no IPython needed below) ---------------------------------------


def merge(check: Report, bench: Report) -> Report:
    """One ``kind="bench"`` report: the check's machine, checks, findings and notes, then the
    benchmark rows, findings and notes. The verdict is the environment's, unless a benchmark
    finding is critical and nothing in the environment is; a benchmark headline is added to
    the summary where one was measured."""
    env_critical = any(f.severity == "critical" for f in check.findings)
    bench_critical = [f for f in bench.findings if f.severity == "critical"]
    if bench_critical and not env_critical:
        verdict = Verdict(
            bottleneck="environment",
            gpu_busy_pct=None,
            summary=f"Not ready: {bench_critical[0].title}.",
        )
    else:
        summary = check.verdict.summary
        headline = _headline(bench)
        if headline:
            summary = f"{summary.rstrip()} {headline}" if summary else headline
        verdict = Verdict(
            bottleneck=check.verdict.bottleneck,
            gpu_busy_pct=check.verdict.gpu_busy_pct,
            summary=summary,
        )
    seen = {f.id for f in check.findings}
    return Report(
        kind="bench",
        machine=check.machine,
        checks=list(check.checks),
        benchmarks=list(bench.benchmarks),
        findings=[*check.findings, *(f for f in bench.findings if f.id not in seen)],
        verdict=verdict,
        notes=[*check.notes, *bench.notes],
        title=TITLE,
    )


def _headline(bench: Report) -> str:
    """'Benchmarks: ...' when a GPU row was measured, else the CPU rate alone (the reason the
    GPU rows were skipped is already the environment's verdict)."""
    gpu_measured = any(
        b.value is not None and not b.id.startswith(("cpu.", "loader.")) for b in bench.benchmarks
    )
    if gpu_measured:
        return f"Benchmarks: {bench.verdict.summary}."
    cpu = next((b for b in bench.benchmarks if b.id == "cpu.matmul.fp32"), None)
    if cpu is not None and cpu.value is not None:
        return f"CPU fp32 matmul: {cpu.value:,.0f} {cpu.unit}."
    return ""


def check_and_bench(
    *, budget_s: float | None = None, progress: Progress | None = None, device: Any = None
) -> Report:
    """The environment check, then the quick benchmarks on the machine it found (``%gpusight``)."""
    from ..bench import build_report
    from ..bench.suite import QUICK_BUDGET_S
    from ..doctor import check
    from ..probes.nvml_session import nvml_session

    # The check (torch import, driver probes) takes about as long as the quick benchmarks:
    # on the H200, 4.4 s and 1.5 s. It gets the first half of the bar.
    share = 0.5

    def bench_progress(stage: str, fraction: float) -> None:
        if progress is not None:
            progress(stage, share + (1 - share) * fraction)

    if progress is not None:
        progress("checking the environment", 0.0)
    # The check's two NVML probes and the matmul and copy benchmarks each start and stop NVML:
    # held open here, it starts once.
    with nvml_session():
        env = check()
        bench = build_report(
            budget_s=budget_s if budget_s is not None else QUICK_BUDGET_S,
            quick=True,
            progress=bench_progress,
            machine=env.machine,
            device=device,
        )
    return merge(env, bench)


# --- progress display ---------------------------------------------------------------------


class TextProgress:
    """One line, redrawn in place (a terminal, and Jupyter's output area, honour ``\\r``)."""

    def __init__(self, stream: TextIO | None = None, width: int = 24) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.width = width
        self.stage = ""
        self.last = 0.0
        self.drawn = 0

    def __call__(self, stage: str, fraction: float | None = None) -> None:
        f = min(max(fraction or 0.0, 0.0), 1.0)
        now = time.monotonic()
        if stage == self.stage and now - self.last < 0.1 and f < 1.0:
            return
        self.stage, self.last = stage, now
        filled = round(self.width * f)
        line = f"\r[{'#' * filled}{'-' * (self.width - filled)}] {100 * f:3.0f}%  {stage[:48]}"
        self.stream.write(line.ljust(self.drawn))
        self.stream.flush()
        self.drawn = len(line)

    def close(self) -> None:
        """Erase the line: the report (or the interrupted message) takes its place."""
        if self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn = 0


class _Display:
    """The widget's progress bar in a kernel with ipywidgets, else the text line."""

    def __init__(self, first_stage: str) -> None:
        self.widget: Any = None
        self.text: TextProgress | None = None
        try:
            # display's in_kernel, not widget's: that one imports ipywidgets first, which only
            # a kernel's bar needs.
            from .display import in_kernel

            if in_kernel():
                from .progress import WidgetProgress

                self.widget = WidgetProgress(first_stage=first_stage)
        except Exception:  # no ipywidgets, no frontend: progress is a nicety
            self.widget = None
        if self.widget is None:
            self.text = TextProgress()
            self.text(first_stage, 0.0)

    def __call__(self, stage: str, fraction: float) -> None:
        if self.widget is not None:
            self.widget(stage, fraction)
        elif self.text is not None:
            self.text(stage, fraction)

    def close(self) -> None:
        if self.widget is not None:
            self.widget.close()
            try:
                self.widget.widget.close()  # the empty widget leaves the output area
            except Exception:
                pass
        if self.text is not None:
            self.text.close()


def _with_progress(
    first_stage: str, work: Callable[[Progress], Report], progress: Progress | None
) -> Report | None:
    """Run ``work(progress)`` under a progress display; on Ctrl-C say so and return None.

    The benchmarks free their buffers and restore torch's flags themselves as the interrupt
    passes through them; here the bar is removed, so that nothing is left behind."""
    display: _Display | None = None
    if progress is None:
        display = _Display(first_stage)
        progress = display
    try:
        return work(progress)
    except KeyboardInterrupt:
        if display is not None:
            display.close()
            display = None
        print(INTERRUPTED, file=sys.stderr)
        return None
    finally:
        if display is not None:
            display.close()


# --- the magic ----------------------------------------------------------------------------


def run_line(line: str, shell: Any, progress: Progress | None = None) -> Report | None:
    """Run ``%gpusight LINE``. Returns the report (the cell displays it), or None for
    ``--help`` and after Ctrl-C. ``progress`` replaces the display (used by scripts)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise _usage_error(f"%gpusight: {exc}") from None
    command = words[0] if words and not words[0].startswith("-") else ""
    rest = words[1:] if command else words
    if command == "help" or (not command and any(w in ("-h", "--help") for w in rest)):
        print(USAGE)
        return None
    if command == "":
        opts = _parser("%gpusight", quick_flag=False).parse_args(rest)
        return _with_progress(
            "gpusight: checking the environment",
            lambda p: check_and_bench(budget_s=opts.budget, progress=p),
            progress,
        )
    if command == "check":
        if rest:
            raise _usage_error(f"%gpusight check takes no arguments, got {' '.join(rest)!r}")
        from ..doctor import check

        return check()
    if command == "bench":
        if any(w in ("-h", "--help") for w in rest):
            print(USAGE)
            return None
        opts = _parser("%gpusight bench", quick_flag=True).parse_args(rest)
        from ..bench import build_report

        return _with_progress(
            "gpusight: benchmarks",
            lambda p: build_report(budget_s=opts.budget, quick=opts.quick, progress=p),
            progress,
        )
    if command == "diagnose":
        try:
            from . import diagnose_magic
        except ImportError as exc:
            raise _usage_error(f"%gpusight diagnose is not available here ({exc})") from None
        rest_line = line.split("diagnose", 1)[1]
        result: Report = diagnose_magic.run_diagnose(rest_line, shell)
        return result
    raise _usage_error(f"%gpusight: unknown command {command!r}")
