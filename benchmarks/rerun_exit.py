"""How long one re-run of ``gpusight run --what-if`` takes, whole process, ended the old way
(``sys.exit``: the interpreter's teardown) and through ``rerun/quick_exit.py``, in turn.

    .venv/bin/python benchmarks/rerun_exit.py [--rounds 6]

Each re-run is the driver's own launch line with its arguments (``--quiet --json --facts
--steps 20 --warmup 3 --profile-steps 0``) on two CPU scripts: a 12-layer MLP at batch 8 (no
DataLoader) and the same kind of step fed by a DataLoader with 2 workers. Prints the median wall
per script and way, and writes benchmarks/results/rerun-exit.md.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpusight.rerun.driver import LAUNCH as NEW
from harness.cli import Parser
from harness.record import write_markdown

OLD = (
    "import os, sys; sys.path[0] = os.devnull; from gpusight.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)

MLP = """
import torch
from torch import nn
model = nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.GELU()) for _ in range(12)])
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(8, 64)
for _ in range(100000):
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

LOADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
for _ in range(100):
    for x, y in DataLoader(data, batch_size=32, num_workers=2):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def wall(launch: str, script: Path, out: Path) -> float:
    cmd = [sys.executable, "-c", launch, "run", "--quiet", "--json", str(out / "r.json"),
           "--facts", str(out / "f.json"), "--steps", "20", "--warmup", "3",
           "--profile-steps", "0", str(script)]  # fmt: skip
    t0 = time.monotonic()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   cwd=out)  # fmt: skip
    return time.monotonic() - t0


def main() -> int:
    ap = Parser(__doc__)
    ap.rounds(6, help="runs of each script each way, taking turns")
    args = ap.parse_args()
    lines = ["| script | sys.exit (s) | quick_exit (s) | saved |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name, code in (("mlp", MLP), ("loader, 2 workers", LOADER)):
            script = out / f"{name.split(',')[0]}.py"
            script.write_text(code)
            got: dict[str, list[float]] = {"old": [], "new": []}
            for k in range(args.rounds):
                ways = [("old", OLD), ("new", NEW)]
                for way, launch in ways if k % 2 == 0 else ways[::-1]:
                    got[way].append(wall(launch, script, out))
            old, new = (statistics.median(got[w]) for w in ("old", "new"))
            lines.append(f"| {name} | {old:.2f} | {new:.2f} | {old - new:.2f} s |")
            print(name, {w: [round(x, 2) for x in v] for w, v in got.items()}, flush=True)
    write_markdown(
        "rerun-exit.md", "One re-run's wall, ended by sys.exit and by quick_exit",
        f"this project's 2-core CPU machine, medians of {args.rounds} runs each, in turn.", lines,
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
