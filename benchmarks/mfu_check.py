#!/usr/bin/env python3
"""GPU check of the speed of light (#35): gpusight's MFU against a hand computation.

For a GPT-style block stack and a torchvision ResNet-50, each a bf16 training step:

1. the FLOPs by formula: the GPT blocks' ``3 x tokens x layers x (24 d^2 + 4 s d)`` (matrix
   products and attention, forward and the two backward products each); the ResNet's every
   convolution and the classifier, ``2 x MACs`` from their output shapes, forward, backward
   twice, less the first convolution's input gradient (the images need none);
2. the step time by CUDA events over ``--steps`` back-to-back steps, before and after the
   watched run (the mean of the two);
3. the same steps under a ``gpusight`` watch: ``run.speed_of_light`` (FLOPs counted by
   FlopCounterMode, the time, MFU against the measured and the datasheet ceiling);
4. errors: gpusight's FLOPs, time and MFU against the hand figures (the same ceiling for both).

    PYTHONPATH=python_pkg python3 benchmarks/mfu_check.py --out "$OUT"

Writes OUT/mfu-check.json and OUT/mfu-check-table.txt (printed last). Needs CUDA.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from harness.cli import Parser
from harness.record import Results
from harness.stats import pct
from torch import nn

TARGET_PCT = 10.0


class Block(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def gpt_case(dev: torch.device) -> tuple[Callable[[], None], float, str]:
    d, heads, layers, batch, seq = 1024, 16, 8, 8, 1024
    torch.manual_seed(0)
    model = nn.Sequential(*[Block(d, heads) for _ in range(layers)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(batch, seq, d, device=dev)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    tokens = batch * seq
    flops = 3.0 * tokens * layers * (24 * d * d + 4 * seq * d)
    return step, flops, f"GPT blocks d={d} x{layers}, batch {batch} x seq {seq}, bf16"


def conv_flops(model: nn.Module, x: torch.Tensor) -> tuple[float, float]:
    """Forward FLOPs of every conv and linear layer (2 x MACs), and the first conv's."""
    rows: list[float] = []

    def hook(m: nn.Module, args: Any, out: torch.Tensor) -> None:
        if isinstance(m, nn.Conv2d):
            k = m.kernel_size[0] * m.kernel_size[1]
            rows.append(2.0 * out.numel() * (m.in_channels // m.groups) * k)
        elif isinstance(m, nn.Linear):
            rows.append(2.0 * out.numel() * m.in_features)

    hs = [m.register_forward_hook(hook) for m in model.modules()
          if isinstance(m, (nn.Conv2d, nn.Linear))]  # fmt: skip
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return sum(rows), rows[0]


def resnet_case(dev: torch.device) -> tuple[Callable[[], None], float, str]:
    import torchvision

    batch = 128
    torch.manual_seed(0)
    model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=dev)
    fwd, first = conv_flops(model, x)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step, 3.0 * fwd - first, f"torchvision ResNet-50, batch {batch}, bf16, channels_last"


def event_ms(step: Callable[[], None], steps: int) -> float:
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(steps):
        step()
    b.record()
    b.synchronize()
    return float(a.elapsed_time(b)) / steps


def watched(step: Callable[[], None], steps: int) -> dict[str, Any]:
    from gpusight.watch.session import Watch

    w = Watch(steps=steps, warmup=5, profile_steps=3, stop_after_steps=False)
    with w:
        for _ in range(steps * 3 + 20):
            step()
    torch.cuda.synchronize()
    report = w.report.to_dict()  # type: ignore[union-attr]
    return {"speed_of_light": report["run"].get("speed_of_light"),
            "step_time_ms": report["run"]["step_time_ms"],
            "verdict": report["verdict"]}  # fmt: skip


def err(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else pct(a / b)


def one(name: str, make: Callable[[torch.device], Any], steps: int) -> dict[str, Any]:
    dev = torch.device("cuda")
    step, hand_flops, label = make(dev)
    before = event_ms(step, steps)
    w = watched(step, steps)
    after = event_ms(step, steps)
    t = (before + after) / 2
    sol = w["speed_of_light"] or {}
    ceilings = {(c["source"], c["precision"]): c.get("tflops") for c in sol.get("ceilings", [])}
    out: dict[str, Any] = {"label": label, "hand_flops": hand_flops, "event_ms": [before, after],
                           "watched": w}  # fmt: skip
    for source, key in (("measured", "mfu_pct"), ("datasheet", "mfu_datasheet_pct")):
        c = ceilings.get((source, "bf16"))
        hand = 100.0 * hand_flops / (t / 1e3) / (c * 1e12) if c else None
        out[f"hand_{key}"] = round(hand, 2) if hand else None
        out[f"error_{key}"] = err(sol.get(key), hand)
    out["error_flops_pct"] = err(sol.get("flops_per_step"), hand_flops)
    out["error_time_pct"] = err(sol.get("step_time_ms"), t)
    del step
    torch.cuda.empty_cache()
    return out


def table(results: dict[str, Any]) -> str:
    lines = [f"{'case':8} {'FLOPs err':>9} {'time err':>9} {'MFU meas':>9} {'hand':>7} "
             f"{'err':>7} {'MFU data':>9} {'hand':>7} {'err':>7}"]  # fmt: skip
    for name, r in results.items():
        sol = r["watched"]["speed_of_light"] or {}

        def f(x: Any, suffix: str = "") -> str:
            return "n/a" if x is None else f"{x:.1f}{suffix}"

        ok = all(
            r.get(k) is not None and abs(r[k]) <= TARGET_PCT
            for k in ("error_mfu_pct", "error_mfu_datasheet_pct")
        )
        lines.append(
            f"{name:8} {f(r['error_flops_pct'], '%'):>9} {f(r['error_time_pct'], '%'):>9} "
            f"{f(sol.get('mfu_pct'), '%'):>9} {f(r['hand_mfu_pct'], '%'):>7} "
            f"{f(r['error_mfu_pct'], '%'):>7} {f(sol.get('mfu_datasheet_pct'), '%'):>9} "
            f"{f(r['hand_mfu_datasheet_pct'], '%'):>7} {f(r['error_mfu_datasheet_pct'], '%'):>7} "
            f"{'ok' if ok else 'MISS'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args(argv)
    saved = Results(args.out, "mfu-check.json", "mfu-check-table.txt", default=str)
    for name, make in (("gpt", gpt_case), ("resnet50", resnet_case)):
        print(f"=== {name}", flush=True)
        got = saved.add(name, one(name, make, args.steps))
        print(json.dumps(got, indent=1, default=str)[:3000], flush=True)
    saved.finish(table(saved.items))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
