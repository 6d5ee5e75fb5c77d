"""The Trainer's `run_fn` (`amp_pipeline.components.training.trainer.run_fn`): trains in a child
process.

TFX calls run_fn in the pipeline's own process. Training there would leave that process's global
Keras dtype policy set and make the two trainers' peak memory indistinguishable, so run_fn hands
the job to `amp_pipeline.components.training.process` in a fresh Python process and waits for it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from amp_pipeline.components.training.options import TrainOptions, TrainSpec
from amp_pipeline.core import names
from amp_pipeline.core.child_process import run_module
from amp_pipeline.core.errors import EXIT_BAD_INPUT, InputError

logger = logging.getLogger(__name__)


LOG_TAIL_LINES = 60


class TrainingFailed(RuntimeError):
    """The training process failed; the message carries the end of its log."""


class TrainingInputError(InputError):
    """The training process stopped on bad input (the user's model module); one line."""


def resolve_auto(cfg: dict) -> dict:
    """Compiled (Kubeflow/Vertex) pipelines leave the recipe to the node the trainer runs on."""
    if cfg["policy"] != "auto" and cfg["device"] != "auto":
        return cfg
    from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware

    recipe = choose_recipe(detect_hardware())
    cfg = {**cfg, "device": recipe.hardware.device}
    if cfg["policy"] == "auto":
        cfg.update(policy=recipe.policy, xla=recipe.xla, loss_scaling=recipe.loss_scaling)
        logger.info("Precision recipe on this node: %s (%s)", recipe.policy, recipe.reason)
    return cfg


def spec_from_fn_args(fn_args) -> TrainSpec:
    """The job: the Trainer's paths and steps, and the TrainOptions in its custom_config."""
    cfg = resolve_auto(fn_args.custom_config)
    options = dataclasses.replace(
        TrainOptions.from_config(cfg),
        train_steps=int(fn_args.train_steps),  # TrainArgs may be a runtime parameter
        eval_steps=int(fn_args.eval_steps),
    )
    return TrainSpec(
        train_files=tuple(fn_args.train_files),
        eval_files=tuple(fn_args.eval_files),
        transform_output=fn_args.transform_output,
        serving_model_dir=fn_args.serving_model_dir,
        model_run_dir=fn_args.model_run_dir,
        data_spec=cfg["data_spec"],
        base_model=getattr(fn_args, "base_model", None) or "",  # TFX: the production model
        **dataclasses.asdict(options),
    )


def run_in_subprocess(spec: TrainSpec, chief: bool = True) -> dict:
    """Runs `spec` in `python -m amp_pipeline.components.training.process` and returns its figures
    (a worker that is not the chief writes none: {})."""
    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = run_dir / names.TRAIN_SPEC_JSON
    spec_path.write_text(spec.to_json())
    log_path = run_dir / names.TRAIN_LOG
    # The trainer dies with the run (core/child_process.py).
    proc = run_module("amp_pipeline.components.training.process", [spec_path], log_path)
    if proc.returncode != 0:
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        lines = [ln for ln in text.splitlines() if ln.strip()]
        last = lines[-1] if lines else "no output"
        if proc.returncode == EXIT_BAD_INPUT:
            raise TrainingInputError(last)
        # TFX removes a failed execution's outputs, this log with them: its end goes to the
        # run's log, which the error names.
        logger.error(
            "The trainer process failed (exit %d); the end of %s:\n%s",
            proc.returncode,
            log_path,
            "\n".join(lines[-LOG_TAIL_LINES:]),
        )
        raise TrainingFailed(f"{last} [exit {proc.returncode}; its log's end is in the run's log]")
    return json.loads((run_dir / names.FIGURES_JSON).read_text()) if chief else {}


def autotuned(spec: TrainSpec) -> tuple[TrainSpec, dict]:
    """The spec with autotune's winning recipe, and autotune's report
    (components/training/autotune.py).

    It runs here, on the node the trainer runs on, before the training process starts (the
    winner may set TensorFlow's thread count, which a process fixes when it starts)."""
    from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware
    from amp_pipeline.components.training import autotune

    hardware = detect_hardware()
    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    report = autotune.run(
        spec,
        hardware,
        run_dir,
        spec.autotune_budget_s,
        Path(spec.autotune_cache) if spec.autotune_cache else None,
        spec.autotune_refresh,
    )
    rule = choose_recipe(hardware)
    report["rule_table"] = {"policy": rule.policy, "xla": rule.xla, "reason": rule.reason}
    report["scaling"] = autotune.scaling_note(spec, report["winner"])
    (run_dir / autotune.AUTOTUNE_JSON).write_text(json.dumps(report, indent=2))
    logger.info("autotune: %s (%s)", report["winner"]["key"], report["winner"]["reason"])
    return autotune.apply(spec, report["winner"]), report


def for_this_task(spec: TrainSpec) -> tuple[TrainSpec, bool]:
    """The spec as this task of a multi-worker cluster runs it, and whether it is the chief.

    Several workers train one model together: autotune, which measures one node, would let them
    disagree on the recipe, so there the rule table decides for all; and only the chief writes
    (every worker takes part in saving, as MultiWorkerMirroredStrategy requires; the others
    keep their spec, log and copies in a local temporary folder and build no TFLite)."""
    from amp_pipeline.components.training import distribution

    config = distribution.tf_config()
    workers = distribution.cluster_workers(config)
    if workers > 1 and spec.policy == "autotune":
        spec = TrainSpec(**resolve_auto({**dataclasses.asdict(spec), "policy": "auto"}))
        logger.info(
            "autotune skipped: %d workers must share one recipe; the rule table chose %s",
            workers,
            spec.policy,
        )
    if distribution.is_chief(config):
        return spec, True
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="amp-worker-"))
    return (
        dataclasses.replace(
            spec,
            model_run_dir=str(scratch / "run"),
            serving_model_dir=str(scratch / "serving"),
            autotune_cache="",
            tflite_variants=(),
        ),
        False,
    )


def run_fn(fn_args) -> None:
    """TFX Trainer entry point."""
    spec, chief = for_this_task(spec_from_fn_args(fn_args))
    report = None
    if spec.policy == "autotune":
        spec, report = autotuned(spec)
    figures = run_in_subprocess(spec, chief)
    if not chief:
        import shutil

        shutil.rmtree(Path(spec.model_run_dir).parent, ignore_errors=True)
        logger.info("Worker done: the chief writes the model")
        return
    if report is not None:  # the figures carry the choice and its evidence
        figures["autotune"] = report
        (Path(spec.model_run_dir) / names.FIGURES_JSON).write_text(json.dumps(figures, indent=2))
    from amp_pipeline.components.training.fitting import quality_text

    logger.info(
        "Trained %s: %s, %.1f examples/sec",
        spec.policy,
        quality_text(figures),
        figures["examples_per_sec"],
    )
