"""Beam pipeline arguments for the data components: DirectRunner, Dataflow, Flink, Spark."""

from __future__ import annotations

import dataclasses

from amp_pipeline.core.errors import InputError

BEAM_RUNNERS = ("direct", "dataflow", "flink", "spark")
# TFX's Beam executors ship TFX to remote workers: without a dependency flag among the Beam
# args, each one copies the whole TFX install (49 MB) into a new temporary folder, builds an
# sdist there and never deletes it (tfx/utils/dependency_utils.py::make_beam_dependency_flags),
# five times a run. The DirectRunner's workers are this Python environment and stage nothing;
# naming a container image (which the DirectRunner never reads) tells TFX so.
DIRECT_NO_STAGING = ("--sdk_container_image=none:direct-runner-uses-this-environment",)
# Beam 2.74's DirectRunner first hands each job to its Prism runner, which downloads a Go binary
# from GitHub and runs it (logs/tfx.log: "Running pipeline with PrismRunner ... Downloading
# prism"); offline it falls back after the lookup fails, behind a firewall that drops packets
# it waits, and online parts of a run execute on a runner --direct_num_workers does not govern.
# The DirectRunner skips Prism for a pipeline that allows unsafe triggers (Prism double-fires
# AfterCount triggers: apache_beam/runners/direct/direct_runner.py); these batch jobs use no
# triggers, so the flag changes nothing else, and each job goes straight to the runner it used
# after Prism failed: the FnApiRunner (the BundleBased runner where FnApi lacks a feature).
DIRECT_NO_PRISM = ("--allow_unsafe_triggers",)


@dataclasses.dataclass(frozen=True)
class BeamProfile:
    """Where ExampleGen, StatisticsGen, Transform and the Evaluators run their Beam jobs.

    Attributes:
        runner: direct, dataflow, flink or spark.
        workers: DirectRunner workers; more than 1 runs them as separate processes.
        project: Dataflow: GCP project.
        region: Dataflow: region.
        temp_location: Dataflow: gs:// folder for temporary files.
        job_endpoint: Flink: the JobManager (host:port); Spark: the Beam job server
            (host:port) in front of the Spark cluster.
        environment_type: Flink/Spark: how SDK workers start: DOCKER (the component image),
            PROCESS or LOOPBACK (local testing).
        extra: further Beam flags, passed through.
    """

    runner: str = "direct"
    workers: int = 1
    project: str = ""
    region: str = ""
    temp_location: str = ""
    job_endpoint: str = ""
    environment_type: str = "DOCKER"
    extra: tuple[str, ...] = ()

    REQUIRED = {
        "dataflow": ("project", "region", "temp_location"),
        "flink": ("job_endpoint",),
        "spark": ("job_endpoint",),
    }

    def args(self) -> list[str]:
        """The beam_pipeline_args. Raises InputError naming a missing flag."""
        if self.runner not in BEAM_RUNNERS:
            raise InputError(
                f"--beam {self.runner}: unknown runner; choose from {', '.join(BEAM_RUNNERS)}"
            )
        missing = [f for f in self.REQUIRED.get(self.runner, ()) if not getattr(self, f)]
        if missing:
            flags = ", ".join(f"--beam-{m.replace('_', '-')}" for m in missing)
            raise InputError(f"--beam {self.runner} needs {flags}")
        if self.workers < 1:
            raise InputError(f"--beam-workers {self.workers}: must be at least 1")
        if self.runner == "direct":
            mode = "in_memory" if self.workers == 1 else "multi_processing"
            out = [
                f"--direct_running_mode={mode}",
                f"--direct_num_workers={self.workers}",
                *DIRECT_NO_STAGING,
                *DIRECT_NO_PRISM,
            ]
        elif self.runner == "dataflow":
            out = [
                "--runner=DataflowRunner",
                f"--project={self.project}",
                f"--region={self.region}",
                f"--temp_location={self.temp_location}",
            ]
        elif self.runner == "flink":
            out = [
                "--runner=FlinkRunner",
                f"--flink_master={self.job_endpoint}",
                f"--environment_type={self.environment_type}",
            ]
        else:
            out = [
                "--runner=PortableRunner",
                f"--job_endpoint={self.job_endpoint}",
                f"--environment_type={self.environment_type}",
            ]
        return out + list(self.extra)
