"""The pipeline's commands (`run`, `check-model`, `inspect`, `autotune`, `doctor`, `predict`,
`monitor`), their flags and the end-of-run table. `commands.py` hands them to the composition root,
`amp_pipeline/cli.py`, which assembles every package's commands; this package imports neither
`kubeflow` nor `benchmarks`."""
