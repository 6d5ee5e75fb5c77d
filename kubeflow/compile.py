"""Compiles the pipeline for Kubeflow Pipelines (KFP v2 YAML) or Vertex AI (PipelineJob JSON)."""

from __future__ import annotations

from pathlib import Path

from components.precision import Hardware, choose_recipe
from kubeflow.deployment import Deployment
from pipeline.config import RunConfig
from pipeline.ingest import DataSpec

# The recipe a GPU node gets; the trainers re-decide on the node itself (policy "auto").
CLUSTER_GPU = Hardware("gpu", "cluster GPU (decided on the node)", compute_capability=(7, 0))


def compile_pipeline(
    config: RunConfig, data: DataSpec, deployment: Deployment, output: Path, beam_args: list[str]
) -> Path:
    """Runs the KubeflowV2DagRunner on create_pipeline and writes `output`."""
    from tfx import v1 as tfx

    from pipeline.pipeline import create_pipeline

    pipeline = create_pipeline(
        config,
        data,
        choose_recipe(CLUSTER_GPU),
        beam_pipeline_args=beam_args,
        deployment=deployment,
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
            default_image=deployment.image,
            display_name=config.pipeline_name,
            use_pipeline_spec_2_1=True,  # parameterType: what KFP 2 and Vertex read
        ),
        output_dir=str(output.parent),
        output_filename=output.name,
    )
    runner.run(pipeline, write_out=True)
    return output
