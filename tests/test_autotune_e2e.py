"""`--policy autotune` end to end on the embedded digits: probed, chosen, trained, gated."""

import dataclasses
import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.e2e
ARGS = (
    "--train-steps",
    "60",
    "--tflite",
    "none",
    "--speed-rounds",
    "0",
    "--accuracy-tolerance",
    "0.05",
)


def test_autotune_run_trains_the_winner_and_a_rerun_uses_the_cache(tmp_path):
    out = tmp_path / "out"
    result = run_cli(
        "run", "--output", str(out), "--policy", "autotune", "--autotune-budget-s", "30", *ARGS
    )
    assert result.returncode in (0, 3), result.stdout + result.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    tuned = summary["autotune"]
    winner = tuned["winner"]["candidate"]
    # The AMP twin trained what autotune chose; the summary says what ran.
    assert summary["policy"] == winner["policy"] and summary["xla"] == winner["xla"]
    assert summary["amp"]["batch_size"] == winner["batch_size"]
    assert summary["fp32"]["batch_size"] == 64  # the baseline stays at the user's batch
    assert tuned["winner"]["reason"]
    assert tuned["rule_table"]["policy"] in ("float32", "mixed_bfloat16")
    measured = [r for r in tuned["candidates"].values() if r["median"]]
    assert len(measured) >= 2
    assert f"autotune     {tuned['winner']['key']}" in result.stdout
    assert "## Autotune" in (out / "report.md").read_text()
    full = json.loads(next((out / "tfx" / "TrainerAmp").rglob("autotune.json")).read_text())
    assert full["winner"] == tuned["winner"] and full["candidates"]
    from mlflow import MlflowClient

    client = MlflowClient(summary["mlflow"]["tracking_uri"])
    children = client.search_runs(
        [client.get_run(summary["mlflow"]["run_id"]).info.experiment_id],
        f"tags.mlflow.parentRunId = '{summary['mlflow']['run_id']}'",
    )
    (tune_run,) = [r for r in children if r.info.run_name == "autotune"]
    assert tune_run.data.tags["winner"] == tuned["winner"]["key"]
    assert any(k.endswith("/examples_per_sec") for k in tune_run.data.metrics)
    # The winner is cached per hardware, model, input and batch: the AMP trainer's own autotune
    # step, run again on this run's Transform output with the run's cache file, does not probe.
    from amp_pipeline.components.training.options import TrainSpec
    from amp_pipeline.components.training.trainer import autotuned

    spec_path = next((out / "tfx" / "TrainerAmp").rglob("train_spec.json"))
    ran = TrainSpec.from_json(spec_path.read_text())
    again = dataclasses.replace(
        ran, policy="autotune", model_run_dir=str(tmp_path / "again"), batch_size=64
    )
    assert again.autotune_cache == str(out / "autotune_cache.json")
    applied, report = autotuned(again)
    assert report["cached"] is True and report["winner"] == tuned["winner"]
    assert not list((tmp_path / "again").glob("autotune_threads*"))  # no probe process ran
    assert applied.batch_size == winner["batch_size"] and applied.policy == winner["policy"]
    # ... and what the summary table prints for a cached choice.
    from amp_pipeline.pipeline.cli.table import format_table
    from amp_pipeline.pipeline.summary import autotune_summary

    assert "[cached]" in format_table({**summary, "autotune": autotune_summary(report)})
