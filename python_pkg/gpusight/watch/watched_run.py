"""What the report is built from: a finished watch as the report builder reads it.

``session.Watch`` is one; the builder (``report_builder.py``, ``phase_report.py``,
``code_sources.py``) knows it only as this, so that it does not depend on the watch's class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..script_command import BatchCommand
    from .calibration import Calibration
    from .collected import Collected
    from .detail import DetailPlan
    from .flop_step import FlopStep
    from .framework_hooks import FrameworkHookClock
    from .host_lines import LineClock
    from .phases import PhaseHooks
    from .profiler_window import ProfilerWindow
    from .raised import Raised
    from .recorder import StepRecorder
    from .sampler_process import WatchSampler


class WatchedRun(Protocol):
    @property
    def collected(self) -> Collected:
        """What the hooks gathered (``collected.py``)."""

    @property
    def recorder(self) -> StepRecorder | None:
        """The steps, as the step boundaries recorded them."""

    @property
    def window(self) -> ProfilerWindow | None:
        """The profiler window, where one ran."""

    @property
    def sampler(self) -> WatchSampler | None:
        """The NVML sampler (the host's CPU % alone without a GPU)."""

    @property
    def detail(self) -> DetailPlan:
        """Which steps recorded copies and syncs, and which ran the module hooks."""

    @property
    def calibration(self) -> Calibration:
        """The per-event costs added to the hooks' own time."""

    @property
    def lines(self) -> LineClock:
        """The host's time by line of the user's code (``host_lines.py``)."""

    @property
    def flops(self) -> FlopStep:
        """The FLOP-counted step after the measured ones."""

    @property
    def phases(self) -> PhaseHooks:
        """Evaluations and checkpoints between the training steps."""

    @property
    def notes(self) -> list[str]: ...

    @property
    def label(self) -> str | None: ...

    @property
    def outcome(self) -> str:
        """How the watched code ended: ``completed``, ``stopped``, ``raised ...``."""

    @property
    def raised(self) -> Raised | None:
        """What it raised and where, when it ``raised``."""

    @property
    def batch_hint(self) -> Callable[[], BatchCommand | None] | None: ...

    @property
    def end_drain_ms(self) -> float | None: ...

    @property
    def batch_shapes(self) -> int:
        """The shapes the DataLoader's batches came in (``loader_hooks._note_shape``)."""

    @property
    def window_start_ms(self) -> float: ...

    @property
    def framework_hooks(self) -> FrameworkHookClock | None:
        """A framework's named hooks, timed (``framework_hooks.py``)."""

    @property
    def window_stop_ms(self) -> float: ...

    @property
    def compiled_graphs(self) -> int: ...

    @property
    def cuda_available(self) -> bool: ...

    @property
    def device_types(self) -> tuple[str, ...]:
        """The device types counted as accelerators (``Watch(device_types=...)``)."""

    @property
    def native_tid(self) -> int | None: ...

    @property
    def t0_ns(self) -> int: ...

    @property
    def end_ns(self) -> int: ...

    @property
    def torch(self) -> Any: ...

    def flags(self) -> dict[str, Any]: ...

    def optimizer_notes(self) -> list[str]: ...
