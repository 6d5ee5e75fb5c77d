"""Submits a compiled pipeline: a Vertex AI PipelineJob JSON with google-cloud-aiplatform, once
or on a schedule (a Vertex Schedule: the schedules API), and a Kubeflow Pipelines package as a
recurring run (KFP's v2beta1 RecurringRun). Every request is built and checked offline first;
--dry-run prints it and needs no credentials."""

from __future__ import annotations

import json
import re
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


def _pipeline_job(job: dict, job_path: Path, parameters: dict, project: str, region: str):
    """The SDK's PipelineJob for a compiled job (credentials needed from here on)."""
    from google.cloud import aiplatform

    return aiplatform.PipelineJob(
        display_name=job.get("displayName", "amp-pipeline"),
        template_path=str(job_path),
        parameter_values=parameters,
        project=project,
        location=region,
    )


def submit(job_path: Path, project: str, region: str, parameters: dict, dry_run: bool) -> dict:
    """Dry run: returns the request without credentials. Else submits and returns its name."""
    job = load_job(job_path)
    request = build_request(job, project, region, parameters)
    if dry_run:
        return request
    pipeline_job = _pipeline_job(job, job_path, parameters, project, region)
    pipeline_job.submit()
    return {**request, "submitted": pipeline_job.resource_name}


# A cron field: numbers, ranges, steps and lists, `*`, or names (JAN, MON); five of them, as
# Vertex's Schedule.cron reads them, optionally after TZ=<zone> or CRON_TZ=<zone>.
_CRON_FIELD = re.compile(
    r"^(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?(,(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?)*$"
)
_CRON_LIMITS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_CRON_NAMES = ("minute", "hour", "day of month", "month", "day of week")


def check_cron(cron: str) -> str:
    """The schedule as Vertex reads it, checked: five fields (minute hour day month weekday),
    an optional `TZ=Area/City ` first.

    Raises:
        InputError: one line naming the field that is wrong.
    """
    text = " ".join(cron.split())
    fields = text.split(" ")
    if fields and fields[0].startswith(("TZ=", "CRON_TZ=")):
        fields = fields[1:]
    if len(fields) != 5:
        raise InputError(
            f"--schedule {cron!r}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week), optionally after TZ=Area/City; got {len(fields)}"
        )
    for field, (low, high), name in zip(fields, _CRON_LIMITS, _CRON_NAMES, strict=True):
        if not _CRON_FIELD.match(field):
            raise InputError(f"--schedule {cron!r}: {name} field {field!r} is not cron syntax")
        for number in re.findall(r"(?<![/0-9])[0-9]+", field):
            if not low <= int(number) <= high:
                raise InputError(f"--schedule {cron!r}: {name} {number} is outside {low}-{high}")
    return text


def schedule_request(
    request: dict, cron: str, display_name: str, max_concurrent_runs: int = 1
) -> dict:
    """The CreateScheduleRequest for a PipelineJob request (build_request), built offline:
    Vertex creates a run from it at every time the cron names; runs do not overlap past
    `max_concurrent_runs`, and a missed time is not caught up."""
    from google.cloud.aiplatform_v1.types import schedule as gca_schedule
    from google.protobuf import json_format

    body = {
        "display_name": display_name,
        "cron": check_cron(cron),
        "max_concurrent_run_count": max_concurrent_runs,
        "allow_queueing": False,
        "create_pipeline_job_request": {
            "parent": request["parent"],
            "pipeline_job": request["pipeline_job"],
        },
    }
    schedule = gca_schedule.Schedule()
    json_format.ParseDict(body, schedule._pb, ignore_unknown_fields=False)
    return {"parent": request["parent"], "schedule": json_format.MessageToDict(schedule._pb)}


def schedule(
    job_path: Path,
    project: str,
    region: str,
    parameters: dict,
    cron: str,
    display_name: str,
    dry_run: bool,
) -> dict:
    """Dry run: the schedule request without credentials. Else creates the Vertex Schedule
    and returns its resource name."""
    job = load_job(job_path)
    request = schedule_request(build_request(job, project, region, parameters), cron, display_name)
    if dry_run:
        return request
    pipeline_job = _pipeline_job(job, job_path, parameters, project, region)
    created = pipeline_job.create_schedule(
        cron=request["schedule"]["cron"],
        display_name=display_name,
        max_concurrent_run_count=1,
        allow_queueing=False,
    )
    return {**request, "submitted": created.resource_name}


def load_package(path: Path) -> dict:
    """A compiled Kubeflow package (`compile --target kubeflow`: the pipeline spec as YAML)."""
    import yaml

    try:
        spec = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise InputError(f"--job {path}: no such file; run `amp-pipeline compile` first") from None
    except yaml.YAMLError as e:
        raise InputError(f"--job {path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(spec, dict) or "root" not in spec or "deploymentSpec" not in spec:
        raise InputError(f"--job {path}: not a compiled Kubeflow pipeline (no root/deploymentSpec)")
    return spec


def recurring_run(package_path: Path, cron: str, display_name: str, parameters: dict) -> dict:
    """The Kubeflow Pipelines v2beta1 RecurringRun body, built offline: the package inline, a
    cron trigger (KFP's cron has a seconds field first: "0 " + the five fields), one run at a
    time, no catch-up."""
    import kfp_server_api as kfp

    spec = load_package(package_path)
    declared = spec["root"].get("inputDefinitions", {}).get("parameters", {})
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise InputError(
            f"--param {unknown[0]}: not a pipeline parameter (declared: {', '.join(declared)})"
        )
    checked = check_cron(cron)
    if checked.startswith(("TZ=", "CRON_TZ=")):
        raise InputError(
            f"--schedule {cron!r}: Kubeflow's cron schedule takes no time zone (it runs in the "
            "cluster's); drop the TZ= prefix"
        )
    run = kfp.V2beta1RecurringRun(
        display_name=display_name,
        pipeline_spec=spec,
        runtime_config=kfp.V2beta1RuntimeConfig(parameters=parameters),
        trigger=kfp.V2beta1Trigger(cron_schedule=kfp.V2beta1CronSchedule(cron=f"0 {checked}")),
        max_concurrency="1",
        mode="ENABLE",
        no_catchup=True,
    )
    return kfp.ApiClient().sanitize_for_serialization(run)


def kubeflow_recurring_run(
    package_path: Path, cron: str, display_name: str, parameters: dict, host: str | None
) -> dict:
    """Dry run (no host): the RecurringRun body. Else creates it on the KFP API at `host`."""
    body = recurring_run(package_path, cron, display_name, parameters)
    if host is None:
        return {"recurring_run": body}
    import kfp_server_api as kfp

    api = kfp.RecurringRunServiceApi(kfp.ApiClient(kfp.Configuration(host=host)))
    created = api.recurring_run_service_create_recurring_run(body)
    return {"recurring_run": body, "submitted": created.recurring_run_id}
