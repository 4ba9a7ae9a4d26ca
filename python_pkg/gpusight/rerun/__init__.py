"""Re-running a user's unmodified script with one change at a time (``gpusight run --what-if``)."""
