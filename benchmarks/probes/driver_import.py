"""Which module's import starts the CUDA driver (``cuInit``): the warm start cannot fork a
re-run from a process where the driver started, so a script whose libraries start it re-runs
every arm afresh (run42's pyg_gin_molecules: 13 s a re-run).

    PYTHONPATH=python_pkg python3 benchmarks/probes/driver_import.py torch_geometric [...]

Imports each named module as the warm start does (NVML's device check on), watching every
module loaded on the way; prints the first whose load left the driver started, and the import
chain that led to it.
"""

from __future__ import annotations

import builtins
import importlib
import os
import sys
from typing import Any

from gpusight.rerun import warm_server


def main(names: list[str]) -> int:
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    chain: list[str] = []
    first: list[tuple[str, list[str]]] = []
    real = builtins.__import__

    def watched(name: str, *args: Any, **kwargs: Any) -> Any:
        chain.append(name)
        try:
            return real(name, *args, **kwargs)
        finally:
            if not first and warm_server._cuda_driver_started():
                first.append((name, list(chain)))
            chain.pop()

    builtins.__import__ = watched
    try:
        for name in ["torch", *names]:
            importlib.import_module(name)
            if not first and warm_server._cuda_driver_started():
                first.append((name, [name]))  # the module's own code, past its imports
    finally:
        builtins.__import__ = real
    if not first:
        print("DRIVER_IMPORT none: no import started the CUDA driver")
        return 0
    name, path = first[0]
    print(f"DRIVER_IMPORT {name} (chain: {' > '.join(path)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
