"""The measurements behind the project's figures (`RESULTS.md`): the AMP benchmark under
TensorFlow or JAX (`bench.py`, `configs.py`, `worker.py`, `jax_worker.py`, `max_batch.py`,
`op_speedups.py`), serving load (`serving_load.py`), scale (`scale.py`, `scale_data.py`), the
gate's noise (`gate_noise.py`), autotune's check (`autotune_check.py`), the `bench` commands
(`cli.py`, `python -m amp_pipeline.benchmarks` for machines without the TFX stack) and the GPU
device script (`gpu/run.sh`).

May import `pipeline`, `components`, `serving` and `core`; not `kubeflow`.
"""
