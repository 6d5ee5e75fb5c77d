"""PromotionGate: one decision, with every reason, from the evaluations and the trainers' figures.

It writes a ModelBlessing that the Pusher consumes (and that the production Resolver later finds
as "the latest promoted model"), and a GateDecision artifact holding decision.json and
decision.md.
"""

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

from tfx.types.artifact import Artifact
from tfx.types.standard_artifacts import (
    Examples,
    InfraBlessing,
    Model,
    ModelBlessing,
    ModelEvaluation,
    ModelRun,
)

from amp_pipeline.components.gate import class_metrics, decision_md, device_rules, twins
from amp_pipeline.components.gate import evidence as gate_evidence
from amp_pipeline.components.gate import regression as gate_regression
from amp_pipeline.components.gate import rules as gate_rules
from amp_pipeline.components.gate.evaluator import sample_record
from amp_pipeline.components.gate.majority import majority
from amp_pipeline.components.gate.production_evaluator import has_evaluation
from amp_pipeline.components.speed import record as speed_record
from amp_pipeline.components.speed.side_by_side import SpeedComparison
from amp_pipeline.core import names
from amp_pipeline.core.component_types import InputArtifact, OutputArtifact, Parameter, component
from amp_pipeline.serving import infra_validator as infra_validation

ACCURACY = "sparse_categorical_accuracy"


class GateDecision(Artifact):
    """decision.json and decision.md of one PromotionGate execution."""

    TYPE_NAME = "amp_pipeline.GateDecision"  # KFP v2 needs <namespace>.<Name>


def accuracy_by_slice(evaluation_uri: str) -> dict[str, dict[str, float]]:
    """{slice: {model name: accuracy}} of a TFMA evaluation; the whole split is slice ''
    ({} where there was no production model to evaluate)."""
    import tensorflow_model_analysis as tfma

    out: dict[str, dict[str, float]] = {}
    if not has_evaluation(evaluation_uri):
        return out
    for metrics in tfma.load_metrics(evaluation_uri):
        keys = metrics.slice_key.single_slice_keys
        name = ",".join(
            f"{k.column}={k.bytes_value.decode() if k.HasField('bytes_value') else k.int64_value}"
            for k in keys
        )
        for kv in metrics.metric_keys_and_values:
            if kv.key.name == ACCURACY and not kv.key.is_diff:
                out.setdefault(name, {})[kv.key.model_name] = kv.value.double_value.value
    return out


def tfma_failures(evaluation_uri: str) -> list[str]:
    """TFMA's failed thresholds, one readable line each."""
    import tensorflow_model_analysis as tfma

    lines: list[str] = []
    if not has_evaluation(evaluation_uri):
        return lines
    result = tfma.load_validation_result(evaluation_uri)
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            key = failure.metric_key
            value = failure.metric_value.double_value.value
            threshold = failure.metric_threshold
            change = threshold.change_threshold
            if key.is_diff and change.HasField("relative"):
                bound = change.relative.value
                lines.append(
                    f"{key.name} change {value:+.4g} vs baseline, relative bound {bound:+.4f}"
                )
            elif key.is_diff:
                bound = change.absolute.value
                lines.append(f"{key.name} change {value:+.4f} vs baseline, must be >= {bound:+.4f}")
            else:
                bound = threshold.value_threshold.lower_bound.value
                lines.append(f"{key.name} {value:.4f}, must be >= {bound:.4f}")
    return lines


def classes_changed(classes: dict | None) -> bool:
    return bool(classes and (classes.get("added") or classes.get("dropped")))


def _read_json(folder: str, name: str) -> dict:
    with open(os.path.join(folder, name)) as f:
        return json.load(f)


def _figures(run: Artifact) -> dict:
    return _read_json(run.uri, names.FIGURES_JSON)


def production_serving_dir(production_blessing: Artifact) -> str:
    """The production model's serving SavedModel, as EvaluatorProduction's blessing names it
    ("" while nothing is in production)."""
    if not production_blessing.has_custom_property("baseline_model"):
        return ""
    model = production_blessing.get_string_custom_property("baseline_model")
    return os.path.join(model, names.SERVING_MODEL_DIR) if model else ""


def _measurements_record(m: gate_rules.Measurements) -> dict:
    skip = ("parity", "production_pairs", "production_classes", "speed")
    return {k: v for k, v in m.__dict__.items() if k not in skip}


def classification_decision(
    cfg: gate_rules.GateConfig,
    fp32: dict,
    amp: dict,
    runs: tuple[str, str],
    evaluations: tuple[str, str],
    models: tuple[str, str, str],
    examples_uri: str,
    label: str,
    label_kind: str,
    speed_result: dict,
    extra: tuple[tuple, Callable[[bool], tuple]],
) -> dict:
    """Each twin's classification rules: the AMP twin's on the paired correctness of the twins
    (`runs`: float32's and AMP's ModelRun folders) and of the AMP twin vs the production model,
    the float32 twin's on the rules that do not compare the twins (its own pairs vs
    production); `models`: the AMP and float32 serving folders and the production one ("" for
    none), every pair over every eval example. `extra`: each twin's serving, tokenizer and
    TFLite rules (AMP's, float32's). TFMA's evaluations (`evaluations`: vs float32, vs
    production; on a sample of a large split, components/gate/evaluator.py) give the per-class
    accuracies and their own threshold report, not the accuracies the rules judge. The float32
    twin's serving rules are `extra[1](whether the AMP twin passed)`: served only when it may
    ship."""
    fp32_dir, amp_dir = runs
    parity_uri, _ = evaluations
    amp_serving, fp32_serving, production_dir = models
    fp32_accuracy, amp_accuracy = gate_evidence.shipped_accuracies(fp32_dir, amp_dir)
    baseline = majority(examples_uri, label, label_kind) if label else {"share": None, "class": ""}
    (amp_production, fp32_production), classes = (
        gate_evidence.production_pairs(
            examples_uri, (amp_serving, fp32_serving), production_dir, label, label_kind
        )
        if production_dir
        else ((None, None), None)
    )
    measurements = gate_rules.Measurements(
        fp32_accuracy=fp32_accuracy,
        amp_accuracy=amp_accuracy,
        production_accuracy=amp_production.accuracies()[1] if amp_production else None,
        fp32_examples_per_sec=fp32["examples_per_sec"],
        amp_examples_per_sec=amp["examples_per_sec"],
        amp_policy=amp["policy"],
        majority_share=float(baseline["share"]) if baseline["share"] is not None else None,
        majority_class=baseline["class"] or "",
        parity=gate_evidence.pooled(fp32_dir, amp_dir),
        production_pairs=amp_production,
        production_classes=classes,
        speed=speed_result,
    )
    float32_twin = dataclasses.replace(
        measurements,
        amp_accuracy=fp32_accuracy,
        production_pairs=fp32_production,
        parity=None,
        candidate="float32 twin",
    )
    rare = class_metrics.class_rules(
        gate_evidence.class_evidence(fp32_dir, amp_dir, amp_serving),
        cfg.recall_tolerance,
        cfg.auc_tolerance,
        cfg.strict,
        cfg.class_metrics,
    )
    amp_result = gate_rules.decide(measurements, cfg, extra=(*rare, *extra[0]))
    result: dict[str, Any] = {
        twins.AMP: amp_result,
        twins.FLOAT32: gate_rules.decide_float32(
            float32_twin, cfg, extra=extra[1](amp_result["passed"])
        ),
    }
    result["measurements"] = _measurements_record(measurements)
    result["seeds"] = gate_evidence.seeds_report(
        fp32, amp, gate_evidence.seed_pairs(fp32_dir, amp_dir)
    )
    result["majority_baseline"] = baseline
    result["production_classes"] = classes
    result["per_class_accuracy"] = {k: v for k, v in accuracy_by_slice(parity_uri).items() if k}
    return result


def regression_decision(
    cfg: gate_rules.GateConfig,
    fp32: dict,
    amp: dict,
    runs: tuple[str, str],
    models: tuple[str, str, str],
    examples_uri: str,
    label: str,
    label_mean: float,
    speed_result: dict,
    extra: tuple[tuple, Callable[[bool], tuple]],
) -> dict:
    """Each twin's regression rules (components/gate/regression.py) on the paired absolute
    errors: the twins', each twin's against the mean baseline, and each twin's against the
    production model on the raw eval examples."""
    fp32_dir, amp_dir = runs
    amp_serving, fp32_serving, production_dir = models
    amp_production, fp32_production = (
        gate_evidence.production_errors(
            examples_uri, (amp_serving, fp32_serving), production_dir, label
        )
        if production_dir
        else (None, None)
    )
    measurements = gate_rules.Measurements(  # what min_speedup reads; no accuracies
        fp32_accuracy=None,
        amp_accuracy=None,
        production_accuracy=None,
        fp32_examples_per_sec=fp32["examples_per_sec"],
        amp_examples_per_sec=amp["examples_per_sec"],
        amp_policy=amp["policy"],
        speed=speed_result,
    )
    amp_result = gate_regression.decide(
        gate_evidence.pooled_errors(fp32_dir, amp_dir),
        gate_evidence.versus_mean(amp_dir, label_mean),
        label_mean,
        amp_production,
        measurements,
        cfg,
        extra=extra[0],
        reference=gate_evidence.versus_reference(amp_dir),
    )
    result: dict[str, Any] = {
        twins.AMP: amp_result,
        twins.FLOAT32: gate_regression.decide_float32(
            gate_evidence.versus_mean(fp32_dir, label_mean),
            label_mean,
            fp32_production,
            cfg,
            extra=extra[1](amp_result["passed"]),
            reference=gate_evidence.versus_reference(fp32_dir),
        ),
    }
    result["measurements"] = _measurements_record(measurements)
    result["seeds"] = gate_evidence.seeds_report(
        fp32, amp, gate_evidence.seed_error_pairs(fp32_dir, amp_dir)
    )
    result["regression"] = {
        "fp32": fp32.get("metrics"),
        "amp": amp.get("metrics"),
        "label_mean": label_mean,
        "production_mae": amp_production.reference_mae if amp_production else None,
    }
    result["majority_baseline"] = {"share": None, "class": ""}
    result["per_class_accuracy"] = {}
    return result


def pipeline_outputs(result: dict) -> dict:
    """The decision as values a pipeline can branch on (a KFP v2 `dsl.Condition`, a TFX
    `Cond`): set as custom properties of the blessing and of the decision artifact.

    - `promoted`: 1 when a twin passed and ships (or already is production), else 0;
    - `precision_ratio`: AMP/float32 examples per second, side by side at the AMP recipe where
      measured (else the two trainers' own runs): what the speed rule read;
    - `accuracy_change`: AMP minus float32 eval accuracy (classification);
    - `error_change`: AMP's MAE over float32's, minus 1 (regression).
    A value that was not measured is left out, so that a condition on it fails loudly rather
    than reading a default."""
    record = result.get("speed_record") or {}
    ratio = (record.get(record.get("gate_uses", "precision")) or {}).get("ratio")
    out: dict = {"promoted": int(bool(result["passed"]))}
    if ratio is not None:
        out["precision_ratio"] = float(ratio)
    m = result.get("measurements") or {}
    if m.get("amp_accuracy") is not None and m.get("fp32_accuracy") is not None:
        out["accuracy_change"] = float(m["amp_accuracy"] - m["fp32_accuracy"])
    maes = [
        ((result.get("regression") or {}).get(twin) or {}).get("mae") for twin in ("amp", "fp32")
    ]
    if maes[0] is not None and maes[1] is not None and maes[1] > 0:
        out["error_change"] = float(maes[0] / maes[1] - 1.0)
    return out


def set_outputs(artifact: Artifact, outputs: dict) -> None:
    for key, value in outputs.items():
        if isinstance(value, int):
            artifact.set_int_custom_property(key, value)
        else:
            artifact.set_float_custom_property(key, value)


def write_decision(decision: Artifact, result: dict) -> None:
    os.makedirs(decision.uri, exist_ok=True)
    with open(os.path.join(decision.uri, names.DECISION_JSON), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(decision.uri, names.DECISION_MD), "w") as f:
        f.write(decision_md.to_markdown(result))
    decision.set_string_custom_property("decision", result["decision"])
    set_outputs(decision, pipeline_outputs(result))


def write_blessing(blessing: Artifact, result: dict, shipped: Artifact) -> None:
    """The Pusher reads `blessed` and pushes the model `current_model_id` names (`shipped`: the
    twin that shipped, the AMP twin where none did); LatestBlessedModelStrategy also needs
    `current_model_id`. A candidate that
    already is the production model (a rerun with cached trainers) is not pushed a second
    time: its earlier blessing keeps it the production model."""
    blessed = 1 if result["passed"] and not result["already_in_production"] else 0
    os.makedirs(blessing.uri, exist_ok=True)
    with open(os.path.join(blessing.uri, "BLESSED" if blessed else "NOT_BLESSED"), "w"):
        pass
    blessing.set_int_custom_property("blessed", blessed)
    blessing.set_string_custom_property("shipped_precision", result["shipped_precision"])
    blessing.set_string_custom_property("current_model", shipped.uri)
    blessing.set_int_custom_property("current_model_id", shipped.id)
    # The Pusher leaves these TFLite variants out (serving/pusher.py::left_out_files).
    blessing.set_string_custom_property(
        "tflite_not_shipped", ",".join(result["tflite_not_shipped"])
    )
    set_outputs(blessing, pipeline_outputs(result))


@component
def PromotionGate(  # noqa: N802 - TFX component names are classes
    parity_evaluation: InputArtifact[ModelEvaluation],
    production_evaluation: InputArtifact[ModelEvaluation],
    production_blessing: InputArtifact[ModelBlessing],
    fp32_run: InputArtifact[ModelRun],
    amp_run: InputArtifact[ModelRun],
    model: InputArtifact[Model],
    fp32_model: InputArtifact[Model],
    infra_blessing: InputArtifact[InfraBlessing],
    examples: InputArtifact[Examples],
    speed: InputArtifact[SpeedComparison],
    blessing: OutputArtifact[ModelBlessing],
    decision: OutputArtifact[GateDecision],
    accuracy_tolerance: Parameter[float] = 0.005,
    min_accuracy: Parameter[float] = 0.0,
    min_speedup: Parameter[float] = 1.0,
    label: Parameter[str] = "",
    label_kind: Parameter[str] = "int",
    strict: Parameter[int] = 0,
    task: Parameter[str] = "classification",
    error_tolerance: Parameter[float] = gate_rules.ERROR_TOLERANCE,
    label_mean: Parameter[float] = 0.0,
    require_amp: Parameter[int] = 0,
    recall_tolerance: Parameter[float] = gate_rules.RECALL_TOLERANCE,
    auc_tolerance: Parameter[float] = gate_rules.AUC_TOLERANCE,
    class_metrics_for: Parameter[str] = "rare",
    min_gain_over_baseline: Parameter[float] = -1.0,
    model_name: Parameter[str] = "model",
    latency_budget_ms: Parameter[float] = 500.0,
) -> None:
    """Decides which twin ships (components/gate/twins.py): `model` is the AMP twin (with its
    InfraValidator's blessing), `fp32_model` the float32 twin, served here on the local server
    (`model_name`, `latency_budget_ms`) when it may ship; writes the blessing (naming the twin
    that shipped) and decision.json/decision.md."""
    cfg = gate_rules.GateConfig(
        accuracy_tolerance,
        min_accuracy,
        min_speedup,
        bool(strict),
        error_tolerance,
        recall_tolerance,
        auc_tolerance,
        class_metrics_for,
        # A negative value: not asked for (a Parameter cannot be None on every orchestrator).
        None if min_gain_over_baseline < 0 else min_gain_over_baseline,
    )
    regression = task == "regression"
    fp32, amp = _figures(fp32_run), _figures(amp_run)
    runs = (fp32_run.uri, amp_run.uri)
    amp_serving = os.path.join(model.uri, names.SERVING_MODEL_DIR)
    fp32_serving = os.path.join(fp32_model.uri, names.SERVING_MODEL_DIR)
    models = (amp_serving, fp32_serving, production_serving_dir(production_blessing))
    speed_result = _read_json(speed.uri, names.SPEED_JSON)
    serving = _read_json(infra_blessing.uri, infra_validation.REPORT)
    amp_extra, tokenizer, amp_edge = device_rules.edge_rules(
        amp, amp_serving, serving, examples.uri, cfg, regression, label
    )
    fp32_checks: dict = {"serving": None, "tokenizer": None, "tflite": None}

    def fp32_extra(amp_passed: bool) -> tuple:
        """The float32 twin's serving, tokenizer and TFLite rules. It is served (the local
        server, as the InfraValidator serves the AMP twin) and its tokenizer checked only
        when it may ship: when the AMP twin failed and --require-amp is off."""
        may_ship = not (amp_passed or require_amp)
        if may_ship:
            report = infra_validation.validate_served(
                fp32_serving, examples.uri, model_name, latency_budget_ms
            )
        else:
            why = "the AMP twin passed" if amp_passed else "--require-amp"
            report = {"skipped": f"not served: the float32 twin cannot ship ({why})"}
        rules, fp32_checks["tokenizer"], fp32_checks["tflite"] = device_rules.edge_rules(
            fp32, fp32_serving, report, examples.uri, cfg, regression, label, check_device=may_ship
        )
        fp32_checks["serving"] = report
        return rules

    extra = (amp_extra, fp32_extra)
    if regression:
        # The mean baseline is the train split's mean (Transform's, as the trainers read it
        # back), not the input check's over every row: eval labels never fit it.
        label_mean = (amp.get("label_scale") or {}).get("mean", label_mean)
        judged = regression_decision(
            cfg, fp32, amp, runs, models, examples.uri, label, label_mean, speed_result, extra
        )
    else:
        evaluations = (parity_evaluation.uri, production_evaluation.uri)
        judged = classification_decision(
            cfg, fp32, amp, runs, evaluations, models, examples.uri, label, label_kind,
            speed_result, extra,
        )  # fmt: skip
    result = twins.choose(
        judged.pop(twins.AMP), judged.pop(twins.FLOAT32), bool(require_amp), amp["policy"]
    )
    result.update(judged)
    shipped = {twins.AMP: model, twins.FLOAT32: fp32_model}.get(result["shipped_precision"])
    production_id = (
        production_blessing.get_int_custom_property("baseline_model_id")
        if production_blessing.has_custom_property("baseline_model_id")
        else None
    )
    result.update(
        task=task,
        speed=speed_result,
        speed_record=speed_record.build(fp32, amp, speed_result),
        serving=serving,
        fp32_serving=fp32_checks["serving"],
        tokenizer=tokenizer,
        fp32_tokenizer=fp32_checks["tokenizer"],
        # Each twin's TFLite variants as a device ran them (None: not run, the twin could not ship).
        tflite={twins.AMP: amp_edge, twins.FLOAT32: fp32_checks["tflite"]},
        tflite_not_shipped=device_rules.not_shipped_variants(result),
        already_in_production=shipped is not None and production_id == shipped.id,
        tfma_failures={
            "fp32_baseline": tfma_failures(parity_evaluation.uri),
            # TFMA reads the production model's class ids against this run's label ids: where
            # the classes changed, those ids name other classes, so its reading is not shown.
            "production": []
            if classes_changed(result.get("production_classes"))
            else tfma_failures(production_evaluation.uri),
        },
        tfma_sample={
            "fp32_baseline": sample_record(parity_evaluation.uri),
            "production": sample_record(production_evaluation.uri),
        },
        thresholds={**cfg.__dict__, "require_amp": bool(require_amp)},
    )
    write_decision(decision, result)
    write_blessing(blessing, result, shipped or model)
