"""The speed AMP really gave: the float32 and AMP twins timed side by side in one fresh process,
alternating bursts at the AMP trainer's batch, XLA and threads (`measurement.py`), the SideBySide
component that runs it (`side_by_side.py`), and the speed record the gate's `min_speedup` rule,
the table and the report read (`record.py`).

May import: `core`, `components.models`, `components.data`, `components.amp`, `components.training`.
"""
