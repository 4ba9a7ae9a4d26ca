"""The what-ifs against the real fix, one module per suite: ``run_whatif.py --suite NAME``
(``gpusight run --what-if`` from outside an unmodified script: ``scenarios``, ``corpus``,
``compile``) and ``gpu_whatif.py --suite NAME`` (in a process: ``diagnose``, ``cell``,
``callbacks``). ``truth``: the script bare and fixed, the gain a what-if is read against."""
