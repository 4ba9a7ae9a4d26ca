"""The fix for a training framework's own per-step time, chosen by which of its hooks takes it.

The line clock times the user's lines; under ``trainer.fit(...)`` it sees Lightning's whole
per-step code as one line's. The watch times Lightning's named hooks on the measured steps
(``watch/framework_hooks.py``): where a callback that ships with Lightning takes a share of the
step worth naming, the fix is that callback's option (a progress bar's refresh), not the generic
list of options a framework loop has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..fixes.framework_calls import PROGRESS_BAR_CLASSES, REFRESH_EVERY, progress_bar_patch
from ..fixes.patch_files import with_patch
from ..report import Evidence, Finding, Fix
from .host_line_fix import kind_of
from .workload_impacts import idle_impact, pct, rnd

if TYPE_CHECKING:
    from .step_view import StepView
    from .workload_evidence import CodeSource

NAMED_SHARE_PCT = 3.0
"""A callback's share of the step, past which the fix names it."""
SHOWN_MS = 0.005
"""A hook of the callback's is listed in the evidence from this time per step on."""
OURS = ("GpusightCallback",)
"""gpusight's own callback (``integrations/lightning.py``): its cost is the watch's."""
ALL_TRAINER_CALLBACKS = "TrainerCallbacks"
"""Hugging Face's Trainer's callbacks, timed as one per event (``watch/framework_hooks.py``)."""


@dataclass(frozen=True)
class HookTime:
    name: str
    """As Lightning names it: ``[Callback]TQDMProgressBar.on_train_batch_end``."""
    ms: float
    """Own host time per step (the named hooks inside it left out)."""
    calls: float
    """Calls per step."""

    @property
    def kind(self) -> str:
        """``Callback``, ``LightningModule``, ``Strategy``, ... or ``loop``."""
        return self.name[1:].split("]", 1)[0] if self.name.startswith("[") else "loop"

    @property
    def owner(self) -> str:
        """The hook's class (a callback's state key starts with its class name)."""
        body = self.name.split("]", 1)[-1]
        return body.rsplit(".", 1)[0].split("{", 1)[0] if "." in body else ""

    @property
    def hook(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def callback_costs(hooks: list[HookTime], user_functions: set[str]) -> dict[str, float]:
    """Each callback class's host time per step, over its hooks, costliest first; the user's
    own callbacks (a class whose hook the line clock timed as the user's code) and gpusight's
    left out: their lines are timed as the user's."""
    out: dict[str, float] = {}
    for h in hooks:
        if h.kind != "Callback" or h.owner in (*OURS, ALL_TRAINER_CALLBACKS):
            continue
        if f"{h.owner}.{h.hook}" in user_functions:
            continue
        out[h.owner] = out.get(h.owner, 0.0) + h.ms
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def costliest_callback(
    hooks: list[HookTime], user_functions: set[str], step_ms: float
) -> tuple[str, float] | None:
    """The framework's callback worth naming: (class, ms per step), or None."""
    costs = callback_costs(hooks, user_functions)
    if not costs or step_ms <= 0:
        return None
    owner, ms = next(iter(costs.items()))
    return (owner, ms) if 100.0 * ms / step_ms >= NAMED_SHARE_PCT else None


def callback_fix(owner: str, ms: float, step_ms: float, at: str) -> tuple[str, str | None]:
    """The fix text for the callback ``owner`` taking ``ms`` of each ``step_ms`` step, called
    from ``at``, and its code where it has one."""
    share = f"{ms:.2f} ms of each {step_ms:.2f} ms step ({100.0 * ms / step_ms:.0f}%)"
    if owner in PROGRESS_BAR_CLASSES:
        bar = owner if owner != "ProgressBar" else "TQDMProgressBar"
        return (
            f"Lightning's progress bar ({owner}) takes {share} under {at}: it redraws at "
            "every batch, and each redraw reads the values logged with prog_bar=True (on the "
            f"GPU, a wait for it). Redraw it every {REFRESH_EVERY} batches "
            f"({bar}(refresh_rate={REFRESH_EVERY}) in the Trainer's callbacks), or turn it off "
            "for training runs (Trainer(..., enable_progress_bar=False), with no progress bar "
            "in its callbacks).",
            f"callbacks=[{bar}(refresh_rate={REFRESH_EVERY})]",
        )
    if owner == "DeviceStatsMonitor":
        return (
            f"Lightning's DeviceStatsMonitor takes {share} under {at}: it reads the device's "
            "statistics at every batch. Keep it for a debugging run, not the training run.",
            None,
        )
    if owner == "LearningRateMonitor":
        return (
            f"Lightning's LearningRateMonitor takes {share} under {at}: log the rate once an "
            'epoch (LearningRateMonitor(logging_interval="epoch")), or less often through '
            "Trainer(log_every_n_steps=N).",
            None,
        )
    return (
        f"The callback {owner} takes {share} under {at}, in its per-batch hooks: pass it to "
        "the Trainer only where its work is needed, or give it an option to act every N "
        "batches.",
        None,
    )


def framework_callback(view: StepView) -> list[Finding]:
    """``code.framework_callback``: a callback that ships with the training framework
    (Lightning's progress bar) takes a share of every step worth naming."""
    ev, total = view.ev, view.total
    got = costliest_callback(ev.framework_hooks, {ln.function for ln in ev.host_lines}, total)
    if got is None:
        return []
    owner, ms = got
    share = pct(ms, total)
    loop = next((ln for ln in ev.host_lines if kind_of(ln) == "framework_loop"), None)
    at = f"{loop.where} (`{(loop.code or '').strip()}`)" if loop is not None else "trainer.fit()"
    text, code = callback_fix(owner, ms, total, at)
    # On a GPU only the host's idle share of the step can come back: past it the GPU is busy.
    gain = share if not view.gpu_run or view.busy is None else min(share, 100.0 - view.busy)
    f = Finding(
        id="code.framework_callback",
        severity="info",
        # Host time: on a GPU a wait inside the hook (a progress bar's read of a logged value)
        # is time the GPU may spend busy anyway, which the gain above leaves out.
        title=f"Lightning's {owner} callback holds the host {ms:.2f} ms of every {total:.2f} ms "
        f"step ({share:.0f}%)",
        evidence=[
            Evidence("callback", owner),
            Evidence("host time in its hooks", rnd(ms, 3), "ms/step"),
            Evidence("share of step", rnd(share), "%"),
            *(
                Evidence(h.name, rnd(h.ms, 3), "ms/step")
                for h in ev.framework_hooks
                if h.kind == "Callback" and h.owner == owner and h.ms >= SHOWN_MS
            ),
        ],
        impact=idle_impact(gain, f"{owner}'s hooks take {rnd(ms, 2)} ms of each step."),
        fix=Fix(text=text, code=code, language="python" if code else None),
    )
    if owner in PROGRESS_BAR_CLASSES:
        with_bar_patch(f, ev.forward_source, "trainer = L.Trainer", at=1)
    return [f]


def with_bar_patch(f: Finding, src: CodeSource | None, trainer: str, at: int) -> Finding:
    """``f`` with its fix the script's Lightning progress bar redrawn less often (or, where the
    file makes none, ``trainer``'s call with the bar off: its code then), the change said in
    its evidence at ``at``; unchanged in a notebook cell or where no single call is found."""
    made = progress_bar_patch(src.text, src.path) if src and src.cell is None and src.text else None
    if src is None or made is None:
        return f
    if made[1] == "enable_progress_bar=False":  # the file makes no bar of its own
        f.fix.code = f"{trainer}(..., {made[1]})"
    f.evidence.insert(at, Evidence("change", made[1]))
    f.fix = with_patch(f.fix, made[0], {src.path: src.text})
    return f


PARTS = {
    "training_step": "the training step (your training_step: the forward and the loss)",
    "backward": "backward",
    "optimizer_step": "the optimizer step (Lightning's closure around it)",
    "optimizer_zero_grad": "zero_grad",
    "train_dataloader_next": "the next batch from the DataLoader",
    "batch_to_device": "the batch's copy to the device",
    "transfer_batch_to_device": "the batch's copy to the device",
    "run_training_batch": "the batch loop's own code",
}
TRAINER_PARTS = {
    "training_step": "the training step (the forward, the loss and backward)",
    "get_batch_samples": "the next batches from the DataLoader",
    "_clip_grad_norm": "the gradient clipping (max_grad_norm)",
    "optimizer_step": "the optimizer's step",
    "_maybe_log_save_evaluate": "the logging, saving and evaluation checks",
}
"""Hugging Face's Trainer's parts (``watch/framework_hooks.HF_PARTS``), and the optimizer's step
it calls between them (timed by the watch's optimizer hook)."""
OPTIMIZER_STEP = "[Trainer]Trainer.optimizer_step"
DATA_HOOKS = ("train_dataloader_next", "get_batch_samples")
LOOP_SHOWN = 4
DATA_SHARE_PCT = 15.0
"""The share of the step waiting for the next batch past which the fix is the loader's."""
COPY_SHARE_PCT = 10.0


def _part(h: HookTime) -> str:
    if h.owner == ALL_TRAINER_CALLBACKS:
        return f"the callbacks' {h.hook}"
    if h.kind == "Callback":
        return f"{h.owner}.{h.hook}"
    parts = TRAINER_PARTS if h.kind == "Trainer" else PARTS
    return parts.get(h.hook, f"{h.owner}.{h.hook}" if h.owner else h.hook)


def loop_text(
    at: str, hooks: list[HookTime], step_ms: float, optimizer_ms: float | None = None
) -> str | None:
    """The fix for the host time under a framework's loop line (``trainer.fit(...)``) from its
    named hooks: where each millisecond went, and the change for the costliest part the user
    can act on; None without hooks (the generic text stands). ``optimizer_ms``: the host's time
    in ``optimizer.step()``, a part of its own in Hugging Face's Trainer (Lightning's spans
    hold it)."""
    hf = any(h.kind == "Trainer" for h in hooks)
    if hf and optimizer_ms:
        hooks = sorted([*hooks, HookTime(OPTIMIZER_STEP, optimizer_ms, 1.0)], key=lambda h: -h.ms)
    shown = [h for h in hooks if h.kind != "Callback" or h.owner not in OURS][:LOOP_SHOWN]
    if not shown or step_ms <= 0:
        return None
    parts = "; ".join(f"{_part(h)} {h.ms:.2f} ms" for h in shown)
    rest = step_ms - sum(h.ms for h in hooks)
    if rest >= 0.05 * step_ms:  # the loop's own code
        parts += f"; outside them {rest:.2f} ms"
    text = (
        f"The host time at {at} is {'the Trainer' if hf else 'Lightning'}'s per-step code, "
        f"not a line of yours to move. Its parts took, of each {step_ms:.2f} ms step: {parts}."
    )

    def share(*names: str) -> float:
        return pct(sum(h.ms for h in hooks if h.hook in names), step_ms)

    if share(*DATA_HOOKS) >= DATA_SHARE_PCT:
        return text + (
            " The step waits for its next batch: give the DataLoader workers ("
            + (
                "TrainingArguments(..., dataloader_num_workers=N, "
                "dataloader_persistent_workers=True)"
                if hf
                else "DataLoader(..., num_workers=N, persistent_workers=True)"
            )
            + ")."
        )
    if share("batch_to_device", "transfer_batch_to_device") >= COPY_SHARE_PCT:
        return text + (
            " The batch's copy to the device takes a share of it: pin_memory=True in the "
            "DataLoader lets the copy run asynchronously."
        )
    if hf:
        return text + (
            " The rest is the model's own work, with the Trainer's fixed cost per step around "
            "it: a larger batch (per_device_train_batch_size) spreads that cost over more "
            "items; logging often (logging_steps) adds to it."
        )
    return text + (
        " The rest is the model's own work, with Lightning's fixed cost per step around it: a "
        "larger batch (the DataModule's or DataLoader's batch_size) spreads that cost over "
        "more items; the logging per step (self.log(..., on_step=True), log_every_n_steps) "
        "and the progress bar add to it."
    )
