"""The data components under Beam's DirectRunner with 2 worker processes compute the same
statistics as a single in-memory worker, and no Beam job reaches outside the machine (Beam
2.74's DirectRunner would first try to download its Prism runner: pipeline/beam.py)."""

import logging
import socket

import pytest
from tfx import v1 as tfx

from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.pipeline.beam import BeamProfile
from amp_pipeline.pipeline.local_runner import run_pipeline
from amp_pipeline.pipeline.pipeline import make_example_gen

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


@pytest.fixture
def outbound_refused(monkeypatch):
    """Every connection to an address off this machine is refused, and recorded."""
    attempts: list = []
    connect = socket.socket.connect

    def local_only(sock, address):
        host = address[0] if isinstance(address, tuple) else str(address)
        if isinstance(address, tuple) and host not in ("127.0.0.1", "::1", "localhost"):
            attempts.append(address)
            raise ConnectionRefusedError(f"outbound connection refused by the test: {address}")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)
    return attempts


@pytest.fixture
def runners(monkeypatch):
    """The Beam runner class that ran each job, in order."""
    from apache_beam.runners.direct import direct_runner
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    ran: list[str] = []
    for cls in (fn_runner.FnApiRunner, direct_runner.BundleBasedDirectRunner):
        original = cls.run_pipeline

        def run(self, pipeline, options, original=original, name=cls.__name__):
            ran.append(name)
            return original(self, pipeline, options)

        monkeypatch.setattr(cls, "run_pipeline", run)
    return ran


def test_two_direct_workers_give_the_statistics_of_one(tmp_path, outbound_refused, caplog, runners):
    caplog.set_level(logging.INFO, logger="apache_beam")
    data = prepare(None, "label", tmp_path / "data")
    single = _statistics(tmp_path, data, workers=1)
    multi = _statistics(tmp_path, data, workers=2)
    # No job tried Prism or a download, and nothing was dialled off the machine.
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "PrismRunner" not in said and "Downloading" not in said
    assert outbound_refused == []
    # Every job (ExampleGen's and StatisticsGen's, at 1 and 2 workers) ran on the FnApiRunner.
    assert runners == ["FnApiRunner"] * 4
    assert single["train"]["num_examples"] + single["eval"]["num_examples"] == 1797
    for split in ("train", "eval"):
        assert multi[split]["num_examples"] == single[split]["num_examples"]
        assert set(multi[split]["features"]) == set(single[split]["features"])
        for name, values in single[split]["features"].items():
            assert multi[split]["features"][name] == pytest.approx(values, rel=1e-9), name
