"""The driver's early check of `--model-module`: a broken module fails in seconds, not minutes."""

from __future__ import annotations

from amp_pipeline.components.models import user_module as model_module
from amp_pipeline.core.data_spec import DataSpec


def check(text: str | None, data: DataSpec) -> model_module.ModuleRef | None:
    """Resolves and imports the module, and builds its model once in float32.

    The build is checked here when the built-in preprocessing makes `x` (its width is known
    before Transform runs); a module with its own preprocessing_fn is built first in the
    trainers, which report a failure the same way.

    Raises:
        model_module.ModelModuleError: one line naming the module and the problem.
    """
    if not text:
        return None
    ref = model_module.inspect(model_module.resolve(text))
    if not ref.preprocessing:
        import keras

        from amp_pipeline.components.data.preprocessing import feature_width, model_spec

        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy("float32")
        try:
            module = model_module.load(ref)
            model_module.build(ref, module, model_spec(data, feature_width(data)))
        finally:
            keras.mixed_precision.set_global_policy(previous)
            keras.backend.clear_session()
    return ref
