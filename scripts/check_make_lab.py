"""The README's first command, run as the user runs it: ``make lab`` must start JupyterLab with
the extension and serve the example notebook, whoever the user is (root in a GPU container).

Starts ``make lab`` on a free port with no browser and no token (its setup, ``dev``, taken as
done: ``make test`` built it first), waits until the server lists the example notebook and the
extension, then stops it. Exit 1 with make's output if it exits or times out first.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = "why-is-my-gpu-idle.ipynb"
TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bytes(r.read())
    except (urllib.error.URLError, OSError):
        return None


def serves_example(base: str) -> bool:
    listing = get(f"{base}/api/contents/")
    if listing is None:
        return False
    names = [c["name"] for c in json.loads(listing).get("content", [])]
    lab = get(f"{base}/lab") or b""
    return EXAMPLE in names and b"gpusight" in lab


def main() -> int:
    port = free_port()
    args = f"--no-browser --port={port} --ServerApp.token= --ServerApp.password="
    log = ROOT / "build" / "make-lab.log"
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["make", "-s", "-o", "dev", "lab", f"LAB_ARGS={args}"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and jupyter stop together
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + TIMEOUT_S
        ok = False
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if serves_example(base):
                    ok = True
                    break
                time.sleep(1.0)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
    who = f"uid {os.getuid()}"
    if ok:
        print(f"make lab ({who}): JupyterLab served {EXAMPLE} with gpusight on port {port}")
        return 0
    why = f"exited {proc.returncode}" if proc.returncode not in (None, -15) else "timed out"
    print(f"make lab ({who}) {why} before serving {EXAMPLE}; its output:", file=sys.stderr)
    print(log.read_text()[-4000:], file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
