"""The DataLoader's settings: workers (a sweep), pin_memory, persistent_workers, prefetch_factor.

In a re-run, every DataLoader the script builds (subclasses too: they call this ``__init__``)
takes the change; the batch knob's ``batch_size`` goes the same way (``LOADER_KEYS``).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .base import Arm, Group, Knob, Situation, Target, share

if TYPE_CHECKING:
    from ..report import Fix

LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")
FINDING = "load.input_bound"
EPOCH_FINDING = "load.epoch_start"
# The loader's changes are planned where loading takes at least this share of the step (%).
MIN_DATA_SHARE = 5.0
UNAPPLIED = "no DataLoader took the setting: a batch sampler, or no DataLoader at all"


def worker_counts(current: int, cores: int) -> list[int]:
    """Doubling from twice today's workers (at least 2), then all cores but two (the training
    process and the pin-memory thread need theirs): the knee lies up there when loading is
    CPU work."""
    top = max(1, cores - 2) if cores > 4 else max(1, cores)
    out: list[int] = []
    n = max(2, current * 2)
    while n < top:
        out.append(n)
        n *= 2
    if top > current and top not in out:
        out.append(top)
    return [n for n in out if n > current]


# Workers past the cores are tried while the sweep scales at least this close to linearly:
# a loader that waits (on storage, on the network) rather than computes.
LINEAR_SHARE = 0.75


def beyond_cores(ran: list[tuple[int, float]], cores: int) -> Arm | None:
    """One more worker count past the cores when the last two points (workers, gain) scaled
    nearly in proportion, up to four times the cores."""
    if len(ran) < 2:
        return None
    (w1, g1), (w2, g2) = ran[-2], ran[-1]
    if w2 < max(2, cores - 2) or w2 >= 4 * cores or g1 <= 0:
        return None
    if g2 / g1 < LINEAR_SHARE * (w2 / w1):
        return None
    return _workers_arm(2 * w2)


def _workers_arm(n: int) -> Arm:
    return Arm("workers", f"DataLoader num_workers={n}", {"num_workers": n}, FINDING)


def _nonneg_int(changes: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        v = changes.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            return f"{key} must be a non-negative integer, got {v!r}"
    return None


def _loader_fix(arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
    from ..fixes import fix
    from .user_lines import patched_loader

    loader = facts.get("loader") or {}
    f = fix(
        f"Build the DataLoader with {arm.label.removeprefix('DataLoader ')} (measured).",
        "loader.workers",
        batch_size=int(loader.get("batch_size") or items or 64),
        workers=int(arm.changes.get("num_workers") or loader.get("num_workers") or 4),
    )
    return patched_loader(f, arm, facts)


class _LoaderKnob(Knob):
    """What the loader's knobs share: how a re-run shows them, their finding, their fix."""

    applied_as = "loader"
    unapplied = UNAPPLIED

    def fix(self, arm: Arm, items: int | None, facts: dict[str, Any]) -> Fix:
        return _loader_fix(arm, items, facts)

    def not_planned(self, s: Situation) -> str:
        if s.loader is None:
            return "no DataLoader fed the model"
        return (
            f"the step waits for its DataLoader {s.data_share:.0f}% of the time, under "
            f"{MIN_DATA_SHARE:.0f}%: the loader keeps up"
        )


class Workers(_LoaderKnob):
    name = "workers"
    keys = ("num_workers",)

    def groups(self, s: Situation) -> list[Group]:
        if s.loader is None or s.data_share < MIN_DATA_SHARE:
            return []
        current = int(s.loader.get("num_workers") or 0)
        counts = worker_counts(current, s.cores)
        g = Group("workers", s.data_share, sweep=True)
        g.arms = [_workers_arm(n) for n in counts]
        if not counts:
            g.arms.append(
                Arm("workers", "DataLoader num_workers", {}, FINDING,
                    skipped=f"num_workers={current} already uses the {s.cores} CPU cores")
            )  # fmt: skip
        return [g]

    def validate(self, changes: dict[str, Any]) -> str | None:
        return _nonneg_int(changes, "num_workers")

    def extend(self, group: Group, gains: list[float | None], cores: int) -> Arm | None:
        ran = [
            (int(a.changes["num_workers"]), x)
            for a, x in zip(
                [a for a in group.arms if not a.skipped and "num_workers" in a.changes],
                gains,
                strict=False,
            )
            if x is not None
        ]
        return beyond_cores(ran, cores)

    def install(self, hooks: Target) -> None:
        # One patch of DataLoader for every loader key, whichever knob owns it.
        values = {k: hooks.changes[k] for k in LOADER_KEYS if hooks.changes.get(k) is not None}
        if values:
            patch_loader(hooks.torch, values, hooks.inj)

    def owns(self, changes: dict[str, Any]) -> bool:
        return any(changes.get(k) is not None for k in LOADER_KEYS)


class LoaderSettings(_LoaderKnob):
    name = "loader"
    keys = ("pin_memory", "persistent_workers", "prefetch_factor")

    def groups(self, s: Situation) -> list[Group]:
        # Epoch starts are a phase between the steps (the watch's load.epoch_start), out of
        # the steps' data wait: keeping the workers is tried for them whatever that wait is.
        restarts = EPOCH_FINDING in s.ids
        if s.loader is None or (s.data_share < MIN_DATA_SHARE and not restarts):
            return []
        ld = s.loader
        between = share(s.facts, "between_steps") if restarts else 0.0
        g = Group("loader", max(s.data_share, between) * 0.5)
        feeds = s.data_share >= MIN_DATA_SHARE
        if feeds and s.cuda and not ld.get("pin_memory"):
            g.arms.append(Arm("loader", "DataLoader pin_memory=True", {"pin_memory": True},
                              FINDING))  # fmt: skip
        if int(ld.get("num_workers") or 0) > 0:
            if not ld.get("persistent_workers") and int(s.facts.get("epochs_seen") or 0) > 1:
                g.arms.append(Arm("loader", "DataLoader persistent_workers=True",
                                  {"persistent_workers": True},
                                  EPOCH_FINDING if restarts else FINDING))  # fmt: skip
            pf = int(ld.get("prefetch_factor") or 2)
            if feeds:
                g.arms.append(Arm("loader", f"DataLoader prefetch_factor={pf * 2}",
                                  {"prefetch_factor": pf * 2}, FINDING))  # fmt: skip
        return [g] if g.arms else []

    def validate(self, changes: dict[str, Any]) -> str | None:
        bad = _nonneg_int(changes, "prefetch_factor")
        if bad is None and changes.get("prefetch_factor") == 0:
            return "prefetch_factor must be at least 1"
        return bad


def patch_loader(torch: Any, loader: dict[str, Any], inj: Any) -> None:
    """Every DataLoader built from now on takes ``loader``'s settings (undone by ``inj``)."""
    cls = torch.utils.data.DataLoader
    orig = cls.__init__
    sig = inspect.signature(orig)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:
            orig(self, *args, **kwargs)
            return
        a = bound.arguments
        changed = False
        for key, value in loader.items():
            if key == "batch_size" and (a.get("batch_sampler") is not None or a.get(key) is None):
                continue  # a batch sampler (or batch_size=None) fixes the batch itself
            if key == "pin_memory" and not torch.cuda.is_available():
                continue
            a[key] = value
            changed = True
        if a.get("num_workers", 0) == 0:
            # These need workers; torch refuses them without.
            a.pop("persistent_workers", None)
            a.pop("prefetch_factor", None)
        if changed:
            inj.hit("loader")
        orig(*bound.args, **bound.kwargs)

    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    cls.__init__ = __init__
    inj._undo.append(lambda: setattr(cls, "__init__", orig))
