"""tf.distribute plumbing: which strategy a trainer picks, who writes, batch and LR scaling."""

from __future__ import annotations

import json

import pytest

from amp_pipeline.benchmarks.speed.bench import loopback_cluster, scaling
from amp_pipeline.components.training import distribution
from amp_pipeline.components.training.distribution import DistributionError, Scaling, resolve
from amp_pipeline.components.training.options import TrainOptions


def cluster(chief: int, workers: int, task: tuple[str, int]) -> dict:
    spec = {"worker": [f"w{i}:1" for i in range(workers)]}
    if chief:
        spec["chief"] = ["c:1"]
    return {"cluster": spec, "task": {"type": task[0], "index": task[1]}}


def test_auto_picks_multiworker_from_tf_config_then_mirrored_for_several_gpus_then_none():
    assert resolve("auto", 0, cluster(1, 1, ("chief", 0))).kind == "multiworker"
    assert resolve("auto", 4, cluster(1, 1, ("worker", 0))).workers == 2
    assert resolve("auto", 4, {}).kind == "mirrored"
    assert resolve("auto", 1, {}).kind == "none"
    assert resolve("auto", 0, {}).kind == "none"
    # A TF_CONFIG of one task is not a cluster to distribute over.
    assert resolve("auto", 0, cluster(0, 1, ("worker", 0))).kind == "none"


def test_explicit_choices_and_what_they_refuse():
    assert resolve("none", 8, cluster(1, 3, ("chief", 0))).kind == "none"
    plan = resolve("mirrored", 0, {}, cpu_replicas=3)
    assert (plan.kind, plan.cpu_replicas) == ("mirrored", 3)
    assert resolve("mirrored", 2, {}, cpu_replicas=3).cpu_replicas == 0  # GPUs win
    with pytest.raises(DistributionError, match="--cpu-replicas"):
        resolve("mirrored", 0, {}, cpu_replicas=1)
    with pytest.raises(DistributionError, match="TF_CONFIG names no cluster"):
        resolve("multiworker", 2, {})
    with pytest.raises(DistributionError, match="--distribution 'ring'"):
        resolve("ring", 0, {})


def test_only_the_chief_writes():
    assert distribution.is_chief({})
    assert distribution.is_chief(cluster(1, 2, ("chief", 0)))
    assert not distribution.is_chief(cluster(1, 2, ("worker", 0)))
    assert distribution.is_chief(cluster(0, 2, ("worker", 0)))  # no chief: worker 0
    assert not distribution.is_chief(cluster(0, 2, ("worker", 1)))


def test_tf_config_errors_name_the_variable():
    assert distribution.tf_config({}) == {}
    with pytest.raises(DistributionError, match="TF_CONFIG is not JSON"):
        distribution.tf_config({"TF_CONFIG": "{cluster"})
    assert distribution.cluster_workers(json.loads(json.dumps(cluster(1, 3, ("chief", 0))))) == 4


def test_global_batch_and_linear_learning_rate():
    s = Scaling(replicas=4, per_replica_batch=64, learning_rate=1e-3)
    assert (s.global_batch, s.scaled_learning_rate) == (256, pytest.approx(4e-3))
    assert "4 replicas x 64 = global batch 256" in s.note(own_optimizer=False)
    assert "0.001 -> 0.004" in s.note(own_optimizer=False)
    assert "keeps its own learning rate" in s.note(own_optimizer=True)
    assert "as given" in Scaling(1, 64, 1e-3).note(False)


def test_train_options_refuse_an_unknown_distribution():
    with pytest.raises(ValueError, match="distribution"):
        TrainOptions(distribution="ring")
    with pytest.raises(ValueError, match="cpu_replicas"):
        TrainOptions(cpu_replicas=0)


def test_cli_takes_the_distribution_flags(cli):
    result = cli("run", "--distribution", "ring", "--output", "/tmp/unused")
    assert result.returncode == 2
    assert "--distribution" in result.stderr


def test_loopback_cluster_gives_each_worker_its_own_port_on_127_0_0_1():
    tasks = loopback_cluster(3)
    addresses = tasks[0]["cluster"]["worker"]
    assert len(set(addresses)) == 3 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert [t["task"]["index"] for t in tasks] == [0, 1, 2]


def test_scaling_efficiency_is_throughput_over_replicas_times_one_replica():
    rows = [
        {
            "model": "mlp",
            "policy": "float32",
            "xla": False,
            "replicas": 1,
            "examples_per_sec": 100.0,
            "replica_mode": "multiworker",
        },
        {
            "model": "mlp",
            "policy": "float32",
            "xla": False,
            "replicas": 2,
            "examples_per_sec": 150.0,
            "replica_mode": "multiworker",
        },
    ]
    (row,) = scaling(rows)
    assert row["speedup"] == pytest.approx(1.5)
    assert row["efficiency"] == pytest.approx(0.75)


def test_the_flags_reach_both_twins_train_options():
    from amp_pipeline.cli import build_parser
    from amp_pipeline.pipeline.cli.flags import run_config

    args = build_parser().parse_args(
        ["run", "--distribution", "mirrored", "--cpu-replicas", "3", "--output", "/tmp/unused"]
    )
    train = run_config(args).train
    assert (train.distribution, train.cpu_replicas) == ("mirrored", 3)


def _spec(**kw):
    from amp_pipeline.components.training.options import TrainSpec

    base = dict(
        train_files=(),
        eval_files=(),
        transform_output="",
        serving_model_dir="/shared/serving",
        model_run_dir="/shared/run",
        data_spec={},
    )
    return TrainSpec(**{**base, **kw})


def test_a_worker_that_is_not_the_chief_writes_only_to_a_local_folder(monkeypatch):
    from amp_pipeline.components.training.trainer import for_this_task

    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster(1, 1, ("worker", 0))))
    spec, chief = for_this_task(_spec())
    assert not chief
    assert not spec.model_run_dir.startswith("/shared")
    assert not spec.serving_model_dir.startswith("/shared")
    assert spec.tflite_variants == ()  # the chief builds the edge models
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster(1, 1, ("chief", 0))))
    spec, chief = for_this_task(_spec())
    assert chief and spec.model_run_dir == "/shared/run"


def test_several_workers_share_the_rule_tables_recipe_instead_of_autotuning(monkeypatch):
    from amp_pipeline.components.amp import precision
    from amp_pipeline.components.training.trainer import for_this_task

    monkeypatch.setattr(
        precision,
        "detect_hardware",
        lambda: precision.Hardware("cpu", "test", features=("avx512_bf16",)),
    )
    monkeypatch.setenv("TF_CONFIG", json.dumps(cluster(1, 1, ("chief", 0))))
    spec, _ = for_this_task(_spec(policy="autotune", device="auto"))
    assert spec.policy == "mixed_bfloat16"
    monkeypatch.delenv("TF_CONFIG")
    spec, _ = for_this_task(_spec(policy="autotune"))
    assert spec.policy == "autotune"  # one machine: autotune as asked
