#!/usr/bin/env python3
"""The trainer callbacks against ``gpusight run`` on the same script (#19): a Hugging Face
``Trainer`` whose loader cannot keep up (frameworks/hf_trainer.py) and a Lightning ``fit`` of a
small-batch MLP (frameworks/lightning_fit.py). Each script runs twice:

1. ``gpusight run --steps 20 --json run.json script.py`` (the script as it is);
2. ``python script.py --callback cb.json`` (the script watching itself: 20 steps from step 5).

Both reports' bottleneck, step time and first finding side by side; the two should name the
same bottleneck (and, on the H200: input_pipeline, launch_overhead).

    PYTHONPATH=python_pkg python3 benchmarks/callbacks_gpu.py --out "$OUT/callbacks"

Writes OUT/callbacks.json and OUT/callbacks-table.txt (printed last). The frameworks must be
installed (the H200 image has transformers, accelerate and lightning).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "hf_trainer": ("input_pipeline", ["--max-steps", "80"]),
    "lightning_fit": ("launch_overhead", ["--max-steps", "300"]),
}


def run(cmd: list[str], timeout: float) -> tuple[int, str, float]:
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr, time.monotonic() - t
    except subprocess.TimeoutExpired as exc:
        return 124, f"timeout: {exc}", time.monotonic() - t


def summary(path: Path) -> dict[str, Any]:
    try:
        rep = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": str(exc)}
    run_ = rep.get("run") or {}
    findings = rep.get("findings") or []
    return {
        "bottleneck": (rep.get("verdict") or {}).get("bottleneck"),
        "step_ms": run_.get("step_time_ms"),
        "steps": run_.get("steps"),
        "first_finding": findings[0]["id"] if findings else None,
        "sync_sources": sorted(
            {
                f"{(s.get('source') or {}).get('file')}:{(s.get('source') or {}).get('line')}"
                for s in run_.get("syncs") or []
                if s.get("source")
            }
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for name in args.only or list(SCRIPTS):
        expected, extra = SCRIPTS[name]
        script = str(HERE / "frameworks" / f"{name}.py")
        rp, cp = out / f"{name}.run.json", out / f"{name}.callback.json"
        rc1, log1, wall1 = run(
            [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "20", "--json",
             str(rp), script, *extra], 600,
        )  # fmt: skip
        rc2, log2, wall2 = run([sys.executable, script, *extra, "--callback", str(cp)], 600)
        (out / f"{name}.log").write_text(log1 + "\n----- callback\n" + log2)
        a, b = summary(rp), summary(cp)
        results[name] = {
            "expected": expected,
            "gpusight_run": {**a, "rc": rc1, "wall_s": round(wall1, 1)},
            "callback": {**b, "rc": rc2, "wall_s": round(wall2, 1)},
            "same_bottleneck": a.get("bottleneck") is not None
            and a.get("bottleneck") == b.get("bottleneck"),
        }
        print(json.dumps({name: results[name]}, indent=1), flush=True)
        (out / "callbacks.json").write_text(json.dumps(results, indent=1))
    lines = [
        f"{'script':14} {'gpusight run':18} {'callback':18} {'same':5} {'expected':16} "
        f"{'step ms (run / callback)':>26}"
    ]
    for name, r in results.items():
        a, b = r["gpusight_run"], r["callback"]
        step = f"{a.get('step_ms') or 0:.2f} / {b.get('step_ms') or 0:.2f}"
        lines.append(
            f"{name:14} {a.get('bottleneck')!s:18} {b.get('bottleneck')!s:18} "
            f"{'yes' if r['same_bottleneck'] else 'NO':5} {r['expected']:16} {step:>26}"
        )
    table = "\n".join(lines)
    (out / "callbacks-table.txt").write_text(table + "\n")
    print("\n" + table, flush=True)
    return 0 if all(r["same_bottleneck"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
