"""What does watching cost? One entry point, one method a question (``benchmarks/cost/``).

    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py [--method NAME] [its options]
    PYTHONPATH=python_pkg python3 benchmarks/watch_cost.py --method NAME --help

The methods, from the user's whole script to one call:

- ``process`` (the default): ``gpusight run`` against the bare script, process against
  process, each timed by the script's own clock (steady cost, the window's extra wall, the exit
  cost, the report's own figures beside them).
- ``scenario``: each public scenario's own script, bare and watched in one process, two threads
  taking turns at its ``Steps.mark()`` (W B B W): the steady cost to about a percent.
- ``interleaved``: one watch for the whole run in a thread of its own against the same workload
  bare, 25-step blocks W B B W; ``--part`` switches a part of the watch off.
- ``overhead``: each scenario's ``main()`` bare and watched in one process, ABBA rounds;
  ``--ablate`` switches the watch's parts off one at a time, ``--micro`` the hooks' cost in
  microseconds a step.
- ``parts``: one model in one loop, blocks of steps bare and under each part of the watch,
  rounds rotated, the SM clock of each block.
- ``hook``: the hooks alone, microseconds a step, on a CPU step where dispatch is all there is.
- ``sampling``: the watch's cost against the rarest rate its full steps are sampled at.
- ``sampler``: what the sampler process costs a short step (paused or running).
- ``inline``: what added Python costs inside a launch-bound GPU step against what it costs hot.
- ``inject``: what a what-if's injection costs a launch-bound forward (any CPU).
- ``spread``: why two processes of one launch-bound script differ.
- ``probe-profiler``: a launch-bound step after a profiler window, CUPTI torn down or not.
- ``probe-sync``: the per-call cost of what the watch adds around a copy and a sync.
- ``probe-moved-model``: where a moved model's what-if loses against the real fix.
"""

from __future__ import annotations

import sys

from harness.cli import dispatch

METHODS = {
    "process": ("cost.process", "gpusight run vs the bare script, process against process"),
    "scenario": ("cost.scenario", "each scenario's script, bare and watched threads in turns"),
    "interleaved": ("cost.interleaved", "one watch's thread against a bare one, W B B W blocks"),
    "overhead": ("cost.overhead", "scenario main()s bare and watched, ABBA (--ablate, --micro)"),
    "parts": ("cost.parts", "one loop, blocks under each part of the watch, rotated"),
    "hook": ("cost.hook", "the hooks alone on a CPU step, microseconds a step"),
    "sampling": ("cost.sampling", "the cost against the full steps' sampling cap"),
    "sampler": ("cost.sampler", "the sampler process paused or running around bare blocks"),
    "inline": ("cost.inline", "added Python inside a launch-bound GPU step vs hot"),
    "inject": ("cost.inject", "a what-if's injection on a launch-bound forward"),
    "spread": ("cost.spread", "why two processes of one script differ"),
    "probe-profiler": ("cost.probe_profiler", "a step after a profiler window (CUPTI)"),
    "probe-sync": ("cost.probe_sync", "per-call cost around a copy and a sync (CUDA)"),
    "probe-moved-model": ("cost.probe_moved_model", "a moved model's what-if vs its --fix"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch(argv, doc=__doc__, flag="--method", choices=METHODS, default="process")


if __name__ == "__main__":
    sys.exit(main())
