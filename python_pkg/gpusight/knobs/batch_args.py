"""The batch size as the script takes it on its command line: found in the run that watches the
script (the argparse options it parses from ``sys.argv``, else ``sys.argv`` itself), and set in
a re-run's arguments, as the user would pass it.

An option counts when its name says batch size (``--batch-size``, ``--batch_size``,
``--batchSize`` as pytorch/examples spell it, ``-b`` beside one, ``--bs``,
``--per_device_train_batch_size``, ...) and its value is a positive integer: as parsed, or, for
an option whose default is None, as the script filled it in afterwards (``args.batchSize =
args.batchSize or 64``). A batch sampler's size, a config file's or a hard-coded one is not seen
here: the DataLoader's ``batch_size`` is the knob then.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..script_command import BatchCommand, with_value

__all__ = [
    "BatchArg",
    "Recorder",
    "accum_action",
    "batch_action",
    "from_argv",
    "from_parser",
    "with_value",
]

_LONG = re.compile(
    r"^--(?:train[-_]?)?(?:per[-_]?device[-_]?(?:train[-_]?)?)?(?:mini[-_]?)?batch(?:[-_]?size)?$"
    r"|^--bs$",
    re.IGNORECASE,
)
_DEST = re.compile(
    r"^(?:train_?)?(?:per_?device_?(?:train_?)?)?(?:mini_?)?batch(?:_?size)?$|^bs$", re.IGNORECASE
)


_ACCUM = re.compile(
    r"^--(?:grad(?:ient)?[-_]?)?accum(?:ulat(?:e|ion))?(?:[-_]?(?:grad[-_]?batches|steps?|iters?))?$",
    re.IGNORECASE,
)
"""An option for the batches an optimizer step takes: ``--accum-steps``, ``--grad-accum-steps``
(timm), ``--gradient_accumulation_steps`` (Hugging Face's examples), ``--accumulate_grad_batches``
(Lightning's)."""


@dataclass
class BatchArg:
    option: str
    """The option as the re-run passes it (its first long spelling)."""
    aliases: list[str]
    """Every spelling of it, looked for in the arguments to replace."""
    value: int
    source: str
    """``argparse`` (read from the script's parser) or ``argv`` (read from ``sys.argv``)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def command(self, script: str, args: list[str]) -> BatchCommand:
        return BatchCommand(self.option, self.value, script, list(args), list(self.aliases))


def _is_batch_action(action: argparse.Action) -> bool:
    longs = [o for o in action.option_strings if o.startswith("--")]
    if not longs and not _DEST.match(action.dest or ""):
        return False
    return any(_LONG.match(o) for o in longs) or bool(_DEST.match(action.dest or ""))


def from_parser(parser: argparse.ArgumentParser, namespace: Any) -> BatchArg | None:
    """The batch option of a parser that parsed the script's ``sys.argv``, with its value."""
    return _parsed(batch_action(parser), namespace)


def _parsed(action: argparse.Action | None, namespace: Any) -> BatchArg | None:
    """``action``'s option with the positive integer it parsed to; None otherwise."""
    if action is None:
        return None
    value = getattr(namespace, action.dest, None)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return None
    longs = [o for o in action.option_strings if o.startswith("--")]
    option = (longs or action.option_strings)[0]
    return BatchArg(option, list(action.option_strings), int(value), "argparse")


def batch_action(parser: argparse.ArgumentParser) -> argparse.Action | None:
    """The parser's first option named for the batch size."""
    return next((a for a in parser._actions if a.option_strings and _is_batch_action(a)), None)


def accum_action(parser: argparse.ArgumentParser) -> argparse.Action | None:
    """The parser's first option named for gradient accumulation."""
    return next(
        (a for a in parser._actions if any(_ACCUM.match(o) for o in a.option_strings)), None
    )


def accum_from_parser(parser: argparse.ArgumentParser, namespace: Any) -> BatchArg | None:
    """The accumulation option of a parser that parsed the script's ``sys.argv``, with its
    value (a positive integer as parsed)."""
    return _parsed(accum_action(parser), namespace)


def from_argv(argv: list[str]) -> BatchArg | None:
    """A batch option written in the arguments themselves (a script without argparse)."""
    for i, a in enumerate(argv):
        name, eq, val = a.partition("=")
        if not _LONG.match(name):
            continue
        raw = val if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        if raw.isdigit() and int(raw) > 0:
            return BatchArg(name, [name], int(raw), "argv")
    return None


class Recorder:
    """While installed, the first batch option parsed from ``sys.argv`` is kept in ``found``."""

    def __init__(self) -> None:
        self.found: BatchArg | None = None
        self.accum: BatchArg | None = None
        """The script's gradient-accumulation option, where it has one."""
        self._unset: tuple[argparse.ArgumentParser, Any] | None = None
        """A batch option parsed as None (its default), with its namespace: the script may
        fill it in after parsing (``args.batchSize = args.batchSize or 64``)."""
        self._orig: Callable[..., Any] | None = None

    def install(self) -> Recorder:
        cls = argparse.ArgumentParser
        orig = cls.parse_known_args
        rec = self

        def parse_known_args(parser: Any, args: Any = None, namespace: Any = None) -> Any:
            out = orig(parser, args, namespace)
            if rec.accum is None and args is None:
                try:
                    rec.accum = accum_from_parser(parser, out[0])
                except Exception:  # as below
                    pass
            if rec.found is None and args is None:
                try:
                    rec.found = from_parser(parser, out[0])
                    action = batch_action(parser) if rec.found is None else None
                    if action is not None and getattr(out[0], action.dest, 0) is None:
                        rec._unset = rec._unset or (parser, out[0])
                except Exception:  # reading the parser is a nicety; the script's parse stands
                    pass
            return out

        self._orig = orig
        cls.parse_known_args = parse_known_args  # type: ignore[method-assign,assignment]
        return self

    def uninstall(self) -> None:
        if self._orig is not None:
            argparse.ArgumentParser.parse_known_args = self._orig  # type: ignore[method-assign]
            self._orig = None

    def result(self, script_args: list[str]) -> BatchArg | None:
        if self.found is None and self._unset is not None:
            try:
                self.found = from_parser(*self._unset)
            except Exception:
                pass
        return self.found or from_argv(script_args)
