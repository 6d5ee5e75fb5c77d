"""Compiled Kubeflow/Vertex pipelines parse with kfp's own protos and match the local DAG."""

import json
import re
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from amp_pipeline.components.amp.precision import Hardware, choose_recipe
from amp_pipeline.components.data.ingest import prepare
from amp_pipeline.core.errors import InputError
from amp_pipeline.kubeflow.target import ClusterTarget
from amp_pipeline.pipeline.beam import BeamProfile
from amp_pipeline.pipeline.config import RunConfig
from tests.conftest import ROOT, run_cli

IMAGE = "europe-docker.pkg.dev/acme/ml/amp-pipeline:1.0"
NODES = {
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "AnomalyCheck",
    "Transform",
    "TrainerFp32",
    "TrainerAmp",
    "Evaluator",
    "EvaluatorProduction",
    "InfraValidator",
    "SideBySide",
    "PromotionGate",
    "Pusher",
}


def local_dag(tmp_path) -> dict[str, set[str]]:
    """Each node's upstream nodes in the pipeline the local runner runs."""
    from amp_pipeline.pipeline.local_runner import local_pipeline
    from amp_pipeline.pipeline.pipeline import twin_options

    config = RunConfig(output=str(tmp_path / "out"), model_name="digits")
    data = prepare(None, "label", tmp_path / "data")
    recipe = choose_recipe(Hardware("cpu", "test"))
    amp = twin_options(config, data, None, recipe.policy, recipe.xla, False, "cpu")
    pipeline = local_pipeline(config, data, amp)
    return {c.id: {u.id for u in c.upstream_nodes} for c in pipeline.components}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compiled")
    out = {}
    for target, name in (("vertex", "job.json"), ("kubeflow", "pipeline.yaml")):
        result = run_cli(
            "compile",
            "--target",
            target,
            "--image",
            IMAGE,
            "--pipeline-root",
            "gs://acme/root",
            "--output",
            str(tmp / name),
            "--train-steps",
            "123",
            *(
                ["--accelerator-count", "2", "--accelerator", "nvidia.com/gpu"]
                if target == "kubeflow"
                else ["--gpus-per-replica", "4", "--trainer-replicas", "2"]
            ),
        )
        assert result.returncode == 0, result.stderr
        out[target] = tmp / name
    return out


def _spec(path: Path) -> pipeline_spec_pb2.PipelineSpec:
    if path.suffix == ".json":
        raw = json.loads(path.read_text())["pipelineSpec"]
    else:
        raw = yaml.safe_load(path.read_text())
    return json_format.ParseDict(raw, pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=True)


@pytest.mark.e2e
@pytest.mark.parametrize("target", ["vertex", "kubeflow"])
def test_compiled_pipeline_has_every_component_image_parameters_and_dag(target, compiled, tmp_path):
    spec = _spec(compiled[target])
    tasks = spec.root.dag.tasks
    assert NODES <= set(tasks)
    # Every container step runs the project's image.
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    containers = {k: v["container"] for k, v in executors.items() if "container" in v}
    assert {k.removesuffix("_executor") for k in containers} == NODES
    assert {c["image"] for c in containers.values()} == {IMAGE}
    # Runtime parameters with their defaults.
    params = spec.root.input_definitions.parameters
    assert {"data_root", "train_args", "accuracy_tolerance"} <= set(params)
    assert params["data_root"].default_value.string_value == "gs://acme/root/data"
    assert json.loads(params["train_args"].default_value.string_value) == {"num_steps": 123}
    assert params["accuracy_tolerance"].default_value.number_value == 0.005
    # The DAG is the local pipeline's (the production resolver compiles to resolver tasks).
    local = local_dag(tmp_path)
    for node in NODES:
        deps = {d.split("-model")[0] for d in tasks[node].dependent_tasks}
        assert deps == local[node], node


@pytest.mark.e2e
def test_kubeflow_trainers_request_gpus(compiled):
    executors = json_format.MessageToDict(_spec(compiled["kubeflow"]).deployment_spec)["executors"]
    for trainer in ("TrainerFp32", "TrainerAmp"):
        resources = executors[f"{trainer}_executor"]["container"]["resources"]
        assert resources["accelerator"] == {"type": "nvidia.com/gpu", "count": "2"}
    assert "resources" not in executors["Transform_executor"]["container"]


@pytest.mark.e2e
def test_vertex_trainers_use_the_vertex_training_extension_on_the_accelerator(compiled):
    spec = _spec(compiled["vertex"])
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    for trainer in ("TrainerFp32", "TrainerAmp"):
        args = executors[f"{trainer}_executor"]["container"]["args"]
        assert "tfx.extensions.google_cloud_ai_platform.trainer.executor.GenericExecutor" in args
        config = tasks_param(spec, trainer, "custom_config")
        # --trainer-replicas 2 --gpus-per-replica 4: a chief and one worker, 4 GPUs each.
        chief, workers = config["ai_platform_training_args"]["worker_pool_specs"]
        assert (chief["replica_count"], workers["replica_count"]) == (1, 1)
        for pool in (chief, workers):
            assert pool["machine_spec"]["accelerator_type"] == "NVIDIA_TESLA_T4"
            assert pool["machine_spec"]["accelerator_count"] == 4
            assert pool["container_spec"]["image_uri"] == IMAGE
        # The trainers pick their strategy from what Vertex gives them (TF_CONFIG, GPUs).
        assert config["distribution"] == "auto"
        assert config["ai_platform_enable_vertex"] is True
        assert config["policy"] in ("auto", "float32")  # decided on the GPU node


@pytest.mark.e2e
def test_the_speed_measurement_runs_on_the_trainers_accelerator(compiled):
    """The gate's precision ratio is timed on the trainers' hardware, not on a CPU pod."""
    kubeflow = json_format.MessageToDict(_spec(compiled["kubeflow"]).deployment_spec)["executors"]
    trainer = kubeflow["TrainerAmp_executor"]["container"]["resources"]
    side = kubeflow["SideBySide_executor"]["container"]["resources"]
    assert side["accelerator"] == trainer["accelerator"] == {"type": "nvidia.com/gpu", "count": "2"}
    vertex_spec = _spec(compiled["vertex"])
    vertex = json_format.MessageToDict(vertex_spec.deployment_spec)["executors"]
    side = vertex["SideBySide_executor"]["container"]["resources"]
    pool = tasks_param(vertex_spec, "TrainerAmp", "custom_config")["ai_platform_training_args"][
        "worker_pool_specs"
    ][0]["machine_spec"]
    # One trainer replica's accelerators, on a machine the size of the trainers' n1-standard-8.
    assert side["accelerator"] == {
        "type": pool["accelerator_type"],
        "count": str(pool["accelerator_count"]),
    }
    assert pool["machine_type"] == "n1-standard-8"
    assert (side["cpuLimit"], side["memoryLimit"]) == (8.0, 30.0)
    # Nothing else asks for an accelerator.
    assert "resources" not in vertex["Transform_executor"]["container"]
    assert "resources" not in vertex["PromotionGate_executor"]["container"]


def test_machine_sizes_come_from_the_machine_type():
    from amp_pipeline.kubeflow.runner import machine_resources

    assert machine_resources("n1-standard-8") == (8, 30.0)
    assert machine_resources("n2-highmem-16") == (16, 128.0)
    assert machine_resources("a2-highgpu-1g") is None


def tasks_param(spec, task: str, name: str) -> dict:
    value = spec.root.dag.tasks[task].inputs.parameters[name]
    return json.loads(value.runtime_value.constant.string_value)


@pytest.mark.e2e
def test_kubeflow_yaml_loads_with_kfp(compiled):
    from kfp import components

    loaded = components.load_component_from_file(str(compiled["kubeflow"]))
    assert loaded.name == "amp-pipeline-digits"
    assert {"data_root", "train_args", "accuracy_tolerance"} <= set(loaded.component_spec.inputs)


@pytest.mark.e2e
def test_dry_run_submission_needs_no_credentials(compiled, tmp_path):
    env_free = run_cli(
        "submit",
        "--job",
        str(compiled["vertex"]),
        "--project",
        "acme",
        "--region",
        "europe-west4",
        "--param",
        'train_args={"num_steps": 7}',
        "--dry-run",
    )
    assert env_free.returncode == 0, env_free.stderr
    assert "projects/acme/locations/europe-west4" in env_free.stdout
    assert '"train_args": "{\\"num_steps\\": 7}"' in env_free.stdout
    bad = run_cli(
        "submit",
        "--job",
        str(compiled["vertex"]),
        "--project",
        "acme",
        "--region",
        "r",
        "--param",
        "epochs=3",
        "--dry-run",
    )
    assert bad.returncode == 2 and "--param epochs: not a pipeline parameter" in bad.stderr


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            BeamProfile("dataflow", project="p"),
            "--beam dataflow needs --beam-region, --beam-temp-location",
        ),
        (BeamProfile("flink"), "--beam flink needs --beam-job-endpoint"),
        (BeamProfile("spark"), "--beam spark needs --beam-job-endpoint"),
    ],
)
def test_beam_profiles_name_the_missing_flag(profile, message):
    with pytest.raises(InputError, match=message):
        profile.args()


def test_beam_profile_arguments():
    from amp_pipeline.pipeline.beam import DIRECT_NO_PRISM, DIRECT_NO_STAGING

    assert BeamProfile("direct", workers=2).args() == [
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
        *DIRECT_NO_STAGING,
        *DIRECT_NO_PRISM,
    ]
    assert BeamProfile("dataflow", project="p", region="r", temp_location="gs://t").args() == [
        "--runner=DataflowRunner",
        "--project=p",
        "--region=r",
        "--temp_location=gs://t",
    ]
    assert "--job_endpoint=js:8099" in BeamProfile("spark", job_endpoint="js:8099").args()
    assert "--flink_master=fm:8081" in BeamProfile("flink", job_endpoint="fm:8081").args()


def test_deployment_validation():
    with pytest.raises(ValueError, match="Received: target='aws'"):
        ClusterTarget("aws", "img", "gs://r", "gs://d")


@pytest.mark.e2e
def test_compiled_spec_imports_the_users_model_module_from_the_image(tmp_path):
    context = tmp_path / "image-context"
    out = tmp_path / "job.json"
    result = run_cli(
        "compile",
        "--target",
        "vertex",
        "--image",
        IMAGE,
        "--pipeline-root",
        "gs://acme/root",
        "--output",
        str(out),
        "--model-module",
        str(Path(__file__).parent.parent / "examples" / "own_preprocessing.py"),
        "--image-context",
        str(context),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the spec imports amp_pipeline.user_models.own_preprocessing" in result.stdout
    # The module lands where kubeflow/Dockerfile copies it into the image ...
    copied = context / "amp_pipeline" / "user_models" / "own_preprocessing.py"
    assert copied.read_text() == (ROOT / "examples" / "own_preprocessing.py").read_text()
    dockerfile = (Path(__file__).parent.parent / "kubeflow" / "Dockerfile").read_text()
    assert "COPY amp_pipeline/ amp_pipeline/" in dockerfile
    # ... and both trainers and Transform name it by import path, never by a local file.
    spec = _spec(out)
    for trainer in ("TrainerFp32", "TrainerAmp"):
        config = tasks_param(spec, trainer, "custom_config")
        assert config["model_module"]["ref"] == "amp_pipeline.user_models.own_preprocessing"
        assert config["model_module"]["preprocessing"] is True
    transform = tasks_param(spec, "Transform", "custom_config")
    assert transform["model_module"]["ref"] == "amp_pipeline.user_models.own_preprocessing"
    assert transform["custom_preprocessing"] is True
    assert str(tmp_path) not in out.read_text() and "examples/" not in out.read_text()


def test_several_trainer_replicas_need_vertex(tmp_path):
    result = run_cli(
        "compile",
        "--target",
        "kubeflow",
        "--image",
        IMAGE,
        "--pipeline-root",
        "gs://acme/root",
        "--output",
        str(tmp_path / "p.yaml"),
        "--trainer-replicas",
        "2",
    )
    assert result.returncode == 2
    assert "--trainer-replicas 2" in result.stderr and "--target vertex" in result.stderr
    assert not (tmp_path / "p.yaml").exists()


def test_vertex_pools_for_one_replica_are_the_chief_alone():
    from amp_pipeline.kubeflow.runner import worker_pools
    from amp_pipeline.kubeflow.target import ClusterTarget

    target = ClusterTarget("vertex", IMAGE, "gs://r", "gs://d", trainer_replicas=1)
    assert [p["replica_count"] for p in worker_pools(target, {})] == [1]
    target = ClusterTarget("vertex", IMAGE, "gs://r", "gs://d", trainer_replicas=4)
    assert [p["replica_count"] for p in worker_pools(target, {})] == [1, 3]


def test_the_direct_runner_does_not_make_tfx_package_itself_per_component(tmp_path, monkeypatch):
    """Without a dependency flag, TFX's Beam executors copy its install (49 MB) into a new
    temporary folder and build an sdist there, never deleted: five per run filled a 252 GB disk
    in a day of test runs. With the direct runner's arguments it adds nothing and builds
    nothing."""
    import tempfile

    from tfx.utils import dependency_utils

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    args = BeamProfile("direct").args()
    assert dependency_utils.make_beam_dependency_flags(args) == args
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_schedules_are_built_offline_for_vertex_and_kubeflow(compiled):
    from google.cloud.aiplatform_v1.types import schedule as gca_schedule

    vertex = run_cli(
        "submit", "--job", str(compiled["vertex"]), "--project", "acme", "--region",
        "europe-west4", "--schedule", "TZ=Europe/Paris 0 3 * * 1", "--dry-run",
    )  # fmt: skip
    assert vertex.returncode == 0, vertex.stderr
    text = vertex.stdout.split("\n", 1)[1]
    assert vertex.stdout.startswith("dry run: would create a Vertex Schedule in projects/acme/")
    body = json.loads(text)
    assert body["cron"] == "TZ=Europe/Paris 0 3 * * 1" and body["maxConcurrentRunCount"] == "1"
    job = body["createPipelineJobRequest"]
    assert job["parent"] == "projects/acme/locations/europe-west4"
    assert "pipelineSpec" in job["pipelineJob"]
    json_format.ParseDict(body, gca_schedule.Schedule()._pb)  # the schedules API's own type
    kubeflow = run_cli(
        "submit", "--target", "kubeflow", "--job", str(compiled["kubeflow"]), "--schedule",
        "0 3 1 * *", "--param", 'train_args={"num_steps": 9}', "--dry-run",
    )  # fmt: skip
    assert kubeflow.returncode == 0, kubeflow.stderr
    run = json.loads(kubeflow.stdout.split("\n", 1)[1])
    assert run["trigger"]["cron_schedule"]["cron"] == "0 0 3 1 * *"  # KFP's seconds field
    assert run["max_concurrency"] == "1" and run["mode"] == "ENABLE" and run["no_catchup"]
    assert run["runtime_config"]["parameters"] == {"train_args": '{"num_steps": 9}'}
    assert run["pipeline_spec"]["root"]["dag"]["tasks"]


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 3 * *", "expected 5 fields"),
        ("0 3 * * MON-FRI", ""),
        ("*/15 * * * *", ""),
        ("0 3 1,15 * *", ""),
        ("60 * * * *", "minute 60 is outside 0-59"),
        ("0 3 ? * *", "day of month field '?' is not cron syntax"),
        ("0 25 * * *", "--schedule '0 25 * * *': hour 25 is outside 0-23"),
    ],
)
def test_cron_is_checked_field_by_field(cron, message):
    from amp_pipeline.kubeflow.submit import check_cron

    if not message:
        assert check_cron(cron) == cron
    else:
        with pytest.raises(InputError, match=re.escape(message)):
            check_cron(cron)


def test_a_compiled_pipeline_on_spans_reads_the_newest_span_when_each_run_starts(tmp_path):
    from amp_pipeline.kubeflow.cli import cluster_spans
    from amp_pipeline.pipeline.pipeline import make_example_gen

    for span in (1, 2):
        (tmp_path / f"day-{span}").mkdir()
        (tmp_path / f"day-{span}" / "a.csv").write_text("x,y\n1,0\n2,1\n3,0\n")
    data = prepare(str(tmp_path / "day-{SPAN}" / "*.csv"), "y", tmp_path / "w")
    compiled = cluster_spans(data, RunConfig())
    node = make_example_gen(compiled, "gs://acme/data", compiled.input_pattern)
    assert not node.exec_properties.get("range_config")  # TFX's driver: the newest span
    assert "day-{SPAN}/*.csv" in node.exec_properties["input_config"]
    one = prepare(str(tmp_path / "day-{SPAN}" / "*.csv"), "y", tmp_path / "w", span=1)
    pinned = make_example_gen(cluster_spans(one, RunConfig(span=1)), "gs://a", one.input_pattern)
    static = json.loads(pinned.exec_properties["range_config"])["static_range"]
    assert static == {"start_span_number": 1, "end_span_number": 1}  # --span: that span
    with pytest.raises(InputError, match="^--rolling-spans 2: a compiled pipeline reads one"):
        cluster_spans(data, RunConfig(rolling_spans=2))
