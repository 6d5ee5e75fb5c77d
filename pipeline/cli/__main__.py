"""`python -m pipeline.cli`: the `amp-pipeline` command."""

from pipeline.cli import entry

entry()
