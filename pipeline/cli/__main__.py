"""`python -m amp_pipeline.pipeline.cli`: the `amp-pipeline` command."""

from amp_pipeline.pipeline.cli import entry

entry()
