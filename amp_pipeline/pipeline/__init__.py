"""The run: its configuration (`config.py`), `create_pipeline` (`pipeline.py`), the local runner
with its lock, signals and progress, the results read back from ML Metadata, the summary, the
report and MLflow tracking; the command line in `pipeline/cli/`.

May import: `core`, `serving`, `components`.
"""
