"""The training frameworks' own mixed-precision switches, for the autocast knob.

Where the script trains through Hugging Face's ``Trainer``, Lightning's ``Trainer`` or
Accelerate's ``Accelerator``, its users turn precision on there (``TrainingArguments(bf16=True)``,
``precision="bf16-mixed"``, ``mixed_precision="bf16"``), and the framework then covers the loss
and the optimizer step as it should (a gradient scaler for fp16). A re-run turns the same switch
as the framework's objects are made; only where none is made does autocast go around the model's
forward. The baseline's run records which framework's objects the script made
(:func:`observe`), so that the plan and the fix name the switch the re-run turns.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..after_import import Callback, after_import


@dataclass(frozen=True)
class Framework:
    name: str
    modules: tuple[str, ...]
    """Where the switch lives (any one imported means the script made use of it)."""
    switch: str
    """The change, as its users write it, for bf16 (``{fp16}`` variants in ``switch_fp16``)."""
    switch_fp16: str


TRANSFORMERS = Framework(
    "transformers", ("transformers.training_args",), "TrainingArguments(..., bf16=True)",
    "TrainingArguments(..., fp16=True)",
)  # fmt: skip
LIGHTNING = Framework(
    "lightning",
    ("lightning.pytorch.trainer.trainer", "pytorch_lightning.trainer.trainer"),
    'Trainer(..., precision="bf16-mixed")',
    'Trainer(..., precision="16-mixed")',
)
ACCELERATE = Framework(
    "accelerate", ("accelerate.accelerator",), 'Accelerator(..., mixed_precision="bf16")',
    'Accelerator(..., mixed_precision="fp16")',
)  # fmt: skip
# Precedence: Hugging Face's Trainer runs on an Accelerator of its own making.
FRAMEWORKS = (TRANSFORMERS, LIGHTNING, ACCELERATE)


def by_name(name: str | None) -> Framework | None:
    return next((fw for fw in FRAMEWORKS if fw.name == name), None)


def switches(
    dtype: str | None, hit: Callable[[str], None], undo: list[Callable[[], None]] | None = None
) -> dict[str, Callback]:
    """For each framework's module: the patch that turns its switch on for ``dtype`` where the
    script left it off, calling ``hit`` with the framework's name when it does. With ``dtype``
    None nothing changes and ``hit`` says which framework's object the script made. ``undo``
    gets what puts each patched class back."""
    fp16 = dtype == "float16"
    undo = undo if undo is not None else []

    def switch_on(args: Any) -> bool:
        if getattr(args, "bf16", False) or getattr(args, "fp16", False):
            return False
        setattr(args, "fp16" if fp16 else "bf16", True)
        return True

    def transformers(mod: ModuleType) -> None:
        undo.append(_wrap_post_init(mod.TrainingArguments, switch_on, lambda: hit("transformers")))

    def lightning(mod: ModuleType) -> None:
        def change(kwargs: dict[str, Any]) -> bool:
            if dtype is None:
                return True
            if kwargs.get("precision") not in (None, 32, "32", "32-true"):
                return False
            kwargs["precision"] = "16-mixed" if fp16 else "bf16-mixed"
            return True

        undo.append(_wrap_init(mod.Trainer, change, lambda: hit("lightning")))

    def accelerate(mod: ModuleType) -> None:
        def change(kwargs: dict[str, Any]) -> bool:
            if dtype is None:
                return True
            said = kwargs.get("mixed_precision") or os.environ.get("ACCELERATE_MIXED_PRECISION")
            if said not in (None, "no"):
                return False
            kwargs["mixed_precision"] = "fp16" if fp16 else "bf16"
            return True

        undo.append(_wrap_init(mod.Accelerator, change, lambda: hit("accelerate")))

    def transformers_trainer(mod: ModuleType) -> None:
        # Observed at the Trainer: TrainingArguments alone also parse custom loops' options.
        undo.append(_wrap_init(mod.Trainer, lambda kwargs: True, lambda: hit("transformers")))

    out: dict[str, Callback] = (
        {TRANSFORMERS.modules[0]: transformers}
        if dtype is not None
        else {"transformers.trainer": transformers_trainer}
    )
    for name in LIGHTNING.modules:
        out[name] = lightning
    out[ACCELERATE.modules[0]] = accelerate
    return out


def observe() -> tuple[list[str], Callable[[], None]]:
    """From now on, the frameworks whose objects the script makes, first made first (the list
    fills as it runs), and what ends the watching."""
    seen: list[str] = []
    undo: list[Callable[[], None]] = []

    def hit(name: str) -> None:
        if name not in seen:
            seen.append(name)

    undo.append(after_import(switches(None, hit, undo)))

    def stop() -> None:
        while undo:
            undo.pop()()

    return seen, stop


def trained_through(seen: list[str]) -> str | None:
    """The framework that drives the training, of those whose objects were made."""
    return next((fw.name for fw in FRAMEWORKS if fw.name in seen), None)


def _wrap_post_init(
    cls: type, change: Callable[[Any], bool], hit: Callable[[], None]
) -> Callable[[], None]:
    """``cls.__post_init__`` (Hugging Face's ``TrainingArguments``) that lets ``change`` edit
    the fields the script set before the class checks them; returns the undo."""
    orig = cls.__post_init__  # type: ignore[attr-defined]

    @functools.wraps(orig)
    def __post_init__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if change(self):
            hit()
        return orig(self, *args, **kwargs)

    cls.__post_init__ = __post_init__  # type: ignore[attr-defined]
    return lambda: setattr(cls, "__post_init__", orig)


def _wrap_init(
    cls: type, change: Callable[[dict[str, Any]], bool], hit: Callable[[], None]
) -> Callable[[], None]:
    """``cls.__init__`` that lets ``change`` edit its keyword arguments; returns the undo."""
    orig = cls.__init__  # type: ignore[misc]

    @functools.wraps(orig)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if change(kwargs):
            hit()
        orig(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    return lambda: setattr(cls, "__init__", orig)
