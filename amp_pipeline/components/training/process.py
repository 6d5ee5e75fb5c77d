"""`python -m amp_pipeline.components.training.process SPEC_JSON`: one trainer in a fresh process.

A fresh process per trainer keeps the global dtype policy and the peak-memory figure of one
precision apart from the other's.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from amp_pipeline.components.amp.loss_scale import LossScaleCollapse
from amp_pipeline.components.models.user_module import ModelModuleError
from amp_pipeline.components.training import distribution
from amp_pipeline.components.training.fitting import quality_text
from amp_pipeline.components.training.job import train_and_export
from amp_pipeline.components.training.options import TrainSpec
from amp_pipeline.core.errors import EXIT_BAD_INPUT


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    spec = TrainSpec.from_json(Path(argv[1]).read_text())
    import tensorflow as tf

    if spec.intra_op_threads:  # before TensorFlow runs anything (autotune's choice)
        tf.config.threading.set_intra_op_parallelism_threads(spec.intra_op_threads)
    try:  # the strategy, too, before TensorFlow runs anything
        plan = distribution.resolve(
            spec.distribution,
            len(tf.config.list_physical_devices("GPU")),
            distribution.tf_config(),
            spec.cpu_replicas,
        )
    except distribution.DistributionError as e:
        print(str(e), file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    logging.info("Distribution: %s (%s)", plan.kind, plan.reason)
    try:
        figures = train_and_export(spec, distribution.make_strategy(plan))
    except LossScaleCollapse as e:
        print(f"{spec.policy} {e}", file=sys.stderr, flush=True)  # the last line: the reason
        return 1
    except ModelModuleError as e:  # the user's module: bad input, one line
        print(str(e), file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    logging.info(
        "policy=%s %s examples/sec=%.1f",
        figures["policy"],
        quality_text(figures),
        figures["examples_per_sec"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
