"""The watch's NVML sampler in a process of its own, so that its Python never holds the GIL
that the user's training thread needs.

A sampler thread in the user's process runs Python between its NVML calls: each ctypes call
gives the GIL up and takes it back, so ten times a sample the training thread is stopped until
the sampler lets go (CPython's switch interval, the OS waking the other thread). On launch-bound
steps of 2 ms that costs the user's loop measurably (``benchmarks/cost/parts.py``'s ``sampler``
parts). Here the same :class:`~gpusight.watch.nvml_sampler.NvmlSampler` loop runs in a child
process, ``python -m gpusight.watch.sampler_process CONFIG``: it samples the parent's CPU %
rather than its own, times its samples on the parent's clock (``perf_counter`` is system-wide),
and hands everything back as one JSON object on stdout when told ``stop`` on stdin.

The child ignores Ctrl-C (it has a session of its own: the terminal's SIGINT goes to the user's
process, which stops it) and exits by itself when its parent dies. Where the child cannot start
or fails, :func:`gpu_sampler` falls back on the thread, and ``reason`` says what happened.
``GPUSIGHT_SAMPLER=thread`` asks for the thread.

The sidebar's monitor runs the same child in stream mode (:class:`StreamingSampler`): each sample,
with the host's CPU and memory beside it, comes back at once as one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, Protocol

from .host_reader import HostReader
from .nvml_sampler import NvmlSampler, Sample

ENV = "GPUSIGHT_SAMPLER"
STOP_TIMEOUT_S = 5.0


class WatchSampler(Protocol):
    """What the watch reads from its sampler (the thread's and the process's alike)."""

    reason: str | None
    busy_s: float
    links: dict[int | str, tuple[int, int]]

    @property
    def available(self) -> bool: ...

    @property
    def samples(self) -> list[Sample]: ...

    def start(self) -> WatchSampler: ...

    def stop(self) -> list[Sample]: ...


class ProcessSampler:
    """:class:`NvmlSampler`'s interface; the sampling happens in a child process."""

    def __init__(
        self,
        gpus: Sequence[int | str],
        interval_s: float = 0.1,
        t0: float | None = None,
        labels: Sequence[int] | None = None,
        max_samples: int = 3000,
        pcie_every: int = 5,
    ) -> None:
        self.config: dict[str, Any] = {
            "gpus": list(gpus),
            "interval_s": interval_s,
            "t0": t0,
            "labels": list(labels) if labels is not None else None,
            "max_samples": max_samples,
            "pcie_every": pcie_every,
            "parent": os.getpid(),
        }
        self.reason: str | None = None
        self.busy_s = 0.0
        self.links: dict[int | str, tuple[int, int]] = {}
        self._samples: list[Sample] = []
        self._available = False
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def available(self) -> bool:
        return self._available

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def samples(self) -> list[Sample]:
        """Known once stopped (the child keeps them until then)."""
        return list(self._samples)

    def start(self) -> ProcessSampler:
        """Start the child; raises ``OSError`` where no process can be started."""
        if self._proc is not None:
            return self
        if self.config["t0"] is None:
            self.config["t0"] = time.perf_counter()
        self._proc = _spawn(self.config)
        return self

    def stop(self) -> list[Sample]:
        proc, self._proc = self._proc, None
        if proc is None:
            return self.samples
        try:
            # "stop" rather than closing stdin: DataLoader workers forked from the user's
            # process hold the pipe's write end too, so the child might never see EOF.
            out, err = proc.communicate(b"stop\n", timeout=STOP_TIMEOUT_S)
        except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
            proc.kill()
            proc.wait()
            self.reason = f"the GPU sampler process did not answer ({type(exc).__name__})"
            return self.samples
        self._read(out, err, proc.returncode)
        return self.samples

    def _read(self, out: bytes, err: bytes, code: int | None) -> None:
        try:
            got = json.loads(out.decode("utf-8"))
        except ValueError:
            self.reason = f"the GPU sampler process failed: {_how(code, err)}"
            return
        self._samples = list(got.get("samples", []))
        self._available = bool(got.get("available"))
        self.reason = got.get("reason")
        self.busy_s = float(got.get("busy_s", 0.0))
        # JSON keys are strings: a label is torch's device index again, a UUID stays one.
        self.links = {
            int(k) if k.isdigit() else k: (int(v[0]), int(v[1]))
            for k, v in got.get("links", {}).items()
        }


Host = dict[str, float | None]
Listener = Callable[[list[Sample], Host], None]


class StreamingSampler:
    """The sidebar monitor's sampler: a child process writes each group (one sample per GPU)
    and the host's figures as one JSON line the moment it samples them; a thread of this process
    (``gpusight-monitor``) reads the lines and calls each listener with ``(group, host)``.

    That thread is blocked in ``read`` between lines, without the GIL: the user's process runs
    one line's parse and the listeners a tick, no NVML call and no ``/proc`` read. A child that
    ends without being stopped calls ``on_exit(why)`` from that thread."""

    def __init__(
        self,
        gpus: Sequence[int | str],
        hz: float,
        t0: float,
        max_samples: int = 16,
        on_exit: Callable[[str], None] | None = None,
    ) -> None:
        self.config: dict[str, Any] = {
            "gpus": list(gpus),
            "interval_s": 1.0 / hz,
            "t0": t0,
            "labels": None,
            # The child's own list is only a by-product (the parent keeps the history).
            "max_samples": max_samples,
            "pcie_every": pcie_every(hz),
            "parent": os.getpid(),
            "stream": True,
        }
        self.on_exit = on_exit
        self.reason: str | None = None
        """Why there are no GPU figures (the child's NVML says so with its first line)."""
        self._available = False
        self._listeners: list[Listener] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._stopping = False
        self._write_lock = threading.Lock()  # configure() and stop() may write at once

    @property
    def available(self) -> bool:
        return self._available

    @property
    def pid(self) -> int | None:
        """The child's pid once started."""
        return self._proc.pid if self._proc is not None else None

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def start(self) -> StreamingSampler:
        """Start the child and its reader; raises ``OSError`` where no process can start."""
        if self._proc is not None:
            return self
        proc = _spawn(self.config)
        self._proc = proc
        self._reader = threading.Thread(
            target=self._read, args=(proc,), name="gpusight-monitor", daemon=True
        )
        self._reader.start()
        return self

    def retime(self, hz: float) -> None:
        """The running child samples at ``hz`` from its next sample on."""
        self._tell(f"hz {hz!r}")

    def stop(self) -> None:
        """Stop the child (killed if it does not go within ``STOP_TIMEOUT_S``) and join the
        reader: no listener runs after this returns, unless called from a listener."""
        proc = self._proc
        if proc is None or self._stopping:
            return
        self._stopping = True
        # "stop" rather than closing stdin: forked DataLoader workers hold the pipe too.
        self._tell("stop")
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        with self._write_lock:
            _close(proc.stdin)
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join()  # EOF now that the child is gone; a slow listener is waited for

    def _tell(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        with self._write_lock:
            try:
                proc.stdin.write(line.encode() + b"\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass  # the child is gone (or stdin closed): the reader says so at EOF

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:  # a pipe's read returns each line as it comes
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if "available" in line:
                self._available = bool(line["available"])
                self.reason = line.get("reason")
            group, host = line.get("samples") or [], line.get("host") or {}
            for listener in self._listeners:
                try:
                    listener(group, host)
                except Exception:
                    pass
        why = _ended(proc)
        with self._write_lock:
            _close(proc.stdin)
        if not self._stopping and self.on_exit is not None:
            self.on_exit(why)


def pcie_every(hz: float) -> int:
    """Every how many samples to read PCIe throughput, which costs NVML 20 ms per direction:
    about twice a second."""
    return max(1, round(hz / 2))


def _spawn(config: dict[str, Any]) -> subprocess.Popen[bytes]:
    if not sys.executable:  # an embedded interpreter: no Python to start a child with
        raise OSError("this interpreter does not know its executable (sys.executable is empty)")
    return subprocess.Popen(
        [sys.executable, "-m", __name__, json.dumps(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_child_env(),
        start_new_session=True,  # the terminal's Ctrl-C is the user's process's to handle
        close_fds=True,
    )


def _ended(proc: subprocess.Popen[bytes]) -> str:
    """Reap a child whose stdout has ended; how it ended, in words."""
    try:
        code = proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # closed its stdout yet lives on: not ours to wait for
        proc.kill()
        code = proc.wait()
    err = proc.stderr.read() if proc.stderr is not None else b""
    for pipe in (proc.stdout, proc.stderr):
        _close(pipe)
    return _how(code, err)


def _how(code: int | None, err: bytes) -> str:
    """How a child ended, in words: its signal, or its exit code and last line on stderr."""
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:]
    return f"exit {code}: {tail[0]}" if tail else f"exit {code}"


def _close(pipe: IO[bytes] | None) -> None:
    if pipe is not None:
        try:
            pipe.close()
        except OSError:
            pass


def _child_env() -> dict[str, str]:
    """The parent's environment, with this package importable however it was found."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def thread_asked() -> bool:
    """``GPUSIGHT_SAMPLER=thread``: sample in a thread of this process, not in a child."""
    return os.environ.get(ENV, "process") == "thread"


def gpu_sampler(
    gpus: Sequence[int | str], interval_s: float, t0: float, labels: Sequence[int]
) -> WatchSampler:
    """The watch's started GPU sampler: a child process, else (``GPUSIGHT_SAMPLER=thread``, or
    no process could start) the thread, with ``reason`` saying why where it is not asked for."""
    why = None
    if not thread_asked():
        try:
            return ProcessSampler(gpus, interval_s=interval_s, t0=t0, labels=labels).start()
        except OSError as exc:
            why = f"the GPU sampler ran as a thread: no process could start ({exc})"
    thread = NvmlSampler(gpus, interval_s=interval_s, t0=t0, labels=labels).start()
    thread.reason = thread.reason or why
    return thread


def _child_sampler(config: dict[str, Any]) -> NvmlSampler:
    return NvmlSampler(
        config["gpus"],
        interval_s=float(config["interval_s"]),
        t0=float(config["t0"]),
        labels=config["labels"],
        max_samples=int(config["max_samples"]),
        pcie_every=int(config["pcie_every"]),
        cpu_pid=int(config["parent"]),
    )


def _guard(sampler: NvmlSampler, parent: int) -> None:
    """Halt the child's sampler on ``stop`` (or EOF, when every holder of the pipe is gone) and
    when the parent dies; ``hz X`` on stdin retimes it."""

    def listen() -> None:
        for line in sys.stdin:
            word, _, arg = line.strip().partition(" ")
            if word != "hz":
                break
            try:
                hz = float(arg)
            except ValueError:
                continue
            if hz > 0:
                sampler.interval_s = 1.0 / hz
                sampler.pcie_every = pcie_every(hz)
        sampler.halt()

    def watch_parent() -> None:
        while not sampler.halted(1.0):
            if os.getppid() != parent:  # the user's process died without stopping us
                sampler.halt()

    threading.Thread(target=listen, daemon=True).start()
    threading.Thread(target=watch_parent, daemon=True).start()


def _serve(config: dict[str, Any]) -> dict[str, Any]:
    """The child's work: sample until ``stop`` on stdin, or until the parent is gone."""
    sampler = _child_sampler(config)
    _guard(sampler, int(config["parent"]))
    sampler.run_here()
    out: dict[str, Any] = {
        "available": sampler.available,
        "reason": sampler.reason,
        "busy_s": sampler.busy_s,
        "links": {str(k): list(v) for k, v in sampler.links.items()},
    }
    out["samples"] = sampler.stop()
    return out


def _stream(config: dict[str, Any]) -> None:
    """The monitor's child: each group and the host's figures as one JSON line, as sampled."""
    sampler = _child_sampler(config)
    host = HostReader()  # read here, so that the user's kernel does no /proc reads a tick
    out = sys.stdout.buffer
    first = True

    def send(group: list[Sample]) -> None:
        nonlocal first
        line: dict[str, Any] = {"samples": group, "host": host.read()}
        if first:  # NVML is open by the first sample: whether it samples a GPU is known
            line["available"], line["reason"] = sampler.available, sampler.reason
            first = False
        try:
            out.write(json.dumps(line).encode() + b"\n")
            out.flush()  # now, not when a buffer fills: the sidebar draws it live
        except (OSError, ValueError):
            sampler.halt()  # the parent closed its end: nobody reads any more

    sampler.subscribe(send)
    _guard(sampler, int(config["parent"]))
    sampler.run_here()
    # Nothing to sample (no NVML, no psutil): stay until stopped, as the thread does.
    while not sampler.halted(1.0):
        pass
    sampler.stop()


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpusight.watch.sampler_process CONFIG_JSON", file=sys.stderr)
        return 2
    config = json.loads(argv[0])
    if config.get("stream"):
        _stream(config)
        return 0
    json.dump(_serve(config), sys.stdout)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
