"""`python -m amp_pipeline`: the `amp-pipeline` command."""

from amp_pipeline.cli import entry

entry()
