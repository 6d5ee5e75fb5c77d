"""The gate's comparison with the model in production streams the eval split: it keeps one
outcome per example, never the examples (components/gate/evidence.py), and it matches the two
models' answers by class name, never by id."""

import tracemalloc

import numpy as np
import pytest
import tensorflow as tf

from amp_pipeline.components.gate import evidence
from amp_pipeline.components.gate.rules import GateConfig, Measurements, production_regression
from amp_pipeline.core import names
from tests.helpers import write_eval_split


def _model(path, offset: int, classes: list[str] | None = None) -> str:
    """A SavedModel that reads feature `v` of each serialized example, whose label is v % 3: it
    answers class name (v + offset) % 3 (offset 0: always right), under ids numbered by its own
    `classes` (its classes.txt; default "0", "1", "2")."""
    classes = classes or ["0", "1", "2"]
    spec = {"v": tf.io.FixedLenFeature([], tf.int64)}

    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.names = tf.constant(classes)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, examples):
            v = tf.io.parse_example(examples, spec)["v"]
            name = tf.strings.as_string((v + offset) % 3)
            ids = tf.argmax(tf.cast(tf.equal(name[:, None], self.names[None, :]), tf.int32), 1)
            return {names.CLASS_IDS: ids, names.CLASSES: name}

    m = M()
    tf.saved_model.save(m, str(path), signatures={names.SERVING_SIGNATURE: m.serve})
    (path / evidence.CLASSES_FILE).write_text("".join(f"{c}\n" for c in classes))
    return str(path)


def _peak_bytes(examples: str, candidate: str, production: str):
    tracemalloc.start()
    (pairs,), _ = evidence.production_pairs(examples, (candidate,), production, "label", "int")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return pairs, peak


@pytest.mark.e2e
def test_production_pairs_count_every_example_in_memory_that_does_not_grow_with_them(tmp_path):
    right, wrong = _model(tmp_path / "right", 0), _model(tmp_path / "wrong", 1)
    small = write_eval_split(tmp_path / "small", 5_000, label="label")
    large = write_eval_split(tmp_path / "large", 100_000, label="label")
    # Both twins against production in one pass: each candidate gets its own pairs (warm-up:
    # TensorFlow's own first allocations).
    (twin_a, twin_b), _ = evidence.production_pairs(small, (right, wrong), wrong, "label", "int")
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


def test_renumbered_classes_are_matched_by_name(tmp_path):
    """Production numbered its classes in another order: by id it would look wrong on two
    thirds of the examples; by name it is as right as the candidate."""
    examples = write_eval_split(tmp_path / "eval", 300, label="label")
    candidate = _model(tmp_path / "candidate", 0)
    production = _model(tmp_path / "production", 0, classes=["2", "0", "1"])
    (pairs,), change = evidence.production_pairs(examples, (candidate,), production, "label", "int")
    assert (pairs.n, pairs.b, pairs.c) == (300, 0, 0)
    assert change["added"] == change["dropped"] == []


def test_a_dropped_class_is_named_and_left_out_of_the_comparison(tmp_path):
    examples = write_eval_split(tmp_path / "eval", 300, label="label")
    # The candidate no longer knows class "2" (always wrong on it); production knew all three.
    candidate = _model(tmp_path / "candidate", 0, classes=["0", "1"])
    production = _model(tmp_path / "production", 0)
    (pairs,), change = evidence.production_pairs(examples, (candidate,), production, "label", "int")
    assert change["dropped"] == ["2"] and change["added"] == []
    assert change["compared"] == 200 and change["left_out"] == 100 and pairs.n == 200
    m = Measurements(
        fp32_accuracy=1.0,
        amp_accuracy=1.0,
        production_accuracy=pairs.accuracies()[1],
        fp32_examples_per_sec=1.0,
        amp_examples_per_sec=1.0,
        amp_policy="float32",
        production_pairs=pairs,
        production_classes=change,
    )
    rule = production_regression(m, GateConfig())
    assert rule.detail.startswith("classes changed since production: dropped '2'; compared by")
    assert "200 eval examples of the classes both models know (100 left out)" in rule.detail
    assert rule.n == 200
