"""The speedup measured side by side: float32 and AMP training steps in alternating short bursts,
in one process, after both twins have trained.

The twins train one after the other, so anything else running on a shared machine lands on one
of them only, and their throughput ratio moved between 1.01x and 1.43x across identical runs.
Here both models (each built under its own dtype policy: Keras layers keep the policy they were
built with) take turns on the same real batches, `steps` training steps at a time, for `rounds`
rounds whose order alternates; each round gives one ratio, and load that comes and goes lands on
both. The median ratio decides `min_speedup`; the spread is shown.

This is the *precision ratio*: both twins at the AMP trainer's batch, XLA setting and intra-op
threads (the recipe it ran, read from its train_spec.json and figures.json), so the precision is
the only difference. The *recipe ratio* (the AMP recipe as trained vs the float32 baseline as
trained) comes from the trainers' own figures (pipeline/summary.py).

`python -m amp_pipeline.components.speed.measurement FP32_SPEC AMP_SPEC OUT_JSON [ROUNDS]` runs it
in a fresh process (the specs are the trainers' own train_spec.json; the AMP one carries the XLA
setting the AMP trainer actually used).
"""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

ROUNDS = 7
MIN_BURST_SECONDS = 0.25
WARMUP_STEPS = 5


def measure(fp32_spec, amp_spec, rounds: int = ROUNDS) -> dict:
    """Alternating bursts of float32 and AMP training steps; one throughput ratio per round."""
    import tensorflow as tf

    from amp_pipeline.components.amp import fp32_math
    from amp_pipeline.components.amp.perf import median, median_and_spread, timed_steps
    from amp_pipeline.components.training.datasets import host_batches
    from amp_pipeline.components.training.model_building import build_fresh, compile_model

    batches = host_batches(amp_spec, amp_spec.batch_size, 4)
    fp32, _ = build_fresh(fp32_spec, "float32")
    compile_model(fp32_spec, fp32, amp_spec.xla)  # same XLA setting: only the precision differs
    amp, _ = build_fresh(amp_spec, amp_spec.policy)  # its layers keep this policy
    compile_model(amp_spec, amp, amp_spec.xla)
    # float32 bursts under the float32 twin's math (strict: TF32 off); AMP under TensorFlow's
    # default. Where TF32 exists and the twin is strict, a TF32 burst too: AMP vs TF32 is the
    # ratio NVIDIA publishes, shown beside the one the gate uses.
    strict = getattr(fp32_spec, "fp32_math", fp32_math.STRICT) == fp32_math.STRICT
    tf32_too = strict and bool(fp32_math.tf32_capable_gpus())
    tf32_on = {"fp32": not strict, "amp": True, "tf32": True}
    models = {"fp32": fp32, "amp": amp}
    if tf32_too:  # its own program: one compiled under strict math is not reused under TF32
        models["tf32"], _ = build_fresh(fp32_spec, "float32")
        compile_model(fp32_spec, models["tf32"], amp_spec.xla)
    # Each program warms up, and under XLA compiles, under the TF32 setting of its own bursts:
    # whether XLA reads the setting when it compiles or when it runs is not settled here (no
    # GPU), and a strict burst must not run a program compiled with TF32 on.
    for name, model in models.items():
        tf.config.experimental.enable_tensor_float_32_execution(tf32_on[name])
        timed_steps(model, batches, WARMUP_STEPS)
    tf.config.experimental.enable_tensor_float_32_execution(tf32_on["fp32"])
    step = max(timed_steps(fp32, batches, 3) / 3, 1e-4)
    steps = max(5, math.ceil(MIN_BURST_SECONDS / step))
    ratios, tf32_ratios, fp32_ms, amp_ms = [], [], [], []
    for r in range(rounds):
        times = {}
        order = list(models.items())
        for name, model in order if r % 2 == 0 else order[::-1]:
            tf.config.experimental.enable_tensor_float_32_execution(tf32_on[name])
            times[name] = timed_steps(model, batches, steps)
        ratios.append(times["fp32"] / times["amp"])
        if tf32_too:
            tf32_ratios.append(times["tf32"] / times["amp"])
        fp32_ms.append(times["fp32"] * 1000 / steps)
        amp_ms.append(times["amp"] * 1000 / steps)
    tf.config.experimental.enable_tensor_float_32_execution(True)
    spread = median_and_spread(ratios)
    batch = amp_spec.batch_size
    return {
        "method": (
            f"{rounds} rounds of {steps} training steps per precision, alternating order, one "
            "process, the same real batches; ratio = float32 time / AMP time per round"
        ),
        "rounds": rounds,
        "steps_per_burst": steps,
        "ratios": ratios,
        "ratio": spread,
        "fp32_math": fp32_math.STRICT if strict else fp32_math.TF32,
        # AMP vs TF32 float32 (NVIDIA's published baseline); None where there is no TF32.
        "ratio_vs_tf32": median_and_spread(tf32_ratios) if tf32_ratios else None,
        "fp32_step_ms": median_and_spread(fp32_ms),
        "amp_step_ms": median_and_spread(amp_ms),
        "fp32_examples_per_sec": batch * 1000 / median(fp32_ms),
        "amp_examples_per_sec": batch * 1000 / median(amp_ms),
        "policy": amp_spec.policy,
        "xla": amp_spec.xla,
        "batch_size": batch,
        "threads": amp_spec.intra_op_threads,
        "device": amp_spec.device,
    }


def main(argv: list[str]) -> int:
    import dataclasses

    from amp_pipeline.components.training.options import TrainSpec

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    fp32 = TrainSpec.from_json(Path(argv[1]).read_text())
    amp_spec = json.loads(Path(argv[2]).read_text())
    amp = TrainSpec.from_json(json.dumps(amp_spec["spec"]))
    amp = dataclasses.replace(amp, xla=bool(amp_spec["xla"]))
    if amp.intra_op_threads:  # the AMP trainer's threads, before TensorFlow runs anything
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(amp.intra_op_threads)
    rounds = int(argv[4]) if len(argv) > 4 else ROUNDS
    result = measure(fp32, amp, rounds)
    Path(argv[3]).write_text(json.dumps(result, indent=2))
    logger.info("side by side: %s", result["ratio"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
