"""The data components under Beam's DirectRunner with 2 worker processes compute the same
statistics as a single in-memory worker."""

import pytest
from tfx import v1 as tfx

from components.data.ingest import prepare
from pipeline.beam import BeamProfile
from pipeline.local_runner import run_pipeline
from pipeline.pipeline import make_example_gen

pytestmark = pytest.mark.e2e


def _statistics(tmp_path, data, workers: int):
    import tensorflow_data_validation as tfdv

    root = tmp_path / f"workers{workers}"
    example_gen = make_example_gen(data, data.input_base, data.input_pattern)
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    pipeline = tfx.dsl.Pipeline(
        pipeline_name="beam-check",
        pipeline_root=str(root / "tfx"),
        components=[example_gen, statistics_gen],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            str(root / "metadata.sqlite")
        ),
        beam_pipeline_args=BeamProfile("direct", workers=workers).args(),
    )
    stats_dir = run_pipeline(pipeline, root / "metadata.sqlite").outputs["StatisticsGen"]
    out = {}
    for split in ("train", "eval"):
        stats = tfdv.load_stats_binary(
            f"{stats_dir['statistics'].uri}/Split-{split}/FeatureStats.pb"
        )
        (dataset,) = stats.datasets
        out[split] = {
            "num_examples": dataset.num_examples,
            "features": {
                f.path.step[0]: (
                    f.num_stats.mean,
                    f.num_stats.std_dev,
                    f.num_stats.min,
                    f.num_stats.max,
                    f.num_stats.num_zeros,
                )
                for f in dataset.features
            },
        }
    return out


def test_two_direct_workers_give_the_statistics_of_one(tmp_path):
    data = prepare(None, "label", tmp_path / "data")
    single = _statistics(tmp_path, data, workers=1)
    multi = _statistics(tmp_path, data, workers=2)
    assert single["train"]["num_examples"] + single["eval"]["num_examples"] == 1797
    for split in ("train", "eval"):
        assert multi[split]["num_examples"] == single[split]["num_examples"]
        assert set(multi[split]["features"]) == set(single[split]["features"])
        for name, values in single[split]["features"].items():
            assert multi[split]["features"][name] == pytest.approx(values, rel=1e-9), name
