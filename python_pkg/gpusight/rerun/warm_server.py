"""The process a what-if forks its re-runs from: the script's libraries imported once.

Started by ``warm_start.WarmStart`` (``python -c warm_start.SERVER``). It imports gpusight's run
command, torch and the libraries the script imports from outside the user's folder, says whether
a run forked from it gets what a fresh process gets (``refusal``), then forks a child a request:
its own session, the run's log as its output, the run's overlay entered, environment, folder and
arguments set, then ``gpusight run`` as a fresh ``python -c LAUNCH`` would run it.

The protocol is one JSON line each way: first ``{"modules", "local"}`` in and
``{"ready": bool, "why": str, "imported": [...], "import_s": float}`` out; then per run
``{"argv", "cwd", "env", "log", "layer"}`` in, ``{"pid": n}`` out once the child leads its own
process group, and ``{"rc": n}`` when it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import re
import sys
import threading
import time
import traceback
from typing import Any

ALWAYS = ("gpusight.cli", "gpusight.commands.run", "torch")


def serve() -> None:
    """Answer the driver on stdin/stdout until stdin closes."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # what an import prints goes to stderr, never into the replies
    ask = json.loads(sys.stdin.readline() or "{}")
    t = time.monotonic()
    imported = preload([*ALWAYS, *ask.get("modules", [])])
    release_nvml()
    why = refusal(ask.get("local", []))
    _reply(reply_fd, ready=why is None, why=why or "", imported=imported,
           import_s=round(time.monotonic() - t, 2), at=STOPPED_AT[0] or "")  # fmt: skip
    if why is not None:
        return
    for line in sys.stdin:
        pid = _fork(json.loads(line), reply_fd)
        _reply(reply_fd, pid=pid)
        _, status = os.waitpid(pid, 0)
        _reply(reply_fd, rc=os.waitstatus_to_exitcode(status))


def _reply(fd: int, **fields: Any) -> None:
    os.write(fd, (json.dumps(fields) + "\n").encode())


def preload(names: list[str]) -> list[str]:
    """Import each of ``names`` (``pkg.mod`` or ``pkg.mod:attr``, the attribute read: a lazy
    package such as transformers imports its submodule then), setting the environment where
    the script sets it (``=K=v``, ``?K=v``: ``script_imports``); the modules that imported."""
    done = []
    saved = dict(os.environ)
    # An import that asks whether CUDA is there asks NVML, which leaves the driver unopened:
    # a child forked after the driver opened could not use the GPU.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    try:
        for name in names:
            if name[:1] in ("=", "?"):
                key, _, value = name[1:].partition("=")
                if name[0] == "=" or key not in os.environ:
                    os.environ[key] = value
                continue
            module, _, attr = name.partition(":")
            try:
                got = importlib.import_module(module)
                if attr:
                    getattr(got, attr)
            except BaseException:  # a library that fails here fails in the run, as it would
                continue
            done.append(name)
            if STARTED_BY[0] is None and _cuda_driver_started():
                STARTED_BY[0] = module  # the refusal names it: the user's library, not ours
            if STOPPED_AT[0] is None and (STARTED_BY[0] or threading.active_count() > 1):
                STOPPED_AT[0] = name
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return done


def refusal(local: list[str]) -> str | None:
    """Why a run forked from this process would not start as a fresh one (None: it would):
    ``local`` the module names the script's folder defines. A module imported from the
    user's folder or its copy is no reason: a fresh run, with the same path and folder,
    imports the same file."""
    if threading.active_count() > 1:
        names = ", ".join(t.name for t in threading.enumerate() if t is not threading.main_thread())
        return f"an import started Python threads ({names}): a fork keeps only one"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "an import initialized CUDA, which a forked process cannot use"
    if _cuda_driver_started():
        who = f"importing {STARTED_BY[0]}" if STARTED_BY[0] else "an import"
        return f"{who} started the CUDA driver, which a forked process cannot use"
    clash = sorted(n for n in local if n in sys.modules)
    if clash:
        # The script's folder comes first on its path: the import would have found its own.
        return f"an import took `{clash[0]}`, which the script's folder defines"
    return None


def _mapped(library: str) -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any(library in row for row in f)
    except OSError:
        return False


def _cuda_driver_started() -> bool:
    """Whether this process initialized the CUDA driver (``cuInit``): a library may load it
    without, and asking how many devices there are tells which without starting it."""
    if not _mapped("libcuda.so"):
        return False
    try:
        n = ctypes.c_int(0)
        return int(ctypes.CDLL("libcuda.so.1").cuDeviceGetCount(ctypes.byref(n))) != NOT_STARTED
    except (OSError, AttributeError):
        return True


NOT_STARTED = 3  # CUDA_ERROR_NOT_INITIALIZED
STARTED_BY: list[str | None] = [None]
"""The first module whose import left the CUDA driver started (``preload``)."""
STOPPED_AT: list[str | None] = [None]
"""The first name asked for whose import left the process unfit to fork from (the driver
started, or threads): a server asked for the names before it only can serve (``warm_start``)."""


def release_nvml() -> None:
    """Undo the NVML sessions the imports opened (torch's NVML check opens one and keeps it):
    a forked run opens its own, as a fresh process does, on a library it finds at rest."""
    if not _mapped("libnvidia-ml.so"):
        return
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return
    for _ in range(16):  # sessions are counted; each shutdown ends one, then it says so
        if int(nvml.nvmlShutdown()) != 0:
            return


def _fork(req: dict[str, Any], reply_fd: int) -> int:
    """A child running ``req``; its pid once it leads its own session."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into the server
        code = 1
        try:
            os.close(r)
            os.close(reply_fd)
            os.setsid()
            os.close(w)  # the server waits for this: the group exists to signal
            _child(req)
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException:
            traceback.print_exc()
        finally:
            _teardown()
            os._exit(code)
    os.close(w)
    os.read(r, 1)  # EOF once the child has its session
    os.close(r)
    return pid


def _child(req: dict[str, Any]) -> None:
    log = os.open(req["log"], os.O_WRONLY)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull, encoding="utf-8")
    if req.get("layer"):
        from .overlay import enter

        enter(tuple(req["layer"]))
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    _reseed()
    own_pages()
    sys.argv = ["-c", *req["argv"]]
    from ..cli import main
    from .quick_exit import end

    end(main(req["argv"]))


def own_pages() -> int:
    """Copy now every private writable page this process shares with the server; the bytes.

    A fork shares the server's memory until either writes to it: each first write to a page
    then stops the process to copy it. The allocator hands out the server's free slots all
    over its heap, so a forked run paid those copies inside its measured steps: Lightning's
    CPU steps read 4 to 17 % slower than a fresh process's on this project's CPU, and as a
    fresh process's once the pages were copied up front (``benchmarks/fork_steps.py``).
    ``MADV_POPULATE_WRITE`` (Linux 5.14) faults a range in for writing without changing a
    byte; where the kernel refuses it, nothing is copied ahead. Only pages in memory are
    shared (``mincore``): a reservation the server never touched (a thread's stack, an
    allocator's arena) stays untouched, as in a fresh process."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            rows = f.read().splitlines()
    except OSError:
        return 0
    page = os.sysconf("SC_PAGE_SIZE")
    done = 0
    for row in rows:
        parts = row.split()
        name = parts[5] if len(parts) > 5 else ""
        if len(parts) < 2 or parts[1] != "rw-p" or name.startswith(("/dev/", "[v")):
            continue  # device memory and the kernel's own pages are not the heap's
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        resident = (ctypes.c_ubyte * ((hi - lo) // page))()
        if libc.mincore(lo, hi - lo, resident) != 0:
            continue
        for run in re.finditer(rb"[\x01-\xff]+", bytes(resident)):
            start, size = lo + run.start() * page, (run.end() - run.start()) * page
            if libc.madvise(start, size, MADV_POPULATE_WRITE) == 0:
                done += size
    return done


MADV_POPULATE_WRITE = 23


def _reseed() -> None:
    """Fresh seeds where a fresh process would draw them (Python's and numpy's global
    generators); torch's default generator starts from a fixed seed in every process alike."""
    import random

    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        with contextlib.suppress(Exception):
            np.random.seed()


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _teardown() -> None:
    """What an interpreter's exit does for a run that started processes of its own (its
    DataLoader workers, multiprocessing's resource tracker): threads joined, atexit run."""
    import atexit

    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
