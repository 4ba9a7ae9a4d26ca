"""Host-to-device copies and host syncs, at the user's line: wrappers of ``Tensor.to`` /
``Tensor.cuda`` and ``torch.cuda.synchronize``, CUDA's sync-debug mode with a
``warnings.showwarning`` hook that counts each sync warning instead of printing it."""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from threading import get_ident
from time import perf_counter_ns
from types import FrameType
from typing import Any

from .collected import CopyAgg, CopySiteSeen, SyncAgg
from .watch_state import WatchState, never_compiling

SYNC_MESSAGE = "called a synchronizing CUDA operation"
PINNED_LEARN = 32
PINNED_RECHECK = 17
"""A copy line whose first 32 sources were all pinned, or all pageable, then asks
``is_pinned()`` (a CUDA driver query, microseconds in a busy loop) on every 17th copy only; a
line seen with both kinds asks every time. A helper that copies several tensors a step shows
both kinds within the first 32, and a prime stride does not fall in step with its period."""

_is_compiling: Callable[[], bool] = never_compiling
"""``watch_state._is_compiling``, as this module's own global (``session._use_is_compiling``)."""


def classify_copy(src_pinned: bool, non_blocking: bool) -> str:
    """The kind of a host-to-device copy (see ``rules.workload.CopySite.kind``)."""
    if src_pinned:
        return "pinned_async" if non_blocking else "pinned_sync"
    return "pageable_async" if non_blocking else "pageable_sync"


def non_blocking_arg(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """``non_blocking`` of a ``Tensor.to``/``Tensor.cuda`` call (the first positional bool)."""
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    for a in args:
        if isinstance(a, bool):
            return a
    return False


_SYNC_KINDS = (
    (".item(", "item"),
    (".tolist(", "tolist"),
    (".numpy(", "numpy"),
    (".cpu(", "cpu"),
    ("'cpu'", "cpu"),
    ('"cpu"', "cpu"),
    ("nonzero", "nonzero"),
    ("synchronize", "synchronize"),
    ("masked_select", "masked_select"),
    ("unique", "unique"),
    ("print(", "print"),
    ("if ", "bool"),
    ("while ", "bool"),
    ("assert ", "bool"),
    ("float(", "float"),
    ("int(", "int"),
)


def sync_kind(code: str | None) -> str:
    """What kind of sync a source line most likely holds (the warning itself does not say)."""
    if code:
        for pattern, kind in _SYNC_KINDS:
            if pattern in code:
                return kind
    return "sync"


class CopySyncHooks(WatchState):
    """The copy and sync wrappers, and the sync-debug mode they need."""

    def _maybe_enable_sync_mode(self) -> None:
        """Sync-debug mode needs CUDA up; never start CUDA ourselves, wait for the run to."""
        torch = self._torch
        if self.lean and not self._sync_mode_set:
            self._sync_mode_set = True  # left as the user has it (restored: nothing)
            return
        if self._sync_mode_set or not self._cuda or not torch.cuda.is_initialized():
            return
        try:
            self._sync_mode_before = int(torch.cuda.get_sync_debug_mode())
            if self._sync_mode_before == 0:
                torch.cuda.set_sync_debug_mode(1)
            self._sync_mode_set = True
        except Exception as exc:
            self.notes.append(f"sync-debug mode unavailable: {exc}")
            self._sync_mode_set = True

    def _set_detail(self, on: bool) -> None:
        """Copies and syncs recorded in the next step, or not; sync-debug mode with them (unless
        the user had it on: then their warnings keep coming, and pass through unrecorded)."""
        self._detail = on
        if self._sync_mode_set and self._sync_mode_before == 0:
            try:
                self._torch.cuda.set_sync_debug_mode(1 if on else 0)
            except Exception as exc:
                self.notes.append(f"could not switch sync-debug mode: {exc}")

    def _restore_sync_mode(self) -> None:
        if self._sync_mode_set and self._sync_mode_before is not None:
            try:
                self._torch.cuda.set_sync_debug_mode(self._sync_mode_before)
            except Exception as exc:
                self.notes.append(f"could not restore sync-debug mode: {exc}")

    def _wrap_copy(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self
        torch = self._torch
        parameter = torch.nn.Parameter
        plain = torch.Tensor
        device_types = self.device_types
        cuda_counts = "cuda" in device_types
        getframe = sys._getframe

        def copy(self_t: Any, *args: Any, **kwargs: Any) -> Any:
            # is_compiling before the thread: under torch.compile this wrapper is traced.
            if not w._detail or _is_compiling() or get_ident() != w._tid:
                return orig(self_t, *args, **kwargs)
            rec = w._rec
            if rec is None:
                return orig(self_t, *args, **kwargs)
            t0 = perf_counter_ns()
            out = orig(self_t, *args, **kwargs)
            t1 = perf_counter_ns()
            try:
                # ``is_cpu``/``is_cuda`` are plain flags; ``.device`` builds an object, and
                # Parameter's isinstance runs Python: a plain Tensor is never a Parameter.
                if (
                    out is not self_t
                    and self_t.is_cpu
                    and not out.is_cpu
                    and (cuda_counts if out.is_cuda else out.device.type in device_types)
                    and (type(self_t) is plain or not isinstance(self_t, parameter))
                ):
                    w.record_copy(self_t, non_blocking_arg(args, kwargs), t0, t1, getframe(1))
            finally:
                cost = perf_counter_ns() - t1 + w.calibration.wrapper_ns
                cur = rec.current
                cur.overhead_ns += cost
                cur.detail_ns += cost
            return out

        self._relay_codes.add(id(copy.__code__))
        return functools.wraps(orig)(copy)

    def record_copy(self, src: Any, non_blocking: bool, t0: int, t1: int, frame: Any) -> CopyAgg:
        """Account one host-to-device copy of ``src`` issued from ``frame`` (or its callers)."""
        loc = (id(frame.f_code), frame.f_lasti) if frame is not None else None
        seen = self._copy_sites.get(loc) if loc is not None else None
        if (
            seen is None
            or seen.mixed
            or seen.calls < PINNED_LEARN
            or seen.calls % PINNED_RECHECK == 0
        ):
            try:
                pinned = bool(src.is_pinned())
            except Exception:
                pinned = False
            if seen is not None and pinned != seen.pinned:
                seen.mixed = True  # this line copies from both kinds: ask every time
        else:
            pinned = seen.pinned
        if seen is None:
            user = self.sources.user_frame(frame)
            site = self.sources.site(user) if user is not None else None
            code = frame.f_code if frame is not None else None
            seen = CopySiteSeen(code, site, f"{site.file}:{site.line}" if site else "?", pinned)
            if loc is not None and user is frame:
                self._copy_sites[loc] = seen
        seen.pinned = pinned
        seen.calls += 1
        kind = classify_copy(pinned, non_blocking)
        site = seen.site
        key = (kind, seen.key)
        agg = self.collected.copies.get(key)
        if agg is None:
            agg = self.collected.copies[key] = CopyAgg(kind=kind, site=site)
        size = int(src.nbytes)
        took = t1 - t0
        agg.count += 1
        agg.bytes += size
        agg.host_ns += took
        rec = self._rec
        if rec is not None:
            cur = rec.current
            if cur.phase == "measure":
                agg.measured += 1
                agg.measured_bytes += size
                agg.measured_host_ns += took
            cur.copy_ns += took
            if rec.recording_window:
                rec.window.host_copies.append((t0, t1))
        return agg

    def _wrap_synchronize(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self
        getframe = sys._getframe

        def synchronize(*args: Any, **kwargs: Any) -> Any:
            rec = w._rec
            if not w._detail or _is_compiling() or get_ident() != w._tid or rec is None:
                return orig(*args, **kwargs)
            t0 = perf_counter_ns()
            out = orig(*args, **kwargs)
            t1 = perf_counter_ns()
            w.record_sync(getframe(1), t1, kind="synchronize", host_ns=t1 - t0)
            cost = perf_counter_ns() - t1 + w.calibration.wrapper_ns
            cur = rec.current
            cur.overhead_ns += cost
            cur.detail_ns += cost
            return out

        self._relay_codes.add(id(synchronize.__code__))
        return functools.wraps(orig)(synchronize)

    def _wrap_showwarning(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        w = self
        getframe = sys._getframe
        relay = self._relay_codes
        # The warnings module calls showwarning from its own ``_showwarnmsg``.
        relay_fn = getattr(warnings, "_showwarnmsg", None)
        if relay_fn is not None and hasattr(relay_fn, "__code__"):
            relay.add(id(relay_fn.__code__))

        def showwarning(
            message: Any,
            category: Any,
            filename: str,
            lineno: int,
            file: Any = None,
            line: str | None = None,
        ) -> None:
            if str(message).startswith(SYNC_MESSAGE):
                rec = w._rec
                if w._detail and get_ident() == w._tid and rec is not None:
                    t = perf_counter_ns()
                    # From the frame that raised it, past the relays (warnings, our wrappers).
                    frame: FrameType | None = getframe(1)
                    while frame is not None and id(frame.f_code) in relay:
                        frame = frame.f_back
                    w.record_sync(frame, t)
                    cost = perf_counter_ns() - t + w.calibration.warning_ns
                    cur = rec.current
                    cur.overhead_ns += cost
                    cur.detail_ns += cost
                # The user only sees these if they had asked for them before we did.
                if not w._sync_mode_before:
                    return
            orig(message, category, filename, lineno, file, line)

        return showwarning

    def record_sync(self, frame: Any, t: int, kind: str | None = None, host_ns: int = 0) -> SyncAgg:
        """Count one host sync at the user's line above ``frame``."""
        loc = (id(frame.f_code), frame.f_lasti) if frame is not None else None
        known = self._sync_sites.get(loc) if loc is not None else None
        if known is not None:
            agg = known[1]
        else:
            user = self.sources.user_frame(frame)
            site = self.sources.site(user) if user is not None else None
            key = f"{site.file}:{site.line}" if site else "?"
            agg_or_none = self.collected.syncs.get(key)
            if agg_or_none is None:
                agg = self.collected.syncs[key] = SyncAgg(
                    kind=kind or sync_kind(site.code if site else None), site=site, key=key
                )
            else:
                agg = agg_or_none
            if loc is not None and user is not None and user is frame:
                self._sync_sites[loc] = (user.f_code, agg)
        rec = self._rec
        if self.phases.tracker.active is not None:
            self.phases.tracker.note_sync(agg.key)
            return agg
        agg.count += 1
        agg.host_ns += host_ns
        if self._fwd_depth:
            agg.in_model += 1
        if rec is not None:
            cur = rec.current
            if cur.phase == "measure":
                agg.measured += 1
            cur.syncs += 1
            if rec.recording_window:
                rec.window.syncs.append((t, agg.key))
        return agg
