"""`python -m benchmarks bench ...`: the benchmark commands alone, for a machine that has Keras and
JAX but not the pipeline's stack (the lent GPU machine: benchmarks/gpu/run.sh)."""

from __future__ import annotations

import sys

from benchmarks import cli
from core.argtypes import Parser


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m benchmarks")
    cli.add_parsers(parser.add_subparsers(dest="command", required=True, parser_class=Parser))
    args = parser.parse_args(argv)
    return cli.COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
