"""What `monitor` needs of the run that pushed the served version, found through ML Metadata's
lineage rather than "the newest": the PushedModel of that version, the pipeline run that pushed
it, and in that run StatisticsGen's train statistics, the schema the model trained with
(AnomalyCheck's curated schema: SchemaGen's with the columns that had missing cells made
optional), the columns read through a vocabulary with an out-of-vocabulary id (all but those
declared `--closed-columns`), and the shipped twin's ModelRun (its train_spec.json: the label,
task and classes; its eval predictions). A later run in the same folder (a rejected one, or one
stopped by anomalies in other data) does not change what the served model is checked
against."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from amp_pipeline.core import names
from amp_pipeline.core.errors import InputError
from amp_pipeline.pipeline.results import OUTPUT_EVENTS, open_store, property_value


@dataclasses.dataclass
class RunRecord:
    output: Path
    model_name: str
    version: int
    label: str
    regression: bool
    classes: tuple[str, ...]
    train_stats: object  # DatasetFeatureStatisticsList of the train split
    schema: object  # tensorflow_metadata Schema: the curated one Transform read
    open_features: frozenset[str]  # read through an OOV id: a new value is no anomaly
    optional_features: frozenset[str]  # had missing cells in the run's input
    eval_answers: list
    mlflow: dict


def _prop(artifact, key: str):
    value = artifact.custom_properties.get(key)
    return property_value(value) if value is not None else None


def pushed_models(output: Path, store) -> list:
    """The PushedModel artifacts of `output` that did push, oldest first."""
    pushed = [a for a in store.get_artifacts_by_type("PushedModel") if _prop(a, "pushed")]
    if not pushed:
        raise InputError(f"--run {output}: no model was pushed from this run folder")
    return sorted(pushed, key=lambda a: a.id)


def _open_run(output: Path):
    """`output`'s ML Metadata, once the folder is known to be a run's."""
    if not (output / names.RUN_SUMMARY_JSON).is_file():
        raise InputError(f"--run {output}: no {names.RUN_SUMMARY_JSON}: not an amp-pipeline run")
    metadata = output / "metadata.sqlite"
    if not metadata.is_file():
        raise InputError(f"--run {output}: no metadata.sqlite: the run recorded no statistics")
    return open_store(metadata)


def served_model_name(output: Path) -> str:
    """The served model's name: the folder the newest push went to (serving/<name>/<version>)."""
    output = Path(output)
    newest = pushed_models(output, _open_run(output))[-1]
    return Path(_prop(newest, "pushed_destination")).parent.name


def _run_outputs(store, pushed) -> tuple[str, list, list[int]]:
    """The pipeline run that pushed `pushed` (its ML Metadata name, the run id MLflow tags the
    run's parent run with) and every artifact it produced (cached ones included)."""
    events = store.get_events_by_artifact_ids([pushed.id])
    producer = [e.execution_id for e in events if e.type in OUTPUT_EVENTS]
    types = {t.id: t.name for t in store.get_context_types()}
    runs = [
        c
        for c in store.get_contexts_by_execution(producer[0])
        if types.get(c.type_id) == "pipeline_run"
    ]
    executions = [e.id for e in store.get_executions_by_context(runs[0].id)]
    ids = {
        e.artifact_id
        for e in store.get_events_by_execution_ids(executions)
        if e.type in OUTPUT_EVENTS
    }
    return runs[0].name, store.get_artifacts_by_id(list(ids)), executions


def _anomaly_check_parameters(store, executions: list[int]) -> tuple[frozenset, frozenset]:
    """(open features, optional features): the AnomalyCheck parameters of the run, as it judged
    the eval split; empty for a run that had no AnomalyCheck."""
    types = {t.id: t.name for t in store.get_execution_types()}
    for execution in store.get_executions_by_id(executions):
        if types.get(execution.type_id, "").endswith(".AnomalyCheck"):
            found = [
                frozenset(n for n in str(_prop(execution, key) or "").split(",") if n)
                for key in ("text_features", "optional_features")
            ]
            return found[0], found[1]
    return frozenset(), frozenset()


def read_run(output: Path, version: int | None = None) -> RunRecord:
    """The run that pushed `version` (None: the newest push). InputError (exit 2) naming what is
    missing: no run there, no push of that version, no statistics."""
    import tensorflow_data_validation as tfdv

    output = Path(output)
    store = _open_run(output)
    pushed = pushed_models(output, store)
    if version is not None:
        pushed = [a for a in pushed if str(_prop(a, "pushed_version")) == str(version)]
        if not pushed:
            raise InputError(
                f"--run {output}: version {version}, which answered the logged requests, was not "
                "pushed from this run folder"
            )
    push = pushed[-1]
    tfx_run_id, produced, executions = _run_outputs(store, push)

    def find(node: str, kind: str):
        found = [a for a in produced if f"/{node}/{kind}/" in a.uri]
        return max(found, key=lambda a: a.id) if found else None

    stats = find("StatisticsGen", "statistics")
    # The schema Transform read; a run from before AnomalyCheck wrote one has SchemaGen's.
    schema = find("AnomalyCheck", "curated_schema") or find("SchemaGen", "schema")
    if stats is None or schema is None:
        raise InputError(f"--run {output}: the run that pushed it has no statistics or schema")
    train_path = Path(stats.uri) / "Split-train" / "FeatureStats.pb"
    if not train_path.is_file():
        raise InputError(f"--run {output}: {train_path} is missing")
    open_features, optional_features = _anomaly_check_parameters(store, executions)
    shipped = _prop(push, "shipped_precision")
    model_run = find("TrainerFp32" if shipped == "float32" else "TrainerAmp", "model_run")
    spec = json.loads((Path(model_run.uri) / "train_spec.json").read_text()) if model_run else {}
    data = spec.get("data_spec") or {}
    regression = data.get("task") == "regression"
    classes = tuple(data.get("classes") or ())
    destination = Path(_prop(push, "pushed_destination"))
    return RunRecord(
        output=output,
        model_name=destination.parent.name,
        version=int(_prop(push, "pushed_version")),
        label=data.get("label", ""),
        regression=regression,
        classes=classes,
        train_stats=tfdv.load_stats_binary(str(train_path)),
        schema=tfdv.load_schema_text(str(Path(schema.uri) / "schema.pbtxt")),
        open_features=open_features,
        optional_features=optional_features,
        eval_answers=eval_answers(model_run, regression, classes),
        mlflow=_mlflow_of(output, tfx_run_id),
    )


def _mlflow_of(output: Path, tfx_run_id: str) -> dict:
    """Where the run's MLflow parent run is: the tracking URI and experiment the folder's runs
    use, and the pipeline run id its parent run is tagged with (`tfx.run_id`); report.track
    finds the run by that tag, so a later run's summary in the folder does not mislead it."""
    from amp_pipeline.pipeline.tracking.tracker import default_tracking_uri

    summary = json.loads((output / names.RUN_SUMMARY_JSON).read_text())
    tracked = summary.get("mlflow") or {}
    return {
        "tracking_uri": tracked.get("tracking_uri") or default_tracking_uri(output),
        "experiment": tracked.get("experiment") or "amp-pipeline",
        "tfx_run_id": tfx_run_id,
    }


def eval_answers(model_run, regression: bool, classes: tuple[str, ...]) -> list:
    """The shipped twin's answers on the eval split (its first seed), as served: class names,
    or values in the label's units."""
    path = Path(model_run.uri) / names.EVAL_PREDICTIONS if model_run is not None else None
    if path is None or not path.is_file():
        return []
    predictions = np.load(path)["predictions"][0]
    if regression:
        return [float(v) for v in predictions]
    return [classes[int(i)] if 0 <= int(i) < len(classes) else str(int(i)) for i in predictions]
