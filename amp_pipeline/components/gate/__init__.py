"""The promotion gate: its statistics (`stats.py`; `error_stats.py` for a regression label's
paired errors), the evidence it reads (`evidence.py`), its rules (`rules.py`; `regression.py`
for a regression label, `class_metrics.py` for the rare class), which twin ships (`twins.py`),
the majority-class baseline (`majority.py`), the Evaluators' executors (`evaluator.py`, and
`production_evaluator.py`, which skips TFMA while nothing is in production), the PromotionGate
component (`component.py`) and its decision as people read it (`decision_md.py`). The speed
measurement it reads is `components/speed/`'s.

May import: every other package of `components`, `serving`, `core`.
"""
