"""monitor.json, monitor.md (each feature's distance, threshold and verdict), a plot per flagged
feature (training against served histograms), and the MLflow run linked to the model's."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from amp_pipeline.pipeline.monitor.drift import (
    constant_value,
    feature_stats,
    numeric_buckets,
    numeric_values,
    share_off_constant,
)

logger = logging.getLogger(__name__)


def _verdict(check: dict | None) -> str:
    if not check:
        return "-"
    word = "BEYOND" if check["beyond"] else "ok"
    tfdv = f" (TFDV {check['tfdv']:.4f})" if check.get("tfdv") is not None else ""
    return f"{check['distance']:.4f} / {check['threshold']:g} {word}{tfdv}"


def to_markdown(result: dict) -> str:
    lines = [
        f"# Monitoring: {result['model']} ({result['verdict']})",
        "",
        f"Run: `{result['run']}`; requests: `{result['requests']}`: {result['examples']} served "
        f"examples of version {result['production_version']} in {result['records']} records"
        + (f"; not logged: {', '.join(result['not_logged'])}" if result.get("not_logged") else "")
        + ".",
        "",
        "| feature | comparator | skew vs training (distance / threshold) | drift vs the last "
        "window | schema anomaly |",
        "|---|---|---|---|---|",
    ]
    for name, entry in result["features"].items():
        comparator = (entry.get("skew") or entry.get("drift") or {}).get("comparator", "")
        anomaly = result["anomalies"].get(name, {}).get("short", "")
        lines.append(
            f"| {name} | {comparator} | {_verdict(entry.get('skew'))} | "
            f"{_verdict(entry.get('drift'))} | {anomaly} |"
        )
    for name, anomaly in result["anomalies"].items():
        if name not in result["features"]:
            lines.append(f"| {name} | | - | - | {anomaly['short']} |")
    for item in result.get("tolerated", []):
        lines.append(f"| {item['feature']} | | - | - | tolerated: {item['finding']} |")
    prediction = result["prediction_drift"]
    lines += ["", "## Served answers against the eval split", ""]
    if "skipped" in prediction:
        lines.append(f"Not measured: {prediction['skipped']}.")
    else:
        lines.append(
            f"{prediction['comparator']} distance {_verdict(prediction)} "
            f"({prediction['served']} served answers, {prediction['eval']} on the eval split)."
        )
    if result.get("drift_note"):
        lines += ["", result["drift_note"]]
    shadow = result.get("shadow")
    if shadow:
        lines += ["", "## Shadow version", ""]
        lines += shadow_lines(shadow)
    if result["flagged"]:
        lines += ["", "## Flagged", ""]
        lines += [f"- {line}" for line in result["flagged"]]
        lines += [f"![{p}]({p})" for p in result.get("plots", [])]
    return "\n".join(lines) + "\n"


def shadow_lines(shadow: dict) -> list[str]:
    head = (
        f"Version {shadow['candidate_version']} beside production version "
        f"{shadow['production_version']}: {shadow['pairs']} examples paired "
        f"({shadow['unpaired']} production answers without a shadow answer)."
    )
    if "skipped" in shadow:
        return [head, "", f"Not compared: {shadow['skipped']}."]
    a = shadow["agreement"]
    lo, hi = a["interval"]
    if "share" in a:
        lines = [head, "", f"Agreement {a['share']:.4f} [{lo:.4f}, {hi:.4f}] ({a['test']})."]
    else:
        lines = [
            head,
            "",
            f"Mean absolute difference {a['mean_abs_difference']:.4g} [{lo:.4g}, {hi:.4g}] "
            f"({a['test']}).",
        ]
    labelled = shadow.get("labelled")
    if labelled and "skipped" not in labelled:
        lo, hi = labelled["interval"]
        if "accuracy_change" in labelled:
            lines.append(
                f"With labels ({labelled['examples']} examples): accuracy "
                f"{labelled['production_accuracy']:.4f} -> {labelled['candidate_accuracy']:.4f}, "
                f"change {labelled['accuracy_change']:+.4f} [{lo:+.4f}, {hi:+.4f}]."
            )
        else:
            lines.append(
                f"With labels ({labelled['examples']} examples): MAE "
                f"{labelled['production_mae']:.4g} -> {labelled['candidate_mae']:.4g}, change "
                f"{labelled['mae_change']:+.4g} [{lo:+.4g}, {hi:+.4g}]."
            )
    elif labelled:
        lines.append(f"Labels not joined: {labelled['skipped']}.")
    return lines


def plot_feature(name: str, train_stats, served_stats, frame, path: Path) -> bool:
    """Training against served shares of one feature, on the bins the distance read: the
    training histogram's buckets for a number (the served values counted into them), the
    values for a string."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    train, served = feature_stats(train_stats, name), feature_stats(served_stats, name)
    if train is None or served is None or name not in frame:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.5))
    numeric = None
    constant = constant_value(train) if train.HasField("num_stats") else None
    if train.HasField("num_stats") and constant is None:  # a string's values are not numbers
        numeric = numeric_buckets(train, numeric_values(frame[name]))
    if constant is not None:
        off = share_off_constant(train, numeric_values(frame[name])) or 0.0
        x = np.arange(2)
        ax.bar(x - 0.2, [1.0, 0.0], 0.4, label="training")
        ax.bar(x + 0.2, [1.0 - off, off], 0.4, label="served")
        ax.set_xticks(x, [f"= {constant:g}", "any other value"])
    elif numeric is not None:
        edges, ref, now = numeric
        ax.stairs(ref / max(ref.sum(), 1), edges, label="training", fill=True, alpha=0.5)
        ax.stairs(now / max(now.sum(), 1), edges, label="served", linewidth=2)
    else:
        buckets = train.string_stats.rank_histogram.buckets[:20]
        total = train.string_stats.common_stats.num_non_missing or 1
        labels = [b.label for b in buckets]
        shares = frame[name].astype(str).value_counts(normalize=True)
        x = np.arange(len(labels))
        ax.bar(x - 0.2, [b.sample_count / total for b in buckets], 0.4, label="training")
        ax.bar(x + 0.2, [float(shares.get(v, 0.0)) for v in labels], 0.4, label="served")
        ax.set_xticks(x, labels, rotation=45, ha="right")
    ax.set_title(f"{name}: training vs served")
    ax.set_ylabel("share")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write(result: dict, out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "monitor.json", "md": out_dir / "monitor.md"}
    paths["json"].write_text(json.dumps(result, indent=2, default=str))
    paths["md"].write_text(to_markdown(result))
    return paths


def track(result: dict, mlflow_ids: dict, files: list[Path]) -> str | None:
    """A child run of the MLflow run of the pipeline run that pushed the model (found by its
    `tfx.run_id` tag): the distances as metrics, the files as artifacts. None (and a warning)
    when the tracking server cannot be reached or has no such run: monitoring does not fail
    for it."""
    uri = mlflow_ids.get("tracking_uri")
    if not uri:
        return None
    try:
        import mlflow

        client = mlflow.MlflowClient(uri)
        found = client.get_experiment_by_name(mlflow_ids.get("experiment") or "amp-pipeline")
        runs = (
            client.search_runs(
                [found.experiment_id],
                filter_string=f"tags.`tfx.run_id` = '{mlflow_ids['tfx_run_id']}'",
            )
            if found is not None
            else []
        )
        if not runs:
            logger.warning(
                "monitor: no MLflow run of pipeline run %s in %s: not tracked",
                mlflow_ids.get("tfx_run_id"),
                uri,
            )
            return None
        parent, experiment = runs[0].info.run_id, runs[0].info.experiment_id
        run = client.create_run(
            experiment,
            tags={"mlflow.parentRunId": parent, "mlflow.runName": "monitor", "kind": "monitor"},
        )
        run_id = run.info.run_id
        for name, entry in result["features"].items():
            for kind in ("skew", "drift"):
                if entry.get(kind):
                    key = "".join(c if c.isalnum() or c in "_-./" else "_" for c in name)
                    client.log_metric(run_id, f"{kind}.{key}", entry[kind]["distance"])
        if "distance" in result["prediction_drift"]:
            client.log_metric(run_id, "prediction_drift", result["prediction_drift"]["distance"])
        client.log_metric(run_id, "examples", result["examples"])
        client.log_param(run_id, "requests", result["requests"])
        client.set_tag(run_id, "verdict", result["verdict"])
        for f in files:
            client.log_artifact(run_id, str(f))
        client.set_terminated(run_id)
        return run_id
    except Exception as e:  # noqa: BLE001 - tracking is a record, not the check
        logger.warning("monitor: not tracked in MLflow (%s): %s", uri, e)
        return None
