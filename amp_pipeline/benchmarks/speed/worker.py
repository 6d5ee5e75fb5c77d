"""`python -m amp_pipeline.benchmarks.speed.worker CONFIG_JSON OUT_JSON [WEIGHTS_NPZ]`: one
benchmark configuration, fresh process (one of them per worker under MultiWorkerMirroredStrategy;
TF_CONFIG says which).

Same model builder, optimizer, step timer and peak-memory code as the pipeline's Trainer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amp_pipeline.benchmarks.speed.configs import BenchConfig


def strategy_of(config: BenchConfig):
    """The configuration's tf.distribute strategy (None for one replica); made before
    TensorFlow runs anything."""
    from amp_pipeline.components.training import distribution

    if config.replicas == 1:
        return None
    if config.replica_mode == "multiworker":
        plan = distribution.Plan("multiworker", "bench", workers=config.replicas)
    else:
        import tensorflow as tf

        gpus = len(tf.config.list_physical_devices("GPU"))
        plan = distribution.Plan(
            "mirrored", "bench", cpu_replicas=0 if gpus >= config.replicas else config.replicas
        )
    return distribution.make_strategy(plan)


def run(config: BenchConfig, weights_out: str = "") -> dict:
    """Trains the configuration on synthetic data; its figures (global examples/sec). With
    `weights_out`, the trained weights are saved there (npz) for comparisons."""
    strategy = strategy_of(config)
    import numpy as np
    import tensorflow as tf

    from amp_pipeline.components.amp.perf import PeakMemory, StepTimer
    from amp_pipeline.components.training.distribution import replicas
    from amp_pipeline.components.training.fitting import fit
    from amp_pipeline.components.training.model_building import build_and_compile
    from amp_pipeline.components.training.options import TrainSpec

    spec = TrainSpec(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir="",
        model_run_dir="",
        data_spec=config.data_spec(),
        model=config.model,
        model_options=config.model_options(),
        policy=config.policy,
        xla=config.xla,
        loss_scaling=config.policy == "mixed_float16",
        batch_size=config.global_batch,
        learning_rate=config.learning_rate * replicas(strategy),  # linear, as the trainer
    )
    model = build_and_compile(spec, strategy=strategy)
    rng = np.random.default_rng(0)
    n = config.global_batch * 4
    x = config.synthetic_x(rng, n)
    y = rng.integers(0, config.num_classes, n)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(config.global_batch).repeat()
    ds = ds.prefetch(tf.data.AUTOTUNE)
    timer = StepTimer(config.global_batch, warmup_steps=config.warmup_steps)
    memory = PeakMemory(config.device)
    memory.start()
    history = fit(
        model,
        strategy,
        ds,
        steps_per_epoch=config.warmup_steps + config.steps,
        epochs=1,
        callbacks=[timer],
        verbose=0,
    )
    if weights_out:
        np.savez(weights_out, *model.get_weights())
    return {
        **timer.summary(),
        "peak_memory_mb": memory.peak_mb(),
        "memory_method": memory.method,
        "replicas": replicas(strategy),
        "final_loss": float(history.history["loss"][-1]),
    }


def main(argv: list[str]) -> int:
    config = BenchConfig(**json.loads(Path(argv[1]).read_text()))
    result = run(config, argv[3] if len(argv) > 3 else "")
    if argv[2]:  # a worker that is not the chief writes nothing
        Path(argv[2]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
