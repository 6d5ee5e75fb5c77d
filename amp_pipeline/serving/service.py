"""What both protocols share: find the servable, check the request, run it (batched)."""

from __future__ import annotations

import numpy as np

from amp_pipeline.serving.batching import Batcher, BatchingConfig
from amp_pipeline.serving.errors import invalid
from amp_pipeline.serving.repository import ModelRepository, Servable
from amp_pipeline.serving.tensors import check_inputs


class PredictionCore:
    """Predict and metadata over a ModelRepository, for the gRPC and REST front ends; each
    answered request offered to the request log (when there is one) and to the shadow version
    (when there is one), neither of which the answer waits for."""

    def __init__(
        self,
        repository: ModelRepository,
        batching: BatchingConfig | None,
        request_log=None,
        shadow=None,
    ):
        self.repository = repository
        self.batcher = Batcher(batching) if batching is not None else None
        self.request_log = request_log  # serving/requestlog/writer.py::RequestLog
        self.shadow = shadow  # serving/requestlog/shadow.py::Shadow

    def servable(self, model: str, version: int | None) -> Servable:
        if not model:
            raise invalid("the request names no model (model_spec.name is empty)")
        return self.repository.get(model, version)

    def predict(
        self,
        servable: Servable,
        signature: str,
        arrays: dict[str, np.ndarray],
        origin: str = "",
    ) -> dict[str, np.ndarray]:
        """Runs a checked request; a failure inside the model is INVALID_ARGUMENT, as in TF
        Serving (the inputs passed the checks, so the data itself was refused). `origin`: the
        protocol it came by, as the request log records it."""
        import tensorflow as tf

        check_inputs(signature, servable.inputs[signature], arrays)
        try:
            if self.batcher is not None:
                outputs = self.batcher.run(servable, signature, arrays)
            else:
                outputs = servable.run(signature, arrays)
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise invalid(f"the model refused the input: {first}") from None
        if self.request_log is not None and self.request_log.draw():
            names = set(servable.inputs[signature])
            self.request_log.offer(
                servable.name, servable.version, signature, arrays, outputs, names, origin
            )
            if self.shadow is not None and servable.version != self.shadow.version:
                self.shadow.offer(servable.name, signature, arrays, names, origin)
        return outputs

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        if self.shadow is not None:
            self.shadow.close()  # its last answers go to the log, which closes after it
        if self.request_log is not None:
            self.request_log.close()
