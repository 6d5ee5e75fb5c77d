"""amp-pipeline: a float32 model and its automatic-mixed-precision twin, trained side by side,
gated on paired evidence, and the best proven twin pushed.

One import namespace. The repository keeps its folders at the top (`core/`, `pipeline/`,
`components/`, `serving/`, `kubeflow/`, `benchmarks/`, `user_models/`); `pyproject.toml` maps
them under this package (`components.gate`, ...), so a wheel installs one top-level
name. For TFX pipelines of your own, see `amp_pipeline.tfx`.

This module imports nothing heavy: the lent GPU machine runs `python -m amp_pipeline.benchmarks`
without TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

# In a checkout (the repository root on sys.path, or an editable install) the mapped folders sit
# beside this one, not inside it: they are found through the package's path. An installed wheel
# has them inside, and no pyproject.toml beside.
_checkout = Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (
    _checkout / "components" / "__init__.py"
).is_file():
    __path__.append(str(_checkout))  # noqa: F821 (a package's __path__)
