"""A shadow version judged on live traffic: its answers paired with production's on the same
requests (`serve --shadow`), with intervals from the gate's own statistics.

Each logged example is one unit: the shadow answered the very request production answered
(pairs share the request's content key, records.request_key). Without labels: how often the two
agree, with a Wilson interval (classes), or the mean absolute difference of their values with a
Student-t interval over examples (regression). With labels joined on a request key: the paired
accuracy difference (components/gate/stats.py) or mean absolute error difference
(components/gate/error_stats.py), candidate minus production, as the gate reads the twins.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from amp_pipeline.components.gate import error_stats, stats
from amp_pipeline.core.errors import InputError
from amp_pipeline.pipeline.monitor.traffic import ANSWER, KEY, SHADOW, VERSION


def versions(rows: pd.DataFrame) -> tuple[int, int | None]:
    """(production version, shadow version or None): production gave the answers users got
    (the most of them, where a new version was pushed mid-window); the shadow's records say
    they are (records' request_origin "grpc/shadow", "rest/shadow")."""
    production = rows.loc[~rows[SHADOW], VERSION].value_counts()
    if production.empty:
        raise InputError("the logs hold only a shadow version's answers: no production ones")
    shadows = rows.loc[rows[SHADOW], VERSION].value_counts()
    return int(production.idxmax()), (int(shadows.idxmax()) if not shadows.empty else None)


def read_labels(path: Path, key: str, label: str) -> pd.Series:
    """{request key value: label} from `--labels CSV --key COLUMN`."""
    if not Path(path).is_file():
        raise InputError(f"--labels {path}: no such file")
    # Every cell as the text it is, as the request log writes answers and features: pandas'
    # own reading makes an integer column with an empty cell float, and "3.0" never equals
    # the served class "3".
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column, flag in ((key, "--key"), (label, "the run's label")):
        if column not in frame:
            raise InputError(f"--labels {path}: no column {column!r} ({flag})")
    frame = frame.assign(**{key: frame[key].str.strip(), label: frame[label].str.strip()})
    frame = frame[(frame[label] != "") & (frame[key] != "")]
    frame = frame.drop_duplicates(subset=[key], keep="last")
    return frame.set_index(key)[label]


def shadow_report(
    rows: pd.DataFrame,
    production: int,
    candidate: int,
    regression: bool,
    labels: pd.Series | None = None,
    key: str | None = None,
) -> dict:
    prod = rows[~rows[SHADOW] & (rows[VERSION] == production)].set_index(KEY)
    cand = rows[rows[SHADOW] & (rows[VERSION] == candidate)].set_index(KEY)
    both = prod.join(cand[[ANSWER]], rsuffix="_candidate", how="inner")
    n = len(both)
    out: dict = {
        "production_version": production,
        "candidate_version": candidate,
        "pairs": n,
        "production_answers": len(prod),
        "unpaired": len(prod) - n,  # the shadow skipped them under load, or failed
    }
    if n == 0:
        return {**out, "skipped": "no request answered by both versions"}
    a = both[ANSWER].to_numpy()
    b = both[f"{ANSWER}_candidate"].to_numpy()
    if regression:
        diff = np.abs(b.astype(float) - a.astype(float))
        mean, sd = float(diff.mean()), float(diff.std(ddof=1)) if n > 1 else 0.0
        half = error_stats.student_t_half_width(sd, n)
        out["agreement"] = {
            "mean_abs_difference": mean,
            "interval": [mean - half, mean + half],
            "test": "Student-t 95% interval of the mean absolute difference over examples",
        }
    else:
        agree = int(np.sum(a.astype(str) == b.astype(str)))
        out["agreement"] = {
            "share": agree / n,
            "interval": list(stats.proportion_interval(agree, n)),
            "test": "Wilson 95% interval over examples",
        }
    if labels is not None and key is not None:
        out["labelled"] = _labelled(both, labels, key, regression)
    return out


def _labelled(both: pd.DataFrame, labels: pd.Series, key: str, regression: bool) -> dict:
    if key not in both:
        return {"skipped": f"--key {key}: not a feature of the logged requests"}
    keys = both[key].astype(str)
    known = keys.isin(labels.index)
    if not known.any():
        return {"skipped": f"no logged request's {key} is in --labels"}
    truth = labels.loc[keys[known]].to_numpy()
    prod = both.loc[known, ANSWER].to_numpy()
    cand = both.loc[known, f"{ANSWER}_candidate"].to_numpy()
    if regression:
        y = truth.astype(float)
        pairs = error_stats.ErrorPairs.from_errors(
            np.abs(cand.astype(float) - y), np.abs(prod.astype(float) - y)
        )
        return {
            "examples": pairs.n,
            "production_mae": pairs.reference_mae,
            "candidate_mae": pairs.reference_mae + pairs.diff_mean,
            "mae_change": pairs.diff_mean,
            "interval": list(error_stats.error_interval(pairs)),
            "test": error_stats.ERROR_TEST,
        }
    truth = truth.astype(str)
    correct = stats.Paired.from_correct(cand.astype(str) == truth, prod.astype(str) == truth)
    return {
        "examples": correct.n,
        "production_accuracy": float(np.mean(prod.astype(str) == truth)),
        "candidate_accuracy": float(np.mean(cand.astype(str) == truth)),
        "accuracy_change": correct.difference,
        "interval": list(stats.paired_interval(correct)),
        "test": stats.TEST,
    }
