"""GPU check of gpusight.diagnose (measured what-ifs), in one call of at most ~4 minutes.

1. ResNet-18 (torchvision), batch 64 of 3x224x224 synthetic images decoded and normalised on the
   host per item, as a first notebook would load them (num_workers=0): ``diagnose(budget_s=60)``.
   Recorded: wall time (target <= 60 s plus diagnose's margin, max(2 s, 10 %)), every what-if
   (with its scope: end to end, or compute only on cached batches) and finding, device memory
   before/after (target: back within 1 MiB) and the user's model/optimizer/RNG/flags (target:
   bit-identical).
2. Planted-bottleneck scenarios, each with a known fix: ``diagnose`` on the slow version, then the
   fix applied in a plain training loop written here (not gpusight's runner), timed interleaved
   with the slow version. Compared: the what-if measured for the fix's own setting (and the top
   what-if) against the fix's measured speedup, both throughputs (time of many steps over their
   count, not the median gap between steps: a loader with workers delivers in bursts). Where the
   --fix changes several DataLoader settings (slow_loader), the what-if compared is the
   "DataLoader winners together" row when diagnose measured one; where it makes several
   changes that are separate what-ifs (fp32_transformer: bf16 autocast and TF32), the "all
   winners together" row, when its winners are exactly those. Target: within 15 %.
   The fix's speedup is measured twice: the scenario's objects in a synchronised loop here
   (median of 5 interleaved pairs), and the scenario script run as it is, bare and with --fix,
   from its own SCENARIO_RESULT lines (``mean_step_ms``, per sample; ``median_step_ms`` for a
   script that prints no mean). slow_loader is compared with the script's runs (a loader with
   workers reaches its throughput in a long steady run; its step is host-bound, so the
   script's unsynchronised clock is right), the others with the loop; the table shows both.
   Scenarios come from ``benchmarks/scenarios/`` when a module there offers
   ``whatif_scenario() -> dict`` (see ``Scenario`` below for the keys); otherwise the three
   built in here: a CPU-bound loader, a float32 conv net (autocast), a tiny batch.
   The public scenarios compared (``external_scenarios``): slow_loader, conv_nchw_amp,
   tiny_batch and fp32_transformer, the ones whose --fix is a change diagnose measures. The
   others' fixes are code changes no what-if makes (move the model to the GPU, drop a per-step
   ``.item()``, DDP for DataParallel, pin a raw host tensor, run the augmentation on the GPU);
   unbatched_inference is ``diagnose_inference``'s (``gpu_multi.py``).

Writes OUT/whatif.json (everything), OUT/whatif-resnet18.json and OUT/whatif-<scenario>.json
(the reports), OUT/whatif-table.txt (the table, also printed last). Needs torch + torchvision;
validates the reports when jsonschema is installed.

    PYTHONPATH=python_pkg python3 benchmarks/gpu_whatif.py --out "$OUT"   # --suite diagnose
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from gpusight.bench.flags import snapshot as precision_snapshot
from gpusight.whatif import diagnose
from harness.cli import Parser
from harness.log import Log
from harness.paths import SCENARIOS
from harness.proc import run
from harness.record import note
from harness.scripts import scenario_result
from harness.stats import paired_ratios
from torch import nn
from torch.utils.data import DataLoader, Dataset

LOGGER = Log()
log = LOGGER
section = LOGGER.section
LOG = LOGGER.lines
FAILURES = LOGGER.failures
TARGET_ERROR_PCT = 15.0


def progress_printer(t0: float) -> Callable[[str, float], None]:
    last = {"stage": ""}

    def progress(stage: str, fraction: float) -> None:
        if stage != last["stage"]:
            last["stage"] = stage
            log(f"  {time.perf_counter() - t0:6.1f} s  {fraction:4.0%}  {stage}")

    return progress


# --- the user's world, hashed independently of gpusight ------------------------------------------


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()


def world_digest(model: nn.Module, opt: torch.optim.Optimizer | None) -> dict[str, str]:
    h_model = hashlib.sha256()
    for name, p in model.named_parameters():
        h_model.update(name.encode() + _bytes(p) + (_bytes(p.grad) if p.grad is not None else b"-"))
    for name, b in model.named_buffers():
        h_model.update(name.encode() + _bytes(b))
    for name, m in model.named_modules():
        h_model.update(f"{name}{m.training}".encode())
    h_opt = hashlib.sha256()
    if opt is not None:
        sd = opt.state_dict()
        h_opt.update(repr(sd["param_groups"]).encode())
        for i in sorted(sd["state"]):
            for k, v in sorted(sd["state"][i].items()):
                h_opt.update(k.encode() + (_bytes(v) if torch.is_tensor(v) else repr(v).encode()))
    h_rng = hashlib.sha256(repr(random.getstate()).encode() + _bytes(torch.get_rng_state()))
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        for s in torch.cuda.get_rng_state_all():
            h_rng.update(_bytes(s))
    cudnn = torch.backends.cudnn
    flags = repr(
        (
            precision_snapshot(),  # gpusight.bench's reader, written apart from whatif.restore
            cudnn.benchmark,
            cudnn.deterministic,
            torch.are_deterministic_algorithms_enabled(),
            torch.is_grad_enabled(),
            torch.get_default_dtype(),
        )
    )
    return {
        "model": h_model.hexdigest(),
        "optimizer": h_opt.hexdigest(),
        "rng": h_rng.hexdigest(),
        "flags": flags,
    }


def save_report(report: Any, path: Path) -> bool | None:
    """Write the report; validate it when jsonschema is there (None: not validated)."""
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    if importlib.util.find_spec("jsonschema") is None:
        return None
    report.validate()
    return True


def what_if_rows(report: Any) -> list[dict[str, Any]]:
    return [
        {
            "change": w.change,
            "finding_id": w.finding_id,
            "before_ms": w.before_ms,
            "after_ms": w.after_ms,
            "speedup": w.speedup,
            "noise_pct": w.noise_pct,
            "skipped": w.skipped,
            "scope": w.scope,
            "params": w.params,
        }
        for w in report.what_if
    ]


def budget_margin(budget: float) -> float:
    """What diagnose may take past budget_s: one step in flight, releasing copies, restoring."""
    return max(2.0, 0.1 * budget)


def scope_tag(w: Any) -> str:
    return {"end_to_end": "[e2e] ", "compute_only": "[compute only] "}.get(w.scope or "", "")


def log_report(report: Any) -> None:
    for w in report.what_if:
        if w.skipped:
            log(f"  - {w.change[:70]:70s} skipped: {w.skipped}")
        else:
            won = "WIN " if (w.params or {}).get("won") else "    "
            change = scope_tag(w) + w.change
            log(
                f"  {won}{change[:68]:68s} {w.before_ms:8.2f} -> {w.after_ms:8.2f} ms "
                f"{w.speedup:5.2f}x (noise {w.noise_pct if w.noise_pct is not None else '-'}%)"
            )
    for f in report.findings:
        log(f"  finding {f.id}: {f.impact.speedup}x  {f.title}")
    log(f"  verdict: {report.verdict.bottleneck}: {report.verdict.summary}")
    for n in report.notes:
        log(f"  note: {n}")


# --- workloads ----------------------------------------------------------------------------------


class DecodedImages(Dataset[tuple[torch.Tensor, int]]):
    """uint8 images held in memory, converted and normalised per item (like ToTensor+Normalize)."""

    MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __init__(self, n: int, size: int, classes: int = 1000, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, classes, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x = self.images[i].float().div_(255)
        return (x - self.MEAN) / self.STD, int(self.labels[i])


class BusyImages(Dataset[tuple[torch.Tensor, int]]):
    """Each item holds a host core for ``busy_ms`` (like JPEG decoding and augmentation)."""

    def __init__(self, n: int, size: int, busy_ms: float) -> None:
        self.n, self.size, self.busy_s = n, size, busy_ms / 1000

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        end = time.perf_counter() + self.busy_s
        while time.perf_counter() < end:
            pass
        g = torch.Generator().manual_seed(i)
        return torch.rand(3, self.size, self.size, generator=g), i % 10


def small_cnn(classes: int = 10) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(64 * 16, classes),
    )


def vgg_like(classes: int = 10) -> nn.Module:
    layers: list[nn.Module] = []
    c = 3
    for width in (64, 64, 128, 128, 256, 256):
        layers += [nn.Conv2d(c, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        if width == c:
            layers.append(nn.MaxPool2d(2))
        c = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def mlp(width: int = 1024, depth: int = 4, classes: int = 10) -> nn.Module:
    layers: list[nn.Module] = []
    d = 256
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, classes))
    return nn.Sequential(*layers)


def warm_state(model: nn.Module, opt: torch.optim.Optimizer, batch: Any, dev: torch.device) -> None:
    """One real step, so that the optimizer holds state and gradients exist: the user's world."""
    x, y = batch
    nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()  # type: ignore[no-untyped-call]
    opt.step()


@dataclass
class Workload:
    model: nn.Module
    loader: Any
    optimizer: torch.optim.Optimizer
    batch_size: int
    autocast: str | None = None  # the fixed loop's autocast dtype
    loss_fn: nn.Module = field(default_factory=nn.CrossEntropyLoss)


@dataclass
class Scenario:
    """A planted bottleneck and its fix.

    ``objects(dev)`` gives diagnose's arguments for the slow version; ``fix_speedup(dev)``
    measures the fix apart from gpusight; ``finding`` names the what-if that predicts the fix and
    ``param`` the what-if parameter holding the speedup at the fix's own setting (for sweeps).
    """

    name: str
    fix: str
    finding: str
    objects: Callable[[torch.device], dict[str, Any]]
    fix_speedup: Callable[[torch.device], dict[str, Any]]
    param: str | None = None
    steps: int = 20
    budget_s: float = 25.0
    # The what-if that applies the fix's own change (its experiment's row, by finding id), at
    # the fix's setting (``param``): the comparison is apples to apples.
    compared: str = ""
    # The --fix changes several DataLoader settings, with this many workers: compare with the
    # "DataLoader winners together" row (its params name ``loader_settings``) when there is one.
    together_workers: int | None = None
    # The --fix speedup from the script's own runs (its SCENARIO_RESULT ``mean_step_ms``), not
    # from this script's loop: for a loader with workers, whose throughput is that of a long
    # steady run (the loop re-iterates the loader for every block of a few worker rounds), in a
    # host-bound step (the script's host clock, never synchronised, is then its throughput).
    fix_from_script: bool = False
    # The --fix makes several changes diagnose measures one by one (experiment keys): compare
    # with the "all winners together" row, matched when its winners are exactly these.
    together_keys: tuple[str, ...] = ()


# --- scenarios of benchmarks/scenarios (the watch engineer's planted bottlenecks) ---------------

SCENARIO_DIR = SCENARIOS


class _Captured(Exception):
    """Raised at the scenario's ``with Steps(...)``: carries its local variables."""


def capture_locals(path: Path, dev: torch.device, extra: list[str]) -> dict[str, Any]:
    """Run a scenario script's main() up to its training loop and take its objects.

    The scenarios build everything, then enter ``with Steps(...)`` (``_common.py``): that is
    where the model, optimizer and data are ready and nothing has trained yet. Global flags the
    scenario sets (cudnn.benchmark, matmul precision) stay set: they are part of its setup;
    ``run_scenario`` puts them back when the scenario is done.
    """
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    common = importlib.import_module("_common")
    spec = importlib.util.spec_from_file_location(f"scenario_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    original = common.Steps.__enter__

    def enter(self: Any) -> Any:
        raise _Captured(dict(sys._getframe(1).f_locals))

    argv = sys.argv
    sys.argv = [str(path), "--device", dev.type, *extra]
    common.Steps.__enter__ = enter
    try:
        mod.main()
    except _Captured as got:
        found: dict[str, Any] = got.args[0]
        return found
    finally:
        common.Steps.__enter__ = original
        sys.argv = argv
    raise RuntimeError(f"{path.name} never reached its training loop")


def objects_loop_ms(obj: dict[str, Any], dev: torch.device) -> float:
    """ms per *sample* of the scenario's step on its own objects, timed apart from gpusight:
    synchronised at both ends, a mean over whole rounds of the loader's workers. A scenario that
    sets torch's float32 matmul precision itself names it (``_matmul_precision``): the loop runs
    with it, since the last scenario built (the slow or the fixed one) left its own set."""
    precision = obj.get("_matmul_precision")
    if precision is None:
        return _objects_loop_ms(obj, dev)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        return _objects_loop_ms(obj, dev)
    finally:
        torch.set_float32_matmul_precision(before)


def _objects_loop_ms(obj: dict[str, Any], dev: torch.device) -> float:
    model, opt, loader = obj["model"], obj["optimizer"], obj["loader"]
    step_fn = obj.get("step_fn")
    loss_fn: Any = obj.get("loss_fn")
    workers = int(getattr(loader, "num_workers", 0) or 0)
    it = iter(loader)

    def next_batch() -> Any:
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(loader)
            return next(it)

    samples = 0

    def step() -> None:
        nonlocal samples
        x, y = next_batch()
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        samples += int(x.shape[0])
        if step_fn is not None:
            step_fn(model, (x, y), opt)
            return
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(max(3, workers + 1)):
        step()
    steps = max(40, 4 * workers)
    sync(dev)
    samples = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    elapsed = time.perf_counter() - t0
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown and not getattr(loader, "persistent_workers", False):
        shutdown()  # persistent workers stay for the next epoch, as in the scenario
    return 1000 * elapsed / samples


# Run each captured scenario script as it is, bare and with --fix (``--no-script-runs``: not).
SCRIPT_RUNS = {"on": True}


def script_result(path: Path, dev: torch.device, args: list[str]) -> dict[str, Any]:
    """The ``SCENARIO_RESULT`` of a scenario script run as it is: its own loop, its own timing."""
    cmd = [sys.executable, str(path), "--device", dev.type, *args]
    proc = run(cmd, 300)
    result = scenario_result(proc.stdout)
    if proc.rc != 0 or result is None:
        raise RuntimeError(
            f"{path.name} {' '.join(args)} exited {proc.rc} without a SCENARIO_RESULT: "
            f"{proc.stderr.strip()[-400:]}"
        )
    return result


def ms_per_sample(result: dict[str, Any]) -> tuple[float, str]:
    """(ms per sample, the number it comes from): the throughput (``mean_step_ms``), or the
    median gap between steps from a script that prints no mean."""
    basis = "mean_step_ms" if result.get("mean_step_ms") else "median_step_ms"
    ms = result.get(basis)
    if not ms:
        raise ValueError(f"no step time in {result}")
    samples = result.get("samples_per_step") or (
        result["samples_per_s"] * result["median_step_ms"] / 1000
    )
    return float(ms) / float(samples), basis


def script_speedup(path: Path, dev: torch.device, extra: list[str]) -> dict[str, Any]:
    """The scenario script's own speedup from --fix: one bare run, one with --fix, per sample."""
    try:
        bare = script_result(path, dev, extra)
        fixed = script_result(path, dev, [*extra, "--fix"])
        bare_ms, bare_basis = ms_per_sample(bare)
        fixed_ms, fixed_basis = ms_per_sample(fixed)
    except (RuntimeError, ValueError, KeyError) as exc:
        return {"speedup": None, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "speedup": bare_ms / fixed_ms,
        "basis": bare_basis if bare_basis == fixed_basis else f"{bare_basis}/{fixed_basis}",
        "bare_ms_per_sample": bare_ms,
        "fixed_ms_per_sample": fixed_ms,
        "bare": bare,
        "fixed": fixed,
        "how": f"{path.name} run as it is, bare and with --fix, once each (its SCENARIO_RESULT)",
    }


def captured_fix_speedup(
    path: Path, to_objects: Callable[[dict[str, Any]], dict[str, Any]], extra: list[str]
) -> Callable[[torch.device], dict[str, Any]]:
    """The scenario built as it is and with ``--fix``, each step timed in a plain loop (a
    throughput: many steps over their count), and the script's own runs as a cross-check."""

    def measure(dev: torch.device) -> dict[str, Any]:
        slow = to_objects(capture_locals(path, dev, extra))
        fixed = to_objects(capture_locals(path, dev, [*extra, "--fix"]))
        slow_ms, fixed_ms = [], []
        for _ in range(5):  # interleaved, so that drift hits both
            slow_ms.append(objects_loop_ms(slow, dev))
            fixed_ms.append(objects_loop_ms(fixed, dev))
        ratios = paired_ratios(slow_ms, fixed_ms)
        loader = fixed["loader"]
        shutdown = getattr(getattr(loader, "_iterator", None), "_shutdown_workers", None)
        if shutdown:  # persistent workers of the fixed loader
            shutdown()
        out = {
            "speedup": statistics.median(ratios),
            "slow_ms_per_sample": statistics.median(slow_ms),
            "fixed_ms_per_sample": statistics.median(fixed_ms),
            "ratios": ratios,
            "how": f"{path.name} built with and without --fix, its step timed here (median of 5)",
        }
        if SCRIPT_RUNS["on"]:
            out["script"] = script_speedup(path, dev, extra)
        return out

    return measure


def _train_step(
    loss_of: Callable[[nn.Module, Any], torch.Tensor], amp: bool
) -> Callable[..., None]:
    def step(m: nn.Module, batch: Any, o: torch.optim.Optimizer | None) -> None:
        dev_type = next(m.parameters()).device.type
        with torch.autocast(dev_type, dtype=torch.bfloat16, enabled=amp and dev_type == "cuda"):
            loss = loss_of(m, batch)
        assert o is not None
        o.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        o.step()

    return step


def external_scenarios() -> list[Scenario]:
    """The scenarios of benchmarks/scenarios/ this script knows how to feed to diagnose."""
    if not SCENARIO_DIR.is_dir():
        return []
    workers = min(16, os.cpu_count() or 2)
    out: list[Scenario] = []

    def add(
        name: str,
        fix: str,
        finding: str,
        objects: Callable[[dict[str, Any]], dict[str, Any]],
        extra: list[str],
        param: str | None = None,
        budget_s: float = 20.0,
        compared: str = "",
        together_workers: int | None = None,
        fix_from_script: bool = False,
        together_keys: tuple[str, ...] = (),
    ) -> None:
        path = SCENARIO_DIR / f"{name}.py"
        if path.exists():
            out.append(
                Scenario(
                    name,
                    fix,
                    finding,
                    lambda dev: objects(capture_locals(path, dev, extra)),
                    captured_fix_speedup(path, objects, extra),
                    param=param,
                    budget_s=budget_s,
                    compared=compared,
                    together_workers=together_workers,
                    fix_from_script=fix_from_script,
                    together_keys=together_keys,
                )
            )

    add(
        "slow_loader",
        f"num_workers={workers}, pin_memory, persistent, prefetch 4",
        "load.input_bound",
        lambda v: {
            "model": v["model"],
            "loader": v["loader"],
            "loss_fn": v["loss_fn"],
            "optimizer": v["opt"],
        },
        ["--iters", "400"],  # a dataset long enough for the sweep's epochs
        param=f"speedup_{workers}_workers",
        # the sweep, pin_memory on its winner, persistent workers, prefetch, and all of the
        # DataLoader's winners together
        budget_s=45.0,
        compared=f"num_workers sweep at {workers} workers",
        together_workers=workers,
        fix_from_script=True,
    )
    add(
        "conv_nchw_amp",
        "channels_last",
        "load.channels_last",
        lambda v: {
            "model": v["model"],
            "loader": [(v["x"], v["y"])],
            "optimizer": v["opt"],
            "step_fn": _train_step(
                lambda m, b: nn.functional.cross_entropy(m(b[0]), b[1]), amp=True
            ),
        },
        [],
        compared="channels_last",
    )
    add(
        "tiny_batch",
        "batch 8 -> 1024",
        "load.small_batch",
        lambda v: {
            "model": v["model"],
            "loader": [(v["xs"][i], v["ys"][i]) for i in range(len(v["xs"]))],
            "loss_fn": nn.functional.cross_entropy,
            "optimizer": v["opt"],
        },
        [],
        param="speedup_batch_1024",
        compared="batch size sweep at batch 1024",
    )
    add(
        "fp32_transformer",
        "bf16 autocast + TF32",
        "load.amp_unused",
        lambda v: {
            "model": v["model"],
            "loader": [(v["x"], v["y"])],
            "optimizer": v["opt"],
            # as the script steps: autocast only in the --fix version
            "step_fn": _train_step(
                lambda m, b: nn.functional.cross_entropy(m(b[0]).flatten(0, 1), b[1]),
                amp=bool(v["args"].fix),
            ),
            "_matmul_precision": "high" if v["args"].fix else "highest",
        },
        [],
        budget_s=30.0,
        compared="bf16 autocast + TF32 together",
        together_keys=("autocast", "tf32"),
        # GPU-bound: the loop (synchronised, 5 interleaved pairs; it sets the scenario's matmul
        # precision) is its throughput. The script's own 20 unsynchronised steps time the host
        # filling the launch queue: 5.71x and 4.20x in two H200 runs, the loop 5.11x and 4.93x.
    )
    return out


# --- built-in scenarios (used when benchmarks/scenarios/ is missing or fails) -------------------


def slow_loader(fix: bool, dev: torch.device) -> Workload:
    torch.manual_seed(0)
    ds = BusyImages(n=4096, size=64, busy_ms=0.5)
    loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=8 if fix else 0)
    model = small_cnn().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    warm_state(model, opt, next(iter(DataLoader(ds, batch_size=64))), dev)
    return Workload(model, loader, opt, 64)


def fp32_convnet(fix: bool, dev: torch.device) -> Workload:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    batches = [
        (
            torch.randn(128, 3, 64, 64, generator=g).to(dev),
            torch.randint(0, 10, (128,), generator=g).to(dev),
        )
        for _ in range(8)
    ]
    model = vgg_like().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    warm_state(model, opt, batches[0], dev)
    return Workload(model, batches, opt, 128, autocast="bfloat16" if fix else None)


def tiny_batch(fix: bool, dev: torch.device) -> Workload:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    bs = 128 if fix else 16
    batches = [
        (torch.randn(bs, 256, generator=g), torch.randint(0, 10, (bs,), generator=g))
        for _ in range(8)
    ]
    model = mlp().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    warm_state(model, opt, batches[0], dev)
    return Workload(model, batches, opt, bs)


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def plain_loop_ms(w: Workload, dev: torch.device, steps: int) -> float:
    """One block: ms per *sample* over ``steps`` steps after a warm-up, synchronised at the ends."""
    it = iter(w.loader)
    workers = getattr(w.loader, "num_workers", 0)
    cast: Any = (
        torch.autocast(dev.type, dtype=getattr(torch, w.autocast)) if w.autocast else nullcontext()
    )

    def batches() -> Iterator[Any]:
        nonlocal it
        while True:
            try:
                yield next(it)
            except StopIteration:
                it = iter(w.loader)

    src = batches()

    def step() -> None:
        x, y = next(src)
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        with cast:
            loss = w.loss_fn(w.model(x), y)
        w.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        w.optimizer.step()

    for _ in range(max(2, workers + 1)):
        step()
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(dev)
    elapsed = time.perf_counter() - t0
    shutdown = getattr(it, "_shutdown_workers", None)
    if shutdown:
        shutdown()
    return 1000 * elapsed / steps / w.batch_size


def loop_fix_speedup(
    build: Callable[[bool, torch.device], Workload], steps: int, reps: int = 5
) -> Callable[[torch.device], dict[str, Any]]:
    def measure(dev: torch.device) -> dict[str, Any]:
        slow, fixed = build(False, dev), build(True, dev)
        slow_ms, fixed_ms = [], []
        for _ in range(reps):  # interleaved, so that drift hits both
            slow_ms.append(plain_loop_ms(slow, dev, steps))
            fixed_ms.append(plain_loop_ms(fixed, dev, steps))
        ratios = paired_ratios(slow_ms, fixed_ms)
        return {
            "speedup": statistics.median(ratios),
            "slow_ms_per_sample": statistics.median(slow_ms),
            "fixed_ms_per_sample": statistics.median(fixed_ms),
            "ratios": ratios,
            "how": "plain training loop in this script, interleaved, median of 5",
        }

    return measure


def built_in(
    name: str,
    fix: str,
    finding: str,
    build: Callable[[bool, torch.device], Workload],
    param: str | None = None,
    steps: int = 20,
    budget_s: float = 25.0,
) -> Scenario:
    def objects(dev: torch.device) -> dict[str, Any]:
        w = build(False, dev)
        return {
            "model": w.model,
            "loader": w.loader,
            "loss_fn": w.loss_fn,
            "optimizer": w.optimizer,
        }

    return Scenario(
        name, fix, finding, objects, loop_fix_speedup(build, steps), param, steps, budget_s
    )


BUILT_IN = [
    built_in(
        "busy_loader",
        "DataLoader(num_workers=8)",
        "load.input_bound",
        slow_loader,
        "speedup_8_workers",
        steps=10,
        budget_s=40.0,  # a sweep of up to four worker counts, each with worker start-up
    ),
    built_in("fp32_convnet", "bf16 autocast", "load.amp_unused", fp32_convnet),
    built_in(
        "small_mlp_batch",
        "batch_size 16 -> 128",
        "load.small_batch",
        tiny_batch,
        "speedup_batch_128",
    ),
]


def together_label(params: dict[str, Any]) -> str:
    """The DataLoader winners together, in few words: "together: 16 workers, pin_memory, ..."."""
    parts = []
    if "num_workers" in params:
        parts.append(f"{params['num_workers']} workers")
    if params.get("pin_memory"):
        parts.append("pin_memory")
    if params.get("persistent_workers"):
        parts.append("persistent")
    if params.get("prefetch_factor"):
        parts.append(f"prefetch {params['prefetch_factor']}")
    return "together: " + ", ".join(parts)


def predicted(report: Any, sc: Scenario) -> tuple[float | None, str, bool, str]:
    """The speedup of the what-if that applies the fix's own change, at the fix's own setting
    (matched), else at the best setting its sweep reached (not matched); how it was found; and
    the what-if's name for the table.

    A --fix of several DataLoader settings (``together_workers``) is compared with the
    "DataLoader winners together" row when diagnose measured one: matched when it ran the fix's
    worker count."""
    if sc.together_workers is not None:
        for w in report.what_if:
            p = w.params or {}
            if "loader_settings" in p and w.skipped is None and w.speedup is not None:
                matched = p.get("num_workers") == sc.together_workers
                off = "" if matched else f"; NOT at the fix's {sc.together_workers} workers"
                return float(w.speedup), f"{w.change}{off}", matched, together_label(p)
    what = sc.compared or sc.finding
    if sc.together_keys:
        return (*_together_row(report, sc.together_keys, what), what)
    speed, basis, matched = _predicted_row(report, sc, what)
    return speed, basis, matched, what


def _together_row(report: Any, keys: tuple[str, ...], what: str) -> tuple[float | None, str, bool]:
    """The "all winners together" row: matched when its winners are exactly ``keys``."""
    for w in report.what_if:
        winners = str((w.params or {}).get("winners", ""))
        if not w.change.startswith("all winners") or w.skipped is not None or w.speedup is None:
            continue
        got = {k for k in winners.split(",") if k}
        if got == set(keys):
            return float(w.speedup), f"{what} ({w.change})", True
        return float(w.speedup), f"{what}: NOT the fix's changes ({w.change})", False
    return None, f"{what}: no winners together", False


def _predicted_row(report: Any, sc: Scenario, what: str) -> tuple[float | None, str, bool]:
    for w in report.what_if:
        if w.finding_id == sc.finding and w.skipped is None and w.speedup is not None:
            if sc.param and w.params and sc.param in w.params:
                return float(w.params[sc.param]), f"{what} ({w.change}; {sc.param})", True
            reached = ""
            if w.params and "largest_tried" in w.params:
                reached = f"; the sweep reached {w.params['largest_tried']}"
            return float(w.speedup), f"{what}: NOT reached ({w.change}{reached})", sc.param is None
    return None, f"{what}: not measured", False


def bigger_win(report: Any, sc: Scenario, compared: float | None) -> tuple[str, float] | None:
    """A what-if of another change that beat the compared one: a win the --fix did not take."""
    rows = [
        w
        for w in report.what_if
        if w.skipped is None
        and w.speedup is not None
        and w.finding_id != sc.finding
        and not w.change.startswith("all winners")
        and (w.params or {}).get("won", True)
    ]
    if not rows:
        return None
    best = max(rows, key=lambda w: w.speedup)
    if compared is not None and best.speedup <= compared:
        return None
    return scope_tag(best) + best.change, float(best.speedup)


def top_what_if(report: Any) -> tuple[str, float | None]:
    rows = [
        w
        for w in report.what_if
        if w.skipped is None and w.speedup is not None and not w.change.startswith("all winners")
    ]
    if not rows:
        return "none", None
    best = max(rows, key=lambda w: w.speedup)
    return scope_tag(best) + best.change, best.speedup


# --- main ---------------------------------------------------------------------------------------


def memory(dev: torch.device) -> int:
    return torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0


def run_resnet(out: Path, dev: torch.device, budget: float) -> dict[str, Any]:
    import torchvision

    torch.manual_seed(0)
    random.seed(0)
    ds = DecodedImages(n=1024, size=224)
    loader = DataLoader(ds, batch_size=64, shuffle=True, num_workers=0)
    model = torchvision.models.resnet18(num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    warm_state(model, opt, next(iter(DataLoader(ds, batch_size=64))), dev)
    sync(dev)
    mem0 = memory(dev)
    before = world_digest(model, opt)
    t0 = time.perf_counter()
    report = diagnose(
        model,
        loader,
        loss_fn=nn.CrossEntropyLoss(),
        optimizer=opt,
        steps=20,
        budget_s=budget,
        progress=progress_printer(t0),
    )
    wall = time.perf_counter() - t0
    sync(dev)
    mem1 = memory(dev)
    after = world_digest(model, opt)
    valid = save_report(report, out / "whatif-resnet18.json")
    log_report(report)
    same = {k: before[k] == after[k] for k in before}
    log(
        f"  wall {wall:.1f} s (budget {budget:.0f} s), "
        f"memory {mem0 / 2**20:.1f} -> {mem1 / 2**20:.1f} MiB"
    )
    log(f"  bit-identical afterwards: {same}; report schema-valid: {valid}")
    return {
        "wall_s": round(wall, 2),
        "budget_s": budget,
        "within_budget": wall <= budget + budget_margin(budget),
        "memory_before_bytes": mem0,
        "memory_after_bytes": mem1,
        "memory_back": abs(mem1 - mem0) <= 2**20,
        "identical": same,
        "schema_valid": valid,
        "findings": [
            {"id": f.id, "speedup": f.impact.speedup, "title": f.title, "snippet": f.fix.snippet_id}
            for f in report.findings
        ],
        "what_if": what_if_rows(report),
        "verdict": report.verdict.summary,
    }


def run_scenario(sc: Scenario, out: Path, dev: torch.device, scale: float) -> dict[str, Any]:
    from gpusight.whatif.restore import read_flags, write_flags

    flags = read_flags()
    try:
        return _run_scenario(sc, out, dev, scale)
    finally:
        write_flags(flags)  # the scenario's own settings (e.g. cudnn.benchmark) end with it


def _run_scenario(sc: Scenario, out: Path, dev: torch.device, scale: float) -> dict[str, Any]:
    # Keys with "_" are for this script's own loop, not diagnose's arguments.
    objects = {k: v for k, v in sc.objects(dev).items() if not k.startswith("_")}
    budget = sc.budget_s * scale
    t0 = time.perf_counter()
    report = diagnose(**objects, steps=sc.steps, budget_s=budget, progress=progress_printer(t0))
    wall = time.perf_counter() - t0
    save_report(report, out / f"whatif-{sc.name}.json")
    log_report(report)
    del objects
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    pred, basis, matched, compared = predicted(report, sc)
    top_change, top_speed = top_what_if(report)
    other = bigger_win(report, sc, pred)
    fix = sc.fix_speedup(dev)
    script = fix.get("script") or {}
    if script:
        log(
            f"  script's own runs: {script['speedup']:.2f}x from {script['basis']}"
            if script.get("speedup") is not None
            else f"  script's own runs: {script.get('error')}"
        )
    loop_from = "loop"
    script_from = f"script {'mean' if script.get('basis') == 'mean_step_ms' else 'median'}"
    other_speed: float | None
    if sc.fix_from_script and script.get("speedup") is not None:
        fix_speed, fix_from = float(script["speedup"]), script_from
        other_speed, other_from = float(fix["speedup"]), loop_from
    else:
        fix_speed, fix_from = float(fix["speedup"]), loop_from
        other_speed = None if script.get("speedup") is None else float(script["speedup"])
        other_from = script_from if other_speed is not None else ""
    err = None if pred is None else 100 * (pred - fix_speed) / fix_speed
    log(
        f"  fix ({sc.fix}) measured {fix_speed:.2f}x ({fix_from}); in this script's loop "
        f"{fix['speedup']:.2f}x ({fix['how']}); what-if {pred}x from {basis}; "
        f"error {err if err is None else round(err, 1)} %"
    )
    return {
        "scenario": sc.name,
        "fix": sc.fix,
        "diagnose_wall_s": round(wall, 2),
        "diagnose_budget_s": budget,
        "diagnose_within_budget": wall <= budget + budget_margin(budget),
        "top_what_if": top_change,
        "top_speedup": top_speed,
        "compared_what_if": compared,
        "bigger_win_not_in_fix": None
        if other is None
        else {"change": other[0], "speedup": round(other[1], 3)},
        "predicted_speedup": pred,
        "predicted_from": basis,
        "matched_setting": matched,
        "fix_speedup": round(fix_speed, 3),
        "fix_from": fix_from,
        "other_fix_speedup": None if other_speed is None else round(other_speed, 3),
        "other_fix_from": other_from,
        "fix_detail": fix,
        "error_pct": None if err is None else round(err, 1),
        "within_target": matched and err is not None and abs(err) <= TARGET_ERROR_PCT,
        "what_if": what_if_rows(report),
    }


def table(resnet: dict[str, Any] | None, rows: list[dict[str, Any]]) -> str:
    lines = []
    if resnet:
        lines += [
            "ResNet-18, batch 64, 3x224x224, diagnose(budget_s=60):",
            f"  wall {resnet['wall_s']} s (target <= {resnet['budget_s']:.0f} + margin): "
            f"{'ok' if resnet['within_budget'] else 'OVER'}; memory back: {resnet['memory_back']}; "
            f"bit-identical: {all(resnet['identical'].values())}",
        ]
        for f in resnet["findings"]:
            lines.append(f"  {f['id']:24s} {f['speedup']:6.2f}x  {f['title'][:80]}")
        lines.append("")
    head = (
        f"{'scenario':16s} {'what-if compared (the --fix change, at its setting)':52s} "
        f"{'what-if':>8s} {'--fix':>8s} {'error':>7s}  {'--fix from':12s} {'other --fix':14s}"
    )
    lines += [head, "-" * len(head)]
    for r in rows:
        pred = f"{r['predicted_speedup']:.2f}x" if r["predicted_speedup"] else "-"
        if r["predicted_speedup"] and not r["matched_setting"]:
            pred += "*"
        err = f"{r['error_pct']:+.1f}%" if r["error_pct"] is not None else "-"
        other_fix = r.get("other_fix_speedup")
        second = "-" if other_fix is None else f"{other_fix:.2f}x {r['other_fix_from']}"
        mark = "" if r["within_target"] else " <-- outside ±15%"
        if not r.get("diagnose_within_budget", True):
            mark += (
                f" <-- diagnose took {r['diagnose_wall_s']:.0f} s for budget_s="
                f"{r['diagnose_budget_s']:.0f} (+ margin)"
            )
        lines.append(
            f"{r['scenario']:16s} {r['compared_what_if'][:52]:52s} {pred:>8s} "
            f"{r['fix_speedup']:7.2f}x {err:>7s}  {r['fix_from']:12s} {second:14s}{mark}"
        )
        other = r.get("bigger_win_not_in_fix")
        if other:
            lines.append(
                f"{'':16s}   bigger win the --fix did not take: {other['change'][:60]} "
                f"{other['speedup']:.2f}x"
            )
    lines.append(
        "what-if: the what-if of the fix's own change, at the fix's own setting (several "
        "DataLoader settings: the row of the loader's winners together); error: what-if vs --fix"
    )
    lines.append(
        "--fix: throughput per sample (many steps over their count) with --fix vs bare; from "
        "'script mean': the scenario script run as it is, bare and --fix, its SCENARIO_RESULT "
        "mean_step_ms ('script median': a script that prints no mean); from 'loop': the "
        "scenario's objects in this script's synchronised loop, median of 5 interleaved pairs; "
        "other --fix: the other of the two, not compared"
    )
    lines.append(
        "*: the what-if did not reach the fix's setting; its best setting is shown instead"
    )
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(__doc__).out(os.environ.get("OUT", "benchmarks/results/gpu-local"))
    ap.add_argument("--budget", type=float, default=60.0, help="ResNet-18 diagnose budget (s)")
    ap.add_argument(
        "--scenario-scale", type=float, default=1.0, help="multiplies each scenario's budget"
    )
    ap.add_argument("--skip-resnet", action="store_true")
    ap.only(help="scenario names")
    ap.add_argument("--device", default="cuda", help="'cpu' for a dry run of this script's code")
    ap.add_argument(
        "--no-script-runs",
        action="store_true",
        help="skip the cross-check that runs each scenario script as it is, bare and --fix",
    )
    args = ap.parse_args(argv)
    SCRIPT_RUNS["on"] = not args.no_script_runs
    out = Path(args.out)
    note(out)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: this script measures GPU what-ifs (--device cpu for a dry run)")
        return 2
    gpu = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu (dry run)"
    log(
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, {gpu}, "
        f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}"
    )
    t_all = time.perf_counter()
    resnet: dict[str, Any] | None = None
    if not args.skip_resnet:
        with section("ResNet-18 diagnose"):
            resnet = run_resnet(out, dev, args.budget)
    external = external_scenarios()
    if args.only:
        scenarios = [s for s in external + BUILT_IN if s.name in args.only]
    else:  # the public scenarios when there are any (about 4 minutes in all on an H200)
        scenarios = external or BUILT_IN
    rows: list[dict[str, Any]] = []
    for sc in scenarios:
        with section(f"scenario {sc.name} (fix: {sc.fix})"):
            rows.append(run_scenario(sc, out, dev, args.scenario_scale))
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    text = table(resnet, rows)
    (out / "whatif-table.txt").write_text(text + "\n")
    (out / "whatif.json").write_text(
        json.dumps(
            {
                "torch": torch.__version__,
                "gpu": gpu,
                "total_s": round(time.perf_counter() - t_all, 1),
                "resnet18": resnet,
                "scenarios": rows,
                "failures": FAILURES,
                "log": LOG,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    log(f"\ntotal {time.perf_counter() - t_all:.0f} s\n")
    log(text)
    for f in FAILURES:
        log(f"FAILED: {f}")
    return 1 if FAILURES else 0
