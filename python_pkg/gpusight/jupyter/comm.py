"""Kernel side of the sidebar's bridge: the ``gpusight`` comm target and what it answers.

The panel imports this module silently and calls :func:`register_target`; it then opens a comm
on target ``gpusight``. Every message is a dict with a ``type``:

browser -> kernel
    ``hello``; ``monitor.start`` {hz, capacity, since}; ``monitor.stop``; ``check`` {request};
    ``bench`` {request, budget_s}; ``watch.arm`` {request}; ``watch.disarm``;
    ``export`` {request, report_id}; ``report.get`` {request, report_id}
kernel -> browser
    ``hello`` (version, executable, capabilities, earlier reports); ``monitor.status``;
    ``tick`` {tick} (from the monitor thread, also while a cell runs); ``ticks`` {ticks} (backlog);
    ``cell`` {event: start|end, t}; ``progress`` {request, stage, fraction};
    ``report`` {request, entry, report}; ``watch.status`` {armed}; ``exported`` {request, path};
    ``error`` {request, message}

:class:`Hub` holds the logic and knows nothing of comms (tests drive it with plain dicts); the
comm package is imported only by :func:`register_target`, so ``gpusight.jupyter.monitor`` stays
importable in a plain Python.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import itertools
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._version import __version__
from .monitor import Sampler, Tick

TARGET = "gpusight"
PROTOCOL = 1
MAX_REPORTS = 20
"""Reports of this kernel session kept for the panel's history (and for Export)."""
PROGRESS_EVERY_S = 0.2

Message = dict[str, Any]
Send = Callable[[Message], None]


@dataclass
class Client:
    """One open comm: one panel (a page can hold one per kernel; two tabs hold two)."""

    id: int
    send: Send
    monitoring: bool = False
    closed: bool = False
    failures: int = field(default=0)


def _number(data: Message, key: str, default: float) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    return float(value)


def _request(data: Message) -> str | None:
    request = data.get("request")
    return request if isinstance(request, str) and len(request) <= 200 else None


def has_cell_magic() -> bool:
    """Whether this gpusight has ``%%gpusight`` (the watch's cell magic)."""
    return importlib.util.find_spec("gpusight.jupyter.cell_magic") is not None


def has_html_export() -> bool:
    """Whether this gpusight can write a report as one HTML file (``gpusight.html_export``)."""
    return importlib.util.find_spec("gpusight.html_export") is not None


def save_html(report: Any, path: Path) -> Path:
    """``report.save_html(path)`` where the Report has it, else ``html_export.save_html``."""
    method = getattr(report, "save_html", None)
    if callable(method):
        saved = method(path)
    else:
        from .. import html_export

        saved = html_export.save_html(report, path)
    return Path(saved) if isinstance(saved, (str, os.PathLike)) else path


def user_cell() -> tuple[bool, str | None]:
    """(whether the code being transformed is a cell the user ran, its execute_request's id).

    IPython transforms a cell before it triggers ``pre_run_cell``, so an input transformer cannot
    see ``silent``; the kernel's parent message (the execute_request) can. Outside a kernel
    (plain IPython) every cell is the user's, and has no id.
    """
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:
        return True, None
    if not Kernel.initialized():
        return True, None
    parent = Kernel.instance().get_parent("shell") or {}  # type: ignore[no-untyped-call]
    header = parent.get("header") or {}
    content = parent.get("content") or {}
    ok = (
        header.get("msg_type") == "execute_request"
        and not content.get("silent", False)
        and bool(content.get("store_history", True))
    )
    msg_id = header.get("msg_id")
    return ok, msg_id if isinstance(msg_id, str) else None


def _inside_cell_magic() -> bool:
    """Whether ``%%gpusight`` (gpusight.jupyter.cell_magic.run_cell) is on the call stack."""
    module = sys.modules.get("gpusight.jupyter.cell_magic")
    code = getattr(getattr(module, "run_cell", None), "__code__", None)
    if code is None:
        return False
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class Hub:
    """The kernel's side of every open panel: one sampler, the session's reports, the hooks."""

    def __init__(self, shell: Any = None, sampler: Sampler | None = None) -> None:
        self.shell = shell
        self.sampler = sampler if sampler is not None else Sampler()
        self.sampler.on_tick = self._broadcast_tick
        self._clients: dict[int, Client] = {}
        self._ids = itertools.count(1)
        self._report_ids = itertools.count(1)
        self._reports: OrderedDict[str, tuple[dict[str, Any], Any]] = OrderedDict()
        self._published: dict[int, str] = {}
        """``id`` of each report kept -> its id here: a report shown again is listed once."""
        self._held: list[Any] = []
        """Reports shown while a watched cell runs: listed after its own, which carries the
        panel's request."""
        self._lock = threading.Lock()
        self._hooks = False
        self._transformer_installed = False
        self.armed: str | None = None
        """Request id of a pending "watch next cell" (None when not armed)."""
        self.watching: str | None = None
        """Request id of the cell being watched now."""
        self._watch_msg: str | None = None
        self._handlers: dict[str, Callable[[Client, Message], None]] = {
            "hello": self._hello,
            "monitor.start": self._monitor_start,
            "monitor.stop": self._monitor_stop,
            "check": self._check,
            "bench": self._bench,
            "watch.arm": self._watch_arm,
            "watch.disarm": self._watch_disarm,
            "export": self._export,
            "report.get": self._report_get,
        }

    # --- clients --------------------------------------------------------------------------

    def connect(self, send: Send) -> Client:
        client = Client(id=next(self._ids), send=send)
        with self._lock:
            self._clients[client.id] = client
        return client

    def disconnect(self, client: Client) -> None:
        client.closed = True
        client.monitoring = False
        with self._lock:
            self._clients.pop(client.id, None)
        self._stop_if_unwatched()

    def clients(self) -> list[Client]:
        with self._lock:
            return list(self._clients.values())

    def _send(self, client: Client, message: Message) -> None:
        if client.closed:
            return
        try:
            client.send(message)
        except Exception:
            # A comm whose page went away: stop feeding it rather than fail the sampler.
            client.failures += 1
            if client.failures >= 3:
                self.disconnect(client)

    def _broadcast(self, message: Message) -> None:
        for client in self.clients():
            if client.monitoring:
                self._send(client, message)

    def _broadcast_tick(self, tick: Tick) -> None:
        self._broadcast({"type": "tick", "tick": tick})

    # --- dispatch -------------------------------------------------------------------------

    def handle(self, client: Client, data: Any) -> None:
        """Answer one message from the browser; bad input gets an ``error`` reply, never raises."""
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            self._send(client, {"type": "error", "request": None, "message": "malformed message"})
            return
        handler = self._handlers.get(data["type"])
        if handler is None:
            self._error(client, data, f"unknown message type {data['type']!r}")
            return
        try:
            handler(client, data)
        except KeyboardInterrupt:
            self._error(client, data, "interrupted")
        except Exception as exc:
            self._error(client, data, f"{type(exc).__name__}: {exc}")

    def _error(self, client: Client, data: Message, message: str) -> None:
        self._send(
            client,
            {
                "type": "error",
                "request": _request(data),
                "about": data.get("type"),
                "message": message,
            },
        )

    # --- hello ----------------------------------------------------------------------------

    def capabilities(self) -> dict[str, bool]:
        return {
            "check": True,
            "bench": True,
            "watch": self.shell is not None and has_cell_magic(),
            "export": has_html_export(),
        }

    def _hello(self, client: Client, data: Message) -> None:
        self._send(
            client,
            {
                "type": "hello",
                "protocol": PROTOCOL,
                "version": __version__,
                "python": sys.version.split()[0],
                "executable": sys.executable,
                "pid": os.getpid(),
                "capabilities": self.capabilities(),
                "reports": [entry for entry, _ in self._reports.values()],
                "armed": self.armed is not None,
            },
        )

    # --- monitor --------------------------------------------------------------------------

    def _status(self) -> Message:
        gpus, _ = self.sampler.inventory()
        return {
            "type": "monitor.status",
            "running": self.sampler.running,
            "source": self.sampler.source,
            "reason": self.sampler.reason,
            "hz": self.sampler.hz,
            "capacity": self.sampler.capacity,
            "gpus": gpus,
            "t": self.sampler.now(),
        }

    def _monitor_start(self, client: Client, data: Message) -> None:
        self.sampler.configure(
            hz=_number(data, "hz", self.sampler.hz),
            capacity=int(_number(data, "capacity", self.sampler.capacity)),
        )
        self.install_hooks()
        since = data.get("since")
        backlog = self.sampler.ticks(float(since) if isinstance(since, (int, float)) else None)
        # The backlog goes first and this client joins the broadcast after it, so its ticks
        # arrive in time order (the browser drops a tick older than the newest it holds).
        if backlog:
            self._send(client, {"type": "ticks", "ticks": backlog})
        client.monitoring = True
        self.sampler.start()
        self._send(client, self._status())

    def _monitor_stop(self, client: Client, data: Message) -> None:
        client.monitoring = False
        self._stop_if_unwatched()
        self._send(client, self._status())

    def _stop_if_unwatched(self) -> None:
        if not any(c.monitoring for c in self.clients()):
            self.sampler.stop()

    # --- cells ----------------------------------------------------------------------------

    def install_hooks(self) -> None:
        """Cell start/end marks for the chart, and the end of a watched cell (once per kernel)."""
        if self._hooks or self.shell is None:
            return
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        self._hooks = True

    def pre_run_cell(self, info: Any) -> None:
        if getattr(info, "silent", False):
            return
        self._broadcast({"type": "cell", "event": "start", "t": self.sampler.now()})

    def post_run_cell(self, result: Any) -> None:
        info = getattr(result, "info", None)
        if getattr(info, "silent", False):
            return
        self._broadcast(
            {
                "type": "cell",
                "event": "end",
                "t": self.sampler.now(),
                "execution_count": getattr(result, "execution_count", None),
                "success": bool(getattr(result, "success", True)),
            }
        )
        request, self.watching, self._watch_msg = self.watching, None, None
        held, self._held = self._held, []
        if request is None:
            return
        value = getattr(result, "result", None)
        count = getattr(result, "execution_count", None)
        count = count if isinstance(count, int) else None
        if callable(getattr(value, "to_dict", None)):
            self._publish_report(request, "watch", value, cell=count)
        else:
            error = getattr(result, "error_in_exec", None) or getattr(
                result, "error_before_exec", None
            )
            why = f"{type(error).__name__}: {error}" if error else "the cell returned no report"
            self._broadcast_all({"type": "error", "request": request, "message": why})
        for other in held:  # shown by the watched cell beside its own report
            self.shown(other, cell=count)
        self._broadcast_all(self._watch_status())

    def _broadcast_all(self, message: Message) -> None:
        for client in self.clients():
            self._send(client, message)

    # --- reports --------------------------------------------------------------------------

    def _publish_report(
        self,
        request: str | None,
        origin: str,
        report: Any,
        data: dict[str, Any] | None = None,
        cell: int | None = None,
    ) -> Message:
        from ..fixes.kernel_names import mark_unbound

        if data is None:
            data = report.to_dict()
        if self.shell is not None:  # the kernel's names: what an inserted cell could use
            mark_unbound(data, getattr(self.shell, "user_ns", None) or {})
        report_id = f"r{next(self._report_ids)}"
        verdict = data.get("verdict") or {}
        entry = {
            "id": report_id,
            "origin": origin,
            "kind": data.get("kind"),
            # The cell that made it, after its title or kind ("watch, cell [3]").
            "title": data.get("title")
            if cell is None
            else f"{data.get('title') or data.get('kind') or origin}, cell [{cell}]",
            "created_at": data.get("created_at"),
            "summary": verdict.get("summary"),
        }
        self._reports[report_id] = (entry, report)
        self._published[id(report)] = report_id
        while len(self._reports) > MAX_REPORTS:
            _, (_, gone) = self._reports.popitem(last=False)
            self._published.pop(id(gone), None)
        message = {"type": "report", "request": request, "entry": entry, "report": data}
        self._broadcast_all(message)
        return message

    def shown(
        self, report: Any, data: dict[str, Any] | None = None, cell: int | None = None
    ) -> None:
        """A report the notebook displayed (a watched cell, ``%gpusight``, ``diagnose``): listed
        in every panel with the panel's own, newest first, once however often it is shown;
        ``cell``: the cell that showed it (default: the one running now)."""
        if id(report) in self._published:
            return
        if self.watching is not None:
            self._held.append(report)
            return
        if cell is None and self.shell is not None:
            from ..watch.notebook_cells import current_count

            cell = current_count(self.shell)
        kind = str(getattr(report, "kind", None) or "report")
        self._publish_report(None, kind, report, data, cell if isinstance(cell, int) else None)

    def _report_get(self, client: Client, data: Message) -> None:
        report_id = data.get("report_id")
        stored = self._reports.get(report_id) if isinstance(report_id, str) else None
        if stored is None:
            self._error(client, data, f"no report {report_id!r} in this kernel session")
            return
        entry, report = stored
        self._send(
            client,
            {
                "type": "report",
                "request": _request(data),
                "entry": entry,
                "report": report.to_dict(),
            },
        )

    def _progress(self, client: Client, request: str | None) -> Callable[[str, float | None], None]:
        last = [0.0]

        def progress(stage: str, fraction: float | None) -> None:
            now = time.monotonic()
            if fraction is not None and 0 < fraction < 1 and now - last[0] < PROGRESS_EVERY_S:
                return
            last[0] = now
            self._send(
                client,
                {"type": "progress", "request": request, "stage": stage, "fraction": fraction},
            )

        return progress

    def _check(self, client: Client, data: Message) -> None:
        from ..doctor import check

        request = _request(data)
        self._progress(client, request)("Checking the environment", None)
        self._publish_report(request, "check", check())

    def _bench(self, client: Client, data: Message) -> None:
        from ..bench.suite import build_report

        request = _request(data)
        budget = min(600.0, max(1.0, _number(data, "budget_s", 10.0)))
        progress = self._progress(client, request)
        progress("Starting the benchmarks", 0.0)
        report = build_report(budget_s=budget, progress=lambda s, f: progress(f"Benchmark: {s}", f))
        self._publish_report(request, "bench", report)

    # --- watch next cell ------------------------------------------------------------------

    def _watch_status(self) -> Message:
        return {"type": "watch.status", "armed": self.armed is not None, "request": self.armed}

    def _watch_arm(self, client: Client, data: Message) -> None:
        if not self.capabilities()["watch"]:
            self._error(client, data, "watching a cell needs %%gpusight, which this gpusight lacks")
            return
        shell = self.shell
        if shell.find_cell_magic("gpusight") is None:
            from .magics import register

            register(shell)
        if not self._transformer_installed:
            shell.input_transformers_cleanup.append(self.transform)
            self._transformer_installed = True
        self.install_hooks()
        self.armed = _request(data) or "watch"
        self._broadcast_all(self._watch_status())

    def _watch_disarm(self, client: Client, data: Message) -> None:
        self.armed = None
        self._broadcast_all(self._watch_status())

    def transform(self, lines: list[str]) -> list[str]:
        """IPython input transformer: once armed, run the next user cell under ``%%gpusight``.

        ipykernel may transform one cell twice (once to decide whether it is async, once to run
        it): the execute_request's id makes the second call wrap the same cell again.
        """
        if self.armed is None and self.watching is None:
            return lines
        ok, msg_id = user_cell()
        if not ok or _inside_cell_magic():
            # %%gpusight transforms its own body: that is the cell itself, not a new one to wrap.
            return lines
        if self.armed is not None:
            self.watching, self.armed = self.armed, None
            self._watch_msg = msg_id
        elif msg_id is None or msg_id != self._watch_msg:
            return lines
        first = next((line for line in lines if line.strip()), "")
        if first.lstrip().startswith("%%gpusight"):
            return lines
        return ["%%gpusight --first-line 1\n", *lines]

    # check_complete() skips transformers with side effects: typing in a console must not fire.
    transform.has_side_effects = True  # type: ignore[attr-defined]

    # --- export ---------------------------------------------------------------------------

    def _export(self, client: Client, data: Message) -> None:
        if not has_html_export():
            self._error(client, data, "HTML export needs a gpusight with gpusight.html_export")
            return
        report_id = data.get("report_id")
        stored = self._reports.get(report_id) if isinstance(report_id, str) else None
        if stored is None:
            self._error(client, data, f"no report {report_id!r} in this kernel session")
            return
        entry, report = stored
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path(f"gpusight-{entry['kind']}-{stamp}.html")
        final = save_html(report, path)
        self._send(
            client,
            {
                "type": "exported",
                "request": _request(data),
                "report_id": report_id,
                "path": str(final.resolve()),
                "name": final.name,
            },
        )


_HUB: Hub | None = None


def hub() -> Hub:
    """This kernel's hub (created on first use, bound to the running IPython shell)."""
    global _HUB
    if _HUB is None:
        shell = None
        try:
            from IPython import get_ipython

            shell = get_ipython()
        except ImportError:
            pass
        _HUB = Hub(shell=shell)
        from . import display

        for report in display.shown_reports():  # shown before any panel asked
            _HUB.shown(report, cell=display.shown_cell(report))
        # The cell the display recorded: not looked up a second time.
        display.on_shown(lambda report, data: hub().shown(report, data, display.shown_cell(report)))
    return _HUB


def _on_open(comm: Any, open_msg: Message) -> None:
    h = hub()
    client = h.connect(comm.send)

    def on_msg(msg: Message) -> None:
        h.handle(client, msg.get("content", {}).get("data"))

    def on_close(msg: Message) -> None:
        h.disconnect(client)

    comm.on_msg(on_msg)
    comm.on_close(on_close)
    h.handle(client, open_msg.get("content", {}).get("data") or {"type": "hello"})


def register_target() -> str:
    """Register the ``gpusight`` comm target in this kernel (again is harmless); returns it."""
    import comm

    comm.get_comm_manager().register_target(TARGET, _on_open)
    return TARGET
