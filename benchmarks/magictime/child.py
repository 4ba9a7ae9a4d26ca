"""One fresh process of ``benchmarks/magic_speed.py``: a notebook's state, then ``%load_ext
gpusight`` and ``%gpusight`` in an IPython ``InteractiveShell``, timed; one line on stdout,
``GPUSIGHT_MAGIC {json}``.

    python benchmarks/magictime/child.py warm|cold [--without-ipython]

warm: ``import torch`` and ``torch.cuda.init()`` (where CUDA is available) before the timer, as
a notebook has them by the time it asks; that setup is timed on its own (the reference). cold:
nothing imported but IPython. In both the shell exists before the timer starts (a kernel has it
before any cell runs). Only the standard library, IPython, torch and gpusight are imported here:
anything else would be loaded for gpusight and flatter it.

The split by stage comes from the progress callback the magic draws its bar with (the first
moment each stage is named) and from timers put around the environment check's probes.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from typing import Any

MARK = "GPUSIGHT_MAGIC "
PROBES = ("system_info", "nvml_info", "torch_info", "toolkit_info", "tensorflow_info", "topology")


def setup_torch() -> dict[str, Any]:
    t0 = time.perf_counter()
    import torch

    cuda = bool(torch.cuda.is_available())
    if cuda:
        torch.cuda.init()  # type: ignore[no-untyped-call]
    return {"import_torch_cuda_init_s": time.perf_counter() - t0, "cuda_initialised": cuda}


def _timed(fn: Any, name: str, into: dict[str, float]) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            into[name] = into.get(name, 0.0) + time.perf_counter() - t0

    return wrapper


def install_timers(marks: list[tuple[float, str]], parts: dict[str, float]) -> None:
    """The progress display records each new stage; the check's probes and rules are timed."""
    import importlib

    from gpusight import doctor
    from gpusight.jupyter import line_magic

    display = line_magic._Display
    draw = display.__call__

    def record(self: Any, stage: str, fraction: float) -> None:
        if not marks or marks[-1][1] != stage:
            marks.append((time.perf_counter(), stage))
        draw(self, stage, fraction)

    display.__call__ = record  # type: ignore[method-assign]
    for name in PROBES:
        mod = importlib.import_module(f"gpusight.probes.{name}")
        mod.probe = _timed(mod.probe, f"probe.{name.removesuffix('_info')}", parts)  # type: ignore[attr-defined]
    doctor.collect = _timed(doctor.collect, "probes", parts)  # type: ignore[attr-defined]
    doctor.report_from_facts = _timed(doctor.report_from_facts, "rules", parts)  # type: ignore[attr-defined]


def report_facts(report: Any) -> dict[str, Any]:
    """What the report said: the figures compared across runs and across code versions."""
    return {
        "kind": report.kind,
        "checks": {c.id: c.status for c in report.checks},
        "findings": list(report.finding_ids),
        "rows": {b.id: b.value for b in report.benchmarks},
        "repeats": {b.id: b.repeats for b in report.benchmarks},
        "skipped": {b.id: b.skipped for b in report.benchmarks if b.skipped},
        "summary": report.verdict.summary,
    }


def main(argv: list[str]) -> int:
    state = argv[0] if argv else "warm"
    with_ipython = "--without-ipython" not in argv
    info: dict[str, Any] = {"state": state, "ipython": with_ipython}
    if state == "warm":
        info.update(setup_torch())
    shell: Any = None
    if with_ipython:
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance()
    marks: list[tuple[float, str]] = []
    parts: dict[str, float] = {}
    info["torch_imported_before"] = "torch" in sys.modules

    t0 = time.perf_counter()
    if shell is not None:
        shell.run_cell("%load_ext gpusight", store_history=False)
    else:
        import gpusight  # noqa: F401
    t1 = time.perf_counter()
    install_timers(marks, parts)
    t2 = time.perf_counter()
    if shell is not None:
        result = shell.run_cell("%gpusight", store_history=False)
        report = result.result
        error = result.error_in_exec
    else:
        from gpusight.jupyter import line_magic

        report, error = line_magic.run_line("", None), None
    t3 = time.perf_counter()

    info.update(
        load_ext_s=t1 - t0,
        timers_s=t2 - t1,
        magic_s=t3 - t2,
        total_s=t3 - t0,
        marks=[(t - t2, stage) for t, stage in marks],
        end_s=t3 - t2,
        parts=parts,
    )
    if report is None or error is not None:
        info["error"] = repr(error) if error is not None else "no report"
    else:
        info["report"] = report_facts(report)
    sys.stdout.flush()
    print("\n" + MARK + json.dumps(info), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
