"""Whether a script's re-runs fork from the warm start, and from what: the server's answer
for a script whose libraries start the CUDA driver as they load (a PyG script: pyg_lib).

    PYTHONPATH=python_pkg python3 benchmarks/probes/warm_second_server.py SCRIPT

Starts the what-if's warm start for SCRIPT as the driver does, waits for it, and prints what
it imported, what it left to each run and the report's note; no run of the script is made.
"""

from __future__ import annotations

import os
import sys
import time

from gpusight.rerun.warm_start import WarmStart


def main(script: str) -> int:
    t = time.monotonic()
    warm = WarmStart.start(sys.executable, script, dict(os.environ), os.getcwd())
    try:
        ready = warm.ready()
        said = warm.said or {}
        print(f"WARM ready={ready} in {time.monotonic() - t:.1f} s")
        print(f"WARM asked={warm.modules}")
        print(f"WARM imported={said.get('imported')} import_s={said.get('import_s')}")
        print(f"WARM left={warm.left}")
        print(f"WARM note={warm.note()}")
    finally:
        warm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
