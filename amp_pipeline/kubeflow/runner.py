"""The Kubeflow/Vertex runner: compiles create_pipeline for a ClusterTarget into KFP v2 YAML or
a Vertex PipelineJob JSON (the penguin template's kubeflow_runner.py).

Runner wiring lives here, not in create_pipeline: the runtime parameters (data root, TrainArgs,
accuracy tolerance), the trainers' GPUs (a KFP ResourceSpec, or Vertex's training extension
with worker_pool_specs), and a precision recipe left to the node (`policy="auto"`): nothing is
decided at compile time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from amp_pipeline.components.models.user_module import ModuleRef
from amp_pipeline.core.data_spec import DataSpec
from amp_pipeline.kubeflow.target import ClusterTarget
from amp_pipeline.pipeline.config import RunConfig

PARAMETERS = ("data_root", "train_args", "accuracy_tolerance")


def worker_pools(target: ClusterTarget, machine: dict) -> list[dict]:
    """Vertex worker_pool_specs: the chief, then `trainer_replicas - 1` workers on the same
    machine. Vertex sets TF_CONFIG on each, and the trainers' `--distribution auto` picks
    MultiWorkerMirroredStrategy from it (MirroredStrategy within a machine of several GPUs)."""
    pool = {"machine_spec": machine, "container_spec": {"image_uri": target.image}}
    pools = [{**pool, "replica_count": 1}]
    if target.trainer_replicas > 1:
        pools.append({**pool, "replica_count": target.trainer_replicas - 1})
    return pools


# vCPUs and GiB per vCPU of Compute Engine's general-purpose families, by machine type prefix.
MEMORY_PER_CPU_GIB = {
    "n1-standard": 3.75, "n1-highmem": 6.5, "n1-highcpu": 0.9,
    "n2-standard": 4.0, "n2-highmem": 8.0, "n2-highcpu": 1.0,
    "e2-standard": 4.0, "e2-highmem": 8.0, "e2-highcpu": 1.0,
    "g2-standard": 4.0,
}  # fmt: skip


def machine_resources(machine_type: str) -> tuple[int, float] | None:
    """(vCPUs, memory GiB) of a Vertex machine type such as n1-standard-8, or None for one whose
    size is not written in its name (a2-highgpu-1g, ...)."""
    family, _, size = machine_type.rpartition("-")
    if family in MEMORY_PER_CPU_GIB and size.isdigit():
        cpus = int(size)
        return cpus, cpus * MEMORY_PER_CPU_GIB[family]
    return None


def speed_check_placement(target: ClusterTarget):
    """place_speed_check for create_pipeline: the SideBySide step requests the trainers'
    accelerator (type and count of one trainer replica), and on Vertex also the CPUs and
    memory of the trainers' machine type, so the ratio the gate uses is timed on the hardware
    the AMP trainer ran on, not on a plain CPU pod."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    resources = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec

    def place(node):
        spec = resources()
        if target.accelerator_count:
            kind = (
                target.kubernetes_accelerator
                if target.target == "kubeflow"
                else (target.accelerator)
            )
            spec.accelerator.CopyFrom(
                resources.AcceleratorConfig(type=kind, count=target.accelerator_count)
            )
        size = machine_resources(target.machine_type) if target.target == "vertex" else None
        if size is not None:
            spec.cpu_limit, spec.memory_limit = float(size[0]), float(size[1])
        return node.with_platform_config(spec) if spec.ByteSize() else node

    return place


def trainer_factory(target: ClusterTarget):
    """make_trainer for create_pipeline: Vertex's Trainer on the target's machines, or TFX's
    Trainer requesting the target's GPUs from Kubernetes."""
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx import v1 as tfx

    def vertex_trainer(node_id: str, custom_config: dict, **kwargs):
        vertex = tfx.extensions.google_cloud_ai_platform
        machine: dict[str, str | int] = {"machine_type": target.machine_type}
        if target.accelerator_count:
            machine.update(
                accelerator_type=target.accelerator, accelerator_count=target.accelerator_count
            )
        custom_config = {
            **custom_config,
            vertex.ENABLE_VERTEX_KEY: True,
            vertex.VERTEX_REGION_KEY: target.region,
            vertex.TRAINING_ARGS_KEY: {"worker_pool_specs": worker_pools(target, machine)},
        }
        return vertex.Trainer(custom_config=custom_config, **kwargs).with_id(node_id)

    def kubeflow_trainer(node_id: str, **kwargs):
        trainer = tfx.components.Trainer(**kwargs).with_id(node_id)
        if target.accelerator_count:
            resources = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec
            trainer.with_platform_config(
                resources.ResourceSpec(
                    accelerator=resources.ResourceSpec.AcceleratorConfig(
                        type=target.kubernetes_accelerator, count=target.accelerator_count
                    )
                )
            )
        return trainer

    return vertex_trainer if target.target == "vertex" else kubeflow_trainer


def compile_pipeline(
    config: RunConfig,
    data: DataSpec,
    target: ClusterTarget,
    output: Path,
    beam_args: list[str],
    model_module: ModuleRef | None = None,
) -> Path:
    """Runs the KubeflowV2DagRunner on create_pipeline and writes `output`.

    `model_module` must be importable in the component image (kubeflow/user_module.py).
    """
    from tfx import v1 as tfx

    from amp_pipeline.pipeline.pipeline import create_pipeline, twin_options

    parameter = tfx.dsl.experimental.RuntimeParameter
    defaults: dict[str, Any] = {
        "data_root": target.data_root,
        "train_args": json.dumps({"num_steps": config.train.train_steps}),
        "accuracy_tolerance": config.accuracy_tolerance,
    }
    pipeline = create_pipeline(
        config,
        data,
        # Each trainer reads the hardware it lands on and picks its own recipe (or probes the
        # candidates there, with --policy autotune): nothing is decided at compile time.
        twin_options(
            config,
            data,
            model_module,
            "autotune" if config.policy == "autotune" else "auto",
            False,
            False,
            "auto",
        ),
        pipeline_root=target.pipeline_root,
        data_root=parameter(name="data_root", ptype=str, default=defaults["data_root"]),
        # Spans: the pattern with {SPAN}, under the data_root parameter (the newest span
        # when the run starts, kubeflow/cli.py::cluster_spans); else every file there.
        data_pattern=data.input_pattern if data.spans else "*",
        serving_base=target.serving_base,
        # TrainArgs as a whole is the parameter (TFX takes no parameter inside a proto): a
        # JSON TrainArgs such as {"num_steps": 300}.
        train_steps=parameter(name="train_args", ptype=str, default=defaults["train_args"]),
        accuracy_tolerance=parameter(
            name="accuracy_tolerance", ptype=float, default=defaults["accuracy_tolerance"]
        ),
        make_trainer=trainer_factory(target),
        place_speed_check=speed_check_placement(target),
        model_module=model_module,
        beam_pipeline_args=beam_args,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=target.image,
            display_name=config.pipeline_name,
            use_pipeline_spec_2_1=True,  # parameterType: what KFP 2 and Vertex read
        ),
    )
    # The runner leaves the parameters' defaults out of the spec: put them in both places a
    # caller reads them from (the spec's inputDefinitions, the job's runtimeConfig).
    job = runner.run(pipeline, parameter_values=defaults, write_out=False)
    declared = job["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]
    for name, value in defaults.items():
        declared[name]["defaultValue"] = value
    if target.target == "vertex":
        output.write_text(json.dumps(job, indent=2, sort_keys=True))
    else:
        header = (
            f"# PIPELINE DEFINITION\n# Name: {config.pipeline_name}\n"
            f"# Inputs: {', '.join(f'{k} (default {v})' for k, v in defaults.items())}\n"
        )
        output.write_text(header + yaml.safe_dump(job["pipelineSpec"], sort_keys=True))
    return output
