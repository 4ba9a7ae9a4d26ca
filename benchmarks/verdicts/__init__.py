"""Does the report say what the script does? One module per suite, ``accuracy.py --suite NAME``:
``scenarios`` (the planted bottlenecks' verdicts and findings), ``shapes`` (the loop shapes'
verdict, phase and estimate against ``--fix``), ``patterns`` (loop shapes from public training
code: the report's steps and step time against the loop's own clock)."""
