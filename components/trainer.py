"""The Trainer's `run_fn` (`components.trainer.run_fn`): trains in a child process.

TFX calls run_fn in the pipeline's own process. Training there would leave that process's global
Keras dtype policy set and make the two trainers' peak memory indistinguishable, so run_fn hands
the job to `components.trainer_process` in a fresh Python process and waits for it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from components.child_process import die_with_parent
from components.trainer_job import TrainSpec
from core import names
from core.errors import EXIT_BAD_INPUT, InputError

logger = logging.getLogger(__name__)


class TrainingFailed(RuntimeError):
    """The training process failed; the message carries the end of its log."""


class TrainingInputError(InputError):
    """The training process stopped on bad input (the user's model module); one line."""


def resolve_auto(cfg: dict) -> dict:
    """Compiled (Kubeflow/Vertex) pipelines leave the recipe to the node the trainer runs on."""
    if cfg["policy"] != "auto" and cfg["device"] != "auto":
        return cfg
    from components.precision import choose_recipe, detect_hardware

    recipe = choose_recipe(detect_hardware())
    cfg = {**cfg, "device": recipe.hardware.device}
    if cfg["policy"] == "auto":
        cfg.update(policy=recipe.policy, xla=recipe.xla, loss_scaling=recipe.loss_scaling)
        logger.info("Precision recipe on this node: %s (%s)", recipe.policy, recipe.reason)
    return cfg


def spec_from_fn_args(fn_args) -> TrainSpec:
    cfg = resolve_auto(fn_args.custom_config)
    return TrainSpec(
        train_files=tuple(fn_args.train_files),
        eval_files=tuple(fn_args.eval_files),
        transform_output=fn_args.transform_output,
        serving_model_dir=fn_args.serving_model_dir,
        model_run_dir=fn_args.model_run_dir,
        data_spec=cfg["data_spec"],
        model=cfg["model"],
        model_options=cfg["model_options"],
        policy=cfg["policy"],
        xla=cfg["xla"],
        loss_scaling=cfg["loss_scaling"],
        device=cfg["device"],
        train_steps=int(fn_args.train_steps),
        eval_steps=int(fn_args.eval_steps),
        batch_size=cfg["batch_size"],
        learning_rate=cfg["learning_rate"],
        seed=cfg["seed"],
        serving_precision=cfg["serving_precision"],
        loss_scale_initial=cfg["loss_scale_initial"],
        loss_scale_growth_interval=cfg["loss_scale_growth_interval"],
        collapse_patience=cfg["collapse_patience"],
        tflite_variants=tuple(cfg["tflite_variants"]),
        tflite_min_agreement=cfg["tflite_min_agreement"],
        tflite_max_int8_drop=cfg["tflite_max_int8_drop"],
        model_module=cfg.get("model_module"),
        seeds=tuple(cfg.get("seeds") or (cfg["seed"],)),
        readiness=bool(cfg.get("readiness")),
        diagnose=bool(cfg.get("diagnose")),
    )


def run_in_subprocess(spec: TrainSpec) -> dict:
    """Runs `spec` in `python -m components.trainer_process` and returns its figures."""
    run_dir = Path(spec.model_run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = run_dir / names.TRAIN_SPEC_JSON
    spec_path.write_text(spec.to_json())
    log_path = run_dir / names.TRAIN_LOG
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with open(log_path, "w") as log:
        # The trainer dies with the run: subprocess.run kills it when the wait is interrupted,
        # and the kernel sends it SIGTERM if the driver is killed outright.
        proc = subprocess.run(
            [sys.executable, "-m", "components.trainer_process", str(spec_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            check=False,
            preexec_fn=die_with_parent,
        )
    if proc.returncode != 0:
        lines = [ln for ln in log_path.read_text().splitlines() if ln.strip()]
        last = lines[-1] if lines else "no output"
        if proc.returncode == EXIT_BAD_INPUT:
            raise TrainingInputError(last)
        raise TrainingFailed(f"{last} [exit {proc.returncode}; log: {log_path}]")
    return json.loads((run_dir / names.FIGURES_JSON).read_text())


def run_fn(fn_args) -> None:
    """TFX Trainer entry point."""
    spec = spec_from_fn_args(fn_args)
    figures = run_in_subprocess(spec)
    logger.info(
        "Trained %s: accuracy %.4f, %.1f examples/sec",
        spec.policy,
        figures["accuracy"],
        figures["examples_per_sec"],
    )
