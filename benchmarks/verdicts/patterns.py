"""Training loops outside the scenario suite under the watch: does the report count the
script's iterations, and is its step time the script's own?

    PYTHONPATH=python_pkg python3 benchmarks/accuracy.py --suite patterns --out DIR \\
        [--only NAME ...] [--device cuda] [--iters 300]

Each pattern is a loop shape met in public training code: several optimizers (a GAN's critic,
an optimizer made every step, one replaced after training the head, a model per fold, a
wrapping optimizer), gradient accumulation, LBFGS's closure, activation checkpointing,
GradScaler and autocast, a teacher and a student, a siamese pair, manual SGD with a clipped
LSTM, a loader with workers, Accelerate, an evaluation pass every few steps, torch.compile,
autoregressive decoding, an encoder and a decoder called in turn. Each runs once under
``gpusight.watch`` (no ``steps``: the whole loop, the profiler window off so that every step
is timed alike) and records its own end of each iteration;
the table compares the report's measured steps with the iterations past the warm-up and its
mean step with the script's mean iteration over the same steps. Writes
``OUT/training-patterns.json`` and ``-table.txt``; prints the table.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.cli import Parser
from harness.record import note
from harness.stats import pct

WARMUP = 3
Marks = list[int]


def _patterns(torch: Any, dev: str) -> dict[str, tuple[Callable[[int, Marks], None], str]]:
    """name -> (loop(iterations, marks), what an iteration is)."""
    nn = torch.nn
    torch.manual_seed(0)
    x = torch.randn(32, 64, device=dev)
    y = torch.randint(0, 8, (32,), device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def mlp() -> Any:
        layers = [m for _ in range(6) for m in (nn.Linear(64, 64), nn.ReLU())]
        return nn.Sequential(*layers, nn.Linear(64, 8)).to(dev)

    def now() -> int:
        if dev != "cpu":
            torch.cuda.synchronize()  # the script's clock sees the GPU's work done
        return time.perf_counter_ns()

    def step(m: Any, opt: Any) -> None:
        opt.zero_grad()
        loss_fn(m(x), y).backward()
        opt.step()

    def plain(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        for _ in range(n):
            step(m, opt)
            marks.append(now())

    def opt_every_step(n: int, marks: Marks) -> None:
        m = mlp()
        for i in range(n):
            step(m, torch.optim.SGD(m.parameters(), lr=0.01 / (1 + i)))
            marks.append(now())

    def replaced_after_head(n: int, marks: Marks) -> None:
        m = mlp()
        head = torch.optim.Adam(m[-1].parameters())
        whole = torch.optim.SGD(m.parameters(), lr=0.01)
        for i in range(n):
            step(m, head if i < 20 else whole)
            marks.append(now())

    def model_per_fold(n: int, marks: Marks) -> None:
        held = []
        for _ in range(3):
            m = mlp()
            opt = torch.optim.Adam(m.parameters())
            held.append(opt)
            for _ in range(n // 3):
                step(m, opt)
                marks.append(now())

    def gan_critic_3(n: int, marks: Marks) -> None:
        g = mlp()
        d = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
        og, od = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
        for _ in range(n):
            for _ in range(3):
                od.zero_grad()
                d(g(x).detach()).mean().backward()
                od.step()
            og.zero_grad()
            (-d(g(x)).mean()).backward()
            og.step()
            marks.append(now())

    def gan_i_mod_3(n: int, marks: Marks) -> None:
        # As in public WGAN code: the critic steps every iteration, the generator every third.
        g = mlp()
        d = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
        og, od = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
        for i in range(n):
            od.zero_grad()
            d(g(x).detach()).mean().backward()
            od.step()
            if i % 3 == 0:
                og.zero_grad()
                (-d(g(x)).mean()).backward()
                og.step()
            marks.append(now())

    def gan_1_1(n: int, marks: Marks) -> None:
        g = mlp()
        d = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 1)).to(dev)
        og, od = torch.optim.Adam(g.parameters()), torch.optim.Adam(d.parameters())
        for _ in range(n):
            od.zero_grad()
            d(g(x).detach()).mean().backward()
            od.step()
            og.zero_grad()
            (-d(g(x)).mean()).backward()
            og.step()
            marks.append(now())

    class Wrapping(torch.optim.Optimizer):  # type: ignore[misc,name-defined]
        """Lookahead-like: its step calls its base optimizer's."""

        def __init__(self, base: Any) -> None:
            self.base = base
            super().__init__(base.param_groups[0]["params"], {})

        @torch.no_grad()  # type: ignore[misc]
        def step(self, closure: Any = None) -> Any:
            return self.base.step(closure)

    def wrapping(n: int, marks: Marks) -> None:
        m = mlp()
        opt = Wrapping(torch.optim.SGD(m.parameters(), lr=0.01))
        for _ in range(n):
            step(m, opt)
            marks.append(now())

    def accumulate_4(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        for _ in range(n):
            for _ in range(4):
                (loss_fn(m(x), y) / 4).backward()
            opt.step()
            opt.zero_grad()
            marks.append(now())

    def lbfgs(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.LBFGS(m.parameters(), max_iter=4)

        def closure() -> Any:
            opt.zero_grad()
            loss = loss_fn(m(x), y)
            loss.backward()
            return loss

        for _ in range(n):
            opt.step(closure)
            marks.append(now())

    def checkpointed(n: int, marks: Marks) -> None:
        from torch.utils.checkpoint import checkpoint

        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        for _ in range(n):
            opt.zero_grad()
            loss_fn(checkpoint(m, x, use_reentrant=False), y).backward()
            opt.step()
            marks.append(now())

    def scaler_autocast(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.SGD(m.parameters(), lr=0.01)
        kind = "cuda" if dev != "cpu" else "cpu"
        scaler = torch.amp.GradScaler(kind)
        dtype = torch.float16 if kind == "cuda" else torch.bfloat16
        for _ in range(n):
            opt.zero_grad()
            with torch.autocast(kind, dtype=dtype):
                loss = loss_fn(m(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            marks.append(now())

    def teacher_student(n: int, marks: Marks) -> None:
        t, s = mlp().eval(), mlp()
        opt = torch.optim.Adam(s.parameters())
        for _ in range(n):
            with torch.no_grad():
                target = t(x)
            opt.zero_grad()
            ((s(x) - target) ** 2).mean().backward()
            opt.step()
            marks.append(now())

    def siamese(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        for _ in range(n):
            opt.zero_grad()
            ((m(x) - m(x * 2)) ** 2).mean().backward()
            opt.step()
            marks.append(now())

    def lstm_manual_sgd(n: int, marks: Marks) -> None:
        emb, rnn, dec = nn.Embedding(100, 32), nn.LSTM(32, 64, 2), nn.Linear(64, 100)
        model = nn.ModuleDict({"emb": emb, "rnn": rnn, "dec": dec}).to(dev)
        data = torch.randint(0, 100, (35, 16), device=dev)
        target = torch.randint(0, 100, (35 * 16,), device=dev)
        hidden = None
        for _ in range(n):
            if hidden is not None:
                hidden = tuple(h.detach() for h in hidden)
            model.zero_grad()
            out, hidden = rnn(emb(data), hidden)
            loss_fn(dec(out).view(-1, 100), target).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            marks.append(now())

    def loader_workers(n: int, marks: Marks) -> None:
        from torch.utils.data import DataLoader, TensorDataset

        ds = TensorDataset(torch.randn(32 * 400, 64), torch.randint(0, 8, (32 * 400,)))
        dl = DataLoader(ds, batch_size=32, num_workers=2, shuffle=True)
        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        done = 0
        while done < n:
            for xb, yb in dl:
                xb, yb = xb.to(dev), yb.to(dev)
                opt.zero_grad()
                loss_fn(m(xb), yb).backward()
                opt.step()
                marks.append(now())
                done += 1
                if done >= n:
                    break

    def accelerate_accum_4(n: int, marks: Marks) -> None:
        # Hugging Face Accelerate's loop: its optimizer wrapper skips the step on the
        # accumulating micro-batches; an iteration is an optimizer step.
        from accelerate import Accelerator
        from torch.utils.data import DataLoader, TensorDataset

        acc = Accelerator(cpu=dev == "cpu", gradient_accumulation_steps=4)
        ds = TensorDataset(torch.randn(32 * 4 * n, 64), torch.randint(0, 8, (32 * 4 * n,)))
        m = mlp()
        opt = torch.optim.AdamW(m.parameters())
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        m, opt, dl, sched = acc.prepare(m, opt, DataLoader(ds, batch_size=32), sched)
        for xb, yb in dl:
            with acc.accumulate(m):
                acc.backward(loss_fn(m(xb), yb))
                opt.step()
                sched.step()
                opt.zero_grad()
            if acc.sync_gradients:
                marks.append(now())

    def eval_every_10(n: int, marks: Marks) -> None:
        m = mlp()
        opt = torch.optim.Adam(m.parameters())
        for i in range(n):
            step(m, opt)
            if i % 10 == 9:
                m.eval()
                with torch.no_grad():
                    for _ in range(5):
                        m(x)
                m.train()
            marks.append(now())

    def compiled(n: int, marks: Marks) -> None:
        m = torch.compile(mlp())
        opt = torch.optim.Adam(m.parameters())
        for _ in range(n):
            step(m, opt)
            marks.append(now())

    def decode(n: int, marks: Marks) -> None:
        layers = [nn.Embedding(100, 64), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 100)]
        m = nn.Sequential(*layers).to(dev).eval()
        with torch.no_grad():
            tok = torch.zeros(1, dtype=torch.long, device=dev)
            for _ in range(n):
                tok = m(tok).argmax(-1)
                marks.append(now())

    def encode_decode(n: int, marks: Marks) -> None:
        enc = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).to(dev).eval()
        dec = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(dev).eval()
        with torch.no_grad():
            for _ in range(n):
                dec(enc(x)).argmax(-1)
                marks.append(now())

    return {
        "plain": (plain, "an Adam step"),
        "opt_every_step": (opt_every_step, "a new SGD each step"),
        "replaced_after_head": (replaced_after_head, "head-only Adam x20, then SGD on all"),
        "model_per_fold": (model_per_fold, "3 folds, a model and Adam each"),
        "gan_critic_3": (gan_critic_3, "3 critic steps + 1 generator step"),
        "gan_i_mod_3": (gan_i_mod_3, "a critic step; a generator step every 3rd"),
        "gan_1_1": (gan_1_1, "1 critic step + 1 generator step"),
        "wrapping": (wrapping, "a wrapper optimizer calling SGD's step"),
        "accumulate_4": (accumulate_4, "4 backward, 1 step"),
        "lbfgs": (lbfgs, "LBFGS.step(closure), 4 inner"),
        "checkpointed": (checkpointed, "checkpoint(model) forward"),
        "scaler_autocast": (scaler_autocast, "GradScaler + autocast"),
        "teacher_student": (teacher_student, "no_grad teacher + student step"),
        "siamese": (siamese, "two forwards, one step"),
        "lstm_manual_sgd": (lstm_manual_sgd, "LSTM, clip, p.data.add_"),
        "loader_workers": (loader_workers, "DataLoader, 2 workers"),
        "accelerate_accum_4": (accelerate_accum_4, "Accelerate, 4 micro-batches a step"),
        "eval_every_10": (eval_every_10, "a step; 5 eval forwards every 10"),
        "compiled": (compiled, "torch.compile(model)"),
        "decode": (decode, "a model call a token"),
        "encode_decode": (encode_decode, "an encoder's call, then a decoder's"),
    }


def run_one(gpusight: Any, loop: Callable[[int, Marks], None], iters: int) -> dict[str, Any]:
    marks: Marks = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = gpusight.watch(warmup=WARMUP, profile_steps=0)
        with w:
            loop(iters, marks)
    rep = w.report
    run = rep.run or {}
    gaps = [(b - a) / 1e6 for a, b in pairwise(marks)]
    # The report's measured steps follow its warm-up: the script's iterations past the same.
    own = gaps[WARMUP:]
    step_ms = run.get("step_time_ms")
    own_ms = statistics.fmean(own) if own else None
    return {
        "iterations": len(marks),
        "expected_steps": max(0, len(marks) - WARMUP),
        "steps": run.get("steps"),
        "kind": w.recorder.kind if w.recorder is not None else None,
        "step_ms": step_ms,
        "own_ms": round(own_ms, 4) if own_ms else None,
        "step_vs_own_pct": (pct(step_ms / own_ms) if step_ms and own_ms else None),
        "overhead_pct": run.get("overhead_pct"),
        "notes": [n for n in rep.notes if "optimizer" in n],
    }


def main(argv: list[str] | None = None) -> int:
    p = Parser(__doc__).out().only()
    p.add_argument("--device", default="cpu")
    p.add_argument("--iters", type=int, default=300)
    args = p.parse_args(argv)
    import gpusight
    import torch

    patterns = _patterns(torch, args.device)
    names = args.only or list(patterns)
    rows: dict[str, Any] = {}
    for name in names:
        loop, what = patterns[name]
        try:
            rows[name] = {"what": what, **run_one(gpusight, loop, args.iters)}
        except Exception as exc:  # one pattern's failure is a row, not the end of the run
            rows[name] = {"what": what, "error": f"{type(exc).__name__}: {exc}"}
    lines = [
        f"training patterns on {args.device} (torch {torch.__version__}), {args.iters} iterations",
        f"{'pattern':20} {'steps':>9} {'kind':>9} {'step ms':>8} {'own ms':>8} {'vs own':>7} "
        f"{'ovh %':>6}  iteration",
    ]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"{name:20} error: {r['error']}")
            continue
        counted = f"{r['steps']}/{r['expected_steps']}"
        vs = r["step_vs_own_pct"]
        lines.append(
            f"{name:20} {counted:>9} {r['kind'] or '-':>9} {r['step_ms'] or 0:8.3f} "
            f"{r['own_ms'] or 0:8.3f} {'-' if vs is None else f'{vs:+.1f}%':>7} "
            f"{r['overhead_pct'] or 0:6.2f}  {r['what']}"
        )
    lines.append(
        "steps: the report's measured steps / the iterations past its warm-up; vs own: the "
        "report's mean step against the script's mean iteration over the same"
    )
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="training-patterns-"))
    note(out)
    meta = {"torch": torch.__version__, "args": vars(args)}
    (out / "training-patterns.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    (out / "training-patterns-table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0
