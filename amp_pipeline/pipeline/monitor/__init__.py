"""After the push: `amp-pipeline monitor` reads the requests `serve --log-requests` logged
(`traffic.py`), checks them against the run's training statistics and schema with TFDV's skew
and drift comparators, and the served answers against the eval split's (`drift.py`), judges a
shadow version on the same traffic (`shadow.py`), and writes monitor.json, monitor.md and plots,
tracked in MLflow beside the model's run (`report.py`, `check.py`).

May import: `core`, `serving`, `components`, `pipeline`'s own modules and `pipeline/tracking`.
"""
