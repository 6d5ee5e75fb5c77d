"""The measurements behind the project's figures (`RESULTS.md`), grouped by what they measure:

- `speed/`: the AMP benchmark under TensorFlow or JAX (`bench.py`, `configs.py`, `worker.py`,
  `jax_worker.py`, `max_batch.py`), op by op (`op_speedups.py`), where BERT's and DLRM's time
  goes (`bert_parts.py`, `dlrm_parts.py`);
- `scale/`: the pipeline at scale (`runs.py`, `data.py`), Beam batches, the shuffled copy, the
  trainer's overhead;
- `gate/`: the gate's noise over repeated runs (`noise.py`);
- `autotune/`: autotune's choice checked, and as the CPU default (`check.py`, `default.py`);
- `quality/`: models against simple baselines (text, regression, ratings);
- `load/`: the local server under load (`serving.py`).

Beside them: the `bench` commands (`cli.py`; `python -m amp_pipeline.benchmarks` for machines
without the TFX stack), what every record holds (`records.py`) and the GPU device script
(`gpu/run.sh`).

May import `pipeline`, `components`, `serving` and `core`; not `kubeflow`.
"""
