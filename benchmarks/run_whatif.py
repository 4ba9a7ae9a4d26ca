"""``gpusight run --what-if`` from outside an unmodified script, against the fix made in it.

    PYTHONPATH=python_pkg python3 benchmarks/run_whatif.py [--suite NAME] --out "$OUT" [...]
    PYTHONPATH=python_pkg python3 benchmarks/run_whatif.py --suite NAME --help

The suites (``benchmarks/whatifs/``):

- ``scenarios`` (the default): each planted scenario's what-if against its ``--fix``
  (``--verify``: the what-if's patch measured too; ``--truth-watched``: the truth under
  ``gpusight run --lean``);
- ``corpus``: the real-library corpus (``corpus/``): each script's verdict and what-if against
  the truth of its ``--fix``, in one lease (``--verdict-only``: the verdict alone);
- ``compile``: the compile what-if against the same script compiling its own model.
"""

from __future__ import annotations

import os
import sys

from harness.cli import dispatch

SUITES = {
    "scenarios": ("whatifs.scenarios", "the planted scenarios' what-ifs against their --fix"),
    "corpus": ("whatifs.corpus", "the real-library corpus: verdicts and what-ifs vs --fix"),
    "compile": ("whatifs.compiled", "torch.compile from outside vs the script compiling"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, doc=__doc__, flag="--suite", choices=SUITES, default="scenarios")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
