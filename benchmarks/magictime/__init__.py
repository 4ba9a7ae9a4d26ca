"""``benchmarks/magic_speed.py``'s parts: the fresh process that runs ``%gpusight``
(``child.py``, run as a script) and the summary of its runs (``summary.py``)."""
