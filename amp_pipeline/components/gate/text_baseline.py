"""What a simple model reaches on a text run's own split: TF-IDF of words and word pairs with a
logistic regression (scikit-learn), fitted on the raw train split ExampleGen wrote and scored on
its raw eval split, the examples the gate judged the twins on. A figure beside the twins' (the
report, the run table, MLflow), not a gate rule: the text counterpart of `beats_majority`."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

# Past these, the baseline reads a prefix of each split (it says so): it is a yardstick, and a
# million documents would cost the run minutes of scikit-learn.
MAX_TRAIN = 100_000
MAX_EVAL = 50_000
DETAIL = "TF-IDF of words and word pairs + logistic regression (scikit-learn)"


def read_split(
    examples: Path, split: str, features: list[str], label: str, limit: int
) -> tuple[list[str], list[str], bool]:
    """(texts, labels, cut) of one raw split: the text features of each example joined by a
    space ('' where missing), its label as text; `cut` when `limit` stopped the read."""
    import tensorflow as tf

    files = sorted(str(p) for p in (examples / f"Split-{split}").iterdir())
    texts: list[str] = []
    labels: list[str] = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        if len(texts) == limit:
            return texts, labels, True
        f = tf.train.Example.FromString(record).features.feature
        kind = f[label].WhichOneof("kind") if label in f else None
        values = getattr(f[label], kind).value if kind else []
        if not values:
            continue  # no label: not an example the gate counted
        texts.append(
            " ".join(
                f[n].bytes_list.value[0].decode("utf-8", "replace")
                if n in f and f[n].bytes_list.value
                else ""
                for n in features
            )
        )
        value = values[0]
        labels.append(value.decode("utf-8") if isinstance(value, bytes) else str(value))
    return texts, labels, False


def text_baseline(examples: Path, features: list[str], label: str) -> dict:
    """Fits and scores the baseline; {"accuracy", "train_examples", "eval_examples", "cut",
    "detail", "seconds"}."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    started = time.perf_counter()
    train_x, train_y, cut_train = read_split(examples, "train", features, label, MAX_TRAIN)
    eval_x, eval_y, cut_eval = read_split(examples, "eval", features, label, MAX_EVAL)
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True),
        LogisticRegression(max_iter=2000, C=4.0),
    )
    model.fit(train_x, train_y)
    predicted = model.predict(eval_x)
    right = sum(p == t for p, t in zip(predicted, eval_y, strict=True))
    return {
        "accuracy": right / len(eval_y),
        "train_examples": len(train_y),
        "eval_examples": len(eval_y),
        "cut": cut_train or cut_eval,
        "detail": DETAIL,
        "seconds": round(time.perf_counter() - started, 1),
    }


def for_run(outputs: dict[str, Any], data: Any, timings: dict[str, float]) -> dict:
    """The baseline of a finished run (its ExampleGen's examples, its DataSpec), timed into
    `timings`; a failure is recorded, not raised: the yardstick must not fail a finished run."""
    examples = next(v["examples"] for k, v in outputs.items() if k.endswith("ExampleGen"))
    try:
        base = text_baseline(Path(examples.uri), list(data.text_features), data.label)
    except Exception as e:  # noqa: BLE001  # any failure of the yardstick is only recorded
        logger.warning("Text baseline not computed: %s", e)
        return {"error": f"{type(e).__name__}: {e}"}
    timings["TextBaseline"] = base["seconds"]
    return base


def baseline_line(summary: dict) -> str | None:
    """The baseline in one sentence beside the twin that shipped (or the AMP twin)."""
    base = summary.get("text_baseline")
    if not base:
        return None
    if base.get("error"):
        return f"{DETAIL}: not computed ({base['error']})"
    twin = "fp32" if summary.get("shipped_precision") == "float32" else "amp"
    model = summary[twin].get("accuracy")
    against = (
        f", {model - base['accuracy']:+.4f} for the {'float32' if twin == 'fp32' else 'AMP'} "
        f"twin ({model:.4f})"
        if model is not None
        else ""
    )
    prefix = " (a prefix of each split)" if base.get("cut") else ""
    return (
        f"{base['detail']}: accuracy {base['accuracy']:.4f} on the same "
        f"{base['eval_examples']:,} eval examples{prefix}{against}"
    )
