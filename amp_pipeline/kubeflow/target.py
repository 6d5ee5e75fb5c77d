"""ClusterTarget: where a compiled pipeline runs (Kubeflow Pipelines or Vertex AI): the image,
the pipeline root, the default data root, and the trainers' machine and accelerators."""

from __future__ import annotations

import dataclasses

TARGETS = ("kubeflow", "vertex")


@dataclasses.dataclass(frozen=True)
class ClusterTarget:
    """Everything that differs between the local run and a Kubeflow/Vertex run.

    (Not to be confused with amp_pipeline.serving.deploy.DeploymentSpec: the TF Serving manifests.)

    Attributes:
        target: `kubeflow` (KFP v2 on a cluster) or `vertex` (Vertex AI Pipelines).
        image: the component image every step runs in (kubeflow/Dockerfile).
        pipeline_root: where artifacts go (gs://... on Vertex).
        data_root: default of the `data_root` runtime parameter: the folder ExampleGen reads.
        machine_type: Vertex machine type of the trainers.
        accelerator: the trainers' accelerator: a Vertex accelerator type
            (NVIDIA_TESLA_T4, NVIDIA_L4, NVIDIA_A100_80GB, NVIDIA_H100_80GB, ...) or, on
            Kubeflow, a Kubernetes resource name (nvidia.com/gpu).
        accelerator_count: accelerators per trainer replica (`--gpus-per-replica`).
        trainer_replicas: machines each trainer trains on, data-parallel (Vertex: a chief pool
            and a worker pool; the trainers pick MultiWorkerMirroredStrategy from TF_CONFIG).
        region: Vertex region the training jobs run in.
    """

    target: str
    image: str
    pipeline_root: str
    data_root: str
    machine_type: str = "n1-standard-8"
    accelerator: str = "NVIDIA_TESLA_T4"
    accelerator_count: int = 1
    trainer_replicas: int = 1
    region: str = "us-central1"

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(
                f"Invalid value for argument target: expected one of {', '.join(TARGETS)}. "
                f"Received: target={self.target!r}"
            )
        for name in ("image", "pipeline_root", "data_root"):
            if not getattr(self, name):
                raise ValueError(f"Invalid value for argument {name}: must not be empty.")
        if self.accelerator_count < 0:
            raise ValueError(
                "Invalid value for argument accelerator_count: must be >= 0. "
                f"Received: accelerator_count={self.accelerator_count}"
            )

        if self.trainer_replicas < 1:
            raise ValueError(
                "Invalid value for argument trainer_replicas: must be >= 1. "
                f"Received: trainer_replicas={self.trainer_replicas}"
            )
        if self.trainer_replicas > 1 and self.target == "kubeflow":
            raise ValueError(
                f"--trainer-replicas {self.trainer_replicas}: a Kubeflow Pipelines step is one "
                "pod; trainers on several machines need --target vertex (worker pools)"
            )

    @property
    def kubernetes_accelerator(self) -> str:
        """The Kubernetes resource a Kubeflow trainer pod requests."""
        return self.accelerator if "/" in self.accelerator else "nvidia.com/gpu"

    @property
    def serving_base(self) -> str:
        return self.pipeline_root.rstrip("/") + "/serving"
