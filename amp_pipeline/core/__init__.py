"""The contracts every package shares and that import nothing else of the project: the error
types and exit codes, the DataSpec, feature names, file and signature names, number formatting
and the CLI's argument validators (docs/ARCHITECTURE.md)."""
