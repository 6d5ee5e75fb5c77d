"""The Trainer's code: its options (`options.py`: TrainOptions and the TrainSpec schema),
`run_fn` (`trainer.py`), the trainer process (`process.py`) and the training job (`job.py`:
`train_and_export`, which runs, in order, `datasets.py` (the split as tf.data, its shuffled copy,
the out-of-vocabulary share), `model_building.py` (the model under the twin's policy, its loss and
optimizer), `fitting.py` (readiness, fit, the seeds) and `twin_export.py` (the SavedModel, TFLite,
every seed's answers, the reference baseline)), distribution, autotune (`autotune.py`,
`autotune_process.py`) and the batch limits.

May import: `core`, `serving`, `components.models`, `components.data`, `components.amp`,
`components.export`.
"""
