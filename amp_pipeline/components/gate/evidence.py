"""The evidence the gate decides on, gathered from the run's artifacts.

- AMP vs float32: both trainers write their served model's predicted class for every eval
  example, per seed (`eval_predictions.npz`), in the same order (the same Transform output,
  read without shuffling): the pairs for components/gate/stats.py.
- AMP vs production: the gate runs both SavedModels on the raw eval split itself (the
  production model was trained in another run).
- Regression: the same files hold predictions in the label's units; the pairs are each
  example's absolute errors (stats.ErrorPairs), and the mean-prediction baseline is the
  absolute error of always answering the label's mean.
- Seeds: each twin's accuracy, throughput and memory per seed, their mean and spread, and the
  per-seed accuracy differences (their MLPerf trimmed mean is reported from five seeds on; the
  gate's evidence pools every seed per example, components/gate/stats.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from amp_pipeline.components.amp.perf import median_and_spread
from amp_pipeline.components.gate.error_stats import ErrorPairs
from amp_pipeline.components.gate.stats import Paired, trimmed
from amp_pipeline.core import names


def load_predictions(run_dir: str) -> dict:
    """{"labels": (n,), "predictions": (seeds, n), "seeds": (seeds,)} of one trainer."""
    with np.load(os.path.join(run_dir, names.EVAL_PREDICTIONS)) as f:
        return {k: f[k] for k in f.files}


def paired_outcomes(
    fp32_dir: str, amp_dir: str, outcome
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(seeds, AMP outcomes, float32 outcomes), shape (seeds, n), for every seed both twins
    trained, in the same order: `outcome(predictions, labels)` per example."""
    fp32, amp = load_predictions(fp32_dir), load_predictions(amp_dir)
    if not np.array_equal(fp32["labels"], amp["labels"]):
        raise ValueError(
            "the twins' eval predictions are not over the same examples in the same order"
        )
    labels = amp["labels"]
    seeds, amp_out, fp32_out = [], [], []
    for i, seed in enumerate(amp["seeds"]):
        if seed not in fp32["seeds"]:
            raise ValueError(
                f"seed {int(seed)}: the AMP twin trained it, the float32 twin did not "
                f"(float32 seeds: {', '.join(str(int(s)) for s in fp32['seeds'])}); the twins "
                "must be paired seed by seed"
            )
        j = int(np.flatnonzero(fp32["seeds"] == seed)[0])
        seeds.append(int(seed))
        amp_out.append(outcome(amp["predictions"][i], labels))
        fp32_out.append(outcome(fp32["predictions"][j], labels))
    return seeds, np.stack(amp_out), np.stack(fp32_out)


def correctness(fp32_dir: str, amp_dir: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(seeds, AMP right, float32 right): per-example correctness, shape (seeds, n)."""
    return paired_outcomes(fp32_dir, amp_dir, np.equal)


def absolute_errors(fp32_dir: str, amp_dir: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(seeds, AMP |error|, float32 |error|) of a regression label, shape (seeds, n), in the
    label's units."""
    return paired_outcomes(fp32_dir, amp_dir, lambda p, y: np.abs(p - y))


def pooled_errors(fp32_dir: str, amp_dir: str) -> ErrorPairs:
    """Every seed's absolute errors together, per example (AMP the candidate)."""
    _, amp_err, fp32_err = absolute_errors(fp32_dir, amp_dir)
    return ErrorPairs.from_errors(amp_err, fp32_err)


def seed_error_pairs(fp32_dir: str, amp_dir: str) -> list[tuple[int, ErrorPairs]]:
    seeds, amp_err, fp32_err = absolute_errors(fp32_dir, amp_dir)
    return [(s, ErrorPairs.from_errors(amp_err[k], fp32_err[k])) for k, s in enumerate(seeds)]


def versus_mean(amp_dir: str, mean: float) -> ErrorPairs:
    """The AMP model's absolute errors (seeds averaged) against always answering `mean`."""
    amp = load_predictions(amp_dir)
    errors = np.abs(amp["predictions"] - amp["labels"])
    baseline = np.broadcast_to(np.abs(amp["labels"] - mean), errors.shape)
    return ErrorPairs.from_errors(errors, baseline)


def versus_reference(run_dir: str) -> ErrorPairs | None:
    """A twin's absolute errors (seeds averaged) against the reference baseline's on the same
    eval examples (components/training/reference.py); None where the trainer wrote none."""
    run = load_predictions(run_dir)
    if "reference" not in run:
        return None
    errors = np.abs(run["predictions"] - run["labels"])
    baseline = np.broadcast_to(np.abs(run["reference"] - run["labels"]), errors.shape)
    return ErrorPairs.from_errors(errors, baseline)


def seed_pairs(fp32_dir: str, amp_dir: str) -> list[tuple[int, Paired]]:
    """(seed, pairs) for every seed both twins trained, AMP as the candidate."""
    seeds, amp_right, fp32_right = correctness(fp32_dir, amp_dir)
    return [
        (seed, Paired.from_correct(amp_right[k], fp32_right[k])) for k, seed in enumerate(seeds)
    ]


def class_evidence(fp32_dir: str, amp_dir: str, amp_serving: str):
    """Both twins' class ids (and a binary label's positive-class scores) per seed on the same
    eval examples, for the rare class's rules (components/gate/class_metrics.py)."""
    from amp_pipeline.components.gate.class_metrics import ClassEvidence

    fp32, amp = load_predictions(fp32_dir), load_predictions(amp_dir)
    seeds = [int(np.flatnonzero(fp32["seeds"] == s)[0]) for s in amp["seeds"]]
    names = class_names(amp_serving)
    k = int(max(amp["labels"].max(initial=0), amp["predictions"].max(initial=0))) + 1
    return ClassEvidence(
        labels=amp["labels"],
        amp=amp["predictions"],
        fp32=fp32["predictions"][seeds],
        classes=tuple(names) if names else tuple(str(i) for i in range(k)),
        amp_scores=amp.get("scores"),
        fp32_scores=fp32["scores"][seeds] if "scores" in fp32 else None,
    )


def shipped_accuracies(fp32_dir: str, amp_dir: str) -> tuple[float, float]:
    """(float32, AMP) accuracy of each twin's first seed, the model its run ships, on every
    eval example."""
    _, amp_right, fp32_right = correctness(fp32_dir, amp_dir)
    return float(np.mean(fp32_right[0])), float(np.mean(amp_right[0]))


def pooled(fp32_dir: str, amp_dir: str) -> Paired:
    """Every seed's pairs together, per example: n is the number of distinct eval examples
    (each seed scores the same ones), and the interval resamples examples with all their
    seeds. No seed is dropped: choosing seeds by their outcome would bias the interval."""
    _, amp_right, fp32_right = correctness(fp32_dir, amp_dir)
    return Paired.from_correct(amp_right, fp32_right)


def seeds_report(fp32: dict, amp: dict, pairs: Sequence[tuple[int, Paired | ErrorPairs]]) -> dict:
    """Per seed and in aggregate: each twin's figures and the paired differences (accuracy;
    for regression, the MAE change as a share of float32's)."""

    def quality(run: dict) -> float | None:
        return run["accuracy"] if run.get("accuracy") is not None else run["metrics"]["mae"]

    def twin(figures: dict) -> dict:
        runs = figures.get("seeds") or []
        return {
            "per_seed": runs,
            "accuracy": median_and_spread([q for r in runs if (q := quality(r)) is not None]),
            "examples_per_sec": median_and_spread([r["examples_per_sec"] for r in runs]),
            "peak_memory_mb": median_and_spread([r["peak_memory_mb"] for r in runs]),
        }

    deltas = [p.relative if isinstance(p, ErrorPairs) else p.difference for _, p in pairs]
    return {
        "seeds": [s for s, _ in pairs],
        "fp32": twin(fp32),
        "amp": twin(amp),
        "pairs": [
            {"seed": s, "delta": d, **p.to_dict()} for (s, p), d in zip(pairs, deltas, strict=True)
        ],
        "delta": {
            "mean": float(np.mean(deltas)) if deltas else None,
            "std": float(np.std(deltas, ddof=1)) if len(deltas) > 1 else None,
            "trimmed_mean": float(np.mean(trimmed(deltas))) if deltas else None,
            "trimmed": len(deltas) >= 5,
        },
    }


def eval_batches(examples_uri: str, batch: int = 1024):
    """ExampleGen's raw eval split as batches of serialized examples (string tensors), read as
    they are needed: the gate's comparisons run in one pass and hold only their per-example
    outcomes, never the examples."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(examples_uri, "Split-eval", "*")))
    return tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch).prefetch(1)


def raw_eval_examples(examples_uri: str, limit: int) -> list[bytes]:
    """The first `limit` serialized raw eval examples (a bounded sample for checks that run
    Python per example)."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(examples_uri, "Split-eval", "*")))
    ds = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    return [bytes(r) for r in ds.as_numpy_iterator()]


def _signatures(saved_model: str):
    import tensorflow as tf

    return tf.saved_model.load(saved_model).signatures


def raw_labels(examples, label: str) -> np.ndarray:
    """The label's values as written in the raw examples (a regression label: numbers)."""
    import tensorflow as tf

    values = []
    for record in examples:
        feature = tf.train.Example.FromString(record).features.feature[label]
        number = feature.float_list.value or feature.int64_list.value
        values.append(float(number[0]) if number else np.nan)
    return np.asarray(values, np.float64)


def production_errors(
    examples_uri: str, candidates: tuple[str, ...], production: str, label: str
) -> list[ErrorPairs]:
    """Each candidate's absolute errors vs the production model's, on every raw eval example
    (streamed: one pass, the production model run once, the errors kept, the examples not).
    One ErrorPairs per candidate SavedModel (the AMP twin's, the float32 twin's)."""
    serves = [_signatures(path)[names.SERVING_SIGNATURE] for path in (*candidates, production)]
    errors: list[list[np.ndarray]] = [[] for _ in serves]
    for chunk in eval_batches(examples_uri):
        labels = raw_labels(chunk.numpy(), label)
        keep = np.isfinite(labels)
        for out, serve in zip(errors, serves, strict=True):
            values = serve(examples=chunk)[names.PREDICTIONS].numpy().reshape(-1)
            out.append(np.abs(values.astype(np.float64)[keep] - labels[keep]))
    joined = [np.concatenate(e) if e else np.zeros(0) for e in errors]
    return [ErrorPairs.from_errors(mine, joined[-1]) for mine in joined[:-1]]


CLASSES_FILE = "classes.txt"  # beside saved_model.pb (components/export/saved_model.py)


def class_names(saved_model: str) -> list[str] | None:
    """A classifier SavedModel's class names in id order (its `classes.txt`), or None for a
    model exported before the file was written (its answers are still compared by name)."""
    path = os.path.join(saved_model, CLASSES_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def raw_label_names(chunk, label: str, label_kind: str) -> np.ndarray:
    """The label of each serialized raw example as a class name ("" where it has none): the
    strings ids are numbered from in DataSpec.classes, whatever a model numbered them."""
    import tensorflow as tf

    dtype = tf.string if label_kind == "string" else tf.int64
    sparse = tf.io.parse_example(chunk, {label: tf.io.VarLenFeature(dtype)})[label]
    values = sparse.values if dtype == tf.string else tf.strings.as_string(sparse.values)
    named = tf.SparseTensor(sparse.indices, values, sparse.dense_shape)
    dense = tf.sparse.to_dense(tf.sparse.slice(named, [0, 0], [sparse.dense_shape[0], 1]), "")
    return np.char.decode(dense.numpy().reshape(-1).astype(bytes), "utf-8")


def class_change(candidate: list[str] | None, production: list[str] | None) -> dict:
    """Classes the candidate knows that production did not (added), and the reverse (dropped);
    both empty where production's class list is unknown."""
    if candidate is None or production is None:
        return {"added": [], "dropped": [], "production_classes_known": production is not None}
    return {
        "added": [c for c in candidate if c not in production],
        "dropped": [c for c in production if c not in candidate],
        "production_classes_known": True,
    }


def production_pairs(
    examples_uri: str,
    candidates: tuple[str, ...],
    production: str,
    label: str,
    label_kind: str = "string",
) -> tuple[list[Paired], dict]:
    """Each candidate vs the model in production on every raw eval example, matched by class
    *name*: each model's `classes` answer against the example's raw label. Two models may number
    their classes differently (classes added, dropped or renamed between runs), so ids are never
    compared across models. Examples whose class one of the models does not know are left out
    (the classes both know are compared); `classes` says which changed and how many examples
    were left out. Streamed: one pass, the production model run once, the per-example
    correctness kept, the examples not. One Paired per candidate SavedModel."""
    paths = (*candidates, production)
    signatures = [_signatures(path)[names.SERVING_SIGNATURE] for path in paths]
    known = [class_names(path) for path in paths]
    change = class_change(known[0], known[-1])
    shared = (
        None
        if any(k is None for k in known)
        else set.intersection(*(set(k) for k in known if k is not None))
    )
    right: list[list[np.ndarray]] = [[] for _ in signatures]
    seen = left_out = unlabelled = 0
    for chunk in eval_batches(examples_uri):
        labels = raw_label_names(chunk, label, label_kind)
        keep = labels != ""
        unlabelled += int(np.count_nonzero(~keep))
        if shared is not None:
            common = np.isin(labels, list(shared))
            left_out += int(np.count_nonzero(keep & ~common))
            keep &= common
        seen += int(np.count_nonzero(keep))
        for out, serve in zip(right, signatures, strict=True):
            answers = serve(examples=chunk)[names.CLASSES].numpy().reshape(-1).astype(bytes)
            out.append(np.char.decode(answers, "utf-8")[keep] == labels[keep])
    joined = [np.concatenate(r) if r else np.zeros(0, bool) for r in right]
    change.update(compared=seen, left_out=left_out, unlabelled=unlabelled)
    return [Paired.from_correct(mine, joined[-1]) for mine in joined[:-1]], change
