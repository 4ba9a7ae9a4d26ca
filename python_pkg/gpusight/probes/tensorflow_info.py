"""Which GPUs TensorFlow sees, when TensorFlow is installed.

Absent TensorFlow is never imported (``find_spec`` only looks). Present, it is asked in a child
process: importing it takes seconds, floods the log and loads its own CUDA libraries, none of
which belongs in the user's kernel. If the user already imported it, their copy is asked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

from .facts import TensorFlowFacts

TIMEOUT_S = 120
_ASK = (
    "import json, tensorflow as tf\n"
    "gpus = [d.name for d in tf.config.list_physical_devices('GPU')]\n"
    "print('GPUSIGHT-TF ' + json.dumps({'version': tf.__version__, 'gpus': gpus}))\n"
)


def installed() -> bool:
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        return False


def _ask_loaded(tf: Any) -> TensorFlowFacts:
    try:
        gpus = [str(d.name) for d in tf.config.list_physical_devices("GPU")]
    except Exception as exc:
        return TensorFlowFacts(installed=True, why=f"tf.config.list_physical_devices failed: {exc}")
    return TensorFlowFacts(installed=True, version=str(getattr(tf, "__version__", "?")), gpus=gpus)


def _ask_child() -> TensorFlowFacts:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # The child must find the same tensorflow find_spec found here.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _ASK],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return TensorFlowFacts(installed=True, why=f"importing tensorflow took over {TIMEOUT_S} s")
    except OSError as exc:
        return TensorFlowFacts(installed=True, why=f"could not start Python: {exc}")
    for line in done.stdout.splitlines():
        if line.startswith("GPUSIGHT-TF "):
            data = json.loads(line.removeprefix("GPUSIGHT-TF "))
            return TensorFlowFacts(
                installed=True, version=str(data["version"]), gpus=[str(g) for g in data["gpus"]]
            )
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return TensorFlowFacts(installed=True, why=f"importing tensorflow failed: {tail}")


def in_child() -> bool:
    """Whether ``probe`` asks a child process (TensorFlow not imported here): then it only waits
    on that child and may run in a thread beside the other probes."""
    return sys.modules.get("tensorflow") is None


def probe() -> TensorFlowFacts:
    loaded = sys.modules.get("tensorflow")
    if loaded is not None:
        return _ask_loaded(loaded)
    if not installed():
        return TensorFlowFacts(installed=False, why="TensorFlow is not installed")
    return _ask_child()
