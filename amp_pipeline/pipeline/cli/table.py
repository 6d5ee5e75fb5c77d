"""The short table `amp-pipeline run` prints at the end: the twins' figures, the recipe, the
speed record, the gate's rules with their outcome and reason, the exports (the JSON contract it
reads is pipeline/summary.py's)."""

from __future__ import annotations

from amp_pipeline.components.gate.text_baseline import baseline_line
from amp_pipeline.components.speed import record as speed_record
from amp_pipeline.core.fmt import number
from amp_pipeline.pipeline.report import parity_sample, reference_figures


def speed_lines(summary: dict) -> list[str]:
    """The speed record: the precision ratio, the recipe ratio and the memory ratio, each with
    what it was measured at, and which one the gate uses."""
    record = summary.get("speed_record")
    if not record:
        return []
    first, *rest = speed_record.lines(record)
    uses = f"  [gate: {record['gate_uses']} ratio]"
    return [f"  speed        {first}" + (uses if record["gate_uses"] == "precision" else "")] + [
        f"               {line}" + (uses if i == 0 and record["gate_uses"] == "recipe" else "")
        for i, line in enumerate(rest)
    ]


def seeds_lines(summary: dict) -> list[str]:
    """Per seed, with --seeds > 1: each twin's accuracy and the paired difference."""
    seeds = summary.get("seeds") or {}
    if len(seeds.get("pairs", [])) < 2:
        return []
    fp32 = {r["seed"]: r for r in seeds["fp32"]["per_seed"]}
    amp = {r["seed"]: r for r in seeds["amp"]["per_seed"]}
    lines = []
    for pair in seeds["pairs"]:
        s = pair["seed"]
        if "diff_mean" in pair:  # regression: MAE per seed, its change a share of fp32's
            f_mae = (fp32.get(s, {}).get("metrics") or {}).get("mae")
            a_mae = (amp.get(s, {}).get("metrics") or {}).get("mae")
            lines.append(
                f"  seed {s:<6} fp32 MAE {number(f_mae, '.4g')}  amp MAE {number(a_mae, '.4g')}"
                f"  change {pair['delta']:+.2%} (n={pair['n']})"
            )
            continue
        lines.append(
            f"  seed {s:<6} fp32 {number(fp32.get(s, {}).get('accuracy'), '.4f')}  amp "
            f"{number(amp.get(s, {}).get('accuracy'), '.4f')}  change {pair['delta']:+.4f} "
            f"({pair['b']} won, {pair['c']} lost of {pair['n']})"
        )
    d = seeds["delta"]
    # Regression: MAE changes as shares of float32's MAE; classes: accuracy differences.
    share = "diff_mean" in seeds["pairs"][0]
    fmt, sd = ("+.2%", ".2%") if share else ("+.4f", ".4f")
    lines.append(
        f"  seeds        mean change {number(d['mean'], fmt)} (sd {number(d['std'], sd)})"
        + (f", trimmed mean {d['trimmed_mean']:{fmt}}" if d.get("trimmed") else "")
    )
    return lines


def readiness_lines(summary: dict) -> list[str]:
    """The readiness check in the terminal table: its verdict and each finding."""
    lines = []
    fix = summary.get("output_fix")
    if fix and fix.get("action") not in (None, "none"):
        lines.append(f"  output       {fix['detail']}")
    report = summary.get("readiness")
    if not report:
        return lines
    verdict = "ready" if report["ok"] else f"{len(report['findings'])} finding(s)"
    lines.append(f"  readiness    {verdict} under {report['policy']}")
    lines += [f"    - {finding}" for finding in report["findings"]]
    lines += [f"    tensor cores: {advice}" for advice in report.get("tensor_core_advice", [])]
    return lines


def _interval(trainer: dict, summary: dict) -> str:
    """Wilson 95% interval of an accuracy on the eval examples the gate paired."""
    from amp_pipeline.components.gate.stats import proportion_interval

    pairs = (summary.get("seeds") or {}).get("pairs") or []
    n = pairs[0]["n"] if pairs else 0
    if not n or trainer.get("accuracy") is None:
        return "n/a"
    lo, hi = proportion_interval(round(trainer["accuracy"] * n), n)
    return f"{lo:.3f}-{hi:.3f}"


def _steps(trainer: dict) -> str:
    t = trainer["step_time_ms"]
    return f"{number(t['p50'], '.1f')}/{number(t['p90'], '.1f')}"


def spans_and_warm_start_lines(summary: dict) -> list[str]:
    """The spans the model trained and was evaluated on, and where the twins started."""
    from amp_pipeline.components.data.spans.selection import describe
    from amp_pipeline.components.training.warm_start import summary_text as warm_start_text

    lines = []
    if spans := (summary.get("data") or {}).get("spans"):
        lines.append(f"  spans        {describe(spans)}: train and eval split 4:1 from them")
    from amp_pipeline.components.data.spans.drift import summary_line

    if line := summary_line((summary.get("data") or {}).get("drift")):
        lines.append(f"  drift        {line}")
    if line := warm_start_text(summary):
        lines.append(f"  warm start   {line}")
    return lines


def reference_line(summary: dict) -> list[str]:
    """The regression label's reference baseline beside the model, one line."""
    ref = summary.get("reference")
    if not ref:
        return []
    figures, against = reference_figures(ref, "HIGHER")
    return [f"  reference    {ref['kind']}: {figures}{against}"]


def quality_rows(summary: dict) -> list[tuple[str, str, str]]:
    """Accuracy and its interval, or for a regression label MAE, RMSE and R² (label units)."""
    fp32, amp = summary["fp32"], summary["amp"]
    if summary.get("task") == "regression":
        f, a = fp32.get("metrics") or {}, amp.get("metrics") or {}
        return [
            ("MAE (eval)", number(f.get("mae"), ".4g"), number(a.get("mae"), ".4g")),
            ("RMSE (eval)", number(f.get("rmse"), ".4g"), number(a.get("rmse"), ".4g")),
            ("R² (eval)", number(f.get("r2"), ".4f"), number(a.get("r2"), ".4f")),
        ]
    return [
        ("accuracy (eval)", number(fp32["accuracy"], ".4f"), number(amp["accuracy"], ".4f")),
        ("  95% interval", _interval(fp32, summary), _interval(amp, summary)),
    ]


def tflite_line(name: str, v: dict) -> str:
    if not v.get("converted"):
        return f"  tflite       {name:<13} FAILED: {v['error']}"
    if "n" not in v:
        return f"  tflite       {name:<13} {v['size_bytes'] / 1024:8.1f} KiB  not run on LiteRT"
    quality = (
        f"MAE {v['mae']:.4g}  max diff {v['max_abs_diff']:.3g} ({v['max_rel_diff']:.2%})"
        if "mae" in v
        else f"accuracy {v['accuracy']:.4f}  agreement {v['agreement']:.4f}"
    )
    return (
        f"  tflite       {name:<13} {v['size_bytes'] / 1024:8.1f} KiB  {quality}  "
        f"{v['latency_ms']:.3f} ms/row  parity on {parity_sample(v)}"
    )


MARKS = {"skipped": "skip", "pass": "pass", "fail": "FAIL", "unproven": "unproven"}


def rule_lines(rules: list[dict]) -> list[str]:
    return [
        f"    {MARKS.get(r.get('outcome') or '', 'pass' if r['passed'] else 'FAIL'):<8} "
        f"{r['name']:<22} {r['detail']}"
        for r in rules
    ]


def gate_rule_lines(summary: dict) -> list[str]:
    """The AMP twin's rules; the float32 twin's too where AMP did not ship (it was the one
    that could), each under a line that says how the twin fared."""
    gate = summary["gate"]
    both = gate.get("twins")
    if not both:
        return rule_lines(gate["rules"])

    def verdict(twin: dict) -> str:
        return "passed every rule" if twin["passed"] else f"failed {', '.join(twin['failed'])}"

    amp = both["amp"]
    lines = [f"   AMP twin ({summary['policy']}): {verdict(amp)}", *rule_lines(amp["rules"])]
    if gate.get("shipped_precision") != "amp":
        fp32 = both["float32"]
        lines += [
            "   float32 twin (judged without the twin rules, being their reference): "
            + verdict(fp32)
            + (" (not shipped: --require-amp)" if gate.get("require_amp") else ""),
            *rule_lines(fp32["rules"]),
        ]
    return lines


def format_table(summary: dict) -> str:
    """The short table printed at the end of `amp-pipeline run`."""
    fp32, amp = summary["fp32"], summary["amp"]
    rows = [
        ("", "fp32", f"amp ({summary['policy']})"),
        *quality_rows(summary),
        (
            "examples/sec",
            number(fp32["examples_per_sec"], ",.0f"),
            number(amp["examples_per_sec"], ",.0f"),
        ),
        ("step p50/p90 ms", _steps(fp32), _steps(amp)),
        (
            "peak memory MB",
            number(fp32["peak_memory_mb"], ".0f"),
            number(amp["peak_memory_mb"], ".0f"),
        ),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"  {a:<{width}}  {b:>12}  {c:>24}" for a, b, c in rows]
    hw = summary["hardware"]
    gate = summary["gate"]
    verdict = "PROMOTED" if summary["status"] == "promoted" else "REJECTED"
    if gate["passed"] and summary["status"] != "promoted":
        verdict = "REJECTED: nothing was pushed"
    lines += [
        "",
        f"  hardware     {hw['device']}: {hw['name']}",
        f"  recipe       {summary['policy']}, xla={'on' if summary['xla'] else 'off'}, "
        f"loss scaling={'on' if summary['loss_scaling'] else 'off'}; float32 twin's math: "
        f"{summary.get('fp32_math', 'not recorded')}",
        f"  why          {hw['reason']}",
    ]
    if summary.get("xla_fallback"):
        lines.append(f"  xla          fell back to off: {summary['xla_fallback']}")
    lines += spans_and_warm_start_lines(summary)
    lines += reference_line(summary)
    if line := baseline_line(summary):
        lines.append(f"  baseline     {line}")
    for name, c in (summary.get("categories") or {}).items():
        if c.get("capped"):
            lines.append(
                f"  category     {name!r}: more values than the {c['vocabulary']:,} its "
                f"vocabulary keeps; {c.get('train_oov_share', 0):.1%} of train rows share the "
                "out-of-vocabulary id"
            )
    for item in (summary.get("data") or {}).get("tolerated", []):
        lines.append(
            f"  validation   split {item['split']!r}, {item['feature']!r}: {item['finding']}"
        )
    lines += readiness_lines(summary)
    tuned = summary.get("autotune")
    if tuned:
        w = tuned["winner"]
        rule = tuned.get("rule_table") or {}
        lines.append(
            f"  autotune     {w['key']}: {w['reason']}; {tuned.get('scaling')} (rule table: "
            f"{rule.get('policy')}, xla={'on' if rule.get('xla') else 'off'})"
            + (" [cached]" if tuned.get("cached") else "")
        )
    distribution = summary.get("distribution")
    if distribution:
        lines.append(f"  replicas     {distribution['strategy']}: {distribution['note']}")
    lines += speed_lines(summary)
    slow = summary.get("why_not_faster")
    if slow:
        lines += [f"    why not faster: {reason}" for reason in slow["reasons"]]
    lines += seeds_lines(summary)
    agrees = (summary["status"] == "promoted") == gate["passed"]
    lines += [f"  gate         {(gate.get('headline') if agrees else None) or verdict}"]
    lines += gate_rule_lines(summary)
    for name, v in summary["exports"].get("tflite", {}).items():
        lines.append(tflite_line(name, v))
    if summary.get("already_in_production"):
        lines.append(
            f"  pushed       nothing new: this model is already in production at "
            f"{summary['exports']['saved_model']}"
        )
    elif summary["exports"]["saved_model"]:
        lines.append(f"  pushed       {summary['exports']['saved_model']}")
    else:
        lines.append("  pushed       nothing (the serving folder is unchanged)")
    if summary.get("deploy"):
        lines.append(f"  deploy       {summary['deploy']['models_config']} (+ kubernetes/)")
    return "\n".join(lines)
