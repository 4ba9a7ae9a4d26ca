"""The command that runs the user's script with its batch option set: how a larger batch is
fixed where the script takes its batch size on its command line (``gpusight run``). Editing
the DataLoader there would hard-code a number over the option the script reads."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from .report import Fix


@dataclass
class BatchCommand:
    """The script's batch option as the watched run was given it, with the run's command."""

    option: str
    """The option as the command passes it (its first long spelling)."""
    value: int
    script: str
    args: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    """Every spelling of the option, replaced in the arguments."""


def with_value(args: list[str], arg: dict[str, Any], value: int) -> list[str]:
    """The script's arguments with the batch option set to ``value`` (every spelling of it
    replaced; appended when the script ran with its default)."""
    aliases = set(arg.get("aliases") or [arg["option"]])
    out: list[str] = []
    found = False
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, _ = a.partition("=")
        if name in aliases and eq:
            out.append(f"{name}={value}")
            found = True
        elif a in aliases and i + 1 < len(args):
            out += [a, str(value)]
            found = True
            i += 1
        else:
            out.append(a)
        i += 1
    if not found:
        out += [str(arg["option"]), str(value)]
    return out


def command_text(option: str, new: int, training: bool = True) -> str:
    lr = " (and scale the learning rate)" if training else ""
    return f"Run the script with {option} {new}{lr}."


def command_fix(text: str, arg: dict[str, Any], new: int, script: str, args: list[str]) -> Fix:
    """``text`` with the shell command that runs ``script`` at batch ``new``, the script's other
    arguments as the run had them."""
    argv = ["python", script, *with_value(list(args), arg, new)]
    return Fix(text=text, code=shlex.join(argv), language="shell")


def batch_command_fix(
    cmd: BatchCommand | None, batch: int, suggested: int, training: bool = True
) -> Fix | None:
    """A larger batch through the script's option, where the run's batch is the option's value
    (otherwise the option sizes something else: an evaluation's batch, a global batch split
    across ranks, one the script divides)."""
    if cmd is None or cmd.value != batch or suggested == batch:
        return None
    arg = {"option": cmd.option, "aliases": cmd.aliases or [cmd.option]}
    text = command_text(cmd.option, suggested, training)
    return command_fix(text, arg, suggested, cmd.script, cmd.args)
