"""Reads what the latest pipeline run produced, from ML Metadata: output artifacts per node."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from amp_pipeline.core import names

OUTPUT_EVENTS = (
    metadata_store_pb2.Event.OUTPUT,
    metadata_store_pb2.Event.DECLARED_OUTPUT,
)


@dataclasses.dataclass(frozen=True)
class NodeOutput:
    uri: str
    type_name: str
    properties: dict


def property_value(v: metadata_store_pb2.Value):
    """An artifact property's value, whichever kind it is (None when unset)."""
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def open_store(metadata_path: Path) -> metadata_store.MetadataStore:
    """The run folder's ML Metadata (SQLite), opened read-only."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(metadata_path)
    config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
    return metadata_store.MetadataStore(config)


@dataclasses.dataclass(frozen=True)
class PipelineRun:
    """One pipeline run: its id, each node's execution id and output artifacts."""

    run_id: str | None
    execution_ids: dict[str, int]
    outputs: dict[str, dict[str, NodeOutput]]


def read_run(metadata_path: Path, pipeline_name: str, run_id: str | None) -> PipelineRun:
    """What run `run_id` of `pipeline_name` produced (None: the newest run)."""
    store = open_store(metadata_path)
    runs = [
        c for c in store.get_contexts_by_type("pipeline_run") if _belongs(store, c, pipeline_name)
    ]
    if run_id is not None:
        runs = [c for c in runs if c.name == run_id]
        if not runs:
            raise LookupError(f"ML Metadata has no run {run_id!r} of {pipeline_name}")
    if not runs:
        return PipelineRun(None, {}, {})
    run = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
    run_executions = {e.id for e in store.get_executions_by_context(run.id)}
    types = {t.id: t.name for t in store.get_artifact_types()}
    out: dict[str, dict[str, NodeOutput]] = {}
    execution_ids: dict[str, int] = {}
    prefix = f"{pipeline_name}."
    for node in store.get_contexts_by_type("node"):
        if not node.name.startswith(prefix):
            continue
        node_id = node.name[len(prefix) :]
        executions = [e.id for e in store.get_executions_by_context(node.id)]
        mine = sorted(set(executions) & run_executions)
        if not mine:
            continue
        execution_ids[node_id] = mine[-1]
        events = store.get_events_by_execution_ids([mine[-1]])
        keyed = {}
        for ev in events:
            if ev.type in OUTPUT_EVENTS and ev.path.steps:
                keyed[ev.artifact_id] = ev.path.steps[0].key
        for art in store.get_artifacts_by_id(list(keyed)):
            props = {k: property_value(v) for k, v in art.custom_properties.items()}
            props.update({k: property_value(v) for k, v in art.properties.items()})
            out.setdefault(node_id, {})[keyed[art.id]] = NodeOutput(
                uri=art.uri, type_name=types.get(art.type_id, ""), properties=props
            )
    return PipelineRun(run.name, execution_ids, out)


def _belongs(store, run_context, pipeline_name: str) -> bool:
    """Whether a pipeline_run context belongs to `pipeline_name` (via its parent pipeline)."""
    parents = store.get_parent_contexts_by_context(run_context.id)
    if parents:
        return any(p.name == pipeline_name for p in parents)
    return True


def trainer_figures(model_run: NodeOutput) -> dict:
    """The figures the training process wrote into its ModelRun artifact."""
    return json.loads((Path(model_run.uri) / names.FIGURES_JSON).read_text())
