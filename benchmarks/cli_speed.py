"""How long the command line takes, whole process, as a user waits for it (issue #18's targets).

    npm run build:standalone   # gpusight html needs the bundle
    .venv/bin/python benchmarks/cli_speed.py                       # this tree
    .venv/bin/python benchmarks/cli_speed.py --src OTHER/python_pkg --label before --big-repeats 1

Each figure is the median wall time of ``--repeats`` runs (5) of a fresh process (``python -m
gpusight ...`` with PYTHONPATH=--src), except ``validate_typical_ms``: the median of 200 calls of
``gpusight.report_schema.validate`` in one process after a first call (which is reported too:
it includes compiling the schema). The reports: python_pkg/tests/html_support.py's typical run
(a minute of NVML samples at 10 Hz, 200 steps, 3 findings, 2 what-ifs, 4 benchmarks; ~170 KB of
JSON) and the same run with its timeline repeated to 40 MB. Writes
benchmarks/results/cli-speed[-LABEL].json and .md.
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import RESULTS, ROOT
from harness.proc import run
from harness.record import git_commit, now

#: name -> (target seconds or None, what the target is)
TARGETS: dict[str, tuple[float | None, str]] = {
    "import_gpusight_s": (0.150, "<= 150 ms"),
    "help_s": (None, ""),
    "import_torch_s": (None, "reference for check"),
    "check_s": (None, "<= import_torch_s + 1 s"),
    "html_typical_s": (0.5, "<= 0.5 s"),
    "validate_typical_ms": (5.0, "<= 5 ms"),
    "html_40mb_s": (10.0, "<= 10 s"),
    "diff_40mb_s": (None, "linear: seconds"),
    "merge_40mb_s": (None, "linear: seconds"),
}

VALIDATE_CODE = """
import json, statistics, sys, time
from gpusight.report_schema import validate
data = json.load(open(sys.argv[1]))
t = time.perf_counter(); validate(data); first = time.perf_counter() - t
times = []
for _ in range(200):
    t = time.perf_counter(); validate(data); times.append(time.perf_counter() - t)
print(json.dumps({"first_ms": first * 1e3, "median_ms": statistics.median(times) * 1e3}))
"""


def make_reports(tmp: Path, src: Path) -> dict[str, Path]:
    """Write the typical report, a 40 MB one and a 40 MB rank report (for merge)."""
    sys.path[:0] = [str(src), str(ROOT / "python_pkg" / "tests")]
    from html_support import typical_report

    typical: dict[str, Any] = typical_report().to_dict()
    big = copy.deepcopy(typical)
    timeline = typical["run"]["timeline"]
    while len(json.dumps(big, indent=2)) < 40_000_000:
        for _ in range(50):
            big["run"]["timeline"].extend(copy.deepcopy(timeline))
    rank = copy.deepcopy(big)
    rank["run"]["kernels"] = {"dist_rank": 0, "dist_world_size": 1}
    out = {"typical": tmp / "typical.json", "big": tmp / "big.json", "rank": tmp / "rank0.json"}
    out["typical"].write_text(json.dumps(typical, indent=2))
    out["big"].write_text(json.dumps(big, indent=2))
    out["rank"].write_text(json.dumps(rank, indent=2))
    return out


def wall(cmd: list[str], env: dict[str, str], repeats: int, timeout: float) -> dict[str, Any]:
    times: list[float] = []
    for _ in range(repeats):
        done = run(cmd, timeout, env=env)
        if done.timed_out:
            return {"median_s": None, "timed_out_after_s": timeout, "runs_s": times}
        times.append(done.wall_s)
        if done.rc not in (0, 1):
            return {"median_s": None, "exit": done.rc, "stderr": done.stderr[-500:]}
    return {"median_s": round(statistics.median(times), 4), "runs_s": [round(x, 4) for x in times]}


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--src", type=Path, default=ROOT / "python_pkg", help="gpusight's sources")
    ap.add_argument("--label", default="")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--big-repeats", type=int, default=5, help="repeats for the 40 MB reports")
    ap.add_argument("--skip-big", action="store_true", help="leave out the 40 MB reports")
    ap.add_argument("--timeout", type=float, default=600.0, help="per run, seconds")
    ap.out(RESULTS, type=Path)
    args = ap.parse_args(argv)

    env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    py = [args.python]
    g = [*py, "-m", "gpusight"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        files = make_reports(tmp, args.src.resolve())
        r, big = args.repeats, args.big_repeats
        runs: dict[str, tuple[list[str], int]] = {
            "import_gpusight_s": ([*py, "-c", "import gpusight"], r),
            "help_s": ([*g, "--help"], r),
            "import_torch_s": ([*py, "-c", "import torch"], r),
            "check_s": ([*g, "check"], r),
            "html_typical_s": ([*g, "html", str(files["typical"]), "-o", str(tmp / "t.html")], r),
            "html_40mb_s": ([*g, "html", str(files["big"]), "-o", str(tmp / "b.html")], big),
            "diff_40mb_s": ([*g, "diff", str(files["big"]), str(files["big"])], big),
            "merge_40mb_s": ([*g, "merge", str(files["rank"]), "--json", str(tmp / "m.json")], big),
        }
        for name, (cmd, n) in runs.items():
            if args.skip_big and "40mb" in name:
                results[name] = {"median_s": None, "skipped": True}
                continue
            results[name] = wall(cmd, env, n, args.timeout)
            print(f"{name}: {results[name].get('median_s')}", file=sys.stderr, flush=True)
        done = run([*py, "-c", VALIDATE_CODE, str(files["typical"])], args.timeout, env=env)
        if done.rc != 0:
            raise SystemExit(f"validating the typical report failed:\n{done.stderr[-2000:]}")
        v = json.loads(done.stdout)
        results["validate_typical_ms"] = {
            "median_ms": round(v["median_ms"], 3),
            "first_call_ms": round(v["first_ms"], 3),
        }
        results["sizes_bytes"] = {k: p.stat().st_size for k, p in files.items()}

    torch_s = results["import_torch_s"]["median_s"]
    check_s = results["check_s"]["median_s"]
    verdicts: dict[str, Any] = {}
    for name, (target, _) in TARGETS.items():
        got = results[name].get("median_s", results[name].get("median_ms"))
        if name == "check_s":
            target = None if torch_s is None else torch_s + 1.0
        verdicts[name] = None if target is None or got is None else got <= target
    head = git_commit() or ""
    record = {
        "command": " ".join(["python", "benchmarks/cli_speed.py", *sys.argv[1:]]),
        "label": args.label or "this tree",
        "src": str(args.src),
        "commit": head,
        "date": now(),
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "repeats": args.repeats,
        "big_repeats": args.big_repeats,
        "results": results,
        "meets_target": verdicts,
        "check_minus_import_torch_s": None
        if torch_s is None or check_s is None
        else round(check_s - torch_s, 3),
    }
    suffix = f"-{args.label}" if args.label else ""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"cli-speed{suffix}.json").write_text(json.dumps(record, indent=2) + "\n")
    rows = ["| figure | median | target | met |", "|---|---|---|---|"]
    for name, (_, text) in TARGETS.items():
        res = results[name]
        got = res.get("median_s", res.get("median_ms"))
        unit = "ms" if name.endswith("_ms") else "s"
        shown = (
            "skipped" if res.get("skipped") else "timed out" if got is None else f"{got:.3f} {unit}"
        )
        met = {True: "yes", False: "NO", None: "-"}[verdicts[name]]
        rows.append(f"| {name} | {shown} | {text} | {met} |")
    (args.out / f"cli-speed{suffix}.md").write_text(
        f"# gpusight CLI speed ({record['label']}, {record['commit']}, {record['date']})\n\n"
        f"`{record['command']}`; load average at the end {record['machine']['load_average']}\n\n"
        + "\n".join(rows)
        + "\n"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
