"""A short ``torch.profiler`` window: start, stop, read back the trace with a clock alignment.

The window is started and stopped from the step hooks (between two steps), so the steps
inside it are whole. Reading the trace back happens after the run, never inside a step.

CUPTI: torch's profiler (Kineto) leaves CUPTI's callbacks on after it stops unless
``TEARDOWN_CUPTI=1`` is in the environment when it stops (pytorch/pytorch#144455). Left on, they
made every later kernel launch dearer: a launch-bound training step ran 32 % slower for the rest
of the run on an H200 (``benchmarks/cost/probe_profiler.py``), and the report's step time
described the watched loop, not the user's. So the window asks for the teardown, unless the
environment already says otherwise or inductor's CUDA graphs are on (torch keeps CUPTI up for
them: a re-init crashed them on older CUDA), and gives the environment back afterwards.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

from .quiet_stderr import without_profiler_chatter
from .trace_analysis import Alignment, find_marker

ALIGN_MARKER = "gpusight::align"
ALIGN_END_MARKER = "gpusight::align_end"
CUPTI_TEARDOWN = "TEARDOWN_CUPTI"


def _inductor_cuda_graphs() -> bool:
    """Inductor's CUDA graphs are on (only looked up where inductor is already imported): torch
    keeps CUPTI up for them, as a re-init after a teardown crashed them on older CUDA."""
    config = sys.modules.get("torch._inductor.config")
    return bool(getattr(getattr(config, "triton", None), "cudagraphs", False))


class ProfilerWindow:
    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.error: str | None = None
        self._prof: Any = None
        self._align_ns: int | None = None
        self._align_end_ns: int | None = None
        self.started = False
        self.recording = False
        """Events are kept (``record``): the start-up step's are not."""
        self.stopped = False
        self._teardown_asked = False
        self.cupti_left_on = False
        """CUPTI stays on after the window: the environment said so (``TEARDOWN_CUPTI`` other
        than 1): later launches pay for its callbacks."""

    def start(self) -> bool:
        """Start profiling; False (and ``error`` says why) when the profiler will not start."""
        try:
            import torch
            from torch.autograd import profiler as autograd_profiler

            if autograd_profiler._is_profiler_enabled:
                self.error = "another profiler is already running: no profiler window"
                return False
            if self.cuda and CUPTI_TEARDOWN not in os.environ and not _inductor_cuda_graphs():
                os.environ[CUPTI_TEARDOWN] = "1"
                self._teardown_asked = True
            self.cupti_left_on = self.cuda and os.environ.get(CUPTI_TEARDOWN) != "1"
            # torch.profiler.profile is a wrapper of this one, and its start asks
            # ``hasattr(torch, "_inductor")``, which imports inductor: 1.6 s here, 4 s on the
            # H200's host, inside the user's step, in scripts that have not imported it yet
            # (inference; training imports it through the optimizer's first step).
            self._prof = autograd_profiler.profile(
                use_cpu=True,
                use_device="cuda" if self.cuda else None,
                record_shapes=True,
                use_kineto=True,
            )
            with without_profiler_chatter():
                if hasattr(self._prof, "_prepare_trace") and hasattr(self._prof, "_start_trace"):
                    # As torch.profiler's schedule warms up: CUPTI on, nothing kept until
                    # ``record`` (the profiled steps), so the start-up step's events are
                    # neither stopped nor read back (a trace's cost grows with its events).
                    self._prof._prepare_trace()
                else:
                    self._prof.__enter__()
                    self.recording = True
            self.started = True
            if self.recording:
                self._mark(torch)
        except Exception as exc:
            self.error = f"profiler window failed to start: {type(exc).__name__}: {exc}"
            self._stop_quietly()
            self.restore_env()
            return False
        return True

    def record(self) -> None:
        """Keep what the profiler sees from now on (the steps after the start-up one)."""
        if not self.started or self.stopped or self.recording:
            return
        try:
            import torch

            with without_profiler_chatter():
                self._prof._start_trace()
            self.recording = True
            self._mark(torch)
        except Exception as exc:
            self.error = f"profiler window failed to start: {type(exc).__name__}: {exc}"
            self._stop_quietly()

    def _mark(self, torch: Any) -> None:
        # The first record_function pays one-off costs; the marker must be cheap to place.
        with torch.autograd.profiler.record_function("gpusight::warm"):
            pass
        with torch.autograd.profiler.record_function(ALIGN_MARKER):
            self._align_ns = time.perf_counter_ns()

    def stop(self) -> None:
        self.record()  # a window stopped in its start-up step: exit needs a started trace
        if self.started and not self.stopped:
            self.stopped = True
            try:
                import torch

                with torch.autograd.profiler.record_function(ALIGN_END_MARKER):
                    self._align_end_ns = time.perf_counter_ns()
                with without_profiler_chatter():
                    self._prof.__exit__(None, None, None)
            except Exception as exc:
                self.error = f"profiler window failed to stop: {type(exc).__name__}: {exc}"

    def restore_env(self) -> None:
        """Give ``TEARDOWN_CUPTI`` back as it was (after the stop: Kineto reads it then)."""
        if self._teardown_asked:
            self._teardown_asked = False
            if os.environ.get(CUPTI_TEARDOWN) == "1":
                del os.environ[CUPTI_TEARDOWN]

    def _stop_quietly(self) -> None:
        if self._prof is not None and self.started and not self.stopped:
            self.stopped = True
            try:
                with without_profiler_chatter():
                    self._prof.__exit__(None, None, None)
            except Exception:
                pass

    def trace(self) -> tuple[dict[str, Any], Alignment] | None:
        """The exported Chrome trace and the clock alignment, or None (``error`` says why)."""
        if not self.started or self._prof is None:
            return None
        self.stop()
        if self._align_ns is None:
            return None
        fd, path = tempfile.mkstemp(prefix="gpusight-trace-", suffix=".json")
        os.close(fd)
        try:
            self._prof.export_chrome_trace(path)
            with open(path, encoding="utf-8") as f:
                data: dict[str, Any] = json.load(f)
        except Exception as exc:
            self.error = f"could not read the profiler trace: {type(exc).__name__}: {exc}"
            return None
        finally:
            # The trace and what its writer left beside it when the write failed (a full
            # temporary folder left "gpusight-trace-*.json.tmp").
            for leftover in (path, path + ".tmp"):
                try:
                    os.unlink(leftover)
                except OSError:
                    pass
        ts = find_marker(data, ALIGN_MARKER)
        if ts is None:
            self.error = "the profiler trace lacks gpusight's alignment marker"
            return None
        return data, Alignment(
            perf_ns=self._align_ns,
            trace_us=ts,
            perf_ns_end=self._align_end_ns,
            trace_us_end=find_marker(data, ALIGN_END_MARKER),
        )
