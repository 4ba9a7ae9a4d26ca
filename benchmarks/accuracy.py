"""Does gpusight say what the script does? Verdicts, phases and step counts against what was
planted, or against the script's own clock.

    PYTHONPATH=python_pkg python3 benchmarks/accuracy.py [--suite NAME] --out "$OUT" [...]
    PYTHONPATH=python_pkg python3 benchmarks/accuracy.py --suite NAME --help

The suites (``benchmarks/verdicts/``):

- ``scenarios`` (the default): every planted scenario under ``gpusight run`` (and bare): the
  expected bottleneck and finding against the report's;
- ``shapes``: the loop shapes (#34): verdict, phase and the lead finding's estimate against the
  scenario's own ``--fix``;
- ``patterns``: loop shapes from public training code (any device): the report's steps and step
  time against the loop's own clock.

The real-library corpus's verdicts are ``run_whatif.py --suite corpus`` (with their what-ifs).
"""

from __future__ import annotations

import sys

from harness.cli import dispatch

SUITES = {
    "scenarios": ("verdicts.scenarios", "the planted scenarios' verdicts and findings"),
    "shapes": ("verdicts.shapes", "the loop shapes: verdict, phase, estimate vs --fix"),
    "patterns": ("verdicts.patterns", "public training loops: steps and step time vs own clock"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, doc=__doc__, flag="--suite", choices=SUITES, default="scenarios")


if __name__ == "__main__":
    sys.exit(main())
