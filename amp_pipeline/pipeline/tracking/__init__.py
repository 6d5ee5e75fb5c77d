"""MLflow tracking of every run: the parent run, a child run per trainer, the export and the gate,
the shipped twin registered (`tracker.py`), and the served SavedModel as an MLflow pyfunc model
(`pyfunc_model.py`).

May import: `core`, `serving`, `components`, and `pipeline`'s own modules.
"""
