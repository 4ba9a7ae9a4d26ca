"""The trainer callbacks against ``gpusight run`` on the same script (#19): a Hugging Face
``Trainer`` whose loader cannot keep up (frameworks/hf_trainer.py) and a Lightning ``fit`` of a
small-batch MLP (frameworks/lightning_fit.py). Each script runs twice:

1. ``gpusight run --steps 20 --json run.json script.py`` (the script as it is);
2. ``python script.py --callback cb.json`` (the script watching itself: 20 steps from step 5).

Both reports' bottleneck, step time and first finding side by side; the two should name the
same bottleneck (and, on the H200: input_pipeline, launch_overhead).

    PYTHONPATH=python_pkg python3 benchmarks/gpu_whatif.py --suite callbacks --out "$OUT/callbacks"

Writes OUT/callbacks.json and OUT/callbacks-table.txt (printed last). The frameworks must be
installed (the H200 image has transformers, accelerate and lightning).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.paths import BENCHMARKS
from harness.proc import run
from harness.record import Results

SCRIPTS = {
    "hf_trainer": ("input_pipeline", ["--max-steps", "80"]),
    "lightning_fit": ("launch_overhead", ["--max-steps", "300"]),
}


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


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True).only()
    args = ap.parse_args(argv)
    out = Path(args.out)
    saved = Results(out, "callbacks.json", "callbacks-table.txt", indent=1)
    results = saved.items
    for name in args.only or list(SCRIPTS):
        expected, extra = SCRIPTS[name]
        script = str(BENCHMARKS / "frameworks" / f"{name}.py")
        rp, cp = out / f"{name}.run.json", out / f"{name}.callback.json"
        r1 = run(
            [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "20", "--json",
             str(rp), script, *extra], 600,
        )  # fmt: skip
        r2 = run([sys.executable, script, *extra, "--callback", str(cp)], 600)
        (out / f"{name}.log").write_text(r1.out + "\n----- callback\n" + r2.out)
        a, b = summary(rp), summary(cp)
        row = {
            "expected": expected,
            "gpusight_run": {**a, "rc": r1.rc, "wall_s": round(r1.wall_s, 1)},
            "callback": {**b, "rc": r2.rc, "wall_s": round(r2.wall_s, 1)},
            "same_bottleneck": a.get("bottleneck") is not None
            and a.get("bottleneck") == b.get("bottleneck"),
        }
        print(json.dumps({name: row}, indent=1), flush=True)
        saved.add(name, row)
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
    saved.finish("\n".join(lines))
    return 0 if all(r["same_bottleneck"] for r in results.values()) else 1
