"""The Trainer's code: its options (`options.py`: TrainOptions and the TrainSpec schema),
`run_fn` (`trainer.py`), the trainer process (`process.py`) and the training job (`job.py`),
distribution, autotune (`autotune.py`, `autotune_process.py`) and the batch limits.

May import: `core`, `serving`, `components.models`, `components.data`, `components.amp`,
`components.export`.
"""
