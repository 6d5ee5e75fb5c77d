"""scikit-learn regressors on a finished regression run's own split, beside the AMP model's and
its float32 twin's eval R²: does the pipeline's model reach the classic tabular baselines?

    python -m amp_pipeline.benchmarks.quality.regression_baseline OUTPUT_FOLDER

It reads the raw train and eval examples the run's ExampleGen wrote (the split the gate used)
and fits, on the same features (every column but the label, minus those the input check
excluded): HistGradientBoostingRegressor (numbers as they are, missing values native, strings as
categories) and Ridge (numbers mean-imputed and standardised, strings one-hot). It prints each
one's R², MAE and RMSE on the eval split with the run's (the trainers' served models on that
split, components/training/fitting.py::regression_metrics).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _latest(folder: Path) -> Path:
    return max(folder.iterdir(), key=lambda p: int(p.name))


def read_split(examples: Path, split: str, label: str, drop: set[str]):
    """({feature: values}, labels) of one split's raw tf.Examples (missing numbers are NaN,
    missing strings '')."""
    import tensorflow as tf

    files = sorted(str(p) for p in (examples / f"Split-{split}").iterdir())
    rows, labels = [], []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator():
        f = tf.train.Example.FromString(record).features.feature
        row = {}
        for name, feature in f.items():
            kind = feature.WhichOneof("kind")
            values = getattr(feature, kind).value if kind else []
            row[name] = values[0] if values else None
        value = row.pop(label)
        if value is None:
            raise ValueError(f"a record has no {label!r}")
        labels.append(float(value))
        rows.append({k: v for k, v in row.items() if k not in drop})
    names = sorted({k for r in rows for k in r})
    columns = {n: [r.get(n) for r in rows] for n in names}
    return columns, np.asarray(labels)


def _frame(columns: dict, strings: set[str]):
    import pandas as pd

    return pd.DataFrame(
        {
            n: (
                [v.decode() if isinstance(v, bytes) else "" for v in vs]
                if n in strings
                else [np.nan if v is None else float(v) for v in vs]
            )
            for n, vs in columns.items()
        }
    )


def metrics(labels: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    errors = predicted - labels
    return {
        "r2": float(1 - np.sum(errors**2) / np.sum((labels - labels.mean()) ** 2)),
        "mae": float(np.mean(np.abs(errors))),
        "rmse": float(np.sqrt(np.mean(errors**2))),
    }


def compare(output: Path) -> dict:
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

    summary = json.loads((output / "run_summary.json").read_text())
    if summary.get("task") != "regression":
        raise SystemExit(f"{output}: not a regression run (task {summary.get('task')!r})")
    data = summary["data"]
    drop = {e.split("'")[1] for e in data["excluded"] if "'" in e}
    examples = _latest(output / "tfx" / "CsvExampleGen" / "examples")
    train_cols, train_y = read_split(examples, "train", data["label"], drop)
    eval_cols, eval_y = read_split(examples, "eval", data["label"], drop)
    strings = {n for n, vs in train_cols.items() if any(isinstance(v, bytes) for v in vs)}
    train, evaluation = _frame(train_cols, strings), _frame(eval_cols, strings)
    numbers = [n for n in train.columns if n not in strings]
    text = sorted(strings)
    gbm = make_pipeline(
        make_column_transformer(
            (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), text),
            ("passthrough", numbers),
        ),
        HistGradientBoostingRegressor(categorical_features=list(range(len(text))), random_state=0),
    )
    ridge = make_pipeline(
        make_column_transformer(
            (OneHotEncoder(handle_unknown="ignore", max_categories=17), text),
            (make_pipeline(SimpleImputer(), StandardScaler()), numbers),
        ),
        Ridge(alpha=1.0),
    )
    result = {
        "data": data["source"],
        "label": data["label"],
        "train_examples": len(train_y),
        "eval_examples": len(eval_y),
        "features": {"numeric": numbers, "string": text},
    }
    for name, model in (("hist_gradient_boosting", gbm), ("ridge", ridge)):
        model.fit(train, train_y)
        result[name] = metrics(eval_y, model.predict(evaluation))
    result["amp"] = summary["amp"]["metrics"]
    result["fp32"] = summary["fp32"]["metrics"]
    result["policy"] = summary["policy"]
    result["model"] = summary["amp"]["model"]
    result["train_steps"] = summary["amp"]["train_steps"]
    best = max(result["hist_gradient_boosting"]["r2"], result["ridge"]["r2"])
    result["amp_r2_minus_best_baseline"] = result["amp"]["r2"] - best
    return result


def main() -> None:
    print(json.dumps(compare(Path(sys.argv[1])), indent=2))


if __name__ == "__main__":
    main()
