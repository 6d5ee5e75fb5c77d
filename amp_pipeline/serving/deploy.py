"""What a TF Serving deployment of the pushed model needs, generated from the serving folder.

- `models.config`: TF Serving's ModelServerConfig (text proto, written with the proto class of
  tensorflow-serving-api): one entry per model, its base path, its version policy.
- `batching_parameters.txt`: TF Serving's BatchingParameters (text proto).
- `kubernetes/serving.yaml` and `kubernetes/serving-gpu.yaml`: a ConfigMap with both files, a
  Deployment of the official `tensorflow/serving` image (gRPC 8500, REST 8501, probes,
  resources) and a Service. The GPU variant uses the `-gpu` image and requests one GPU.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from amp_pipeline.serving.batching import BatchingConfig
from amp_pipeline.serving.repository import discover

TF_SERVING_VERSION = "2.16.1"  # matches tensorflow-serving-api in the lock file
CONFIG_MOUNT = "/config"
MODELS_MOUNT = "/models"


@dataclasses.dataclass(frozen=True)
class DeploymentSpec:
    """Attributes:
    models: served model names (each is `<base_path>/<name>/<version>/`).
    base_path: where the serving folder is inside the container (or a gs:// / s3:// URI).
    keep_versions: versions TF Serving keeps loaded (newest first); /versions/<n> reaches them.
    app: Kubernetes name of the Deployment, Service and ConfigMap.
    replicas: Deployment replicas.
    models_claim: PersistentVolumeClaim holding the serving folder (ignored for a URI base path).
    cpu / memory: requests (limits are twice as much).
    batching: server-side batching; None turns it off.
    """

    models: tuple[str, ...]
    base_path: str = MODELS_MOUNT
    keep_versions: int = 2
    app: str = "amp-pipeline-serving"
    replicas: int = 1
    models_claim: str = "amp-pipeline-models"
    cpu: str = "1"
    memory: str = "2Gi"
    batching: BatchingConfig | None = BatchingConfig()


def models_config(spec: DeploymentSpec) -> str:
    config = model_server_config_pb2.ModelServerConfig()
    for name in spec.models:
        model = config.model_config_list.config.add()
        model.name = name
        model.base_path = f"{spec.base_path.rstrip('/')}/{name}"
        model.model_platform = "tensorflow"
        model.model_version_policy.latest.num_versions = spec.keep_versions
    return text_format.MessageToString(config)


def batching_parameters(batching: BatchingConfig) -> str:
    """BatchingParameters as text proto (its proto is not part of tensorflow-serving-api)."""
    return (
        f"max_batch_size {{ value: {batching.max_batch_size} }}\n"
        f"batch_timeout_micros {{ value: {round(batching.batch_timeout_s * 1e6)} }}\n"
        f"num_batch_threads {{ value: {batching.num_batch_threads} }}\n"
        "max_enqueued_batches { value: 100 }\n"
        "pad_variable_length_inputs: true\n"
    )


def _server_args(spec: DeploymentSpec) -> list[str]:
    args = [
        "--port=8500",
        "--rest_api_port=8501",
        f"--model_config_file={CONFIG_MOUNT}/models.config",
        "--model_config_file_poll_wait_seconds=60",
        "--file_system_poll_wait_seconds=10",
    ]
    if spec.batching is not None:
        args += [
            "--enable_batching",
            f"--batching_parameters_file={CONFIG_MOUNT}/batching_parameters.txt",
        ]
    return args


def kubernetes_manifests(spec: DeploymentSpec, gpu: bool = False) -> list[dict]:
    """ConfigMap, Deployment and Service for the official image (GPU variant on request)."""
    labels = {"app": spec.app}
    files = {"models.config": models_config(spec)}
    if spec.batching is not None:
        files["batching_parameters.txt"] = batching_parameters(spec.batching)
    limits: dict[str, str | int] = {"cpu": _double(spec.cpu), "memory": _double(spec.memory)}
    if gpu:
        limits["nvidia.com/gpu"] = 1
    readiness_path = f"/v1/models/{spec.models[0]}"
    volumes = [{"name": "config", "configMap": {"name": f"{spec.app}-config"}}]
    mounts = [{"name": "config", "mountPath": CONFIG_MOUNT, "readOnly": True}]
    if "://" not in spec.base_path:
        volumes.append(
            {"name": "models", "persistentVolumeClaim": {"claimName": spec.models_claim}}
        )
        mounts.append({"name": "models", "mountPath": spec.base_path, "readOnly": True})
    container = {
        "name": "tensorflow-serving",
        "image": f"tensorflow/serving:{TF_SERVING_VERSION}{'-gpu' if gpu else ''}",
        "args": _server_args(spec),
        "ports": [
            {"name": "grpc", "containerPort": 8500},
            {"name": "http", "containerPort": 8501},
        ],
        "readinessProbe": {
            "httpGet": {"path": readiness_path, "port": 8501},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
        },
        "livenessProbe": {
            "tcpSocket": {"port": 8500},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
        },
        "resources": {"requests": {"cpu": spec.cpu, "memory": spec.memory}, "limits": limits},
        "volumeMounts": mounts,
    }
    pod_spec: dict = {"containers": [container], "volumes": volumes}
    if gpu:
        pod_spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
    name = f"{spec.app}-gpu" if gpu else spec.app
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{spec.app}-config", "labels": labels},
            "data": files,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "replicas": spec.replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": spec.app, "labels": labels},
            "spec": {
                "selector": labels,
                "ports": [
                    {"name": "grpc", "port": 8500, "targetPort": 8500},
                    {"name": "http", "port": 8501, "targetPort": 8501},
                ],
            },
        },
    ]


def _double(quantity: str) -> str:
    """Twice a Kubernetes quantity: "1" -> "2", "500m" -> "1000m", "2Gi" -> "4Gi"."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([a-zA-Z]*)", quantity)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    return f"{2 * float(match[1]):g}{match[2]}"


def write_deployment(serving_dir: Path, out_dir: Path, **overrides) -> dict[str, Path]:
    """Writes every file for the models under `serving_dir`; returns {what: path}."""
    models = tuple(discover(Path(serving_dir)))
    if not models:
        raise ValueError(f"{serving_dir}: no pushed model there (<model>/<version>/saved_model.pb)")
    spec = DeploymentSpec(models=models, **overrides)
    out_dir = Path(out_dir)
    (out_dir / "kubernetes").mkdir(parents=True, exist_ok=True)
    paths = {
        "models_config": out_dir / "models.config",
        "batching_parameters": out_dir / "batching_parameters.txt",
        "kubernetes": out_dir / "kubernetes" / "serving.yaml",
        "kubernetes_gpu": out_dir / "kubernetes" / "serving-gpu.yaml",
    }
    paths["models_config"].write_text(models_config(spec))
    if spec.batching is not None:
        paths["batching_parameters"].write_text(batching_parameters(spec.batching))
    else:
        paths.pop("batching_parameters")
    for key, gpu in (("kubernetes", False), ("kubernetes_gpu", True)):
        paths[key].write_text(yaml.safe_dump_all(kubernetes_manifests(spec, gpu), sort_keys=False))
    return paths
