"""A training framework's step hook as the loop of its steps: where the model's call has no
loop around it in its file because the framework's loop calls the function that holds it
(Lightning's ``training_step``, a ``transformers.Trainer`` subclass's ``compute_loss`` or
``training_step``), that function runs once a step, and the framework hands it a step counter
(Lightning's ``batch_idx``, the Trainer's ``self.state.global_step``) that a statement of the
step can be run by, every N steps. The framework's other once-a-batch hooks hold statements of
the step too (a Lightning ``Callback``'s or the module's own ``on_train_batch_end``, a
``TrainerCallback``'s ``on_step_end``): each is found by the line it holds, with the counter its
arguments carry. Pure text work with ``ast``."""

from __future__ import annotations

import ast
from dataclasses import dataclass

Function = ast.FunctionDef | ast.AsyncFunctionDef

_LIGHTNING_HOOKS = frozenset({"training_step"})
_TRAINER_HOOKS = frozenset({"compute_loss", "training_step"})

_BATCH_IDX = {"on_train_batch_start": 2, "on_train_batch_end": 3}
"""A LightningModule's own once-a-batch hooks, by the place of ``batch_idx`` in their
arguments (``self`` first); its other ones count by ``self.global_step``."""
_MODULE_HOOKS = frozenset({*_BATCH_IDX, "on_before_backward", "on_after_backward",
                           "on_before_optimizer_step", "on_before_zero_grad"})  # fmt: skip
_CALLBACK_OFFSET = 2
"""A Lightning ``Callback``'s hooks take ``trainer, pl_module`` before the module's arguments."""
_HF_CALLBACK_HOOKS = frozenset({"on_step_begin", "on_step_end", "on_pre_optimizer_step",
                                "on_optimizer_step"})  # fmt: skip
"""A ``TrainerCallback``'s once-a-step hooks: ``(self, args, state, control, **kwargs)``."""


@dataclass(frozen=True)
class StepHook:
    """The framework's step function around the model's call, and the step counter it has."""

    function: Function
    counter: str
    """An expression of the step's index: ``batch_idx``, ``self.global_step``,
    ``self.state.global_step``."""


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _framework(cls: ast.ClassDef) -> str | None:
    """``lightning``, ``trainer``, ``callback`` (Lightning's) or ``trainer_callback`` by the
    class's bases (``L.LightningModule``, ``pl.LightningModule``, ``Trainer``,
    ``Seq2SeqTrainer``, ``L.Callback``, ``TrainerCallback``)."""
    names = [_dotted(b).rsplit(".", 1)[-1] for b in cls.bases]
    if any(n == "LightningModule" for n in names):
        return "lightning"
    if any(n.endswith("Trainer") for n in names):
        return "trainer"
    if "TrainerCallback" in names:
        return "trainer_callback"
    if "Callback" in names:
        return "callback"
    return None


def _counter(kind: str, fn: Function) -> str:
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if kind == "lightning":
        # ``training_step(self, batch, batch_idx)``: Lightning passes the batch's index in its
        # epoch; without it, the count of optimizer steps so far.
        return args[2] if len(args) >= 3 and args[2] != "_" else "self.global_step"
    return "self.state.global_step"


def step_hook(tree: ast.Module, call_line: int) -> StepHook | None:
    """The framework's step hook whose body holds ``call_line``, with its counter; None where
    the line is in no such method of a LightningModule or a Trainer subclass."""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        kind = _framework(cls)
        if kind not in ("lightning", "trainer"):
            continue
        hooks = _LIGHTNING_HOOKS if kind == "lightning" else _TRAINER_HOOKS
        for fn in cls.body:
            if (
                isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
                and fn.name in hooks
                and _holds(fn, call_line)
            ):
                return StepHook(fn, _counter(kind, fn))
    return None


def _holds(fn: Function, line: int) -> bool:
    return fn.body[0].lineno <= line <= (fn.end_lineno or fn.lineno)


def _arg(fn: Function, at: int) -> str | None:
    args = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return args[at] if len(args) > at and args[at] != "_" else None


def _hook_counter(kind: str, fn: Function) -> str | None:
    """The counter a framework's once-a-batch hook ``fn`` has: its ``batch_idx``, else the
    trainer's step count as the hook can reach it; None for any other method."""
    if kind == "trainer_callback":
        state = _arg(fn, 2) if fn.name in _HF_CALLBACK_HOOKS else None
        return f"{state}.global_step" if state else None
    if fn.name not in _MODULE_HOOKS:
        return None
    offset = _CALLBACK_OFFSET if kind == "callback" else 0
    at = _BATCH_IDX.get(fn.name)
    idx = _arg(fn, at + offset) if at is not None else None
    if idx is not None:
        return idx
    if kind == "lightning":
        return "self.global_step"
    trainer = _arg(fn, 1)
    return f"{trainer}.global_step" if trainer else None


def batch_hook(tree: ast.Module, line: int) -> StepHook | None:
    """The framework's once-a-batch hook other than the step function that holds ``line``: a
    Lightning ``Callback``'s or the module's own ``on_train_batch_end`` (and the like), a
    ``TrainerCallback``'s ``on_step_end``; None where the line is in none."""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        kind = _framework(cls)
        if kind not in ("lightning", "callback", "trainer_callback"):
            continue
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not _holds(fn, line):
                continue
            counter = _hook_counter(kind, fn)
            if counter is not None:
                return StepHook(fn, counter)
    return None


def reads_counter(test: ast.expr, counter: str) -> bool:
    """Whether the condition ``test`` reads the step counter (a plain name, or a dotted one
    such as ``self.global_step``)."""
    return any(_dotted(n) == counter for n in ast.walk(test) if isinstance(n, ast.expr))
