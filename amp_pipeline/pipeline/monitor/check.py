"""`amp-pipeline monitor`: the logged traffic of the run's model against its training data.

A check reads one window: the requests logged since the previous check into the same output
folder (window.json records where that one stopped), or every request in the folder the first
time. Skew, anomalies and the shadow read this window; drift compares it with the previous
window's statistics, a disjoint set of requests.

Exit codes: 0 nothing beyond a threshold; 4 skew, drift, a schema anomaly or prediction drift
(the first feature named in one line); 2 bad input (no logs, a run with no statistics).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from pathlib import Path

from amp_pipeline.core.errors import EXIT_DRIFT
from amp_pipeline.pipeline.monitor import drift, report, shadow, traffic
from amp_pipeline.pipeline.monitor.run_record import read_run, served_model_name
from amp_pipeline.serving.requestlog.writer import read_settings

EXIT_OK = 0
SERVED_STATS = "served_statistics.pb"
PREVIOUS_STATS = "previous_served_statistics.pb"
# Where the last window stopped in the request logs ({file: records read}) and the newest
# record's time: a window is the requests since the previous check, so that drift against the
# last window compares two disjoint sets of requests.
WINDOW_JSON = "window.json"
FEW_EXAMPLES = 100


@dataclasses.dataclass(frozen=True)
class MonitorOptions:
    run: Path
    requests: Path
    output: Path
    thresholds: drift.Thresholds = drift.Thresholds()
    labels: Path | None = None
    key: str | None = None
    track: bool = True


def monitor(options: MonitorOptions) -> tuple[dict, int]:
    import tensorflow_data_validation as tfdv

    out = Path(options.output)
    window = read_window(out, options.requests)
    served = traffic.read_traffic(
        options.requests, served_model_name(options.run), window.get("cursor")
    )
    production, candidate = shadow.versions(served.rows)
    run = read_run(options.run, production)  # the run that pushed the version users got
    rows = served.production()
    settings = read_settings(options.requests)
    not_logged = tuple(settings.get("exclude") or ())
    schema = drift.served_schema(run.schema, run.label, options.thresholds, not_logged)
    frame = drift.features_frame(rows, schema)
    served_stats = tfdv.generate_statistics_from_dataframe(frame)
    out.mkdir(parents=True, exist_ok=True)
    previous = None
    if (out / SERVED_STATS).is_file():  # the last window's, kept for drift
        shutil.copyfile(out / SERVED_STATS, out / PREVIOUS_STATS)
        previous = tfdv.load_stats_binary(str(out / PREVIOUS_STATS))
    with drift.native_stderr_quiet():
        checks = drift.feature_checks(
            run.train_stats, served_stats, schema, frame, options.thresholds, previous,
            run.open_features, run.optional_features,
        )  # fmt: skip
    this_window = {
        "requests": str(Path(options.requests).resolve()),
        "since": window.get("until"),  # None: the first window, every record in the folder
        "until": _iso(served.newest),
        "records": served.records,
        "cursor": served.cursor,
    }
    answers = [a for a in rows[traffic.ANSWER].tolist() if a is not None]
    prediction = drift.prediction_drift(
        answers, run.eval_answers, run.regression, options.thresholds
    )
    flagged = flagged_lines(checks, prediction)
    result = {
        "model": run.model_name,
        "run": str(run.output),
        "requests": str(options.requests),
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "records": served.records,
        "window": {k: this_window[k] for k in ("since", "until", "records")},
        "skipped_records": dict(served.skipped),
        "examples": len(rows),
        "not_logged": list(not_logged),
        "sample_rate": settings.get("sample_rate", 1.0),
        "production_version": production,
        "versions": sorted(int(v) for v in rows[traffic.VERSION].unique()),
        "thresholds": dataclasses.asdict(options.thresholds),
        **checks,
        "prediction_drift": prediction,
        "drift_note": None
        if previous is not None
        else "Drift: no earlier window in this folder; the next monitor run compares with it.",
        "few_examples": len(rows) < FEW_EXAMPLES,
        "flagged": flagged,
        "verdict": "beyond a threshold" if flagged else "ok",
    }
    if candidate is not None:
        labels = (
            shadow.read_labels(options.labels, options.key, run.label)
            if options.labels is not None and options.key is not None  # the CLI asks for both
            else None
        )
        result["shadow"] = shadow.shadow_report(
            served.rows, production, candidate, run.regression, labels, options.key
        )
    plots = []
    for name in result["features"]:
        entry = result["features"][name]
        if any((entry.get(k) or {}).get("beyond") for k in ("skew", "drift")):
            path = out / f"{_file_name(name)}.png"
            if report.plot_feature(name, run.train_stats, served_stats, frame, path):
                plots.append(path.name)
    result["plots"] = plots
    files = report.write(result, out)
    if options.track:
        result["mlflow_run_id"] = report.track(
            result, run.mlflow, [files["json"], files["md"], *(out / p for p in plots)]
        )
        files = report.write(result, out)
    # Last: a check that failed on the way leaves the window and its statistics where they
    # were, and the next check reads those requests again.
    (out / SERVED_STATS).write_bytes(served_stats.SerializeToString())
    (out / WINDOW_JSON).write_text(json.dumps(this_window, indent=2))
    return result, EXIT_DRIFT if flagged else EXIT_OK


def read_window(out: Path, requests: Path) -> dict:
    """The last window's record (window.json in the monitor's folder): where in the request
    logs it stopped. Empty for the first check, or when the last one read another folder."""
    path = out / WINDOW_JSON
    if not path.is_file():
        return {}
    window = json.loads(path.read_text())
    if window.get("requests") != str(Path(requests).resolve()):
        return {}
    return window


def _iso(timestamp_secs: int) -> str | None:
    if not timestamp_secs:
        return None
    at = datetime.datetime.fromtimestamp(timestamp_secs, datetime.timezone.utc)
    return at.isoformat(timespec="seconds")


def _file_name(feature: str) -> str:
    return "".join(c if c.isalnum() or c in "_-." else "_" for c in feature) + "_histograms"


def flagged_lines(checks: dict, prediction: dict) -> list[str]:
    """One line per finding, the features' first (in name order)."""
    lines = []
    for name, entry in checks["features"].items():
        for kind in ("skew", "drift"):
            m = entry.get(kind)
            if m and m["beyond"]:
                what = "against training" if kind == "skew" else "against the last window"
                lines.append(
                    f"{kind} in feature {name}: {m['comparator']} distance {m['distance']:.4f} "
                    f"{what}, threshold {m['threshold']:g}"
                )
    for name, anomaly in checks["anomalies"].items():
        lines.append(f"anomaly in feature {name}: {anomaly['description'] or anomaly['short']}")
    if prediction.get("beyond"):
        lines.append(
            f"prediction drift: {prediction['comparator']} distance {prediction['distance']:.4f} "
            f"against the eval split's answers, threshold {prediction['threshold']:g}"
        )
    return lines
