"""Does the what-if measure the line (issue #50), on a GPU?

The four scripts of ``host_lines_check.py`` (``gc.collect(); torch.cuda.empty_cache()`` every
step of a ResNet-50, numpy inside ``forward``, a histogram of every parameter every step, a
tokenizer in the loop), their loops made long enough for a what-if's runs. For each:

1. ``gpusight run --what-if --try statement --patch fix.diff``: the statement row (its change
   in words, its gain, or why it was not tried);
2. ``gpusight run --verify fix.diff``: the patched script against the original, the same
   computation the row measured;
3. the truth: the script bare with and without its planted waste (``--fix`` removes it
   outright, where the row may only run it every 10 steps).

    PYTHONPATH=python_pkg python3 benchmarks/statement_check.py --out OUT [--only NAME ...]

Writes ``OUT/statement-check.json`` and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from host_lines_check import SCRIPTS, _truth_ms

# The loops made longer: a what-if run needs its warm-up, 20 measured steps of at least 2 s,
# and three steps after them.
_LONGER = (
    ("range(60):", "range(300):"),
    ("* 1000 / 50:", "* 1000 / 290:"),
    ("range(120):", "range(400):"),
    ("* 1000 / 100:", "* 1000 / 380:"),
)


def _source(name: str) -> str:
    text = SCRIPTS[name][0]
    for old, new in _LONGER:
        text = text.replace(old, new)
    return text


def _gs(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpusight", "run", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def check(name: str, out: Path, budget: float, timeout: float) -> dict[str, object]:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(_source(name), encoding="utf-8")
    row: dict[str, object] = {"scenario": name}
    t = time.monotonic()
    wi = _gs(["--what-if", "--try", "statement", "--budget", str(budget), "--json",
              "whatif.json", "--patch", "fix.diff", "train.py"], folder, timeout)  # fmt: skip
    row["whatif_s"] = round(time.monotonic() - t, 1)
    (folder / "whatif.log").write_text(wi.stderr[-20000:], encoding="utf-8")
    report = folder / "whatif.json"
    if not report.exists():
        row["error"] = wi.stderr[-400:]
        return row
    rep = json.loads(report.read_text())
    rows = [
        r for r in rep.get("what_if") or [] if (r.get("params") or {}).get("group") == "statement"
    ]
    first = rows[0] if rows else {}
    row.update(change=first.get("change"), row_gain=first.get("speedup"),
               skipped=first.get("skipped"), noise_pct=first.get("noise_pct"))  # fmt: skip
    if (folder / "fix.diff").exists() and first.get("speedup"):
        v = _gs(["--verify", "fix.diff", "--report", "whatif.json", "train.py"], folder, timeout)
        (folder / "verify.txt").write_text(v.stdout + v.stderr[-4000:], encoding="utf-8")
        got = re.search(r"measured: ([0-9.]+)x", v.stdout)
        row["verify_gain"] = float(got[1]) if got else None
    before = _truth_ms(folder / "train.py", False, timeout)
    after = _truth_ms(folder / "train.py", True, timeout)
    row.update(truth_before_ms=before, truth_after_ms=after)
    if before and after:
        row["truth_gain"] = round(before / after, 2)
    gain, verify = row.get("row_gain"), row.get("verify_gain")
    if isinstance(gain, float) and isinstance(verify, float):
        row["row_vs_verify_pct"] = round(100.0 * (gain / verify - 1.0), 1)
    return row


def _table(rows: list[dict[str, object]]) -> str:
    head = ("scenario", "row", "gain", "verify", "row vs verify %", "truth (removed)", "why not")
    lines = [" | ".join(head)]
    for r in rows:
        lines.append(
            " | ".join(
                str(x)
                for x in (
                    r["scenario"],
                    str(r.get("change") or "-")[:60],
                    r.get("row_gain") or "-",
                    r.get("verify_gain") or "-",
                    r.get("row_vs_verify_pct", "-"),
                    r.get("truth_gain") or "-",
                    str(r.get("skipped") or r.get("error") or "")[:90],
                )
            )
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="*", default=list(SCRIPTS))
    p.add_argument("--budget", type=float, default=150.0)
    p.add_argument("--timeout", type=float, default=400.0)
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [check(name, out, args.budget, args.timeout) for name in args.only]
    (out / "statement-check.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
