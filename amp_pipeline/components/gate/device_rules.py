"""The gate's rules on what ships to devices: each TFLite variant's parity as a device runs it
(raw eval rows through LiteRT against the SavedModel's predict_raw,
components/export/device_parity.py), the shipped tokenizer against Transform (text), and which
variants stay out of the push (an int8 variant that missed its thresholds)."""

from __future__ import annotations

import dataclasses

from amp_pipeline.components.export import device_parity, text_parity
from amp_pipeline.components.gate import evidence as gate_evidence
from amp_pipeline.components.gate import stats as gate_stats
from amp_pipeline.components.gate import twins
from amp_pipeline.components.gate.rules import Rule, from_evidence, serving_rule

NOT_SHIPPED = "not shipped"  # an int8 TFLite variant that missed its thresholds


def variant_rule(name: str, variant: str, r: dict, evidence_rule: Rule) -> Rule:
    """A TFLite variant's rule as the gate applies it: float32 and float16 are the device
    deployment (one that fails, or does not convert, rejects the twin); an int8 variant that
    fails or does not convert is left out of the push and the twin ships without it (outcome
    "not shipped", the reason kept)."""
    if variant not in ("int8", "dynamic_int8") or evidence_rule.passed or evidence_rule.skipped:
        return evidence_rule
    return dataclasses.replace(
        evidence_rule,
        passed=True,
        outcome=NOT_SHIPPED,
        detail=f"not shipped (the twin ships without it): {evidence_rule.detail}",
    )


def unmeasured_rule(name: str, r: dict, threshold: float) -> Rule | None:
    """The rule of a variant that failed to convert or was not run; None when it was measured."""
    if not r.get("converted"):
        return Rule(name, None, threshold, False, f"conversion failed: {r.get('error')}")
    if "n" not in r:
        return Rule(name, None, threshold, True, "not run on LiteRT: this twin cannot ship",
                    skipped=True)  # fmt: skip
    return None


def tflite_rules(report: dict, strict: bool = False) -> tuple[Rule, ...]:
    """One rule per TFLite variant the user asked for: converted, and its parity rule met on
    the evidence of raw eval rows run through LiteRT (components/export/device_parity.py):
    float32/float16 agreement with the SavedModel's predict_raw (Wilson interval against the
    floor), int8 accuracy paired with the SavedModel's (against the allowed drop; one that
    misses it is not shipped, variant_rule).
    """
    thresholds = report.get("thresholds", {})
    rules = []
    for variant, r in report.get("variants", {}).items():
        int8 = variant in ("int8", "dynamic_int8")
        name = f"tflite_{variant}"
        threshold = thresholds.get("max_int8_accuracy_drop" if int8 else "min_agreement", 0)
        missing = unmeasured_rule(name, r, threshold)
        if missing is not None:
            rules.append(variant_rule(name, variant, r, missing))
            continue
        if int8:
            drop = thresholds.get("max_int8_accuracy_drop", 0.0)
            pairs = gate_stats.Paired(
                n=r["n"], b=r["only_variant_right"], c=r["only_reference_right"]
            )
            evidence = gate_stats.parity(pairs, drop, strict, f"{variant} TFLite")
            rule = from_evidence(name, evidence, -drop)
        else:
            floor = thresholds.get("min_agreement", 1.0)
            evidence = gate_stats.rate_at_least(
                r["agreeing"], r["n"], floor, strict, "agreement with the SavedModel"
            )
            rule = from_evidence(name, evidence, floor)
        rule = dataclasses.replace(
            rule, detail=f"{rule.detail}; largest probability difference {r['max_abs_diff']:.2g}"
        )
        rules.append(variant_rule(name, variant, r, rule))
    return tuple(rules)


# The device encodings amp_pipeline.components.export.text_parity.check compares with Transform: the
# rule each gets, what it encodes, its Python reference and the word for one checked value.
DEVICE_ENCODINGS = (("tflite_tokenizer", ("text",), "tokenizer", "tflite/tokenizer.py", "texts"),)


def tokenizer_rule(report: dict | None) -> tuple[Rule, ...]:
    """The device tokenizer gives Transform's token ids on every eval text, and the device
    encoder Transform's category and bag ids on every eval value (deterministic checks: one
    differing example fails its rule). `report` is
    amp_pipeline.components.export.text_parity.check's result; None (no such feature, or no TFLite
    model): no rule."""
    if not report:
        return ()
    rules = []
    for name, kinds, what, where, unit in DEVICE_ENCODINGS:
        features = [f for f in report["features"] if f.get("kind", "text") in kinds]
        if not features:
            continue
        checked = sum(f["checked"] for f in features)
        identical = sum(f["identical"] for f in features)
        if identical == checked:
            detail = (
                f"the device {what} ({where}) gives Transform's ids on all {checked} eval {unit}"
            )
        else:
            bad = next(f for f in features if f["identical"] < f["checked"])
            first = bad["first_difference"]
            detail = (
                f"the device {what} differs from Transform on {checked - identical} of "
                f"{checked} eval {unit}, first in column {bad['feature']!r}: "
                f"{first.get('text', first.get('value'))!r}"
            )
        share = identical / checked if checked else 1.0
        rules.append(Rule(name, share, 1.0, identical == checked, detail, n=checked))
    return tuple(rules)


def edge_rules(
    figures: dict,
    serving_dir: str,
    serving: dict,
    examples_uri: str,
    cfg,
    regression: bool,
    label: str,
    check_device: bool = True,
) -> tuple:
    """One twin's rules on what it ships: each TFLite variant's parity as a device runs it (raw
    eval rows through LiteRT against predict_raw: components/export/device_parity.py), the
    device tokenizer (text), and the infra validation of its SavedModel. A twin that cannot
    ship (`check_device` off) is not run on LiteRT: its variants read as not measured.
    Returns (rules, the tokenizer check, the TFLite report)."""

    trainer_report = figures.get("tflite") or {}
    tokenizer = edge = None
    if check_device:
        examples = gate_evidence.raw_eval_examples(examples_uri, text_parity.sample_size(figures))
        tokenizer = text_parity.check(serving_dir, examples)
        edge = device_parity.check(serving_dir, examples, label, trainer_report)
    from amp_pipeline.components.gate import regression as gate_regression

    rules_of = gate_regression.tflite_rules if regression else tflite_rules
    return (
        (
            *rules_of(edge if edge is not None else trainer_report, cfg.strict),
            *tokenizer_rule(tokenizer),
            serving_rule(serving),
        ),
        tokenizer,
        edge,
    )


def not_shipped_variants(result: dict) -> list[str]:
    """The shipped twin's TFLite variants whose rule says not shipped (an int8 variant that
    missed its thresholds: the twin ships without it)."""
    shipped = result.get("shipped_precision")
    twin = (
        (result.get("twins") or {}).get(shipped) if shipped in (twins.AMP, twins.FLOAT32) else None
    )
    rules = (twin or result).get("rules", [])
    return sorted(
        r["name"].removeprefix("tflite_") for r in rules
        if r["name"].startswith("tflite_") and r.get("outcome") == NOT_SHIPPED
    )  # fmt: skip
