"""report.md and its PNG plots: throughput and memory fp32 vs AMP, training curves, loss scale."""

from __future__ import annotations

from pathlib import Path

from amp_pipeline.components.gate.text_baseline import baseline_line
from amp_pipeline.core import names
from amp_pipeline.core.fmt import number


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_throughput_memory(summary: dict, path: Path) -> Path:
    plt = _plt()
    fp32, amp = summary["fp32"], summary["amp"]
    labels = ["fp32", f"amp\n({summary['policy']})"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    axes[0].bar(
        labels, [fp32["examples_per_sec"], amp["examples_per_sec"]], color=["#4c72b0", "#dd8452"]
    )
    axes[0].set_title("Throughput (examples/sec)")
    axes[1].bar(
        labels, [fp32["peak_memory_mb"], amp["peak_memory_mb"]], color=["#4c72b0", "#dd8452"]
    )
    axes[1].set_title("Peak memory (MB)")
    fig.suptitle(f"{summary['hardware']['device']}: {summary['hardware']['name']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_training_curves(fp32: dict, amp: dict, path: Path) -> Path:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.6))
    for name, figures, color in (("fp32", fp32, "#4c72b0"), ("amp", amp, "#dd8452")):
        curve = figures.get("curve", {})
        for ax, key in zip(axes, ("loss", "accuracy"), strict=True):
            values = curve.get(key, [])
            ax.plot(
                range(1, len(values) + 1),
                values,
                label=f"{name} ({figures['policy']})",
                color=color,
            )
    for ax, key in zip(axes, ("loss", "accuracy"), strict=True):
        ax.set_xlabel("step")
        ax.set_title(f"training {key} (running mean)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_loss_scale(amp: dict, path: Path) -> Path:
    plt = _plt()
    history = amp.get("loss_scale", {}).get("history", [])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    if history:
        ax.plot(range(1, len(history) + 1), history, color="#dd8452")
        ax.set_yscale("log", base=2)
        ax.set_title(f"loss scale ({amp['loss_scale'].get('overflow_steps', 0)} overflow steps)")
    else:
        ax.text(0.5, 0.5, f"no loss scaling under {amp['policy']}", ha="center", va="center")
        ax.set_axis_off()
    ax.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _twin_name(gate: dict) -> str:
    shipped = gate.get("shipped_precision")
    return (
        "float32 twin (shipped)"
        if shipped == "float32"
        else ("AMP twin (shipped)" if shipped == "amp" else "AMP twin (nothing shipped)")
    )


def gate_section(summary: dict) -> list[str]:
    """report.md's gate: each rule's outcome with its estimate and 95% interval, the seeds and
    the side-by-side speed measurement."""
    from amp_pipeline.components.gate.decision_md import twins_table

    gate = summary["gate"]
    lines = ["## Promotion gate", ""]
    if gate.get("twins"):
        lines += [f"**{gate.get('headline', '')}**", "", *twins_table(gate), ""]
        lines += [f"Rules of the {_twin_name(gate)}:", ""]
    lines += [
        "| rule | outcome | estimate | 95% interval | n | reason |",
        "|---|---|---|---|---|---|",
    ]
    for r in gate["rules"]:
        iv = r.get("interval")
        lines.append(
            f"| {r['name']} | {r.get('outcome') or ('pass' if r['passed'] else 'fail')} | "
            f"{number(r['value'], '.4f')} | "
            f"{f'[{iv[0]:+.4f}, {iv[1]:+.4f}]' if iv else 'n/a'} | {r.get('n') or 'n/a'} | "
            f"{r['detail']} |"
        )
    speed = summary.get("speed") or {}
    record = summary.get("speed_record")
    if record:
        from amp_pipeline.components.speed.record import lines as speed_lines

        lines += ["", f"Speed and memory (the gate uses the {record['gate_uses']} ratio):", ""]
        lines += [f"- {line}" for line in speed_lines(record)]
    if speed.get("method"):
        lines += [
            "",
            f"Side by side: {speed['method']}; ratios "
            f"{', '.join(f'{x:.2f}' for x in speed['ratios'])}.",
        ]
    seeds = summary.get("seeds") or {}
    if len(seeds.get("pairs", [])) > 1:
        lines += ["", "| seed | AMP - float32 | AMP only right | float32 only right | n |"]
        lines += ["|---|---|---|---|---|"]
        for p in seeds["pairs"]:
            lines.append(f"| {p['seed']} | {p['delta']:+.4f} | {p['b']} | {p['c']} | {p['n']} |")
    return [*lines, ""]


def category_lines(categories: dict) -> list[str]:
    """Per category: eval rows whose value the train split did not have (answered from the
    out-of-vocabulary row), and a vocabulary cut at its cap."""
    lines = []
    for name, c in categories.items():
        share = c["eval_unseen_rows"] / c["eval_rows"] if c["eval_rows"] else 0.0
        lines.append(
            f"- Category {name!r}: {c['vocabulary']:,} values in its vocabulary; "
            f"{c['eval_unseen_rows']:,} of {c['eval_rows']:,} eval rows ({share:.1%}) hold one "
            "the train split did not have, answered from the out-of-vocabulary row"
            + (
                f"; it has more values than the vocabulary keeps: its {c['vocabulary']:,} most "
                "frequent are kept, the others share the out-of-vocabulary id, "
                f"{c.get('train_oov_share', 0):.1%} of the train rows read"
                if c.get("capped")
                else ""
            )
        )
    return lines


def data_section(summary: dict) -> list[str]:
    """report.md's data section: notices (excluded columns, imbalance), missing values, classes."""
    data = summary.get("data") or {}
    lines = ["## Data", "", f"- {data.get('rows', 0):,} rows from {data.get('source')}"]
    lines += [f"- {notice}" for notice in data.get("notices", [])]
    lines += [
        f"- Validation, split {t['split']!r}, feature {t['feature']!r}: {t['finding']} "
        "(tolerated, not drift)"
        for t in data.get("tolerated", [])
    ]
    lines += category_lines(summary.get("categories") or {})
    missing = data.get("missing") or {}
    if missing:
        rows = max(data.get("rows") or 1, 1)
        lines += ["", "| column | missing values | share |", "|---|---|---|"]
        for name, count in sorted(missing.items(), key=lambda kv: -kv[1])[:30]:
            lines.append(f"| {name} | {count:,} | {count / rows:.1%} |")
    counts = data.get("class_counts") or {}
    if counts:
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{k}: {v:,}" for k, v in ranked[:20])
        more = f", ... ({len(ranked)} classes)" if len(ranked) > 20 else ""
        lines += ["", f"Examples per class: {shown}{more}"]
    return [*lines, ""]


def readiness_section(summary: dict) -> list[str]:
    """report.md's AMP readiness section: the verdict, each finding, the fixes applied."""
    report = summary.get("readiness")
    fix = summary.get("output_fix") or {}
    if not report and fix.get("action") in (None, "none"):
        return []
    lines = ["## AMP readiness", ""]
    if fix.get("action") not in (None, "none"):
        lines.append(f"- Output: {fix['detail']}")
    if report:
        numeric = report.get("numeric") or {}
        verdict = "ready" if report["ok"] else "**not ready**"
        lines.append(f"- Under {report['policy']}: {verdict}")
        lines += [f"- Finding: {finding}" for finding in report["findings"]]
        if numeric.get("skipped"):
            lines.append(f"- Numeric probe: skipped ({numeric['skipped']})")
        elif numeric:
            cosine = numeric.get("gradient_cosine")
            lines.append(
                f"- Numeric probe: {numeric.get('batch')} real examples, forward and backward "
                f"against float32; relative error bound {numeric.get('bound')}; gradient cosine "
                f"{number(cosine, '.4f')}"
            )
        compiled = report.get("compile")
        if compiled:
            state = "compiles" if compiled["ok"] else f"fails ({compiled['error']})"
            lines.append(f"- XLA: one train step {state} in {compiled['seconds']:.1f} s")
        lines += [f"- Tensor cores: {a}" for a in report.get("tensor_core_advice", [])]
        if report.get("float32_layers"):
            lines.append(
                "- Layers computing in float32 under the mixed policy (no AMP gain there): "
                + ", ".join(report["float32_layers"])
            )
    return [*lines, ""]


def slow_section(summary: dict) -> list[str]:
    """report.md's "why AMP was not faster", with the measured reasons."""
    slow = summary.get("why_not_faster")
    if not slow:
        return []
    return [
        f"## Why AMP was not faster ({number(slow['speedup'], '.2f')}x, below "
        f"{slow['threshold']:.1f}x)",
        "",
        *[f"- {reason}" for reason in slow["reasons"]],
        "",
    ]


def plot_autotune(summary: dict, path: Path) -> Path | None:
    """Throughput of every autotune candidate measured, the winner highlighted."""
    tuned = summary.get("autotune")
    if not tuned:
        return None
    rows = sorted(
        ((k, r["median"]) for k, r in tuned["candidates"].items() if r.get("median")),
        key=lambda kv: kv[1],
    )
    if not rows:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.2))
    winner = tuned["winner"]["key"]
    ax.barh(
        [k for k, _ in rows],
        [v for _, v in rows],
        color=["#dd8452" if k == winner else "#4c72b0" for k, _ in rows],
    )
    ax.set_xlabel("examples/sec (median of the probe's rounds)")
    ax.set_title(f"autotune: {winner}", fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_predicted_vs_actual(summary: dict, path: Path) -> Path | None:
    """A regression label: each twin's predictions (first seed) against the eval labels, with
    the line of perfect answers. None for classes, or when the predictions are not there."""
    import numpy as np

    if summary.get("task") != "regression":
        return None
    files = summary.get("evaluation") or {}
    twins = {}
    for twin in ("fp32", "amp"):
        file = files.get(f"{twin}_predictions")
        if not file or not Path(file).exists():
            return None
        with np.load(file) as f:
            twins[twin] = (f["labels"], f["predictions"][0])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for (twin, (labels, predicted)), color in zip(
        twins.items(), ("#4c72b0", "#dd8452"), strict=False
    ):
        ax.scatter(labels, predicted, s=6, alpha=0.5, color=color, label=twin)
    labels = twins["amp"][0]
    low, high = float(np.min(labels)), float(np.max(labels))
    ax.plot([low, high], [low, high], color="black", linewidth=1, label="perfect")
    label = summary.get("data", {}).get("label", "label")
    ax.set_xlabel(f"actual {label}")
    ax.set_ylabel(f"predicted {label}")
    ax.set_title("predicted vs actual (eval split)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def reference_figures(ref: dict, higher: str) -> tuple[str, str]:
    """('RMSE x, MAE y, R² z', '; the AMP twin's RMSE is n% lower') of a reference baseline
    summary; `higher` is the word for a model worse than the baseline."""
    m, gain = ref["metrics"], ref.get("rmse_gain")
    against = (
        f"; the {ref['model']}'s RMSE is {abs(gain):.1%} {'lower' if gain >= 0 else higher}"
        if gain is not None
        else ""
    )
    return f"RMSE {m['rmse']:.4g}, MAE {m['mae']:.4g}, R² {m['r2']:.4f}", against


def spans_lines(summary: dict) -> list[str]:
    """The spans and the warm start, one line each where they apply."""
    from amp_pipeline.components.data.spans.selection import describe
    from amp_pipeline.components.training.warm_start import summary_text as warm_start_text

    lines = []
    if spans := (summary.get("data") or {}).get("spans"):
        lines.append(
            f"- Spans: {describe(spans)}, split 4:1 into train and eval "
            f"(pattern `{summary['data']['source']}`)"
        )
    if text := warm_start_text(summary):
        lines.append(f"- Warm start: {text}")
    from amp_pipeline.components.data.spans.drift import summary_line

    if line := summary_line((summary.get("data") or {}).get("drift")):
        lines.append(f"- Drift between spans: {line}")
    return lines


def reference_lines(summary: dict) -> list[str]:
    """A regression label's reference baseline on the same eval examples (a figure, not a
    rule, unless --min-gain-over-baseline asks for one)."""
    ref = summary.get("reference")
    if not ref:
        return []
    figures, against = reference_figures(ref, "**higher**")
    return [f"- Reference baseline ({ref['detail']}): {figures} on the same eval examples{against}"]


def quality_line(summary: dict) -> str:
    """Accuracy of both twins, or for regression their MAE, RMSE and R² (label units)."""
    fp32, amp = summary["fp32"], summary["amp"]
    if summary.get("task") == "regression":
        f, a = fp32.get("metrics") or {}, amp.get("metrics") or {}
        return (
            f"- Error (label units): MAE fp32 {number(f.get('mae'), '.4g')}, amp "
            f"{number(a.get('mae'), '.4g')} (change {number(summary.get('mae_change'), '+.2%')} "
            f"of fp32's); RMSE fp32 {number(f.get('rmse'), '.4g')}, amp "
            f"{number(a.get('rmse'), '.4g')}; R² fp32 {number(f.get('r2'), '.4f')}, amp "
            f"{number(a.get('r2'), '.4f')}"
        )
    return (
        f"- Accuracy: fp32 {number(fp32['accuracy'], '.4f')}, amp "
        f"{number(amp['accuracy'], '.4f')} "
        f"(delta {number(summary['accuracy_delta'], '+.4f')})"
    )


def parity_sample(v: dict) -> str:
    """'5,000 raw rows, LiteRT 1 thread (not shipped)': what a variant's parity read, how the
    latency was timed, and whether it ships."""
    threads = v.get("latency_threads")
    on = f", LiteRT {threads} thread{'s' if threads != 1 else ''}" if threads else ""
    shipped = " (not shipped)" if v.get("shipped") is False else ""
    return f"{v.get('n', 0):,} raw rows{on}{shipped}"


def tflite_rows(summary: dict) -> list[str]:
    variants = summary["exports"].get("tflite", {})
    regression = any("mae" in v for v in variants.values())
    quality = "MAE | max rel diff" if regression else "accuracy | agreement"
    lines = [
        f"| TFLite variant | size KiB | {quality} | max abs diff | ms/example | parity on |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v in variants.items():
        if not v.get("converted"):
            lines.append(f"| {name} | failed: {v['error']} | | | | | |")
            continue
        if "n" not in v:
            lines.append(f"| {name} | {v['size_bytes'] / 1024:.1f} | not run on LiteRT | | | |")
            continue
        figures = (
            f"{v['mae']:.4g} | {v['max_rel_diff']:.2%}"
            if regression
            else f"{v['accuracy']:.4f} | {v['agreement']:.4f}"
        )
        lines.append(
            f"| {name} | {v['size_bytes'] / 1024:.1f} | {figures} "
            f"| {v['max_abs_diff']:.2g} | {v['latency_ms']:.3f} | {parity_sample(v)} |"
        )
    return lines


def autotune_section(summary: dict) -> list[str]:
    tuned = summary.get("autotune")
    if not tuned:
        return []
    w, rule = tuned["winner"], tuned.get("rule_table") or {}
    return [
        "## Autotune",
        "",
        f"- Winner: `{w['key']}`: {w['reason']}; {tuned.get('scaling')}",
        f"- The rule table would pick {rule.get('policy')}, XLA "
        f"{'on' if rule.get('xla') else 'off'}",
        *[
            f"- Parity {'ok' if p['ok'] else 'failed'}: {p['policy']}, XLA "
            f"{'on' if p['xla'] else 'off'}: {p['reason']}"
            for p in tuned.get("parity", [])
        ],
        "",
        "![autotune](autotune.png)",
        "",
    ]


def write_report(summary: dict, fp32: dict, amp: dict, out_dir: Path) -> dict[str, Path]:
    """Writes the plots and report.md into `out_dir`; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = {
        "throughput_memory": plot_throughput_memory(summary, out_dir / "throughput_memory.png"),
        "training_curves": plot_training_curves(fp32, amp, out_dir / "training_curves.png"),
        "loss_scale": plot_loss_scale(amp, out_dir / "loss_scale.png"),
    }
    tuned = plot_autotune(summary, out_dir / "autotune.png")
    if tuned is not None:
        plots["autotune"] = tuned
    scatter = plot_predicted_vs_actual(summary, out_dir / "predicted_vs_actual.png")
    if scatter is not None:
        plots["predicted_vs_actual"] = scatter
    gate = summary["gate"]
    lines = [
        f"# amp-pipeline run: {summary['status'].upper()}",
        "",
        f"- Hardware: {summary['hardware']['device']} {summary['hardware']['name']}; "
        f"AMP recipe {summary['policy']} (XLA {'on' if summary['xla'] else 'off'}, "
        f"loss scaling {'on' if summary['loss_scaling'] else 'off'}): "
        f"{summary['hardware']['reason']}",
        f"- Speedup: **{number(summary['speedup'], '.2f')}x** examples/sec "
        f"({summary.get('speedup_kind', 'precision')} ratio); memory "
        f"**{number(summary['memory_ratio'], '.2f')}x** (recipe ratio, "
        f"{summary['fp32']['memory_method']})",
        quality_line(summary),
        *spans_lines(summary),
        *reference_lines(summary),
        *([f"- Text baseline, {line}"] if (line := baseline_line(summary)) else []),
        f"- Gate: {gate.get('headline') or ('passed' if gate['passed'] else 'failed')}",
        f"- Shipped: {summary.get('shipped_precision', 'amp')} twin"
        if summary.get("shipped_precision", "amp") != "none"
        else "- Shipped: neither twin",
        f"- Pushed: {summary['exports']['saved_model'] or 'nothing'}",
        "",
        *gate_section(summary),
        *autotune_section(summary),
        *data_section(summary),
        *readiness_section(summary),
        *slow_section(summary),
        "![throughput and memory](throughput_memory.png)",
        "",
        "![training curves](training_curves.png)",
        "",
        "![loss scale](loss_scale.png)",
        "",
        *(
            ["![predicted vs actual](predicted_vs_actual.png)", ""]
            if "predicted_vs_actual" in plots
            else []
        ),
        *tflite_rows(summary),
    ]
    report = out_dir / names.REPORT_MD
    report.write_text("\n".join(lines) + "\n")
    return {"report": report, **plots}
