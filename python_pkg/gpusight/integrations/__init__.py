"""Watch a window of training steps from inside a framework's own training loop.

- ``gpusight.integrations.huggingface.GpusightCallback``: a ``transformers.TrainerCallback``.
- ``gpusight.integrations.lightning.GpusightCallback``: a Lightning ``Callback``.

Each watches ``steps`` steps of ``trainer.train()`` / ``trainer.fit()`` (after ``start_step``),
then shows the report in a notebook or writes it in a script. The frameworks are imported only
by their own module, when it is imported: gpusight never needs them.
"""
