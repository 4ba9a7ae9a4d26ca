"""Is the first fix chosen by what the costly line does, on training code of common shapes?

Each script in ``line_fixes/`` wastes time in one way real training code does (an EMA update
from Python, a norm read per parameter, anomaly detection left on, ``generate()`` one prompt
at a time, a progress bar fed ``.item()``, batches stacked from numpy rows, an accuracy in
numpy every step, a JSON line of metrics every step, the loss printed every step,
``gc.collect()`` every step, a checkpoint every 10 steps, a Python collate_fn with no workers,
float64 from numpy, a loss summed one sample at a time, a flip per image in a Python loop, a
validation pass every 25 steps, a mask built from Python lists in every forward, a teacher
deep-copied every step, predictions gathered on the host every step, a validation batch every
step) and says in its
docstring what the first fix must say (``EXPECT:``, a finding id or the start of the fix's
text). Each is watched with ``gpusight run --steps 20``; the table gives the first fix's
finding, whether it says what was expected, and its text. Runs on the CPU or a GPU.

    PYTHONPATH=python_pkg python3 benchmarks/line_fix_check.py --out OUT
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "line_fixes"


def expected(script: Path) -> str:
    found = re.search(r"^EXPECT: (.+)$", script.read_text(), re.MULTILINE)
    return found.group(1).strip() if found else ""


def check(script: Path, out: Path) -> dict[str, Any]:
    rp = out / f"{script.stem}.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "20",
           "--json", str(rp), script.name]  # fmt: skip
    # The gpusight this file imports, in the scripts' folder too (a relative PYTHONPATH would
    # not reach it there, and an installed one would run instead).
    import gpusight

    root = str(Path(gpusight.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    t = time.monotonic()
    done = subprocess.run(cmd, cwd=script.parent, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    row: dict[str, Any] = {"script": script.stem, "rc": done.returncode,
                           "wall_s": round(time.monotonic() - t, 1),
                           "expect": expected(script)}  # fmt: skip
    if not rp.exists():
        row["error"] = done.stderr[-600:]
        return row
    from gpusight.first_fix import first_finding
    from gpusight.report import load_report
    from gpusight.report_parse import report_from_dict

    report = report_from_dict(load_report(rp))
    first = first_finding(report)
    row["verdict"] = report.verdict.bottleneck
    row["first"] = first.id if first else None
    row["fix"] = first.fix.text if first else None
    said = f"{row['first']} {row['fix']}"
    row["ok"] = bool(row["expect"]) and row["expect"] in said
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'script':16} {'verdict':16} {'first fix':26} ok   fix"]
    for r in rows:
        fix = (r.get("fix") or r.get("error") or "")[:90].replace("\n", " ")
        ok = "yes" if r.get("ok") else "NO"
        verdict, first = str(r.get("verdict")), str(r.get("first"))
        lines.append(f"{r['script']:16} {verdict:16} {first:26} {ok:4} {fix}")
    right = sum(1 for r in rows if r.get("ok"))
    lines.append(f"\nthe first fix says what the line needs: {right} of {len(rows)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", nargs="*", default=None)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    scripts = sorted(HERE.glob("*.py"))
    if args.only:
        scripts = [s for s in scripts if s.stem in args.only]
    rows = [check(s, args.out.resolve()) for s in scripts]
    (args.out / "line-fixes.json").write_text(json.dumps(rows, indent=1) + "\n")
    text = table(rows)
    (args.out / "line-fixes.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
