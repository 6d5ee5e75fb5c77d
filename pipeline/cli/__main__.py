"""`python -m pipeline.cli`: the `amp-pipeline` command."""

import sys

from pipeline.cli import main

sys.exit(main())
