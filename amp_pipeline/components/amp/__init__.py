"""Mixed precision: the recipe for the hardware (`precision.py`), the rules that keep a model
safe under it (`rules.py`: float32 output, variable dtypes, the dtype report), the readiness
check, the loss-scale monitor, the diagnosis of a slow AMP run and the performance
measurements (`perf.py`: step timer, peak memory).

May import: `core`, `components.models`, `components.data`.
"""
