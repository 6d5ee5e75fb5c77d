"""Compiles the pipeline for Kubeflow Pipelines (KFP v2 YAML) or Vertex AI (PipelineJob JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from components.model_module import ModuleRef
from components.precision import Hardware, choose_recipe
from kubeflow.deployment import Deployment
from pipeline.config import RunConfig
from pipeline.ingest import DataSpec

# The recipe a GPU node gets; the trainers re-decide on the node itself (policy "auto").
CLUSTER_GPU = Hardware("gpu", "cluster GPU (decided on the node)", compute_capability=(7, 0))


def compile_pipeline(
    config: RunConfig,
    data: DataSpec,
    deployment: Deployment,
    output: Path,
    beam_args: list[str],
    model_module: ModuleRef | None = None,
) -> Path:
    """Runs the KubeflowV2DagRunner on create_pipeline and writes `output`.

    `model_module` must be importable in the component image (kubeflow/user_module.py).
    """
    from tfx import v1 as tfx

    from pipeline.pipeline import create_pipeline

    pipeline = create_pipeline(
        config,
        data,
        choose_recipe(CLUSTER_GPU),
        beam_pipeline_args=beam_args,
        deployment=deployment,
        model_module=model_module,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=deployment.image,
            display_name=config.pipeline_name,
            use_pipeline_spec_2_1=True,  # parameterType: what KFP 2 and Vertex read
        ),
    )
    defaults = {
        "data_root": deployment.data_root,
        "train_args": json.dumps({"num_steps": config.train_steps}),
        "accuracy_tolerance": config.accuracy_tolerance,
    }
    # The runner leaves the parameters' defaults out of the spec: put them in both places a
    # caller reads them from (the spec's inputDefinitions, the job's runtimeConfig).
    job = runner.run(pipeline, parameter_values=defaults, write_out=False)
    declared = job["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]
    for name, value in defaults.items():
        declared[name]["defaultValue"] = value
    if deployment.target == "vertex":
        output.write_text(json.dumps(job, indent=2, sort_keys=True))
    else:
        header = (
            f"# PIPELINE DEFINITION\n# Name: {config.pipeline_name}\n"
            f"# Inputs: {', '.join(f'{k} (default {v})' for k, v in defaults.items())}\n"
        )
        output.write_text(header + yaml.safe_dump(job["pipelineSpec"], sort_keys=True))
    return output
