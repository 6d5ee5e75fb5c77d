"""One autotune probe in a fresh process:

    python -m amp_pipeline.components.training.autotune_process SPEC OUT THREADS BUDGET_S
    [CANDIDATES]

TensorFlow fixes its intra-op thread count when it starts, so each thread count is probed in a
process of its own (components/training/autotune.py).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    threads, budget = int(argv[3]), float(argv[4])
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    from amp_pipeline.components.amp.precision import detect_hardware
    from amp_pipeline.components.training import autotune
    from amp_pipeline.components.training.batch_limits import max_batch
    from amp_pipeline.components.training.model_building import build_fresh, model_spec
    from amp_pipeline.components.training.options import TrainSpec

    spec = TrainSpec.from_json(Path(argv[1]).read_text())
    hw = detect_hardware()
    model, _ = build_fresh(spec, "float32")
    largest = max_batch(model, spec.data_spec["rows"])
    if len(argv) > 5:  # the leaders of the first probe, again at this thread count
        given = json.loads(Path(argv[5]).read_text())
        cands = [
            autotune.Candidate(c["policy"], c["xla"], c["batch_size"], c["learning_rate"], threads)
            for c in given
        ]
    else:
        precisions = autotune.reduced_precisions(hw.device, hw.compute_capability, hw.features)
        cands = autotune.candidates(
            precisions, spec.batch_size, spec.learning_rate, largest, [threads]
        )
    logging.info("autotune: %d candidates with %s threads, %.0f s", len(cands), threads, budget)
    found = autotune.probe(spec, cands, budget, parity=len(argv) <= 5)
    found["parity"] = {json.dumps(list(k)): list(v) for k, v in found["parity"].items()}
    found["model_width"] = model_spec(spec).input_width
    Path(argv[2]).write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
