"""What both protocols share: find the servable, check the request, run it (batched)."""

from __future__ import annotations

import numpy as np

from amp_pipeline.serving.batching import Batcher, BatchingConfig
from amp_pipeline.serving.errors import invalid
from amp_pipeline.serving.repository import ModelRepository, Servable
from amp_pipeline.serving.tensors import check_inputs


class PredictionCore:
    """Predict and metadata over a ModelRepository, for the gRPC and REST front ends."""

    def __init__(self, repository: ModelRepository, batching: BatchingConfig | None):
        self.repository = repository
        self.batcher = Batcher(batching) if batching is not None else None

    def servable(self, model: str, version: int | None) -> Servable:
        if not model:
            raise invalid("the request names no model (model_spec.name is empty)")
        return self.repository.get(model, version)

    def predict(
        self, servable: Servable, signature: str, arrays: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Runs a checked request; a failure inside the model is INVALID_ARGUMENT, as in TF
        Serving (the inputs passed the checks, so the data itself was refused)."""
        import tensorflow as tf

        check_inputs(signature, servable.inputs[signature], arrays)
        try:
            if self.batcher is not None:
                return self.batcher.run(servable, signature, arrays)
            return servable.run(signature, arrays)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise invalid(f"the model refused the input: {first}") from None

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
