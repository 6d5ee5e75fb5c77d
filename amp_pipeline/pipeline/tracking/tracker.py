"""MLflow tracking of a pipeline run: one parent run, child runs for the float32 trainer, the AMP
trainer, the export and the gate; the AMP model in the registry.

The default store is a SQLite file under the output folder (no server);
`--tracking-uri` or `MLFLOW_TRACKING_URI` point it at a server.
"""

from __future__ import annotations

import logging
import math
import os
import re
import socket
import subprocess
import time
from pathlib import Path

logger = logging.getLogger(__name__)

CHAMPION = "champion"
PARENT_TAG = "mlflow.parentRunId"
OUTPUT_TAG = "amp.output"
DRIVER_HOST = "amp.driver_host"
DRIVER_PID = "amp.driver_pid"


def _quote(text: str) -> str:
    """A value inside MLflow's single-quoted filter strings."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def default_tracking_uri(output_dir: Path) -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{output_dir / 'mlflow.db'}"


def git_commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _finite_metrics(metrics: dict[str, float | None]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    } | {k: 1.0 if v else 0.0 for k, v in metrics.items() if isinstance(v, bool)}


def speed_metrics(record: dict | None) -> dict:
    """The precision, recipe and memory ratios as metrics (what each was measured at is in
    speed_tags)."""
    if not record:
        return {}
    return {
        "precision_ratio": record["precision"]["ratio"],
        "recipe_ratio": record["recipe"]["ratio"],
        "memory_ratio_recipe": record["memory"]["ratio"],
    }


def speed_tags(record: dict | None) -> dict:
    """What each speed figure was measured at: batch, XLA and threads, and which the gate used."""
    if not record:
        return {}
    from amp_pipeline.components.speed.record import label

    p = record["precision"]
    at = p.get("at")
    return {
        "speed_gate_uses": record["gate_uses"],
        "precision_ratio_at": (
            label({**at, "policy": f"{at['policy']} vs float32"}) if at else p.get("skipped", "")
        )[:5000],
        "recipe_ratio_amp_at": label(record["recipe"]["amp"]),
        "recipe_ratio_fp32_at": label(record["recipe"]["fp32"]),
    }


def readiness_metrics(report: dict | None) -> dict:
    """The readiness check as parent-run metrics."""
    if not report:
        return {}
    return {"readiness_ok": bool(report["ok"]), "readiness_findings": len(report["findings"])}


def readiness_tags(summary: dict) -> dict:
    """The readiness findings, the output fix and why AMP was not faster, as tags."""
    tags = {}
    report = summary.get("readiness")
    if report:
        tags["readiness"] = " | ".join(report["findings"]) or "ready"
    fix = summary.get("output_fix")
    if fix:
        tags["output_fix"] = fix["action"]
    if summary.get("xla_fallback"):
        tags["xla_fallback"] = summary["xla_fallback"]
    if summary.get("why_not_faster"):
        tags["why_not_faster"] = " | ".join(summary["why_not_faster"]["reasons"])
    return tags


ALIAS_ATTEMPTS = 5


def set_alias(client, model_name: str, alias: str, version: str) -> None:
    """Points `alias` at `version`. MLflow's server sets an alias by a read, then an insert:
    two runs promoting the same model at once can both read "no alias" and the second insert
    fails on the alias row's unique key (`sqlite3.IntegrityError: UNIQUE constraint failed:
    registered_model_aliases...`, seen with two concurrent runs on one server). The row exists
    by then, so setting it again updates it: the run that sets it last holds it."""
    from mlflow.exceptions import MlflowException

    for attempt in range(ALIAS_ATTEMPTS):
        try:
            client.set_registered_model_alias(model_name, alias, version)
            return
        except MlflowException as e:
            if "UNIQUE constraint failed" not in str(e) or attempt == ALIAS_ATTEMPTS - 1:
                raise
            logger.warning("alias %r of %s set concurrently; setting it again", alias, model_name)
            time.sleep(0.2 * (attempt + 1))


def metric_key(name: str) -> str:
    """An MLflow metric or tag key from a rule name: `recall[Yes]` -> `recall.Yes`; anything
    MLflow refuses (it takes letters, digits, _ - . : / and spaces) becomes '-'."""
    name = name.replace("[", ".").replace("]", "")
    return re.sub(r"[^A-Za-z0-9_./: -]", "-", name)


class RunTracker:
    """Writes one pipeline run to MLflow. Every run it opens ends FINISHED or FAILED."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None):
        import mlflow
        from mlflow import MlflowClient

        self.tracking_uri = tracking_uri
        self.experiment = experiment
        mlflow.set_tracking_uri(tracking_uri)
        self.client = MlflowClient(tracking_uri)
        self.experiment_id = self._experiment_id(artifact_root)
        self.run_id: str | None = None
        self._open: list[str] = []

    def _experiment_id(self, artifact_root: Path | None) -> str:
        from mlflow.exceptions import MlflowException

        for _ in range(5):  # two runs may create the experiment at the same time
            found = self.client.get_experiment_by_name(self.experiment)
            if found is not None:
                return found.experiment_id
            try:
                location = artifact_root.as_uri() if artifact_root else None
                return self.client.create_experiment(self.experiment, location)
            except MlflowException as e:
                logger.info("create_experiment raced (%s); looking it up again", e)
                time.sleep(0.2)
        raise RuntimeError(f"cannot create or find MLflow experiment {self.experiment!r}")

    def _create(self, name: str, tags: dict[str, str], parent: str | None = None) -> str:
        if parent:
            tags = {**tags, PARENT_TAG: parent}
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=name)
        self._open.append(run.info.run_id)
        return run.info.run_id

    def _end(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status)
        if run_id in self._open:
            self._open.remove(run_id)

    def _log(self, run_id: str, params=None, metrics=None, tags=None, step_metrics=None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        ms = [Metric(k, v, now, 0) for k, v in _finite_metrics(metrics or {}).items()]
        for key, values in (step_metrics or {}).items():
            ms += [
                Metric(key, float(v), now, i)
                for i, v in enumerate(values, start=1)
                if v is not None and math.isfinite(v)
            ]
        ps = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        ts = [RunTag(k, str(v)[:5000]) for k, v in (tags or {}).items()]
        for i in range(0, max(len(ms), 1), 900):  # MLflow takes at most 1000 metrics a batch
            self.client.log_batch(
                run_id,
                metrics=ms[i : i + 900],
                params=ps if i == 0 else [],
                tags=ts if i == 0 else [],
            )

    def start(self, name: str, params: dict, tags: dict, output: Path | None = None) -> str:
        """Opens the parent run (status RUNNING) before the pipeline starts.

        It is tagged with this host, process and output folder, so that a later run in the
        same folder can tell it was left RUNNING by a killed driver (`fail_stale_runs`).
        """
        owner = {DRIVER_HOST: socket.gethostname(), DRIVER_PID: str(os.getpid())}
        if output is not None:
            owner[OUTPUT_TAG] = str(output)
        self.run_id = self._create(name, {**tags, **owner, "git_commit": git_commit()})
        self._log(self.run_id, params=params)
        return self.run_id

    def fail_stale_runs(self, output: Path) -> list[str]:
        """Marks FAILED every run still RUNNING for this host's `output` folder.

        Call it holding the folder's lock: no live run can then be writing there, so a RUNNING
        run there was left by a driver that was killed before it could end it.
        """
        query = (
            "attributes.status = 'RUNNING' and "
            f"tags.`{OUTPUT_TAG}` = '{_quote(str(output))}' and "
            f"tags.`{DRIVER_HOST}` = '{_quote(socket.gethostname())}'"
        )
        stale = []
        for run in self.client.search_runs([self.experiment_id], query, max_results=1000):
            pid = run.data.tags.get(DRIVER_PID, "?")
            note = (
                f"stale: its driver (pid {pid}) stopped without ending the run; marked FAILED "
                "by the next run in the same output folder"
            )
            self.client.set_tag(run.info.run_id, "error", note)
            self.client.set_terminated(run.info.run_id, "FAILED")
            stale.append(run.info.run_id)
        return stale

    def kill(self, reason: str) -> None:
        """Ends every open run as KILLED (SIGINT/SIGTERM), with the reason as a tag."""
        self._end_open("KILLED", reason)

    def fail(self, error: BaseException | str) -> None:
        """Ends every open run as FAILED, with the error message as a tag."""
        self._end_open("FAILED", str(error).splitlines()[0] if str(error) else type(error).__name__)

    def _end_open(self, status: str, reason: str) -> None:
        for run_id in list(reversed(self._open)):
            try:
                self.client.set_tag(run_id, "error", reason[:5000])
                self._end(run_id, status)
            except Exception:  # noqa: BLE001 - keep ending the others
                logger.exception("could not mark MLflow run %s %s", run_id, status)

    def log_trainer(self, name: str, figures: dict, tags: dict) -> str:
        run = self._create(name, {**tags, "policy": figures["policy"]}, parent=self.run_id)
        step = figures["step_time_ms"]
        curve = figures.get("curve", {})
        steps = {"train_loss": curve.get("loss", []), "train_accuracy": curve.get("accuracy", [])}
        scale = figures.get("loss_scale", {})
        if scale.get("history"):
            steps["loss_scale"] = scale["history"]
        self._log(
            run,
            params={
                "policy": figures["policy"],
                "xla": figures.get("xla"),
                "loss_scaling": figures.get("loss_scaling"),
                "train_steps": figures["train_steps"],
                "batch_size": figures["batch_size"],
                "model": figures["model"],
            },
            metrics={
                "accuracy": figures["accuracy"],
                **(figures.get("metrics") or {}),  # regression: mae, rmse, r2 (label units)
                "loss": figures["loss"],
                "examples_per_sec": figures["examples_per_sec"],
                "step_time_p50_ms": step["p50"],
                "step_time_p90_ms": step["p90"],
                "peak_memory_mb": figures["peak_memory_mb"],
                "overflow_steps": scale.get("overflow_steps", 0),
            },
            tags={"memory_method": figures["memory_method"]},
            step_metrics=steps,
        )
        self._end(run)
        return run

    def log_export(self, summary: dict, tags: dict) -> str:
        run = self._create("export", tags, parent=self.run_id)
        metrics = {}
        for name, v in summary["exports"].get("tflite", {}).items():
            metrics[f"tflite_{name}_converted"] = bool(v.get("converted"))
            metrics[f"tflite_{name}_shipped"] = v.get("shipped", v.get("converted")) is not False
            for key in ("size_bytes", "accuracy", "agreement", "max_abs_diff", "latency_ms"):
                if key in v:
                    metrics[f"tflite_{name}_{key}"] = v[key]
        pushed = summary["exports"].get("saved_model")
        if pushed and (Path(pushed) / "tflite").is_dir():  # what was pushed: models and kit
            self.client.log_artifacts(run, str(Path(pushed) / "tflite"), "tflite")
        self._log(run, metrics=metrics)
        self._end(run)
        return run

    def log_autotune(self, tuned: dict, tags: dict) -> str:
        """A child run with one metric set per autotune candidate, and the winner as tags."""
        run = self._create("autotune", tags, parent=self.run_id)
        metrics = {}
        for key, r in tuned["candidates"].items():
            name = re.sub(r"[^A-Za-z0-9_./ -]", "-", key)
            metrics[f"{name}/examples_per_sec"] = r["median"]
            if r.get("spread"):
                metrics[f"{name}/min"], metrics[f"{name}/max"] = r["spread"]
            metrics[f"{name}/dropped"] = bool(r.get("dropped"))
        self._log(
            run,
            metrics=metrics,
            tags={
                "winner": tuned["winner"]["key"],
                "reason": tuned["winner"]["reason"],
                "scaling": tuned.get("scaling") or "",
                "cached": str(tuned.get("cached", False)),
            },
        )
        self._end(run)
        return run

    def log_gate(self, summary: dict, decision_files: list[Path], tags: dict) -> str:
        """A child run with every rule of the shipped twin (the AMP twin's where none shipped)
        as metrics and tags, and both twins' failed rules as tags."""
        gate = summary["gate"]
        run = self._create("gate", {**tags, "decision": summary["status"]}, parent=self.run_id)
        metrics = {"gate_passed": bool(gate["passed"])}
        tags = {
            "failed_rules": ",".join(gate["failed"]) or "none",
            "shipped_precision": summary.get("shipped_precision", "amp"),
        }
        for twin, record in (gate.get("twins") or {}).items():
            tags[f"{twin}_twin.failed_rules"] = ",".join(record["failed"]) or "none"
        for rule in gate["rules"]:
            name = metric_key(rule["name"])
            metrics[f"rule_{name}_passed"] = bool(rule["passed"])
            if rule["value"] is not None:
                metrics[f"rule_{name}_value"] = rule["value"]
            if rule.get("interval"):
                metrics[f"rule_{name}_ci_low"], metrics[f"rule_{name}_ci_high"] = rule["interval"]
            if rule.get("n"):
                metrics[f"rule_{name}_n"] = rule["n"]
            tags[f"rule.{name}.outcome"] = rule.get("outcome", "")
            tags[f"rule.{name}.reason"] = rule["detail"]
        self._log(run, metrics=metrics, tags=tags)
        for f in decision_files:
            self.client.log_artifact(run, str(f))
        self._end(run)
        return run

    def register(self, model_name: str, saved_model: str, summary: dict) -> dict:
        """Logs the served SavedModel as a pyfunc model, with its signature and an input example,
        and registers a version of it."""
        import mlflow

        from amp_pipeline.pipeline.tracking.pyfunc_model import ServingModel, signature

        classes = None if summary.get("task") == "regression" else summary["data"]["classes"]
        model_signature, example = signature(saved_model, classes)
        with mlflow.start_run(run_id=self.run_id):
            info = mlflow.pyfunc.log_model(
                name="model",
                python_model=ServingModel(),
                artifacts={"saved_model": saved_model},
                pip_requirements=["tensorflow==2.16.2", "pandas"],
                # What `mlflow models serve` clients send: the raw columns, with types.
                signature=model_signature,
                input_example=example,
            )
        version = mlflow.register_model(info.model_uri, model_name)
        gate = summary["gate"]
        self.client.set_model_version_tag(model_name, version.version, "gate", summary["status"])
        # Which twin this version is, and the dtype policy it trained under.
        shipped = summary.get("shipped_precision", "amp")
        twin = "float32" if shipped == "float32" else "amp"
        self.client.set_model_version_tag(model_name, version.version, "twin", twin)
        self.client.set_model_version_tag(
            model_name,
            version.version,
            "precision",
            "float32" if twin == "float32" else summary.get("policy", ""),
        )
        if summary["status"] == "promoted":
            set_alias(self.client, model_name, CHAMPION, version.version)
        else:
            self.client.set_model_version_tag(
                model_name, version.version, "failed_rules", ",".join(gate["failed"])
            )
        return {"name": model_name, "version": int(version.version), "model_uri": info.model_uri}

    def finish(
        self,
        summary: dict,
        fp32: dict,
        amp: dict,
        artifacts: list[Path],
        decision_files: list[Path],
        model_name: str,
        saved_model: str | None,
        tags: dict,
    ) -> dict:
        """Child runs, parent metrics, artifacts, registry; then ends the parent FINISHED."""
        assert self.run_id is not None, "finish before start"
        children = {
            "fp32": self.log_trainer("fp32-trainer", fp32, tags),
            "amp": self.log_trainer("amp-trainer", amp, tags),
            "export": self.log_export(summary, tags),
            "gate": self.log_gate(summary, decision_files, tags),
        }
        if summary.get("autotune"):
            children["autotune"] = self.log_autotune(summary["autotune"], tags)
        registered = self.register(model_name, saved_model, summary) if saved_model else None
        self._log(
            self.run_id,
            # What the AMP trainer ran, from its own record (params are written once).
            params={k: summary[k] for k in ("policy", "xla", "loss_scaling") if k in summary},
            metrics={
                "speedup": summary["speedup"],
                "speedup_trainers": summary.get("speedup_trainers"),
                **speed_metrics(summary.get("speed_record")),
                "memory_ratio": summary["memory_ratio"],
                "accuracy_delta": summary["accuracy_delta"],
                "fp32_accuracy": summary["fp32"]["accuracy"],
                "amp_accuracy": summary["amp"]["accuracy"],
                **{
                    f"{twin}_{k}": v
                    for twin in ("fp32", "amp")
                    for k, v in (summary[twin].get("metrics") or {}).items()
                },
                "mae_change": summary.get("mae_change"),
                "text_baseline_accuracy": (summary.get("text_baseline") or {}).get("accuracy"),
                "fp32_examples_per_sec": summary["fp32"]["examples_per_sec"],
                "amp_examples_per_sec": summary["amp"]["examples_per_sec"],
                "fp32_peak_memory_mb": summary["fp32"]["peak_memory_mb"],
                "amp_peak_memory_mb": summary["amp"]["peak_memory_mb"],
                "gate_passed": bool(summary["gate"]["passed"]),
                **readiness_metrics(summary.get("readiness")),
            },
            tags={
                **tags,
                **speed_tags(summary.get("speed_record")),
                "decision": summary["status"],
                "shipped_precision": summary.get("shipped_precision", "amp"),
                "gate_why": summary["gate"].get("why", ""),
                "fp32_math": summary.get("fp32_math", "not recorded"),
                "failed_rules": ",".join(summary["gate"]["failed"]) or "none",
                **readiness_tags(summary),
            },
        )
        for f in artifacts:
            if f.exists():
                self.client.log_artifact(self.run_id, str(f))
        return {"children": children, "registered_model": registered}

    def close(self) -> None:
        if self.run_id is not None:
            self._end(self.run_id)
