"""The promotion gate: its statistics (`stats.py`), the evidence it reads (`evidence.py`), its
rules (`rules.py`), the side-by-side speed measurement (`speed.py`) and the SideBySide
component that runs it (`side_by_side.py`), the attributed speed record (`speed_record.py`),
the majority-class baseline (`majority.py`), the regression rules (`regression.py`), the
Evaluator that skips TFMA while nothing is in production (`production_evaluator.py`) and the
PromotionGate component (`component.py`).

May import: every other package of `components`, `serving`, `core`.
"""
