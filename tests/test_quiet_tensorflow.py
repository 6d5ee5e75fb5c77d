"""TensorFlow's three CUDA registration lines are dropped from stderr, and nothing else is."""

from amp_pipeline.core.quiet_tensorflow import filtered

IMPORT_STDERR = b"""\
2026-12-07 09:15:22.088988: E external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:479] \
Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when one has \
already been registered
2026-12-07 09:15:22.118183: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:10575] \
Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has \
already been registered
2026-12-07 09:15:22.118248: E external/local_xla/xla/stream_executor/cuda/cuda_blas.cc:1442] \
Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one \
has already been registered
2026-12-07 09:15:22.2: E tensorflow/core/a real error.cc:1] Could not load the plugin
warnings.warn(message, FutureWarning)
"""


def test_only_the_registration_lines_are_dropped():
    kept = filtered(IMPORT_STDERR).decode().splitlines()
    assert kept == [
        "2026-12-07 09:15:22.2: E tensorflow/core/a real error.cc:1] Could not load the plugin",
        "warnings.warn(message, FutureWarning)",
    ]
    assert filtered(b"no newline at the end") == b"no newline at the end"
