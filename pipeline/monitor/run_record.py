"""What `monitor` needs of the run that pushed the model: its training statistics and schema (from
its ML Metadata), the label and task, the served model's name, the shipped twin's answers on the
eval split, and its MLflow run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from amp_pipeline.core import names
from amp_pipeline.core.errors import InputError


@dataclasses.dataclass
class RunRecord:
    output: Path
    model_name: str
    label: str
    regression: bool
    classes: tuple[str, ...]
    train_stats: object  # DatasetFeatureStatisticsList of the train split
    schema: object  # tensorflow_metadata Schema
    eval_answers: list
    mlflow: dict


def _newest_uri(store, type_name: str, producer: str) -> str | None:
    found = [a for a in store.get_artifacts_by_type(type_name) if f"/{producer}/" in a.uri]
    return max(found, key=lambda a: a.id).uri if found else None


def read_run(output: Path) -> RunRecord:
    """InputError (exit 2) naming what is missing: no run there, or a run with no statistics."""
    import tensorflow_data_validation as tfdv
    from ml_metadata.metadata_store import metadata_store
    from tfx import v1 as tfx

    output = Path(output)
    summary_path = output / names.RUN_SUMMARY_JSON
    if not summary_path.is_file():
        raise InputError(f"--run {output}: no {names.RUN_SUMMARY_JSON}: not an amp-pipeline run")
    summary = json.loads(summary_path.read_text())
    metadata = output / "metadata.sqlite"
    if not metadata.is_file():
        raise InputError(f"--run {output}: no metadata.sqlite: the run recorded no statistics")
    store = metadata_store.MetadataStore(
        tfx.orchestration.metadata.sqlite_metadata_connection_config(str(metadata))
    )
    stats_uri = _newest_uri(store, "ExampleStatistics", "StatisticsGen")
    schema_uri = _newest_uri(store, "Schema", "SchemaGen")
    if stats_uri is None or schema_uri is None:
        raise InputError(f"--run {output}: the run has no training statistics or schema")
    train_path = Path(stats_uri) / "Split-train" / "FeatureStats.pb"
    if not train_path.is_file():
        raise InputError(f"--run {output}: {train_path} is missing")
    data = summary.get("data") or {}
    regression = summary.get("task") == "regression"
    classes = tuple(data.get("classes") or ())
    return RunRecord(
        output=output,
        model_name=(summary.get("config") or {}).get("model_name") or "model",
        label=data.get("label", ""),
        regression=regression,
        classes=classes,
        train_stats=tfdv.load_stats_binary(str(train_path)),
        schema=tfdv.load_schema_text(str(Path(schema_uri) / "schema.pbtxt")),
        eval_answers=eval_answers(summary, regression, classes),
        mlflow=summary.get("mlflow") or {},
    )


def eval_answers(summary: dict, regression: bool, classes: tuple[str, ...]) -> list:
    """The shipped twin's answers on the eval split (its first seed), as served: class names,
    or values in the label's units."""
    twin = "fp32" if summary.get("shipped_precision") == "float32" else "amp"
    path = (summary.get("evaluation") or {}).get(f"{twin}_predictions")
    if not path or not Path(path).is_file():
        return []
    predictions = np.load(path)["predictions"][0]
    if regression:
        return [float(v) for v in predictions]
    return [classes[int(i)] if 0 <= int(i) < len(classes) else str(int(i)) for i in predictions]
