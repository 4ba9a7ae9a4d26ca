"""What runs between training steps: evaluation, checkpoint saving and a DataLoader's epoch start,
timed apart from the steps.

An evaluation begins where the loop puts a model with parameters into eval mode (``model.eval()``:
the outermost ``Module.train(False)`` call) and ends where the model goes back (``train(True)``)
or where training resumes without it (the next optimizer step or backward); one that never
calls ``model.eval()`` is a ``no_grad`` block that takes batches (``no_grad_evals.py``). A
checkpoint is one call of ``torch.save`` or of a library's own save (``save_pretrained``, a
trainer's checkpoint), the outermost one where they nest. An epoch start is a DataLoader with
worker processes it does not keep (``persistent_workers=False``) making its iterator
(``iter(loader)``: the workers start, ``worker_init_fn`` runs in each, the dataset is sent to
them) until its first batch arrives.
What the watch's other hooks measured meanwhile (the loader's wait, copies, time in the model,
syncs) moves out of the step into the phase, so that a step's figures stay the training step's,
and the step keeps how long its phases took (``phase_ns``).

Only while a training loop drives the steps (an optimizer or a backward ends them): in inference
every call is in eval mode, and nothing runs between steps. A model put in eval mode at every
step (a distillation's teacher, an EMA model) is part of the step, no evaluation: after
``PER_STEP_EVALS`` evaluations a step apart the watch stops looking for evaluations, and the
report gives the ones it saw back to their steps (``phase_report.settle``).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import get_ident
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from ..after_import import after_import
from .call_sites import CallSite, call_site

if TYPE_CHECKING:
    from .recorder import StepRecord, StepRecorder
    from .watch_state import WatchState

EVALUATION = "evaluation"
CHECKPOINT = "checkpoint"
EPOCH_START = "epoch_start"
TRAINING_KINDS = frozenset({"optimizer", "backward"})
PER_STEP_EVALS = 3
MAX_EVENTS = 10_000
"""Phases kept per watch: one a step at most in a loop that evaluates every step."""

LIBRARY_SAVES: dict[str, tuple[str | None, str]] = {
    "transformers.modeling_utils": ("PreTrainedModel", "save_pretrained"),
    "transformers.trainer": ("Trainer", "_save_checkpoint"),
    "lightning.pytorch.trainer.trainer": ("Trainer", "save_checkpoint"),
    "pytorch_lightning.trainer.trainer": ("Trainer", "save_checkpoint"),
    "accelerate.accelerator": ("Accelerator", "save_state"),
    "safetensors.torch": (None, "save_file"),
}
"""Module -> (class or None for a module function, name): the frameworks' checkpoint calls,
patched as the script imports them (``after_import``)."""


@dataclass(slots=True)
class PhaseEvent:
    kind: str
    start_ns: int
    site: CallSite | None
    """The user's line that began it (the ``model.eval()`` or the save), where it is theirs."""
    caller: CallSite | None = None
    """The line one level out that called the function holding ``site`` (the loop's
    ``evaluate(...)``), where that is the user's too."""
    end_ns: int = 0
    at_step: int = 0
    """Training steps begun since the watch started, when it began (``PhaseHooks.steps``)."""
    data_ns: int = 0
    copy_ns: int = 0
    framework_ns: int = 0
    syncs: int = 0
    sync_sites: dict[str, int] = field(default_factory=dict)
    """Syncs recorded in the phase, by the watch's site key (``file:line``)."""
    workers: int = 0
    """An epoch start's worker processes."""
    init_fn: str | None = None
    """An epoch start's ``worker_init_fn``, by name, where the loader has one."""
    dataset_id: int = 0
    """``id`` of an epoch start's dataset: which loader it was."""

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)


Held = tuple[int, int, int, int, bool]
"""A step's loader wait, copy time, model time, syncs and epoch flag at one moment."""


def held_now(rec: StepRecorder) -> Held:
    cur = rec.current
    return (cur.data_ns, cur.copy_ns, cur.framework_ns, cur.syncs, cur.epoch)


class PhaseTracker:
    """The phases seen, and the one under way with what the step held when it began."""

    def __init__(self) -> None:
        self.events: list[PhaseEvent] = []
        self.active: PhaseEvent | None = None
        self.dropped = 0
        self._record: StepRecord | None = None
        self._held: Held = (0, 0, 0, 0, False)

    def begin(
        self, kind: str, rec: StepRecorder, t: int, site: CallSite | None, held: Held | None = None
    ) -> bool:
        """A phase begins at ``t``; ``held``: the step's counters then, where ``t`` is past."""
        if self.active is not None or rec.kind not in TRAINING_KINDS:
            return False
        self._record = rec.current
        self._held = held or held_now(rec)
        self.active = PhaseEvent(kind, t, site)
        return True

    def end(self, rec: StepRecorder, t: int) -> PhaseEvent | None:
        """The phase under way ends at ``t``: what the step gained meanwhile becomes the
        phase's, and the step keeps its duration in ``phase_ns``."""
        ev, self.active = self.active, None
        if ev is None:
            return None
        ev.end_ns = t
        cur = rec.current
        if cur is self._record:
            data, copy, framework, syncs, epoch = self._held
            ev.data_ns, cur.data_ns = cur.data_ns - data, data
            ev.copy_ns, cur.copy_ns = cur.copy_ns - copy, copy
            ev.framework_ns, cur.framework_ns = cur.framework_ns - framework, framework
            ev.syncs += cur.syncs - syncs
            cur.syncs = syncs
            if ev.kind != EPOCH_START:
                cur.epoch = epoch  # an evaluation's own loader is no epoch of the training's
            cur.phase_ns += ev.duration_ns
        rec.phase_seen = True
        rec.phase_measured = rec.phase_measured or cur.phase == "measure"
        self._record = None
        if len(self.events) < MAX_EVENTS:
            self.events.append(ev)
        else:
            self.dropped += 1
        return ev

    def note_sync(self, key: str) -> None:
        """A sync inside the phase under way: the phase's, not the training step's."""
        ev = self.active
        if ev is not None:
            ev.syncs += 1
            ev.sync_sites[key] = ev.sync_sites.get(key, 0) + 1


def _has_parameters(module: Any) -> bool:
    try:
        return next(iter(module.parameters()), None) is not None
    except Exception:
        return False


def _sites(w: WatchState, frame: Any) -> tuple[CallSite | None, CallSite | None]:
    """The user's line that called, and the user's line one function further out."""
    try:
        user = w.sources.user_frame(frame)
        site = call_site(w.sources, user)
        # A script's or a cell's top level has no caller of the user's.
        outer = (
            None
            if user is None or user.f_code.co_name == "<module>"
            else call_site(w.sources, user.f_back)
        )
    except Exception:  # a phase's line is a nicety: never the user's problem
        return None, None
    if outer is not None and site is not None and outer.filename == site.filename:
        if outer.line == site.line:
            outer = None
    return site, outer


class PhaseHooks:
    """The wrappers that see phases begin and end, installed for one watch."""

    def __init__(self, w: WatchState, is_compiling: Callable[[], bool]) -> None:
        self.w = w
        self.tracker = PhaseTracker()
        self._is_compiling = is_compiling
        self._train_depth = 0
        self._saving = False
        self.steps = 0
        """Training steps begun (optimizer steps, or backward calls where none steps)."""
        self.per_step = False
        """The model went into eval mode at every step: no evaluation phase (see above)."""
        self._close = 0
        self._epoch_iter = 0

    def install(self, torch: Any) -> None:
        p = self.w._patches
        module_cls = torch.nn.Module
        p.set_attr(module_cls, "train", self._wrap_train(module_cls.train))
        p.set_attr(torch, "save", self._wrap_save(torch.save))

        def patch(owner_name: str | None, name: str) -> Callable[[Any], None]:
            def apply(mod: Any) -> None:
                owner = getattr(mod, owner_name) if owner_name else mod
                p.set_attr(owner, name, self._wrap_save(getattr(owner, name)))

            return apply

        p.add(
            "framework checkpoint saves",
            after_import({m: patch(owner, name) for m, (owner, name) in LIBRARY_SAVES.items()}),
        )

    def _ours(self) -> bool:
        w = self.w
        return get_ident() == w._tid and w._rec is not None and not self._is_compiling()

    def training_resumes(self) -> None:
        """An optimizer step or a backward begins: an evaluation left without ``train()``
        ends here."""
        rec = self.w._rec
        if self.tracker.active is not None and rec is not None:
            self.tracker.end(rec, perf_counter_ns())

    def _wrap_train(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        @functools.wraps(orig)
        def train(module: Any, mode: bool = True) -> Any:
            if hooks._train_depth or not hooks._ours():
                return orig(module, mode)
            t = perf_counter_ns()
            hooks._switched(module, bool(mode), sys._getframe(1), t)
            rec = hooks.w._rec
            if rec is not None:
                rec.current.overhead_ns += perf_counter_ns() - t
            hooks._train_depth += 1  # the module's children: straight through
            try:
                return orig(module, mode)
            finally:
                hooks._train_depth -= 1

        return train

    def _switched(self, module: Any, mode: bool, frame: Any, t: int) -> None:
        tracker, rec = self.tracker, self.w._rec
        assert rec is not None
        if mode:
            if tracker.active is not None and tracker.active.kind == EVALUATION:
                tracker.end(rec, t)
        elif (
            tracker.active is None
            and not self.per_step
            and rec.kind in TRAINING_KINDS
            and _has_parameters(module)
        ):
            self.begin_evaluation(frame, t)

    def begin_evaluation(
        self, frame: Any, t: int, held: Held | None = None, line: int | None = None
    ) -> bool:
        """An evaluation begins at ``t``, entered from ``frame`` (``held``: the step's counters
        when it began, and ``line`` the frame's line then, where that was before now); False
        where none does."""
        tracker, rec = self.tracker, self.w._rec
        if rec is None:
            return False
        last = next((e for e in reversed(tracker.events) if e.kind == EVALUATION), None)
        if last is not None:
            # At most 2 step begins apart: a loop with two optimizers begins two a step.
            self._close = self._close + 1 if self.steps - last.at_step <= 2 else 0
            if self._close >= PER_STEP_EVALS:
                self.per_step = True
                return False
        site, outer = _sites(self.w, frame)
        if line and site is not None and site.filename == frame.f_code.co_filename:
            site = dataclasses.replace(site, line=line, col=None)  # the frame has moved on
        if not tracker.begin(EVALUATION, rec, t, site, held):
            return False
        assert tracker.active is not None
        tracker.active.caller = outer
        tracker.active.at_step = self.steps
        return True

    def epoch_begins(self, it: Any, t: int, frame: Any) -> None:
        """``iter(loader)`` began at ``t`` making ``it``: an epoch start, where its loader starts
        worker processes anew."""
        rec, tracker = self.w._rec, self.tracker
        if rec is None or tracker.active is not None or not self._ours():
            return
        if not getattr(it, "_num_workers", 0) or getattr(it, "_persistent_workers", False):
            return
        site, outer = _sites(self.w, frame)
        if tracker.begin(EPOCH_START, rec, t, site):
            assert tracker.active is not None
            ev = tracker.active
            ev.caller, ev.at_step = outer, self.steps
            ev.workers = int(getattr(it, "_num_workers", 0) or 0)
            fn = getattr(it, "_worker_init_fn", None)
            ev.init_fn = getattr(fn, "__qualname__", None) or (repr(fn) if fn else None)
            ev.dataset_id = id(getattr(it, "_dataset", None))
            self._epoch_iter = id(it)

    def first_batch(self, it: Any, t: int) -> None:
        """``it`` gave its first batch at ``t``: the epoch start it began ends there."""
        active, rec = self.tracker.active, self.w._rec
        if active is None or active.kind != EPOCH_START or rec is None:
            return
        if id(it) == self._epoch_iter:
            self.tracker.end(rec, t)

    def _wrap_save(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        hooks = self

        @functools.wraps(orig)
        def save(*args: Any, **kwargs: Any) -> Any:
            rec = hooks.w._rec
            if (
                hooks._saving
                or hooks.tracker.active is not None
                or not hooks._ours()
                or rec is None
                or rec.kind not in TRAINING_KINDS
            ):
                return orig(*args, **kwargs)
            t = perf_counter_ns()
            site, outer = _sites(hooks.w, sys._getframe(1))
            hooks.tracker.begin(CHECKPOINT, rec, t, site)
            if hooks.tracker.active is not None:
                hooks.tracker.active.caller = outer
            hooks._saving = True
            try:
                return orig(*args, **kwargs)
            finally:
                hooks._saving = False
                hooks.tracker.end(rec, perf_counter_ns())

        return save
