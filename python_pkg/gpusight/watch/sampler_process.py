"""The watch's NVML sampler in a process of its own, so that its Python never holds the GIL
that the user's training thread needs.

A sampler thread in the user's process runs Python between its NVML calls: each ctypes call
gives the GIL up and takes it back, so ten times a sample the training thread is stopped until
the sampler lets go (CPython's switch interval, the OS waking the other thread). On launch-bound
steps of 2 ms that costs the user's loop measurably (``benchmarks/watch_parts.py``'s ``sampler``
parts). Here the same :class:`~gpusight.watch.nvml_sampler.NvmlSampler` loop runs in a child
process, ``python -m gpusight.watch.sampler_process CONFIG``: it samples the parent's CPU %
rather than its own, times its samples on the parent's clock (``perf_counter`` is system-wide),
and hands everything back as one JSON object on stdout when told ``stop`` on stdin.

The child ignores Ctrl-C (it has a session of its own: the terminal's SIGINT goes to the user's
process, which stops it) and exits by itself when its parent dies. Where the child cannot start
or fails, :func:`gpu_sampler` falls back on the thread, and ``reason`` says what happened.
``GPUSIGHT_SAMPLER=thread`` asks for the thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from .nvml_sampler import NvmlSampler, Sample

ENV = "GPUSIGHT_SAMPLER"
STOP_TIMEOUT_S = 5.0


class Sampler(Protocol):
    """What the watch reads from its sampler (the thread's and the process's alike)."""

    reason: str | None
    busy_s: float
    links: dict[int | str, tuple[int, int]]

    @property
    def available(self) -> bool: ...

    @property
    def samples(self) -> list[Sample]: ...

    def start(self) -> Sampler: ...

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
        self._stopped = False

    @property
    def available(self) -> bool:
        return self._available

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
        self._proc = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps(self.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_env(),
            start_new_session=True,  # the terminal's Ctrl-C is the user's process's to handle
            close_fds=True,
        )
        return self

    def stop(self) -> list[Sample]:
        proc, self._proc = self._proc, None
        if proc is None or self._stopped:
            return self.samples
        self._stopped = True
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
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {code}"]
            self.reason = f"the GPU sampler process failed: {tail[0]}"
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


def _child_env() -> dict[str, str]:
    """The parent's environment, with this package importable however it was found."""
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def gpu_sampler(
    gpus: Sequence[int | str], interval_s: float, t0: float, labels: Sequence[int]
) -> Sampler:
    """The watch's started GPU sampler: a child process, else (``GPUSIGHT_SAMPLER=thread``, or
    no process could start) the thread, with ``reason`` saying why where it is not asked for."""
    if os.environ.get(ENV, "process") != "thread":
        proc = ProcessSampler(gpus, interval_s=interval_s, t0=t0, labels=labels)
        try:
            return proc.start()
        except OSError as exc:
            why = f"the GPU sampler ran as a thread: no process could start ({exc})"
        thread = NvmlSampler(gpus, interval_s=interval_s, t0=t0, labels=labels).start()
        thread.reason = thread.reason or why
        return thread
    return NvmlSampler(gpus, interval_s=interval_s, t0=t0, labels=labels).start()


def _serve(config: dict[str, Any]) -> dict[str, Any]:
    """The child's work: sample until ``stop`` on stdin, or until the parent is gone."""
    parent = int(config["parent"])
    sampler = NvmlSampler(
        config["gpus"],
        interval_s=float(config["interval_s"]),
        t0=float(config["t0"]),
        labels=config["labels"],
        max_samples=int(config["max_samples"]),
        pcie_every=int(config["pcie_every"]),
        cpu_pid=parent,
    )

    def wait_for_stop() -> None:
        sys.stdin.readline()  # "stop", or EOF when every holder of the pipe is gone
        sampler.halt()

    def watch_parent() -> None:
        while not sampler.halted(1.0):
            if os.getppid() != parent:  # the user's process died without stopping us
                sampler.halt()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    threading.Thread(target=watch_parent, daemon=True).start()
    sampler.run_here()
    out: dict[str, Any] = {
        "available": sampler.available,
        "reason": sampler.reason,
        "busy_s": sampler.busy_s,
        "links": {str(k): list(v) for k, v in sampler.links.items()},
    }
    out["samples"] = sampler.stop()
    return out


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpusight.watch.sampler_process CONFIG_JSON", file=sys.stderr)
        return 2
    json.dump(_serve(json.loads(argv[0])), sys.stdout)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
