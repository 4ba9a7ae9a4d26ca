"""The pieces every benchmark shares, one copy each.

- ``paths``: where the repository, the scenarios, the corpus and the package are; folders put on
  ``sys.path``; a child's ``PYTHONPATH``.
- ``proc``: a command run with a timeout, its output captured (``run``).
- ``scripts``: what the scenario and corpus scripts print and declare (``SCENARIO_RESULT``,
  ``CORPUS_RESULT``, their step logs, their top-level ``LABEL``/``EXPECTED``).
- ``order``: the order runs and blocks take turns in: ABBA rounds, rotations, W B B W blocks.
- ``stats``: medians and their intervals, paired ratios and differences, spreads.
- ``table``: aligned text tables and the figures in them.
- ``record``: results written to ``--out``, with the command line and the git commit beside
  them (``OUT/COMMAND.txt``).
- ``cli``: the argparse base (``--out``, ``--only``, ``--rounds``) and the dispatch of an entry
  point to one of its methods or suites.
- ``log``: a long check's log, its sections, and the failures it counts.

Entry points put ``benchmarks/`` on ``sys.path`` by being run from it (``python3
benchmarks/NAME.py``); the tests' ``bench_support`` does the same.
"""
