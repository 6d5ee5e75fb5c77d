"""Data in spans: which spans a `{SPAN}` pattern selects (selection.py) and how the newest span
drifted from the one before it (drift.py)."""
