"""The FLOPs of one training step, counted by torch's ``FlopCounterMode`` on the step after the
measured ones.

Counting dispatches every operator through Python, which costs a step several times its time:
so it never runs in a step the report times. When the measured steps are in, the watch keeps its
hooks for one more step (``Watch._measuring_done``), counts it, and only then lets the run go on
or stops it. A step that held an evaluation or a checkpoint is counted again (its FLOPs are not
the training step's), up to ``TRIES`` steps. Each counted matrix product or convolution is
tallied by the precision it runs in: its inputs' dtype, with float32 read as TF32 where torch's
flags let cuBLAS or cuDNN use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .machine import tf32_matmul

TRIES = 3
_CONV = ("convolution", "conv")
FLOPS_CUT_SHORT = "the run ended before the step after the measured ones did"


def flops_blocked(models: Iterable[Any], compiled: bool) -> str | None:
    """Why a count of the next step would be wrong, or None."""
    if compiled:
        return (
            "the model is compiled: its kernels run outside the dispatcher FlopCounterMode "
            "counts in"
        )
    for m in models:
        if type(m).__name__ == "DataParallel" and len(getattr(m, "device_ids", ()) or ()) > 1:
            return "DataParallel runs its replicas in threads FlopCounterMode does not see"
    return None


@dataclass
class CountedFlops:
    """What the count found: FLOPs by precision, or why there is no count."""

    by_precision: dict[str, float] = field(default_factory=dict)
    step_index: int | None = None
    """1-based index of the counted step (after the measured ones)."""
    unavailable: str | None = None

    @property
    def total(self) -> float:
        return float(sum(self.by_precision.values()))


def precision_of(dtype: Any, conv: bool, flags: dict[str, Any]) -> str:
    """The precision a product runs in, for the ceiling it is set against."""
    name = str(dtype).replace("torch.", "")
    if name == "bfloat16":
        return "bf16"
    if name == "float16":
        return "fp16"
    if name.startswith("float8"):
        return "fp8"
    if name == "float32":
        tf32 = bool(flags.get("cudnn.allow_tf32")) if conv else tf32_matmul(flags)
        return "tf32" if tf32 else "fp32"
    return name


def _counter_class(torch: Any) -> type | None:
    """A ``FlopCounterMode`` that also tallies by precision; None before torch 2.1."""
    try:
        from torch.utils.flop_counter import FlopCounterMode as base
    except ImportError:
        return None

    class StepFlopCounter(base):  # type: ignore[misc, valid-type]
        def __init__(self, flags: dict[str, Any]) -> None:
            super().__init__(display=False)
            self.gs_flags = flags
            self.gs_by: dict[str, float] = {}

        def _count_flops(self, func_packet: Any, out: Any, args: Any, kwargs: Any) -> Any:
            counts = self.flop_counts["Global"]
            before = counts[func_packet]
            result = super()._count_flops(func_packet, out, args, kwargs)  # type: ignore[no-untyped-call]
            added = counts[func_packet] - before
            if added:
                first = next((a for a in args if isinstance(a, torch.Tensor)), None)
                conv = any(c in str(func_packet) for c in _CONV)
                # TF32 is a CUDA setting: a product on the CPU runs in its dtype.
                flags = self.gs_flags if first is not None and first.is_cuda else {}
                p = precision_of(getattr(first, "dtype", None), conv, flags)
                self.gs_by[p] = self.gs_by.get(p, 0.0) + float(added)
            return result

    return StepFlopCounter


class FlopStep:
    """The count's state: idle, counting a step, or done (``result``)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.result: CountedFlops | None = None
        self._counter: Any = None
        self.tries = 0
        self._index = 0

    @property
    def counting(self) -> bool:
        return self._counter is not None

    def begin(self, torch: Any, flags: dict[str, Any], index: int, why_not: str | None) -> bool:
        """Start counting the step with 1-based ``index``; False when no count is made
        (``why_not`` given, or no ``FlopCounterMode`` in this torch)."""
        if not self.enabled or self.result is not None:
            return False
        if why_not is not None:
            self.result = CountedFlops(unavailable=why_not)
            return False
        cls = _counter_class(torch)
        if cls is None:
            self.result = CountedFlops(unavailable="this torch has no FlopCounterMode (2.1+)")
            return False
        try:
            counter = cls(flags)
            counter.__enter__()
        except Exception as exc:
            self.result = CountedFlops(unavailable=f"FlopCounterMode failed: {exc}")
            return False
        self._counter, self._index = counter, index
        self.tries += 1
        return True

    def end(self, held_phase: bool, again: Callable[[], bool]) -> None:
        """The counted step ended. One that held an evaluation or a checkpoint is counted
        again (``again`` starts the next count) while tries are left."""
        counter, self._counter = self._counter, None
        if counter is None:
            return
        ok = self._exit(counter)
        if not ok:
            return
        if held_phase:
            if self.tries < TRIES and again():
                return
            self.result = CountedFlops(
                unavailable=f"each of the {self.tries} steps after the measured ones held an "
                "evaluation or a checkpoint"
            )
            return
        by = {p: f for p, f in counter.gs_by.items() if f > 0}
        self.result = CountedFlops(by_precision=by, step_index=self._index)
        if not by:
            self.result.unavailable = (
                "the counted step ran no matrix product or convolution that FlopCounterMode counts"
            )

    def abort(self, why: str) -> None:
        """The run ended or failed mid-count: the mode comes off, no count."""
        counter, self._counter = self._counter, None
        if counter is not None and self._exit(counter):
            self.result = CountedFlops(unavailable=why)

    def _exit(self, counter: Any) -> bool:
        try:
            counter.__exit__(None, None, None)
        except Exception as exc:
            self.result = CountedFlops(unavailable=f"FlopCounterMode failed: {exc}")
            return False
        return True
