"""What-ifs measured inside a process, against the change made by hand.

    PYTHONPATH=python_pkg python3 benchmarks/gpu_whatif.py [--suite NAME] --out "$OUT" [...]
    PYTHONPATH=python_pkg python3 benchmarks/gpu_whatif.py --suite NAME --help

The suites (``benchmarks/whatifs/``):

- ``diagnose`` (the default): ``gpusight.diagnose`` on ResNet-18 and on the planted scenarios,
  each what-if against its fix in a plain loop (``--device cpu``: a dry run of the code);
- ``cell``: ``%%gpusight --what-if`` on the example notebook's training cell in IPython, against
  the loader fixed by hand;
- ``callbacks``: the trainer callbacks (Hugging Face, Lightning) against ``gpusight run`` on the
  same script: the same bottleneck.
"""

from __future__ import annotations

import sys

from harness.cli import dispatch

SUITES = {
    "diagnose": ("whatifs.diagnose", "gpusight.diagnose's what-ifs vs the fix in a plain loop"),
    "cell": ("whatifs.cell", "%%gpusight --what-if on the notebook's cell vs the fix by hand"),
    "callbacks": ("whatifs.callbacks", "the trainer callbacks vs gpusight run, same script"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, doc=__doc__, flag="--suite", choices=SUITES, default="diagnose")


if __name__ == "__main__":
    sys.exit(main())
