"""SideBySide: after both twins trained, the AMP speedup measured side by side in one process
(components/speed/measurement.py), for the gate's `min_speedup` rule."""

import json
import logging
import os

from tfx.types.artifact import Artifact
from tfx.types.standard_artifacts import ModelRun

from amp_pipeline.core import names
from amp_pipeline.core.child_process import run_module
from amp_pipeline.core.component_types import InputArtifact, OutputArtifact, Parameter, component

logger = logging.getLogger(__name__)


class SpeedComparison(Artifact):
    """speed.json: the side-by-side throughput ratio of the AMP and float32 models."""

    TYPE_NAME = "amp_pipeline.SpeedComparison"  # KFP v2 needs <namespace>.<Name>


def float32_reason(amp: dict) -> str:
    """Why no precision ratio was measured when the AMP trainer ran float32, in true words:
    autotune's measured choice, or the rule table's reason for this hardware."""
    tuned = (amp.get("autotune") or {}).get("winner")
    same = "the float32 program twice, so no precision ratio"
    if tuned:
        return (
            f"autotune chose float32 ({tuned['key']}: {tuned['reason']}): {same}; the recipe "
            "ratio is the batch and thread gain, not a precision gain"
        )
    return (
        "the AMP trainer ran float32 (the rule table found no faster precision on its "
        f"{amp.get('device') or 'hardware'}, or --policy float32 was asked): {same}"
    )


def compare(fp32_run_dir: str, amp_run_dir: str, out_dir: str, rounds: int) -> dict:
    """Runs the side-by-side measurement in a fresh process and returns speed.json's content.

    Nothing is measured where the AMP trainer ran float32 (the same program twice: the ratio
    would be noise), or where `rounds` is 0 (asked for none).
    """
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(amp_run_dir, names.FIGURES_JSON)) as f:
        amp = json.load(f)
    if amp["policy"] == "float32":
        result = {"skipped": float32_reason(amp)}
    elif rounds < 1:
        result = {
            "skipped": "--speed-rounds 0: no side-by-side timing; the speed rule judges the "
            "trainers' own throughputs (the recipe ratio)"
        }
    else:
        with open(os.path.join(amp_run_dir, names.TRAIN_SPEC_JSON)) as f:
            spec = json.load(f)
        amp_json = os.path.join(out_dir, "amp_recipe.json")
        with open(amp_json, "w") as f:
            json.dump({"spec": spec, "xla": amp["xla"]}, f)
        out_json = os.path.join(out_dir, names.SPEED_JSON)
        args: list[str | int] = [
            os.path.join(fp32_run_dir, names.TRAIN_SPEC_JSON),
            amp_json,
            out_json,
            rounds,
        ]
        log = os.path.join(out_dir, "side_by_side.log")
        proc = run_module("amp_pipeline.components.speed.measurement", args, log)
        if proc.returncode != 0:
            raise RuntimeError(
                f"the side-by-side speed measurement failed (exit {proc.returncode}; log: "
                f"{os.path.join(out_dir, 'side_by_side.log')})"
            )
        with open(out_json) as f:
            result = json.load(f)
    with open(os.path.join(out_dir, names.SPEED_JSON), "w") as f:
        json.dump(result, f, indent=2)
    return result


@component
def SideBySide(  # noqa: N802 - TFX component names are classes
    fp32_run: InputArtifact[ModelRun],
    amp_run: InputArtifact[ModelRun],
    comparison: OutputArtifact[SpeedComparison],
    rounds: Parameter[int] = 7,
) -> None:
    """Writes speed.json into `comparison`."""
    result = compare(fp32_run.uri, amp_run.uri, comparison.uri, rounds)
    ratio = (result.get("ratio") or {}).get("median")
    if ratio is not None:
        comparison.set_float_custom_property("median_ratio", ratio)
