"""amp-pipeline: a float32 model and its automatic-mixed-precision twin, trained side by side,
gated on paired evidence, and the best proven twin pushed.

One import namespace. Every package lives under this folder (`amp_pipeline.components.gate` is
`amp_pipeline/components/gate/`); the repository root's `core/`, `pipeline/`, `components/`,
`serving/`, `kubeflow/`, `benchmarks/` and `user_models/` are symlinks to them, so the design
card's folders stay visible at the top while interpreters, editors and type checkers all read the
same files under the same names. For TFX pipelines of your own, see `amp_pipeline.tfx`.

This module imports nothing heavy: the lent GPU machine runs `python -m amp_pipeline.benchmarks`
without TensorFlow.
"""

from __future__ import annotations

__version__ = "0.1.0"
