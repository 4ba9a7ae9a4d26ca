"""A training framework's step hook as the loop of its steps: where the model's call has no
loop around it in its file because the framework's loop calls the function that holds it
(Lightning's ``training_step``, a ``transformers.Trainer`` subclass's ``compute_loss`` or
``training_step``), that function runs once a step, and the framework hands it a step counter
(Lightning's ``batch_idx``, the Trainer's ``self.state.global_step``) that a statement of the
step can be run by, every N steps. Pure text work with ``ast``."""

from __future__ import annotations

import ast
from dataclasses import dataclass

Function = ast.FunctionDef | ast.AsyncFunctionDef

_LIGHTNING_HOOKS = frozenset({"training_step"})
_TRAINER_HOOKS = frozenset({"compute_loss", "training_step"})


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
    """``lightning`` or ``trainer`` by the class's bases (``L.LightningModule``,
    ``pl.LightningModule``, ``Trainer``, ``Seq2SeqTrainer``)."""
    names = [_dotted(b).rsplit(".", 1)[-1] for b in cls.bases]
    if any(n == "LightningModule" for n in names):
        return "lightning"
    if any(n.endswith("Trainer") for n in names):
        return "trainer"
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
        if kind is None:
            continue
        hooks = _LIGHTNING_HOOKS if kind == "lightning" else _TRAINER_HOOKS
        for fn in cls.body:
            if (
                isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
                and fn.name in hooks
                and fn.body[0].lineno <= call_line <= (fn.end_lineno or fn.lineno)
            ):
                return StepHook(fn, _counter(kind, fn))
    return None


def reads_counter(test: ast.expr, counter: str) -> bool:
    """Whether the condition ``test`` reads the step counter (a plain name, or a dotted one
    such as ``self.global_step``)."""
    return any(_dotted(n) == counter for n in ast.walk(test) if isinstance(n, ast.expr))
