"""The AMP speed benchmark: float32 against AMP per model, TensorFlow or JAX, and where the time
goes."""
