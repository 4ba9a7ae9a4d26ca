"""Does the report name the line that wastes the host's time (issue #49), on a GPU?

Four scripts, each with one kind of waste the issue lists: ``gc.collect()`` and
``torch.cuda.empty_cache()`` every step of a ResNet-50 at batch 64, numpy inside ``forward``, a
histogram logger of every parameter every step, a pure-Python tokenizer in the loop. Each is
watched with ``gpusight run --steps 10``; the table gives the costliest line of the user's own
work in ``run.host_lines``, its share, whether it is the planted line, the host finding's title
and the verdict. With ``--truth`` each script also runs bare with and without its waste (the
planted line's ``--fix``), and the table gives the truth's gain beside the report's estimate.

    PYTHONPATH=python_pkg python3 benchmarks/host_lines_check.py --out OUT [--truth]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from gpusight.rules.host_line_fix import HostLine, is_framework

HEAD = """\
import gc, sys, time
import numpy as np
import torch
from torch import nn

dev = "cuda" if torch.cuda.is_available() else "cpu"
FIX = "--fix" in sys.argv
torch.manual_seed(0)


def sync():
    if dev == "cuda":
        torch.cuda.synchronize()
"""

SCRIPTS = {
    "gc_every_step": (
        HEAD
        + """\
import torchvision
model = torchvision.models.resnet50().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 3, 224, 224, device=dev)
y = torch.randint(0, 1000, (64,), device=dev)
t0 = None
for step in range(60):
    if step == 10:
        sync(); t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if not FIX:
        gc.collect(); torch.cuda.empty_cache()  # PLANTED
sync()
print(f"TRUTH_MS {(time.perf_counter() - t0) * 1000 / 50:.3f}")
""",
        "gc.collect(); torch.cuda.empty_cache()",
    ),
    "numpy_in_forward": (
        HEAD
        + """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(512, 8192)
        self.out = nn.Linear(8192, 10)

    def forward(self, x):
        h = self.fc(x)
        if not FIX:
            top = np.argpartition(h.detach().cpu().numpy(), -16, axis=1)[:, -16:]  # PLANTED
            h = h + torch.from_numpy(top[:, :1] % 2).to(h.device).float()
        return self.out(h)

model = Net().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256, 512, device=dev)
y = torch.randint(0, 10, (256,), device=dev)
t0 = None
for step in range(120):
    if step == 20:
        sync(); t0 = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
sync()
print(f"TRUTH_MS {(time.perf_counter() - t0) * 1000 / 100:.3f}")
""",
        "np.argpartition",
    ),
    "histogram_logging": (
        HEAD
        + """\
def add_histogram(f, name, values, step):
    counts, edges = np.histogram(values, bins=200)  # PLANTED
    f.write(f"{step} {name} {counts.tolist()}\\n")

log = open("hist.log", "w")
model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)]).to(dev)
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(128, 1024, device=dev)
t0 = None
for step in range(120):
    if step == 20:
        sync(); t0 = time.perf_counter()
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if not FIX:
        for name, p in model.named_parameters():
            add_histogram(log, name, p.detach().cpu().numpy(), step)
sync()
print(f"TRUTH_MS {(time.perf_counter() - t0) * 1000 / 100:.3f}")
""",
        "np.histogram",
    ),
    "tokenizer_in_loop": (
        HEAD
        + """\
VOCAB = {f"w{i}": i for i in range(30000)}

def tokenize(texts):
    ids = [[VOCAB.get(w, 0) for w in t.split()][:128] for t in texts]  # PLANTED
    return torch.tensor([x + [0] * (128 - len(x)) for x in ids])

texts = [" ".join(f"w{(i * 7 + j) % 40000}" for j in range(2000)) for i in range(64)]
model = nn.Sequential(nn.Embedding(30000, 256), nn.Flatten(), nn.Linear(128 * 256, 2)).to(dev)
opt = torch.optim.AdamW(model.parameters())
cached = tokenize(texts).to(dev) if FIX else None
t0 = None
for step in range(60):
    if step == 10:
        sync(); t0 = time.perf_counter()
    batch = cached if FIX else tokenize(texts).to(dev)
    loss = nn.functional.cross_entropy(model(batch), torch.zeros(64, dtype=torch.long, device=dev))
    opt.zero_grad()
    loss.backward()
    opt.step()
sync()
print(f"TRUTH_MS {(time.perf_counter() - t0) * 1000 / 50:.3f}")
""",
        "VOCAB.get",
    ),
}


def _truth_ms(script: Path, fix: bool, timeout: float) -> float | None:
    args = [sys.executable, str(script), *(["--fix"] if fix else [])]
    done = subprocess.run(args, cwd=script.parent, capture_output=True, text=True, timeout=timeout)
    line = next((x for x in done.stdout.splitlines() if x.startswith("TRUTH_MS")), None)
    return float(line.split()[1]) if line else None


def check(name: str, out: Path, truth: bool, timeout: float) -> dict[str, object]:
    source, planted = SCRIPTS[name]
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "train.py"
    script.write_text(source, encoding="utf-8")
    report = folder / "report.json"
    cmd = [sys.executable, "-m", "gpusight", "run", "--quiet", "--steps", "10",
           "--json", str(report), str(script)]  # fmt: skip
    t = time.monotonic()
    run = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=timeout)
    row: dict[str, object] = {"scenario": name, "rc": run.returncode,
                              "wall_s": round(time.monotonic() - t, 1)}  # fmt: skip
    if not report.exists():
        row["error"] = run.stderr[-400:]
        return row
    rep = json.loads(report.read_text())
    lines = (rep.get("run") or {}).get("host_lines") or {}
    # The user's own work, as the rules read it: the step's framework calls left out.
    own = [
        r
        for r in lines.get("lines", [])
        if not is_framework(
            HostLine(r["file"], r["line"], r.get("code"), r["function"], r["ms_per_step"],
                     r["share_pct"], in_forward=bool(r.get("in_forward"))),
            None,
        )
    ]  # fmt: skip
    top = own[0] if own else {}
    host = next((f for f in rep["findings"] if f["id"] == "load.cpu_preprocessing"), None)
    row.update(
        top_line=f"{top.get('line')}: {top.get('code', '')[:50]}",
        share_pct=top.get("share_pct"),
        planted=planted in str(top.get("code", "")),
        verdict=rep["verdict"]["bottleneck"],
        finding=(host or {}).get("title"),
        fix=((host or {}).get("fix") or {}).get("text", "")[:90],
        estimate=((host or {}).get("impact") or {}).get("speedup"),
        step_ms=(rep.get("run") or {}).get("step_time_ms"),
    )
    if truth:
        before, after = _truth_ms(script, False, timeout), _truth_ms(script, True, timeout)
        row.update(truth_before_ms=before, truth_after_ms=after)
        if before and after:
            row["truth_gain"] = round(before / after, 2)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--truth", action="store_true")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [check(n, args.out, args.truth, args.timeout) for n in args.only or SCRIPTS]
    (args.out / "host-lines.json").write_text(json.dumps(rows, indent=1))
    with (args.out / "COMMAND.txt").open("a") as f:
        f.write(" ".join(sys.argv) + "\n")
    for r in rows:
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
