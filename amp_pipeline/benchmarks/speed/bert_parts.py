"""Where a BERT-style training step spends its time, float32 vs mixed precision: the embeddings
(token + position lookup and LayerNorm), one attention sublayer (MultiHeadAttention with the
float32 softmax, residual, LayerNorm) and one feed-forward sublayer (two Dense, GELU, residual,
LayerNorm) of the pipeline's own encoder (components/models/builtin.py), each timed forward +
backward on its own, the sublayers scaled by the model's depth.

    python -m amp_pipeline.benchmarks.speed.bert_parts --size base --seq-len 128 --batch-size 8

Each part is a compiled tf.function (no XLA), one warm-up call, then the median of `--calls`.
Both precisions are measured in the same process, alternating, so that a busy machine slows
both alike. A diagnostic for benchmarks/RESULTS.md ("Text"), beside `amp-pipeline bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _parts(size: str, seq_len: int, vocab: int):
    """(name, layer-building function, input maker, times per model) of each part."""
    import keras

    from amp_pipeline.components.models import builtin, layers

    depth, width, heads = builtin.BERT_SIZES[size]

    def embeddings():
        ids = keras.Input((seq_len,), dtype="int32")
        x = keras.layers.Embedding(vocab, width)(ids)
        x = layers.PositionEmbedding()(x)
        return keras.Model(ids, layers.Float32LayerNorm(epsilon=1e-12)(x))

    def attention():
        x = keras.Input((seq_len, width))
        mask = keras.Input((seq_len, seq_len), dtype="bool")
        a = layers.Float32SoftmaxAttention(heads, width // heads)(x, x, attention_mask=mask)
        return keras.Model([x, mask], layers.Float32LayerNorm(epsilon=1e-12)(x + a))

    def feed_forward():
        x = keras.Input((seq_len, width))
        f = keras.layers.Dense(4 * width, activation="gelu")(x)
        f = keras.layers.Dense(width)(f)
        return keras.Model(x, layers.Float32LayerNorm(epsilon=1e-12)(x + f))

    return (
        ("embeddings", embeddings, "ids", 1),
        ("attention", attention, "hidden+mask", depth),
        ("feed-forward", feed_forward, "hidden", depth),
    )


def _inputs(kind: str, batch: int, seq_len: int, width: int, vocab: int):
    import numpy as np

    rng = np.random.default_rng(0)
    if kind == "ids":
        return [rng.integers(1, vocab, (batch, seq_len)).astype("int32")]
    hidden = rng.normal(size=(batch, seq_len, width)).astype("float32")
    if kind == "hidden":
        return [hidden]
    return [hidden, np.ones((batch, seq_len, seq_len), bool)]


def measure(size: str, seq_len: int, batch: int, calls: int, vocab: int = 30_522) -> dict:
    import keras
    import tensorflow as tf

    from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware
    from amp_pipeline.components.models import builtin

    policy = choose_recipe(detect_hardware(), "auto", "auto").policy
    if policy == "float32":  # a CPU without bfloat16: measure what AMP would emulate
        policy = "mixed_bfloat16"
    width = builtin.BERT_SIZES[size][1]
    steps = {}
    for name, build, kind, times in _parts(size, seq_len, vocab):
        for p in ("float32", policy):
            keras.mixed_precision.set_global_policy(p)
            model = build()
            inputs = [tf.constant(v) for v in _inputs(kind, batch, seq_len, width, vocab)]

            @tf.function
            def step(*xs, model=model):
                with tf.GradientTape() as tape:
                    out = model(list(xs) if len(xs) > 1 else xs[0])
                    loss = tf.reduce_sum(tf.cast(out, "float32"))
                return tape.gradient(loss, model.trainable_variables)

            step(*inputs)
            steps[(name, p)] = (step, inputs, times)
    keras.mixed_precision.set_global_policy("float32")
    samples: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    for _ in range(calls):  # alternate: each call of each part in each precision, in turn
        for key, (step, inputs, _) in steps.items():
            start = time.perf_counter()
            grads = step(*inputs)
            _ = [tf.convert_to_tensor(g).numpy() for g in grads[-1:]]  # the step has run
            samples[key].append((time.perf_counter() - start) * 1000)
    rows = []
    for name, _, _, times in _parts(size, seq_len, vocab):
        f32 = statistics.median(samples[(name, "float32")]) * times
        amp = statistics.median(samples[(name, policy)]) * times
        rows.append({"part": name, "times": times, "float32_ms": f32, "amp_ms": amp})
    total32 = sum(r["float32_ms"] for r in rows)
    total_amp = sum(r["amp_ms"] for r in rows)
    for r in rows:
        r["float32_share"] = r["float32_ms"] / total32
        r["amp_share"] = r["amp_ms"] / total_amp
        r["speedup"] = r["float32_ms"] / r["amp_ms"]
    return {
        "size": size,
        "seq_len": seq_len,
        "batch_size": batch,
        "policy": policy,
        "calls": calls,
        "cpu": platform.processor() or platform.machine(),
        "parts": rows,
        "total_speedup": total32 / total_amp,
    }


def to_markdown(result: dict) -> str:
    lines = [
        f"BERT-{result['size']} parts, sequence {result['seq_len']}, batch "
        f"{result['batch_size']}, forward + backward, median of {result['calls']} calls "
        f"({result['policy']} vs float32)",
        "",
        "| part | float32 ms | share | AMP ms | share | speedup |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in result["parts"]:
        part = r["part"] + (f" (x{r['times']})" if r["times"] > 1 else "")
        lines.append(
            f"| {part} | "
            f"{r['float32_ms']:.1f} | {r['float32_share']:.0%} | {r['amp_ms']:.1f} | "
            f"{r['amp_share']:.0%} | {r['speedup']:.2f}x |"
        )
    lines.append(f"| all | | | | | {result['total_speedup']:.2f}x |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="base", choices=("tiny", "mini", "small", "base"))
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    result = measure(args.size, args.seq_len, args.batch_size, args.calls)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    print(to_markdown(result))


if __name__ == "__main__":
    main()
