"""An arm: a planned change made real, on copies of the user's model, optimizer and loss module.

Building an arm copies (``copy.deepcopy``) the model, builds a fresh optimizer of the user's class
from the user's param groups with its state copied over, and prepares the batches the change
asks for. ``close()`` drops every reference, so device memory can return to where it was.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from time import perf_counter_ns, thread_time_ns
from typing import Any, Literal

import torch
from torch import nn

from ..knobs import dataloader, owners
from ..knobs.base import Arm as Plan
from ..knobs.base import Knob
from ..knobs.loader import LOADER_KEYS
from ..knobs.tensors import Batch, concat, moved, pin
from .knob_hooks import KnobHooks
from .loaders import is_dataloader, shutdown
from .restore import read_flags, write_flags

StepFn = Callable[[nn.Module, Any, "torch.optim.Optimizer | None"], Any]

Source = Literal["cached", "loader", "device"]

# --- the change an arm makes -------------------------------------------------------------------
#
# A change is a knob's arm (``knobs/base.Arm``): a label and ``changes``, keyed as the knobs key
# them (torch's global flags set by the knobs' own ``flags_on``), plus how this driver feeds the
# step: ``source`` (where the batches come from: ``cached``, a fixed set taken from the loader
# once, so that compute changes do not measure the loader; ``loader``, a clone of the user's
# DataLoader with the change's DataLoader arguments; ``device``, the cached batches kept on the
# GPU), ``batch_factor`` (batches that many times larger) and ``non_blocking`` (copies that do not
# block the host). A key left out means "as the user has it".


def planned(label: str, /, **changes: Any) -> Plan:
    """A change to measure, ``changes`` as above."""
    return Plan(group="", label=label, changes=changes)


def source_of(plan: Plan) -> Source:
    found: Source = plan.changes.get("source", "cached")
    return found


def loader_overrides(plan: Plan) -> dict[str, Any]:
    """The DataLoader arguments the change sets (its batch factor aside)."""
    return dataloader.arguments(plan.changes)


def batch_factor(plan: Plan) -> int:
    return int(plan.changes.get("batch_factor", 1))


def relabelled(plan: Plan, label: str, **changes: Any) -> Plan:
    """The same change under another label, with ``changes`` set over its own."""
    return dataclasses.replace(plan, label=label, changes={**plan.changes, **changes})


def without(plan: Plan, *keys: str) -> Plan:
    return dataclasses.replace(
        plan, changes={k: v for k, v in plan.changes.items() if k not in keys}
    )


def merged(a: Plan, b: Plan, label: str) -> Plan:
    """``a`` with ``b``'s changes added (``b`` wins where both set something); batches from the
    device before the loader before the cached set, and the larger batch."""
    order: list[Source] = ["cached", "loader", "device"]
    changes = {**a.changes, **b.changes}
    changes["source"] = max(source_of(a), source_of(b), key=order.index)
    changes["batch_factor"] = max(batch_factor(a), batch_factor(b))
    for key in changes:  # a switch either turns on stays on, a value either sets is kept
        if a.changes.get(key) is True or b.changes.get(key) is True:
            changes[key] = True
        elif changes[key] is None and key not in LOADER_KEYS:
            changes[key] = a.changes.get(key)
    return Plan(group=a.group, label=label, changes=normal(changes))


def normal(changes: dict[str, Any]) -> dict[str, Any]:
    """``changes`` without the keys that say "as the user has it": two changes that make the same
    arm are equal."""
    return {
        k: v
        for k, v in changes.items()
        if not (
            (k == "source" and v == "cached")
            or (k == "batch_factor" and v == 1)
            or (v is False and k not in LOADER_KEYS)
            or (v is None and k not in LOADER_KEYS)
        )
    }


def same_change(a: Plan, b: Plan) -> bool:
    return normal(a.changes) == normal(b.changes)


@dataclass
class Workload:
    """The user's objects, never modified, and what gpusight took from them once."""

    model: nn.Module
    loader: Any
    loss_fn: Any
    optimizer: torch.optim.Optimizer | None
    step_fn: StepFn | None
    device: torch.device
    cached: list[Batch] = field(default_factory=list)


def model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


def copy_optimizer(opt: torch.optim.Optimizer, memo: dict[int, Any]) -> torch.optim.Optimizer:
    """The same optimizer class over the copied parameters, with the user's state copied in."""
    groups = []
    for g in opt.param_groups:
        params = [memo[id(p)] if id(p) in memo else copy.deepcopy(p, memo) for p in g["params"]]
        groups.append({**{k: v for k, v in g.items() if k != "params"}, "params": params})
    try:
        new = type(opt)(groups, **opt.defaults)
    except TypeError:
        # An optimizer whose constructor wants more than its defaults: copy it whole (deepcopy
        # maps its parameters and state through the model's memo; its __getstate__ leaves out
        # hooks and the step wrapper an LR scheduler installs, which point at the user's object).
        return copy.deepcopy(opt, memo)
    new.load_state_dict(copy.deepcopy(opt.state_dict()))
    return new


def copy_training_state(
    model: nn.Module, optimizer: torch.optim.Optimizer | None, loss_fn: Any
) -> tuple[nn.Module, torch.optim.Optimizer | None, Any]:
    memo: dict[int, Any] = {}
    model_c = copy.deepcopy(model, memo)
    loss_c = copy.deepcopy(loss_fn, memo) if isinstance(loss_fn, nn.Module) else loss_fn
    opt_c = copy_optimizer(optimizer, memo) if optimizer is not None else None
    for p in model_c.parameters():
        p.grad = None  # the copy starts clean; the user's gradients stay the user's
    return model_c, opt_c, loss_c


# --- the default training step ------------------------------------------------------------------


def _call_model(model: nn.Module, batch: Batch) -> tuple[Any, Any]:
    """(model output, target) for the usual batch shapes: x, (x, y), (x1, x2, ..., y), {kw: ...}."""
    if isinstance(batch, dict):
        return model(**batch), None
    if isinstance(batch, (tuple, list)):
        if len(batch) == 1:
            return model(batch[0]), None
        if len(batch) == 2:
            return model(batch[0]), batch[1]
        return model(*batch[:-1]), batch[-1]
    return model(batch), None


def _loss_of(out: Any, target: Any, loss_fn: Any) -> torch.Tensor | None:
    if loss_fn is not None:
        loss = loss_fn(out) if target is None else loss_fn(out, target)
        return loss if isinstance(loss, torch.Tensor) else None
    if isinstance(out, torch.Tensor) and out.dim() == 0:
        return out
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        found: torch.Tensor = out["loss"]
        return found
    loss = getattr(out, "loss", None)
    return loss if isinstance(loss, torch.Tensor) else None


class Arm:
    """One change, ready to run: copies, batches, and the settings it needs while it runs."""

    def __init__(self, work: Workload, plan: Plan) -> None:
        self.plan = plan
        c = plan.changes
        self.device = work.device
        self.loss_fn_user = work.loss_fn
        self.step_fn = work.step_fn
        self._loader_user = work.loader
        self.first_step_s: float | None = None
        self.loader: Any = None
        self.batches: list[Batch] = []
        self.scaler: Any = None
        self._iter: Iterator[Any] | None = None
        t0 = time.perf_counter()
        self.model, self.optimizer, self.loss_fn = copy_training_state(
            work.model, work.optimizer, work.loss_fn
        )
        self.copy_s = time.perf_counter() - t0
        self.hooks = KnobHooks(c)  # the knobs that act on the model's calls, on the copy
        self.hooks.attach(self.model)
        self.knobs = owners(c)
        if self.optimizer is not None and any(k.scales_loss(c) for k in self.knobs):
            self.scaler = torch.amp.GradScaler(self.device.type)
        self._prepare_batches(work)
        self._pos = 0
        self.batch_index = 0
        # Loading in this thread (no workers): its CPU time says whether it computes or waits.
        on_loader = source_of(self.plan) == "loader"
        self._fetch_timed = on_loader and dataloader.workers(self.loader) == 0
        self.fetch_ns = self.fetch_cpu_ns = 0

    # batches -------------------------------------------------------------------------------------

    def _prepare_batches(self, work: Workload) -> None:
        c, src, f = self.plan.changes, source_of(self.plan), batch_factor(self.plan)
        if src == "loader":
            self.loader = (
                dataloader.clone(work.loader, c) if is_dataloader(work.loader) else work.loader
            )
            return
        cached = work.cached
        if f > 1:
            # Whole larger batches made of the cached ones: no concatenation inside the timed loop.
            n = max(1, len(cached) // f)
            cached = [
                concat([cached[(j * f + i) % len(cached)] for i in range(f)]) for j in range(n)
            ]
        if src == "device":
            layouts = [k.input_layout(torch) for k in self.knobs]
            layout = next((f for f in layouts if f is not None), None)
            cached = [moved(b, self.device, non_blocking=False, layout=layout) for b in cached]
        elif c.get("non_blocking") and self.device.type == "cuda":
            cached = [pin(b) for b in cached]
        self.batches = cached

    def start_epoch(self) -> None:
        self.stop()
        self._iter = iter(self.loader) if source_of(self.plan) == "loader" else None
        self._pos = 0
        self.batch_index = 0  # counted from the start of the epoch, as the user would count

    def next_batch(self) -> Batch:
        """The next batch as the loader gives it (on the host), or from the prepared set."""
        if source_of(self.plan) != "loader":
            b = self.batches[self._pos % len(self.batches)]
            self._pos += 1
            return b
        assert self._iter is not None
        c0 = thread_time_ns() if self._fetch_timed else None
        t0 = perf_counter_ns()
        try:
            b = next(self._iter)
        except StopIteration:
            # An epoch boundary inside the measurement: a real cost, measured as it comes.
            self.start_epoch()
            b = next(self._iter)
            c0 = None  # the new epoch's start is not a fetch like the others
        if c0 is not None:
            self.fetch_cpu_ns += thread_time_ns() - c0
            self.fetch_ns += perf_counter_ns() - t0
        self.batch_index += 1
        return b

    def fetch_cpu_pct(self) -> float | None:
        """This thread's CPU time over the wall time of its fetches from a loader without
        workers, in % (None: no such fetches)."""
        return round(100.0 * self.fetch_cpu_ns / self.fetch_ns, 1) if self.fetch_ns else None

    def stop(self, final: bool = False) -> None:
        # A persistent-workers loader reuses its iterator (and workers) across epochs: shutting
        # it down between blocks would break the next iter(); only close() does.
        if final or not dataloader.keeps_workers(self.loader):
            shutdown(self._iter)
            shutdown(getattr(self.loader, "_iterator", None) if final else None)
        self._iter = None

    # the step -----------------------------------------------------------------------------------

    def step(self, batch: Batch) -> None:
        c = self.plan.changes
        if source_of(self.plan) != "device":
            batch = moved(batch, self.device, non_blocking=bool(c.get("non_blocking")))
        if self.step_fn is not None:
            with self._step_context():
                self.step_fn(self.model, batch, self.optimizer)
            return
        with self._step_context():
            out, target = _call_model(self.model, batch)
            loss = _loss_of(out, target, self.loss_fn)
        if self.optimizer is None:
            return
        if loss is None:
            raise TypeError(
                f"the model returned {type(out).__name__}, not a loss: pass loss_fn=... "
                "(called as loss_fn(output, target)) or step_fn=..."
            )
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()  # type: ignore[no-untyped-call]
            self.optimizer.step()

    def _step_context(self) -> contextlib.ExitStack:
        """What the change runs the step under (its knobs' ``step_context``: autocast)."""
        stack = contextlib.ExitStack()
        for knob in self.knobs:
            cm = knob.step_context(torch, self.plan.changes, self.device.type)
            if cm is not None:
                stack.enter_context(cm)
        return stack

    @contextlib.contextmanager
    def settings(self) -> Iterator[None]:
        """The global flags this change needs (its knobs' ``flags_on``), set only while its
        steps run."""
        knobs = [k for k in self.knobs if type(k).flags_on is not Knob.flags_on]
        if not knobs:
            yield
            return
        saved = read_flags()
        try:
            for knob in knobs:
                knob.flags_on(torch)
            yield
        finally:
            write_flags(saved)

    def close(self) -> None:
        """Drop every reference this arm holds (workers stopped, copies and batches released)."""
        self.stop(final=True)
        self.hooks.close()
        self.loader = None
        self.batches = []
        self.model = None  # type: ignore[assignment]
        self.optimizer = None
        self.loss_fn = None
        self.scaler = None
