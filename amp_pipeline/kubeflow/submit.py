"""Submits a compiled Vertex AI PipelineJob JSON with google-cloud-aiplatform."""

from __future__ import annotations

import json
from pathlib import Path

from amp_pipeline.core.errors import InputError


def load_job(path: Path) -> dict:
    try:
        job = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"--job {path}: no such file; run `amp-pipeline compile` first") from None
    except json.JSONDecodeError as e:
        raise InputError(f"--job {path}: not JSON ({e.msg} at line {e.lineno})") from None
    if "pipelineSpec" not in job:
        raise InputError(f"--job {path}: not a Vertex PipelineJob (no pipelineSpec)")
    return job


def build_request(job: dict, project: str, region: str, parameters: dict) -> dict:
    """The CreatePipelineJob request, built offline: what would be sent to Vertex."""
    from google.cloud.aiplatform_v1.types import pipeline_job as gca_pipeline_job
    from google.protobuf import json_format

    declared = job["pipelineSpec"]["root"].get("inputDefinitions", {}).get("parameters", {})
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise InputError(
            f"--param {unknown[0]}: not a pipeline parameter (declared: {', '.join(declared)})"
        )
    body = dict(job)
    runtime = dict(body.get("runtimeConfig", {}))
    runtime["parameterValues"] = {**runtime.get("parameterValues", {}), **parameters}
    body["runtimeConfig"] = runtime
    pipeline_job = gca_pipeline_job.PipelineJob()
    json_format.ParseDict(body, pipeline_job._pb, ignore_unknown_fields=False)
    return {
        "parent": f"projects/{project}/locations/{region}",
        "pipeline_job": json_format.MessageToDict(pipeline_job._pb),
    }


def submit(job_path: Path, project: str, region: str, parameters: dict, dry_run: bool) -> dict:
    """Dry run: returns the request without credentials. Else submits and returns its name."""
    job = load_job(job_path)
    request = build_request(job, project, region, parameters)
    if dry_run:
        return request
    from google.cloud import aiplatform

    pipeline_job = aiplatform.PipelineJob(
        display_name=job.get("displayName", "amp-pipeline"),
        template_path=str(job_path),
        parameter_values=parameters,
        project=project,
        location=region,
    )
    pipeline_job.submit()
    return {**request, "submitted": pipeline_job.resource_name}
