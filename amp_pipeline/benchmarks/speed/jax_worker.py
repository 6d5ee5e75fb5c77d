"""`python -m amp_pipeline.benchmarks.speed.jax_worker CONFIG_JSON OUT_JSON`: one benchmark
configuration under Keras 3's JAX backend, in a fresh process (KERAS_BACKEND=jax is set by
benchmarks/speed/bench.py).

The same model builders (components/models/builtin.py), float32 output rule
(components/amp/rules.py) and step timer (components/amp/perf.py) as the TensorFlow bench;
Adam, wrapped in Keras' LossScaleOptimizer under mixed_float16. JAX compiles every train step
with XLA. Nothing here imports TensorFlow.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from amp_pipeline.benchmarks.speed.configs import BenchConfig

JAX_MEMORY_METHOD = (
    "JAX device memory_stats()['peak_bytes_in_use'], whole process (a fresh one per "
    "configuration: model, optimizer state, activations and XLA workspace)"
)


def device_peak_mb() -> float | None:
    """Peak device memory of this process from the JAX device's allocator (None on CPU, whose
    client keeps no such statistics)."""
    import jax

    stats = jax.devices()[0].memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return peak / 2**20 if peak is not None else None


def same_batch(x, y, steps: int):
    """One host batch, `steps` times (a keras.utils.PyDataset): the timed steps measure the
    device's compute, not the input pipeline."""
    import keras

    class SameBatch(keras.utils.PyDataset):
        def __len__(self):
            return steps

        def __getitem__(self, index):
            return x, y

    return SameBatch()


def run(config: BenchConfig) -> dict:
    import jax
    import keras
    import numpy as np

    from amp_pipeline.components.amp.perf import PeakMemory, StepTimer
    from amp_pipeline.components.amp.rules import float32_output
    from amp_pipeline.components.models.builtin import build_model

    if keras.backend.backend() != "jax":
        raise RuntimeError("amp_pipeline.benchmarks.speed.jax_worker needs KERAS_BACKEND=jax")
    if config.matmul_precision:
        jax.config.update("jax_default_matmul_precision", config.matmul_precision)
    keras.mixed_precision.set_global_policy(config.policy)
    keras.utils.set_random_seed(0)
    width = config.input_width()
    model = build_model(
        config.model, width, config.num_classes, config.image_shape(), **config.model_options()
    )
    model, _ = float32_output(model, width, config.policy)
    optimizer = keras.optimizers.Adam(config.learning_rate)
    if config.policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(),
        jit_compile=True,
    )
    rng = np.random.default_rng(0)
    x = config.synthetic_x(rng, config.batch_size)
    y = rng.integers(0, config.num_classes, config.batch_size)
    steps = config.warmup_steps + config.steps
    timer = StepTimer(config.batch_size, warmup_steps=config.warmup_steps)
    host = PeakMemory("cpu")
    host.start()
    model.fit(same_batch(x, y, steps), epochs=1, callbacks=[timer], verbose=0)
    device_mb = device_peak_mb()
    on_gpu = jax.devices()[0].platform == "gpu"
    return {
        **timer.summary(),
        "peak_memory_mb": device_mb if device_mb is not None else host.peak_mb(),
        "memory_method": JAX_MEMORY_METHOD if device_mb is not None else host.method,
        "replicas": 1,
        "backend": "jax",
        "device": str(jax.devices()[0].device_kind) if on_gpu else "cpu",
        "versions": {"jax": jax.__version__, "keras": keras.__version__},
    }


def main(argv: list[str]) -> int:
    config = BenchConfig(**json.loads(Path(argv[1]).read_text()))
    try:
        result = run(config)
    except Exception as e:  # noqa: BLE001 - an out-of-memory batch is a result of the search
        if "RESOURCE_EXHAUSTED" in str(e) or "Out of memory" in str(e):
            Path(argv[2]).write_text(json.dumps({"oom": True, "error": str(e)[:500]}))
            return 0
        raise
    Path(argv[2]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("KERAS_BACKEND", "jax")
    sys.exit(main(sys.argv))
