"""Shared by the corpus scripts: arguments, device choice and the script's own clock.

Each corpus script is a training or inference loop written the way users of its library write
one (timm, torchvision, transformers, torch_geometric, Lightning, torchaudio, accelerate), on
synthetic data built in the script (nothing downloaded: models from configs, no weights). Its
module-level names say what it is:

* ``LIBRARY``: the library the loop is written against;
* ``LABEL``: one line, what the workload is and what holds it back;
* ``EXPECTED``: ``{"bottleneck": <verdict id>, "pick": <what-if group matching --fix or None>}``;
* ``FIX``: one line, what ``--fix`` changes in the script (the truth a what-if is held to).

The script counts its own items (images, graphs, sequences: what its users count) and times
itself from outside the step, host time between step ends after ``--warmup`` steps, the device
drained at the end of a run that finishes. It prints one line ``CORPUS_RESULT {json}`` when it
ends, also when ``gpusight run --steps`` ends it early: ``items_per_s`` is the timed steps'
items over their time. ``SyntheticImages`` is the image scripts' dataset: a seeded uint8 pool.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from types import TracebackType

import torch
from torch.utils.data import Dataset


def parser(doc: str | None, iters: int = 60) -> argparse.ArgumentParser:
    """The shared arguments; a script adds its own (``--batch-size``, ...) before parsing."""
    p = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    p.add_argument("--fix", action="store_true", help="apply the script's best fix in the script")
    p.add_argument("--iters", type=int, default=iters, help="steps to run")
    p.add_argument("--warmup", type=int, default=5, help="steps the script's own clock skips")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    return p


def pick_device(name: str | None) -> torch.device:
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Clock:
    """``with Clock(name, args, device) as clock: ... clock.mark(items)`` after each step;
    ``clock.done()`` after the last one drains the device first (a run that ends early, under
    ``gpusight run --steps``, is reported without it: the watch is unwinding then).

    On a GPU each mark also records an event on the device: a drained run's time is the longer
    of the host's and the device's between the first timed mark and the last, so that what runs
    between the last step and ``done()`` (a trainer's teardown moving the model back to the CPU,
    a DataLoader's workers shut down after ``break``: about a second on an H200) is not in it.
    """

    def __init__(self, name: str, args: argparse.Namespace, device: torch.device) -> None:
        self.name = name
        self.args = args
        self.device = device
        self.ends: list[float] = []
        self.items: list[int] = []
        self.shapes: list[object] = []
        self.events: list[torch.cuda.Event] = []
        self.device_s: float | None = None
        self.drained = False

    def __enter__(self) -> Clock:
        self.ends = [time.perf_counter()]
        self.items = []
        self.shapes = []
        self.events = [self._event()] if self.device.type == "cuda" else []
        return self

    def _event(self) -> torch.cuda.Event:
        ev = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        ev.record()
        return ev

    def mark(self, items: int, shape: object = None) -> None:
        """``shape``: what a one-off cost is paid per (a batch's padded length, where bf16
        attention builds a plan per length): the steady figure leaves out each shape's first
        step (``steady``)."""
        self.ends.append(time.perf_counter())
        self.items.append(int(items))
        self.shapes.append(shape)
        if self.events:
            self.events.append(self._event())

    def done(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            w = self._first_timed()
            if len(self.events) > w + 1:
                self.device_s = self.events[w].elapsed_time(self.events[-1]) / 1000.0
        self.drained = True

    def _first_timed(self) -> int:
        return int(min(self.args.warmup, max(0, len(self.items) - 1)))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        w = self._first_timed()
        seconds = self.ends[-1] - self.ends[w] if len(self.ends) > w + 1 else 0.0
        if self.device_s is not None:
            seconds = max(seconds, self.device_s)  # the queued steps' end, not done()'s time
        items = sum(self.items[w:])
        steps = len(self.items) - w
        result = {
            "name": self.name,
            "fix": bool(self.args.fix),
            "device": str(self.device),
            "steps": steps,
            "items": items,
            "seconds": round(seconds, 6),
            "mean_step_ms": round(1000.0 * seconds / steps, 4) if steps > 0 else None,
            "items_per_s": round(items / seconds, 2) if seconds > 0 else None,
            "drained": self.drained,
            "tenths_ms": _tenths_ms(self.ends[w:]),
        }
        if any(x is not None for x in self.shapes):
            result.update(steady(self.ends, self.items, self.shapes, w))
        print("CORPUS_RESULT " + json.dumps(result), flush=True)


def steady(ends: list[float], items: list[int], shapes: list[object], w: int) -> dict[str, object]:
    """Items per second over the timed steps whose shape an earlier step had: the rate a long
    run settles at, where each new shape's one-off cost (a plan built per padded length) is
    paid once. The gpusight what-if counts such a step at its run's median for the same
    reason; a truth of 100 steps, most of them new shapes, reads neither."""
    seen = set(shapes[:w])
    took, done, new = 0.0, 0, 0
    for i in range(w, len(items)):
        if shapes[i] in seen:
            took += ends[i + 1] - ends[i]
            done += items[i]
        else:
            new += 1
            seen.add(shapes[i])
    return {
        "new_shape_steps": new,
        "steady_items_per_s": round(done / took, 2) if took > 0 else None,
    }


def _tenths_ms(ends: list[float]) -> list[float]:
    """The mean step (ms) over each tenth of the timed steps: whether the step drifts as the
    run goes on, which a what-if's early window would not see."""
    steps = len(ends) - 1
    if steps < 10:
        return []
    at = [round(k * steps / 10) for k in range(11)]
    return [round(1000.0 * (ends[j] - ends[i]) / (j - i), 3) for i, j in itertools.pairwise(at)]


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """uint8 images and labels drawn once from a seeded generator; an item is a view into
    that pool, so a fetch costs next to nothing."""

    def __init__(self, length: int, size: int, pool: int = 256, classes: int = 1000) -> None:
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, classes, (pool,), generator=g)
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        j = index % len(self.images)
        return self.images[j], int(self.labels[j])
