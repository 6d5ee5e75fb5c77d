"""TF-IDF + logistic regression (scikit-learn) on a finished text run's own split, beside the
promoted AMP model's eval accuracy: is the BERT-style encoder as good as the classic baseline?

    python -m amp_pipeline.benchmarks.quality.text_baseline OUTPUT_FOLDER

It reads the raw train and eval examples the run's ExampleGen wrote (the split the gate used),
fits TfidfVectorizer (unigrams and bigrams) + LogisticRegression on the train split's text
columns, scores the eval split, and prints both accuracies with the run's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _latest(folder: Path) -> Path:
    return max(folder.iterdir(), key=lambda p: int(p.name))


def _split(examples: Path, split: str, features: list[str], label: str):
    import tensorflow as tf

    files = sorted(str(p) for p in (examples / f"Split-{split}").iterdir())
    texts, labels = [], []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        f = tf.train.Example.FromString(record).features.feature
        texts.append(
            " ".join(
                (f[name].bytes_list.value[0].decode("utf-8") if f[name].bytes_list.value else "")
                for name in features
            )
        )
        kind = f[label].WhichOneof("kind")
        labels.append(str(getattr(f[label], kind).value[0]))
    return texts, labels


def compare(output: Path) -> dict:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    summary = json.loads((output / "run_summary.json").read_text())
    data = summary["data"]
    features = data.get("text_features") or []
    if not features:
        raise SystemExit(f"{output}: the run has no text feature")
    examples = _latest(output / "tfx" / "CsvExampleGen" / "examples")
    train = _split(examples, "train", features, data["label"])
    evaluation = _split(examples, "eval", features, data["label"])
    model = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True),
        LogisticRegression(max_iter=2000, C=4.0),
    )
    model.fit(*train)
    predicted = model.predict(evaluation[0])
    accuracy = sum(p == t for p, t in zip(predicted, evaluation[1], strict=True)) / len(predicted)
    return {
        "train_examples": len(train[0]),
        "eval_examples": len(evaluation[0]),
        "tfidf_logreg_accuracy": accuracy,
        "amp_accuracy": summary["amp"]["accuracy"],
        "fp32_accuracy": summary["fp32"]["accuracy"],
        "model": summary["amp"]["model"],
        "policy": summary["policy"],
    }


def main() -> None:
    result = compare(Path(sys.argv[1]))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
