"""`python -m amp_pipeline.benchmarks bench ...`: the benchmark commands alone, for a machine that
has Keras and JAX but not the pipeline's stack (the lent GPU machine: benchmarks/gpu/run.sh)."""

from __future__ import annotations

import sys

from amp_pipeline.benchmarks import cli
from amp_pipeline.core.argtypes import Parser


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m amp_pipeline.benchmarks")
    cli.add_parsers(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    args = parser.parse_args(argv)
    return cli.COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
