"""`python -m benchmarks.worker CONFIG_JSON OUT_JSON`: one benchmark configuration, fresh process.

Same model builder, optimizer, step timer and peak-memory code as the pipeline's Trainer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks.configs import BenchConfig


def run(config: BenchConfig) -> dict:
    import numpy as np
    import tensorflow as tf

    from components.perf import PeakMemory, StepTimer
    from components.trainer_job import TrainSpec, build_and_compile

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
        batch_size=config.batch_size,
    )
    model = build_and_compile(spec)
    rng = np.random.default_rng(0)
    n = config.batch_size * 4
    x = rng.random((n, config.input_width()), dtype=np.float32)
    y = rng.integers(0, config.num_classes, n)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(config.batch_size).repeat()
    ds = ds.prefetch(tf.data.AUTOTUNE)
    timer = StepTimer(config.batch_size, warmup_steps=config.warmup_steps)
    memory = PeakMemory(config.device)
    memory.start()
    model.fit(
        ds,
        steps_per_epoch=config.warmup_steps + config.steps,
        epochs=1,
        callbacks=[timer],
        verbose=0,
    )
    return {**timer.summary(), "peak_memory_mb": memory.peak_mb(), "memory_method": memory.method}


def main(argv: list[str]) -> int:
    config = BenchConfig(**json.loads(Path(argv[1]).read_text()))
    Path(argv[2]).write_text(json.dumps(run(config)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
