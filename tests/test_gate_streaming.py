"""The gate's comparison with the model in production streams the eval split: it keeps one
outcome per example, never the examples (components/gate/evidence.py)."""

import tracemalloc

import numpy as np
import tensorflow as tf

from components.gate import evidence
from core import names
from tests.helpers import write_eval_split


def _model(path, offset: int) -> str:
    """A SavedModel that reads feature `v` of each serialized example: its label is v % 3, its
    answer (v + offset) % 3 (offset 0: always right)."""
    spec = {"v": tf.io.FixedLenFeature([], tf.int64)}

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, examples):
            v = tf.io.parse_example(examples, spec)["v"]
            return {names.CLASS_IDS: (v + offset) % 3}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def transform(self, examples):
            return {names.LABEL_KEY: tf.io.parse_example(examples, spec)["v"] % 3}

    m = M()
    signatures = {names.SERVING_SIGNATURE: m.serve, names.TRANSFORM_SIGNATURE: m.transform}
    tf.saved_model.save(m, str(path), signatures=signatures)
    return str(path)


def _peak_bytes(examples: str, candidate: str, production: str):
    tracemalloc.start()
    (pairs,) = evidence.production_pairs(examples, (candidate,), production)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return pairs, peak


def test_production_pairs_count_every_example_in_memory_that_does_not_grow_with_them(tmp_path):
    right, wrong = _model(tmp_path / "right", 0), _model(tmp_path / "wrong", 1)
    small = write_eval_split(tmp_path / "small", 5_000)
    large = write_eval_split(tmp_path / "large", 100_000)
    # Both twins against production in one pass: each candidate gets its own pairs (warm-up:
    # TensorFlow's own first allocations).
    twin_a, twin_b = evidence.production_pairs(small, (right, wrong), wrong)
    assert (twin_a.n, twin_a.b, twin_a.c) == (5_000, 5_000, 0)
    assert (twin_b.n, twin_b.b, twin_b.c) == (5_000, 0, 0)
    pairs, small_peak = _peak_bytes(small, right, wrong)
    assert (pairs.n, pairs.b, pairs.c) == (5_000, 5_000, 0)
    pairs, large_peak = _peak_bytes(large, right, wrong)
    assert (pairs.n, pairs.b, pairs.c) == (100_000, 100_000, 0)
    assert np.isclose(pairs.accuracies()[1], 0.0)
    # Held as a list, 95,000 more serialized examples would be about 6 MB of Python objects;
    # streamed, the growth is the per-example outcomes (bytes each).
    assert large_peak - small_peak < 2 * 2**20, (small_peak, large_peak)
