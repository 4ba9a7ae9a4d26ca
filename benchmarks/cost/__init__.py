"""What watching costs, one module per method; ``benchmarks/watch_cost.py --method NAME`` runs
one (its ``main(argv)``). The methods, and the question each answers, are listed in
``watch_cost.py``."""
