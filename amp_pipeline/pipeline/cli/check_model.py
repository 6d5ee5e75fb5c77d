"""`amp-pipeline check-model`: the AMP readiness check of a model, without training it.

It runs the data half of the pipeline (ExampleGen to Transform, cached in `<output>/tfx`) so that
the probe sees exactly what the trainers would read, then runs the readiness check
(components/amp/readiness.py) on one real batch under the chosen mixed policy.
"""

from __future__ import annotations

import json
from typing import TextIO

from amp_pipeline.core import names
from amp_pipeline.pipeline.config import RunConfig, model_for

REDUCED_POLICIES = ("mixed_bfloat16", "mixed_float16")


def probe_policy(policy: str, auto_policy: str) -> str:
    """The policy to probe: the one asked for, else the hardware's; float32 hardware gets
    mixed_bfloat16 (there is nothing to check in float32)."""
    if policy != "auto":
        return policy
    return auto_policy if auto_policy in REDUCED_POLICIES else "mixed_bfloat16"


def check(config: RunConfig, console: TextIO) -> dict:
    """Runs the check and returns its report (also written to `<output>/readiness.json`).

    Raises:
        InputError: bad data or a broken model module (exit code 2).
    """
    from amp_pipeline.pipeline.data_half import transformed

    with transformed(config, "check-model") as (t, terminal):
        from amp_pipeline.components.amp.precision import choose_recipe, detect_hardware
        from amp_pipeline.components.training.datasets import make_dataset
        from amp_pipeline.components.training.fitting import check_readiness
        from amp_pipeline.components.training.options import TrainSpec
        from amp_pipeline.pipeline.pipeline import twin_options

        hardware = detect_hardware()
        auto = choose_recipe(hardware)
        policy = probe_policy(config.policy, auto.policy)
        recipe = choose_recipe(hardware, policy, config.xla)
        # The GPU recipe (mixed_float16) compiles with XLA; the probe checks that it can.
        xla = config.xla == "on" or (
            config.xla == "auto" and (recipe.xla or policy == "mixed_float16")
        )
        model = model_for(t.config, t.data)
        terminal.write(f"  probing {model} under {policy}, XLA {'on' if xla else 'off'}\n")
        options = twin_options(
            t.config, t.data, t.module_ref, policy, xla, policy == "mixed_float16", hardware.device
        )
        spec = TrainSpec(
            train_files=t.train_files,
            eval_files=(),
            transform_output=t.transform_output,
            serving_model_dir="",
            model_run_dir="",
            data_spec=t.data.to_dict(),
            **options.to_config(),
        )
        dataset = make_dataset(
            spec.train_files, spec.transform_output, spec.batch_size, spec.seed, train=True
        )
        report = check_readiness(spec, dataset)
    report = {
        "model": model,
        "data": t.data.source,
        "hardware": {**hardware.to_dict(), "recipe": auto.policy, "reason": auto.reason},
        **report,
    }
    output = config.output_dir
    (output / names.READINESS_JSON).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


def format_report(report: dict) -> str:
    """What `check-model` prints: the verdict, each finding and the advice."""
    numeric = report["numeric"]
    lines = [
        f"  policy       {report['policy']} (hardware: {report['hardware']['name']}, "
        f"auto picks {report['hardware']['recipe']})",
    ]
    if numeric.get("skipped"):
        lines.append(f"  numeric      skipped: {numeric['skipped']}")
    else:
        layers = numeric["layers"]
        non_finite = [r["path"] for r in layers if not r["finite"]]
        worst = max((r["relative_error"] or 0.0 for r in layers if r["finite"]), default=0.0)
        seen = (
            f"non-finite outputs from {len(non_finite)} of them"
            if non_finite
            else f"largest relative error {worst:.3g} (bound {numeric['bound']})"
        )
        lines.append(
            f"  numeric      {len(layers)} layer outputs on {numeric['batch']} real examples "
            f"vs float32: {seen}"
            + ("" if numeric["ok"] else f"; first bad layer {numeric['first_bad_layer']!r}")
        )
    if report.get("compile"):
        c = report["compile"]
        lines.append(
            f"  xla          one train step {'compiles' if c['ok'] else 'FAILS: ' + c['error']}"
        )
    for advice in report.get("tensor_core_advice", []):
        lines.append(f"  tensor cores {advice}")
    if report.get("float32_layers"):
        lines.append(f"  float32      {', '.join(report['float32_layers'])}")
    verdict = "READY" if report["ok"] else f"NOT READY ({len(report['findings'])} finding(s))"
    lines.append(f"  verdict      {verdict}")
    lines += [f"    - {finding}" for finding in report["findings"]]
    return "\n".join(lines)
