"""Runs the pipeline on this machine: LocalDagRunner, ML Metadata in SQLite, the Beam
components on the runner `--beam` names (Beam's DirectRunner by default)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import uuid
from pathlib import Path
from typing import TextIO

from amp_pipeline.components.training.options import RECIPE_FIELDS, TrainOptions
from amp_pipeline.core import names
from amp_pipeline.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, InputError, causes
from amp_pipeline.pipeline.config import (
    RunConfig,
    model_for,
    model_options_for,
    prepared,
    with_data_steps,
)
from amp_pipeline.pipeline.progress import captured_output, write_header
from amp_pipeline.pipeline.run_lock import OutputLock, check_output
from amp_pipeline.pipeline.signals import Interrupted, deferred, interruptible

logger = logging.getLogger(__name__)


def _find_input_error(error: BaseException) -> InputError | None:
    """The InputError behind `error` (TFX may wrap what a component raised)."""
    return next((e for e in causes(error) if isinstance(e, InputError)), None)


def _params(config: RunConfig, data, amp: TrainOptions) -> dict:
    """The parent run's parameters at the start: the run's settings and the shared training
    options (TrainOptions' fields). What the AMP trainer really ran (policy, XLA after a
    fallback, loss scaling) is added when it has run (RunTracker.finish)."""
    shared = {k: v for k, v in amp.to_config().items() if k not in RECIPE_FIELDS}
    shared["tflite_variants"] = ",".join(amp.tflite_variants) or "none"
    return {
        **shared,
        "model": amp.model,
        "model_module": config.model_module or "",
        "policy_requested": config.policy,
        "xla_requested": config.xla,
        "amp_train_steps": config.amp_train_steps or amp.train_steps,
        "data_source": data.source,
        "rows": data.rows,
        "accuracy_tolerance": config.accuracy_tolerance,
        "min_accuracy": config.min_accuracy,
        "min_speedup": config.min_speedup,
        "error_tolerance": config.error_tolerance,
        "min_gain_over_baseline": config.min_gain_over_baseline,
        "task": data.task,
        "parity": config.parity,
        # With {SPAN}: the spans read, e.g. "4,5" (the summary says which were available).
        "spans": ",".join(str(n) for n in data.spans.get("spans", [])) if data.spans else "",
    }


def _track_success(tracker, latest, result: dict, config: RunConfig, tags: dict) -> None:
    """Child runs, report, registry; run_summary.json gets the MLflow ids, then is logged."""
    from amp_pipeline.pipeline import summary
    from amp_pipeline.pipeline.amp_half import TRAINER_AMP, TRAINER_FP32
    from amp_pipeline.pipeline.report import write_report
    from amp_pipeline.pipeline.results import trainer_figures

    output = config.output_dir
    fp32 = trainer_figures(latest.outputs[TRAINER_FP32]["model_run"])
    amp = trainer_figures(latest.outputs[TRAINER_AMP]["model_run"])
    report = write_report(result, fp32, amp, output)
    readiness = output / names.READINESS_JSON
    readiness.write_text(json.dumps(amp.get("readiness"), indent=2) + "\n")
    # The twin that shipped is registered (the AMP twin, tagged rejected, where none did).
    twin = TRAINER_FP32 if result.get("shipped_precision") == "float32" else TRAINER_AMP
    candidate = Path(latest.outputs[twin]["model"].uri) / names.SERVING_MODEL_DIR
    starts = result.get("warm_start") or {}
    tags = {
        **tags,
        **{
            f"warm_start.{twin_name}": (start or {}).get("reason", "")[:250]
            for twin_name, start in starts.items()
        },
        "tfx.run_id": latest.run_id or "",
        **{f"mlmd.execution_id.{n}": str(i) for n, i in latest.execution_ids.items()},
    }
    tracked = tracker.finish(
        result,
        fp32,
        amp,
        artifacts=[*report.values(), candidate / names.DTYPE_REPORT_JSON, readiness],
        decision_files=[output / names.DECISION_JSON, output / names.DECISION_MD],
        model_name=config.model_name,
        saved_model=str(candidate),
        tags=tags,
    )
    result["mlflow"] = {
        "tracking_uri": tracker.tracking_uri,
        "experiment": tracker.experiment,
        "run_id": tracker.run_id,
        "child_run_ids": tracked["children"],
        "registered_model": tracked["registered_model"],
    }
    for item in ((result.get("data") or {}).get("drift") or {}).get("features", []):
        key = "".join(c if c.isalnum() or c in "_-." else "_" for c in item["feature"])
        tracker.client.log_metric(tracker.run_id, f"drift.{key}", item["value"])
    result["report"] = str(report["report"])
    path = summary.write_summary(result, output)
    tracker.client.log_artifact(tracker.run_id, str(path))
    tracker.close()


def track_after_decision(track, tracker, result: dict, output: Path) -> None:
    """Runs `track` (MLflow's child runs, report and registry) once the gate has decided and
    the Pusher has published. A tracking failure then must not turn the run into "failed"
    while the serving folder holds the model it pushed: the decision and its exit code stand,
    and run_summary.json, the table and the parent run (when it can still be written) say
    what was not recorded."""
    from amp_pipeline.pipeline import summary

    try:
        track()
    except Exception as e:  # noqa: BLE001 - the decision stands (a signal is not an Exception)
        first = str(e).splitlines()[0] if str(e) else ""
        error = f"{type(e).__name__}: {first}"
        logger.exception("MLflow tracking failed after the gate decided")
        pushed = result.get("exports", {}).get("saved_model")
        stands = f"; the push stands: {pushed}" if pushed else ""
        result["mlflow"] = {**_mlflow_ids(tracker), "error": error}
        result.setdefault("warnings", []).append(
            f"MLflow tracking failed after the decision ({error}): the decision is "
            f"{result['status']}{stands}; the registry and child runs were not written"
        )
        summary.write_summary(result, output)
        try:
            tracker.fail(f"tracking after the decision: {error}")
        except Exception:  # noqa: BLE001 - the tracking server itself may be what failed
            logger.warning("the MLflow parent run could not be marked FAILED either")


def run(config: RunConfig, console: TextIO) -> dict:
    """Runs the whole pipeline and returns run_summary.json's content (also written to disk).

    One run per output folder at a time (pipeline/run_lock.py); SIGINT and SIGTERM stop it
    cleanly (pipeline/signals.py).

    Raises:
        InputError: bad input, before or during the run (exit code 2).
        RunInterrupted: SIGINT or SIGTERM (exit code 130 or 143).
        RunFailed: anything else (exit code 1).
    """
    output = config.output_dir
    check_output(output)
    with OutputLock(output), interruptible():
        from amp_pipeline.pipeline import summary

        summary.write_summary(summary.running_summary(config), output)
        return _run_locked(config)


def _run_locked(config: RunConfig) -> dict:
    from amp_pipeline.pipeline import summary

    output = config.output_dir
    recipe = tracker = None
    train_bytes = 0
    with captured_output(config.log_path) as (progress, terminal):
        try:
            from amp_pipeline.pipeline import preflight

            config, data = prepared(config)
            config = with_data_steps(config, data)
            from amp_pipeline.components.data.spans import drift as span_drift

            drift = span_drift.compare(data, output)
            span_drift.check(drift, config.drift)
            from amp_pipeline.pipeline import user_model

            module_ref = user_model.check(config.model_module, data)
            # Imported here so that TF's and Beam's start-up noise goes to the log file, and
            # after the data check so that a bad CSV is reported in a second.
            from absl import logging as absl_logging

            from amp_pipeline.components.amp.diagnosis import recipe_probe
            from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware
            from amp_pipeline.components.training import batch_limits
            from amp_pipeline.pipeline.pipeline import twin_options
            from amp_pipeline.pipeline.tracking.tracker import RunTracker, default_tracking_uri
            from amp_pipeline.serving.pusher import clean_partial_pushes

            check_model_fits_data(config, data, module_ref)
            train_bytes = train_split_bytes(data)
            fit_warnings = (
                preflight.check(
                    # A file or folder as given; else (the embedded digits as prepared, a
                    # glob, spans) the folder ExampleGen reads.
                    config.data if config.data and Path(config.data).exists() else data.input_base,
                    output,
                    config.beam.workers,
                    train_bytes=train_bytes,
                )
                if config.beam.runner == "direct"
                else []
            )
            limits_model = model_for_limits(config, data, module_ref)
            batch_limits.check_batch_size(config.train.batch_size, data.rows, limits_model)
            recipe = choose_recipe(detect_hardware(), config.policy, config.xla)
            # The probe says, before training, whether the AMP precision gains here: for the
            # policy the hardware chose and for one the user named (autotune probes itself).
            probe = (
                recipe_probe(limits_model, recipe.policy, config.train.batch_size)
                if config.policy != "autotune"
                else None
            )
            del limits_model
            write_header(terminal, config, data, recipe, probe)
            if line := span_drift.summary_line(drift):
                terminal.write(f"  drift: {line}\n")
            for warning in fit_warnings:
                terminal.write(f"  warning: {warning}\n")
            for removed in clean_partial_pushes(config.serving_dir):
                terminal.write(f"  note: removed {removed}, left by an unfinished push\n")
            terminal.write(f"  full log: {config.log_path}\n")
            tracker = RunTracker(
                config.tracking_uri or default_tracking_uri(output),
                config.experiment,
                artifact_root=None if config.tracking_uri else output / "mlartifacts",
            )
            for stale in tracker.fail_stale_runs(output):
                terminal.write(
                    f"  note: MLflow run {stale} was left RUNNING by a killed run; marked FAILED\n"
                )
            tags = {
                "tfx.pipeline_name": config.pipeline_name,
                "hardware.device": recipe.hardware.device,
                "hardware.name": recipe.hardware.name,
                "hardware.features": ",".join(recipe.hardware.features),
            }
            amp = twin_options(
                config,
                data,
                module_ref,
                recipe.policy,
                recipe.xla,
                recipe.loss_scaling,
                recipe.hardware.device,
            )
            if amp.policy == "autotune":  # winners cached per output folder
                amp = dataclasses.replace(
                    amp, autotune_cache=str(config.output_dir / "autotune_cache.json")
                )
            tracker.start(config.model_name, _params(config, data, amp), tags, output)
            terminal.write(f"  mlflow: {tracker.tracking_uri} run {tracker.run_id}\n")
            absl_logging.set_verbosity(absl_logging.INFO)
            pipeline = local_pipeline(config, data, amp, module_ref)
            progress.total = len(pipeline.components)
            outputs = run_pipeline(pipeline, config.metadata_path)
            result = summary.build_summary(
                outputs.outputs, recipe, dataclasses.asdict(config), data.to_dict(), output
            )
            result["recipe_probe"] = probe
            result["data"]["drift"] = drift
            if data.text_features and data.task != "regression":
                from amp_pipeline.components.gate.text_baseline import for_run

                result["text_baseline"] = for_run(outputs.outputs, data, progress.timings)
            result["timings_s"] = dict(progress.timings)
            result["driver_peak_rss_mb"] = peak_rss_mb()
            result["driver_peak_rss_mb_by_component"] = {
                k: round(v) for k, v in progress.peak_rss_mb.items()
            }
            if result["status"] == "promoted":
                from amp_pipeline.serving.deploy import write_deployment

                paths = write_deployment(config.serving_dir, output / "deploy")
                result["deploy"] = {k: str(v) for k, v in paths.items()}
            track_after_decision(
                lambda: _track_success(tracker, outputs, result, config, tags),
                tracker,
                result,
                output,
            )
        except Interrupted as e:
            with deferred():  # a second Ctrl-C must not cut the clean-up short
                where = f" during {progress.current}" if progress.current else ""
                logger.warning("Run %s%s", e, where)
                stopped = summary.interrupted_summary(e, where, recipe)
                if tracker is not None and tracker.run_id:
                    tracker.kill(f"{e}{where}")
                    stopped["mlflow"] = _mlflow_ids(tracker)
                summary.write_summary(stopped, output)
            raise RunInterrupted(f"{e}{where}", e.exit_code) from None
        except Exception as e:  # noqa: BLE001 - every failure is reported, then re-raised
            from amp_pipeline.pipeline import preflight

            # A full disk first: it may surface inside another error (a module's, a child's).
            input_error = preflight.disk_full(
                e, output, config.data, config.beam.workers, train_bytes
            ) or _find_input_error(e)
            code = EXIT_BAD_INPUT if input_error else EXIT_FAILED
            where = f" in {progress.current}" if progress.current else ""
            logger.exception("Run failed%s", where)
            failure = summary.failure_summary(input_error or e, code, recipe)
            try:  # on a full disk these may fail too: the one line still reaches the user
                if tracker is not None and tracker.run_id:
                    tracker.fail(f"{type(e).__name__}{where}: {e}")
                    failure["mlflow"] = _mlflow_ids(tracker)
                summary.write_summary(failure, output)
            except OSError:
                logger.exception("Could not record the failure")
            if input_error is not None:
                raise input_error from None
            raise RunFailed(f"{type(e).__name__}{where}: {e}", Path(config.log_path)) from e
    return result


def train_split_bytes(data) -> int:
    """The whole input as float32 rows of `x` and the label: what a trainer holds in memory, or
    copies to shuffle it (components/training/datasets.py::in_memory_bytes, from the DataSpec)."""
    from amp_pipeline.components.data.preprocessing import feature_width

    try:
        return int(data.rows) * (feature_width(data) + 1) * 4
    except Exception:  # noqa: BLE001 - an estimate; a module's own preprocessing may not say
        return 0


def check_model_fits_data(config: RunConfig, data, module_ref) -> None:
    """A built-in model that cannot read this input is bad input, said before any work."""
    if module_ref is not None:
        return
    from amp_pipeline.components.models.builtin import NUMBERS_ONLY, id_features

    model = model_for(config, data)
    ids = id_features(data)
    if model in NUMBERS_ONLY and ids:
        raise InputError(
            f"--model {model}: it reads every column of {data.source} as a number, and "
            f"{', '.join(ids)} hold ids (categories, values or tokens) that it would feed to a "
            "dense layer as magnitudes; use --model mlp (ids through embeddings), bert (text) "
            "or dlrm (IDs)"
        )
    if model in ("cnn", "resnet50") and data.image_shape is None:
        raise InputError(
            f"--model {model}: {data.source} is tabular (no image features); "
            "use --model mlp or transformer"
        )
    if model == "bert" and not data.text_features:
        raise InputError(
            f"--model bert: {data.source} has no text column (a string column of "
            "multi-word values); name one with --text-columns"
        )
    if model == "dlrm" and (
        not data.categorical_features or data.text_features or data.bag_features
    ):
        raise InputError(
            f"--model dlrm: {data.source} has "
            + (
                "a text or multi-valued column; dlrm reads numbers and categories only"
                if data.text_features or data.bag_features
                else "no categorical column (an ID column, a string column of more than 16 "
                "values); name one with --categorical-columns"
            )
        )


def local_pipeline(config: RunConfig, data, amp: TrainOptions, module_ref=None):
    """create_pipeline wired for this machine: the data where it is, the output folder as the
    pipeline root and serving base, ML Metadata in SQLite, and an infra validation that is
    never answered from the cache."""
    from amp_pipeline.pipeline.pipeline import create_pipeline

    return create_pipeline(
        config,
        data,
        amp,
        pipeline_root=str(config.pipeline_root),
        data_root=data.input_base,
        data_pattern=data.input_pattern,
        serving_base=str(config.serving_dir),
        train_steps=config.train.train_steps,
        amp_train_steps=config.amp_train_steps,
        accuracy_tolerance=config.accuracy_tolerance,
        model_module=module_ref,
        infra_requested_at=datetime.datetime.now(datetime.timezone.utc).isoformat(),
        metadata_connection_config=metadata_config(config.metadata_path),
        beam_pipeline_args=config.beam.args(),
    )


def model_for_limits(config: RunConfig, data, module_ref):
    """The run's model built once in float32 for the memory estimate of a batch, or None where
    its input width is known only after Transform (a module with its own preprocessing_fn)."""
    if module_ref is not None and module_ref.preprocessing:
        return None
    import keras

    from amp_pipeline.components.data.preprocessing import feature_width, model_spec
    from amp_pipeline.components.models import user_module as model_module
    from amp_pipeline.components.models.builtin import build_from_spec

    spec = model_spec(data, feature_width(data))
    try:
        if module_ref is not None:
            module = model_module.load(module_ref)
            return model_module.build(module_ref, module, spec)
        name = model_for(config, data)
        return build_from_spec(name, spec, **model_options_for(config, name))
    finally:
        keras.backend.clear_session(free_memory=False)


def _mlflow_ids(tracker) -> dict:
    return {
        "tracking_uri": tracker.tracking_uri,
        "experiment": tracker.experiment,
        "run_id": tracker.run_id,
    }


def metadata_config(path: Path):
    from tfx.orchestration import metadata

    return metadata.sqlite_metadata_connection_config(str(path))


def run_pipeline(pipeline, metadata_path: Path):
    """Runs `pipeline` under LocalDagRunner with a run id of its own, and reads back what this
    run (not the newest one in ML Metadata) produced."""
    from tfx.dsl.compiler import compiler
    from tfx.dsl.compiler import constants as compiler_constants
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.portable import runtime_parameter_utils

    from amp_pipeline.pipeline.results import read_run

    ir = compiler.Compiler().compile(pipeline)
    run_id = f"{datetime.datetime.now().isoformat()}-{uuid.uuid4().hex[:8]}"
    runtime_parameter_utils.substitute_runtime_parameter(
        ir, {compiler_constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id}
    )
    try:
        LocalDagRunner().run_with_ir(ir)
    finally:  # the twins' shared shuffled copy of a streamed train split
        from amp_pipeline.components.training.datasets import remove_shared_shuffles

        remove_shared_shuffles(pipeline.pipeline_info.pipeline_root)
    return read_run(metadata_path, pipeline.pipeline_info.pipeline_name, run_id)


def peak_rss_mb() -> float:
    """This process's peak resident set so far (ru_maxrss, kB on Linux)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class RunInterrupted(RuntimeError):
    """SIGINT or SIGTERM stopped the run; `exit_code` is 130 or 143."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class RunFailed(RuntimeError):
    """The pipeline failed for a reason that is not bad input (exit code 1)."""

    def __init__(self, message: str, log_path: Path):
        super().__init__(message)
        self.log_path = log_path
