"""Skew, drift and schema anomalies of the served traffic, by TFDV's own comparators, and the
drift of the served answers.

- skew: the traffic against the run's training statistics (the train split StatisticsGen
  wrote), TFDV's skew comparators;
- drift: the traffic against the previous monitoring window's (when `monitor` ran before into
  the same folder), TFDV's drift comparators;
- anomalies: the traffic against the run's schema in its SERVING environment (the label not
  expected): a missing feature, a wrong type, a value out of the domain;
- prediction drift: the served answers against the same model's answers on the eval split.

Distances are L-infinity for categories (string features) and Jensen-Shannon divergence for
numbers, as TFDV's comparators and Vertex AI Model Monitoring define them. TFDV computes them
(its measurement is kept beside ours in monitor.json), but the verdict reads them on the
reference's own buckets: TFDV's approximate Jensen-Shannon aligns two histograms by spreading
counts over re-cut buckets, and where the served values are all one value its reading jumps to
1.0 (the digits' pixel_16: 99.78% zeros in training, 100% in 600 served rows, read as disjoint;
tensorflow/data-validation#216 reports the same sensitivity). Here the reference's histogram
(its STANDARD buckets for a number, its value counts for a string) is the one binning, and the
served values are counted into it exactly.

A number that took one value in training (the digits' always-zero pixels) has one bucket [v, v]
in TFDV's histogram: every served value falls into it, and no divergence on it moves. It is read
instead as the share of served values off that value ("share off the constant"), against the
same numeric threshold. The schema gets no range for it: one value off the constant would be a
schema anomaly, and the digits' pixel_56, non-zero on 1 row of 1,797, would alarm on the
model's own eval rows.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pandas as pd

from amp_pipeline.pipeline.monitor.traffic import ANSWER, KEY, SHADOW, VERSION

SKEW, DRIFT = "skew", "drift"
# A feature constant in the reference is read as the share of served values off that value:
# a histogram of one bucket [v, v] holds every served value, and no divergence on it can move.
OFF_CONSTANT = "share off the constant"


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """Attributes:
    categorical: L-infinity distance beyond which a string feature has moved.
    numeric: Jensen-Shannon divergence beyond which a numeric feature has moved.
    prediction: the same for the served answers (L-infinity for classes, JS for values).
    """

    categorical: float = 0.1
    numeric: float = 0.1
    prediction: float = 0.1


def features_frame(rows: pd.DataFrame, schema) -> pd.DataFrame:
    """The served rows' features as the schema types them (numbers as numbers)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    frame = rows.drop(columns=[c for c in (ANSWER, VERSION, KEY, SHADOW) if c in rows])
    frame = frame.reset_index(drop=True)  # else TFDV counts the index as a feature
    for feature in schema.feature:
        if feature.name in frame and feature.type in (schema_pb2.INT, schema_pb2.FLOAT):
            values = pd.to_numeric(frame[feature.name], errors="coerce")
            present = values.dropna()
            if feature.type == schema_pb2.INT and (present == present.round()).all():
                # Missing cells made the column float (NaN), which TFDV reads as a FLOAT
                # feature: an integer column with a missing cell was a type anomaly.
                values = values.astype("Int64")
            frame[feature.name] = values
    return frame


def numeric_values(column: pd.Series) -> np.ndarray:
    """A served column as float64 numbers, NaN where a cell is missing or not a number."""
    return pd.to_numeric(column, errors="coerce").astype("Float64").to_numpy(float, na_value=np.nan)


def served_schema(schema, label: str, thresholds: Thresholds, not_logged: tuple[str, ...] = ()):
    """A copy of the run's schema with the comparators' thresholds set on every feature, and a
    SERVING environment in which neither the label nor the features the log left out
    (`--log-exclude`) are expected."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    out = schema_pb2.Schema()
    out.CopyFrom(schema)
    for env in ("TRAINING", "SERVING"):
        if env not in out.default_environment:
            out.default_environment.append(env)
    for feature in out.feature:
        absent = feature.name == label or feature.name in not_logged
        if absent and "SERVING" not in feature.not_in_environment:
            feature.not_in_environment.append("SERVING")
        if feature.type == schema_pb2.BYTES:
            feature.skew_comparator.infinity_norm.threshold = thresholds.categorical
            feature.drift_comparator.infinity_norm.threshold = thresholds.categorical
        else:
            feature.skew_comparator.jensen_shannon_divergence.threshold = thresholds.numeric
            feature.drift_comparator.jensen_shannon_divergence.threshold = thresholds.numeric
    return out


def _measurements(anomalies, which: str) -> dict[str, dict]:
    """{feature: {"distance", "threshold", "comparator"}} from TFDV's drift_skew_info."""
    out = {}
    for info in anomalies.drift_skew_info:
        name = ".".join(info.path.step)
        for m in getattr(info, f"{which}_measurements"):
            comparator = "L-infinity" if m.type == m.L_INFTY else "Jensen-Shannon"
            out[name] = {"distance": m.value, "threshold": m.threshold, "comparator": comparator}
    return out


def feature_stats(stats, name: str):
    """A feature's statistics in a DatasetFeatureStatisticsList, by name (None: not there)."""
    for feature in stats.datasets[0].features:
        path = ".".join(feature.path.step) if feature.path.step else feature.name
        if path == name:
            return feature
    return None


def numeric_buckets(reference, values: np.ndarray) -> tuple | None:
    """(edges, reference counts, served counts) on the reference feature's STANDARD histogram:
    its own buckets, the served values counted into them as TFDV counts (a bucket holds its
    upper edge: integers sit on edges, lectage's 2 in [1.5, 2.0]), the outer ones open; None
    where the reference has no such histogram."""
    histograms = [h for h in reference.num_stats.histograms if h.type == h.STANDARD]
    if not histograms or not histograms[0].buckets:
        return None
    buckets = histograms[0].buckets
    ref = np.array([b.sample_count for b in buckets], float)
    edges = np.array([b.low_value for b in buckets] + [buckets[-1].high_value], float)
    bucket = np.searchsorted(edges[1:-1], values[np.isfinite(values)], side="left")
    now = np.bincount(bucket, minlength=len(buckets)).astype(float)
    return edges, ref, now


def constant_value(reference) -> float | None:
    """The one value a numeric feature took in the reference, or None where it took several
    (or none). TFDV gives such a feature one bucket [v, v]: every served value falls into it,
    so a histogram distance on it is 0 whatever is served."""
    stats = reference.num_stats
    if not stats.common_stats.num_non_missing or stats.min != stats.max:
        return None
    return float(stats.min)


def share_off_constant(reference, values: np.ndarray) -> float | None:
    """The share of the served (non-missing) values that differ from the reference feature's
    one value; None where the reference is not constant or nothing was served."""
    constant = constant_value(reference)
    values = values[np.isfinite(values)]
    if constant is None or not len(values):
        return None
    return float(np.mean(values != constant))


def numeric_distance(reference, values: np.ndarray) -> float | None:
    """Jensen-Shannon divergence (bits) of `values` against the reference feature's STANDARD
    histogram, on its own buckets (numeric_buckets)."""
    found = numeric_buckets(reference, values)
    if found is None or not found[1].sum() or not found[2].sum():
        return None
    _, ref, now = found
    return jensen_shannon(ref / ref.sum(), now / now.sum())


def categorical_distance(reference, values: pd.Series) -> float | None:
    """L-infinity distance of `values`' shares against the reference feature's value shares
    (its rank histogram over its non-missing count, as TFDV normalises it)."""
    values = values.dropna().astype(str)
    buckets = reference.string_stats.rank_histogram.buckets
    total = reference.string_stats.common_stats.num_non_missing
    if not buckets or not total or values.empty:
        return None
    ref = {b.label: b.sample_count / total for b in buckets}
    now = values.value_counts(normalize=True).to_dict()
    return max(abs(ref.get(v, 0.0) - now.get(v, 0.0)) for v in set(ref) | set(now))


def _ours(reference_stats, frame: pd.DataFrame, schema, thresholds: Thresholds) -> dict:
    from tensorflow_metadata.proto.v0 import schema_pb2

    out = {}
    for feature in schema.feature:
        reference = feature_stats(reference_stats, feature.name)
        if reference is None or feature.name not in frame:
            continue
        if feature.type == schema_pb2.BYTES:
            distance = categorical_distance(reference, frame[feature.name])
            comparator, threshold = "L-infinity", thresholds.categorical
        else:
            values = numeric_values(frame[feature.name])
            threshold = thresholds.numeric
            if constant_value(reference) is not None:
                distance, comparator = share_off_constant(reference, values), OFF_CONSTANT
            else:
                distance, comparator = numeric_distance(reference, values), "Jensen-Shannon"
        if distance is not None:
            out[feature.name] = {
                "distance": float(distance),
                "threshold": threshold,
                "comparator": comparator,
                "beyond": bool(distance > threshold),
            }
    return out


@contextlib.contextmanager
def native_stderr_quiet():
    """TFDV's C++ code logs a warning per feature it looks up and does not find (hundreds of
    lines on a wide table); the monitor's own findings are what the user reads."""
    import os
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def feature_checks(
    train_stats, served_stats, schema, frame: pd.DataFrame, thresholds: Thresholds,
    previous_stats=None, open_features: frozenset = frozenset(),
    optional_features: frozenset = frozenset(),
) -> dict:  # fmt: skip
    """Per feature: skew (and drift, with an earlier window) distance, threshold and verdict,
    with TFDV's own measurement beside it; and the schema anomalies of the traffic. The
    findings the run tolerated in its eval split are tolerated in the traffic the same way
    (components/data/anomaly_check.py: a new value of a column read through an
    out-of-vocabulary id, a missing cell in a column that had them, a guessed boolean) and
    listed apart, under "tolerated"."""
    import tensorflow_data_validation as tfdv

    from amp_pipeline.components.data.anomaly_check import tolerate

    skew = _measurements(
        tfdv.validate_statistics(
            train_stats, schema, environment="TRAINING", serving_statistics=served_stats
        ),
        SKEW,
    )
    drift = (
        _measurements(
            tfdv.validate_statistics(
                served_stats, schema, environment="SERVING", previous_statistics=previous_stats
            ),
            DRIFT,
        )
        if previous_stats is not None
        else {}
    )
    schema_anomalies = tfdv.validate_statistics(served_stats, schema, environment="SERVING")
    tolerated = tolerate(schema_anomalies, set(open_features), set(optional_features))
    anomalies = {
        name: {
            "short": info.short_description,
            "description": info.description,
        }
        for name, info in schema_anomalies.anomaly_info.items()
    }
    ours = {SKEW: _ours(train_stats, frame, schema, thresholds)}
    if previous_stats is not None:
        ours[DRIFT] = _ours(previous_stats, frame, schema, thresholds)
    features = {}
    for name in sorted(set(ours[SKEW]) | set(ours.get(DRIFT, {}))):
        entry = {}
        for kind, tfdv_found in ((SKEW, skew), (DRIFT, drift)):
            if name in ours.get(kind, {}):
                tfdv_value = tfdv_found.get(name, {}).get("distance")
                entry[kind] = {**ours[kind][name], "tfdv": tfdv_value}
        features[name] = entry
    return {"features": features, "anomalies": anomalies, "tolerated": tolerated}


def _distribution(values, bins) -> np.ndarray:
    counts = np.histogram(values, bins)[0].astype(float)
    return counts / counts.sum() if counts.sum() else counts


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """JS divergence in bits (0: the same, 1: disjoint), as TFDV reports it."""
    m = (p + q) / 2

    def kl(a, b):
        mask = a > 0
        return float(np.sum(a[mask] * np.log2(a[mask] / b[mask])))

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def prediction_drift(
    served: list, reference: list, regression: bool, thresholds: Thresholds
) -> dict:
    """The served answers' distribution against the model's answers on the eval split."""
    if not served or not reference:
        return {"skipped": "no served answers" if not served else "no eval-split answers"}
    if regression:
        ref = np.asarray(reference, float)
        edges = np.unique(np.quantile(ref, np.linspace(0, 1, 11)))
        edges[0], edges[-1] = -np.inf, np.inf
        p, q = _distribution(ref, edges), _distribution(np.asarray(served, float), edges)
        distance, comparator = jensen_shannon(p, q), "Jensen-Shannon"
        shares = None
    else:
        classes = sorted({*map(str, reference), *map(str, served)})
        ref = pd.Series(map(str, reference)).value_counts(normalize=True)
        now = pd.Series(map(str, served)).value_counts(normalize=True)
        shares = {c: [float(ref.get(c, 0.0)), float(now.get(c, 0.0))] for c in classes}
        distance = max(abs(a - b) for a, b in shares.values())
        comparator = "L-infinity"
    return {
        "distance": float(distance),
        "threshold": thresholds.prediction,
        "comparator": comparator,
        "beyond": bool(distance > thresholds.prediction),
        "served": len(served),
        "eval": len(reference),
        "shares": shares,  # class: [eval share, served share]
    }
