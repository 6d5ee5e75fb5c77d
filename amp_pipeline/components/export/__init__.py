"""What leaves the trainer: the serving SavedModel with its signatures and the check of the
artifact as written (`saved_model.py`), and the TFLite variants with their parity (`tflite.py`).

May import: `core`, `components.models`, `components.data`.
"""
