"""TFLite variants of the trained model, each checked against the float32 SavedModel.

Mixed-precision graphs do not convert (`invalid TFLite type: 'tensor<16xbf16>'`), so
the converter always reads a float32 rebuild of the model: same architecture, same weights (the
variables of a mixed-precision model are float32 already).

The TFLite models take the raw columns (components/export/device_graph.py: Transform's work is in
the graph, builtin ops only); a sidecar `model_<variant>.json` says what each input is, and
`labels.txt` the classes, in the order of the `probabilities` output.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np

from amp_pipeline.core import names

logger = logging.getLogger(__name__)

VARIANTS = ("float32", "float16", "dynamic_int8", "int8")
# Full-integer quantization quantizes the input `x` to 8 bits with one scale: token ids (up to
# the vocabulary size) would collapse onto 256 levels. A text model's TFLite input stays float.
TEXT_VARIANTS = ("float32", "float16", "dynamic_int8")


def variants_for(
    requested: tuple[str, ...], has_text: bool, regression: bool = False
) -> tuple[str, ...]:
    """The variants a model can have: without `int8` when `x` holds token or category ids
    (`has_text`: full-integer quantization would put them on 256 levels), or when the
    output is a regression value (full-integer quantization puts the answer on 256 levels and
    clips inputs beyond the 200 representative rows' range: on a 1,500-row price CSV it raised
    the MAE by 10.9% and moved one prediction by 951, tests/test_regression_e2e.py's data)."""
    cut = has_text or regression
    return tuple(v for v in requested if not cut or v in TEXT_VARIANTS)


@dataclasses.dataclass(frozen=True)
class ParityThresholds:
    """What each variant must reach to pass.

    Attributes:
        min_agreement: smallest share of eval examples whose predicted class equals the
            SavedModel's, for the float32 and float16 variants.
        max_int8_accuracy_drop: largest accuracy drop of the int8 variants vs the SavedModel.
    """

    min_agreement: float = 0.995
    max_int8_accuracy_drop: float = 0.01


def _converter(saved_model_dir: str, variant: str, representative):
    """The TFLite converter of one variant, builtin ops only (what Android, iOS and
    microcontrollers run; no Flex). int8 quantizes inside the graph: its inputs and outputs
    stay float (or strings, or int64), so an app needs no quantization parameters."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=[names.DEVICE_SIGNATURE]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if variant == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "dynamic_int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif variant == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS_INT8,
            tf.lite.OpsSet.TFLITE_BUILTINS,  # the lookups and string inputs stay as they are
        ]
    elif variant != "float32":
        raise ValueError(
            f"Invalid value for argument variant: expected one of {', '.join(VARIANTS)}. "
            f"Received: variant={variant!r}"
        )
    return converter


# Parity is measured on the first PARITY_EXAMPLES of the eval split by default
# (--tflite-parity-examples): at 5,000 a 100% agreement proves the 99.5% floor, and a BERT-base
# encoder at ~50 ms a call checks each variant in minutes, not hours.
PARITY_EXAMPLES = 5_000


class LiteRTRunner:
    """A .tflite file's device signature in the LiteRT interpreter (ai-edge-litert, the runtime
    an app ships; not tf.lite), fed one row at a time as a device feeds it. XNNPACK is LiteRT's
    default CPU delegate; `threads` is its thread count."""

    def __init__(self, path: str | Path, threads: int = 1):
        from ai_edge_litert.interpreter import Interpreter

        self.threads = threads
        self.interpreter = Interpreter(model_path=str(path), num_threads=threads)
        self.runner = self.interpreter.get_signature_runner(names.DEVICE_SIGNATURE)
        self.output = next(iter(self.runner.get_output_details()))

    def __call__(self, feed: dict) -> np.ndarray:
        """The output (probabilities, or the prediction) of one row's inputs."""
        return np.asarray(self.runner(**feed)[self.output], np.float32).reshape(-1)


def parity(probs: np.ndarray, reference: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Accuracy, agreement with the reference's classes and the largest output difference,
    with the counts the gate's statistics need (components/gate/stats.py): examples, agreeing
    examples, and the examples only one of the two got right."""
    predicted = probs.argmax(axis=1)
    expected = reference.argmax(axis=1)
    right, reference_right = predicted == labels, expected == labels
    return {
        "accuracy": float(np.mean(right)),
        "agreement": float(np.mean(predicted == expected)),
        "max_abs_diff": float(np.max(np.abs(probs - reference))),
        "n": int(len(labels)),
        "agreeing": int(np.sum(predicted == expected)),
        "only_variant_right": int(np.sum(right & ~reference_right)),
        "only_reference_right": int(np.sum(~right & reference_right)),
    }


def regression_parity(
    predicted: np.ndarray, reference: np.ndarray, labels: np.ndarray, label_std: float
) -> dict[str, float]:
    """A regression variant against the reference (both in the label's units): the largest
    absolute prediction difference, the largest relative one (to the reference's size, at
    least the label's standard deviation: a reference near 0 would make any difference
    infinite), and the paired absolute errors' summary the gate's error rule reads
    (components/gate/error_stats.py::ErrorPairs)."""
    diff = np.abs(predicted - reference)
    variant_error, reference_error = np.abs(predicted - labels), np.abs(reference - labels)
    paired = variant_error - reference_error
    return {
        "mae": float(np.mean(variant_error)),
        "reference_mae": float(np.mean(reference_error)),
        "max_abs_diff": float(np.max(diff)),
        "max_rel_diff": float(np.max(diff / np.maximum(np.abs(reference), label_std))),
        "n": int(len(labels)),
        "error_diff_mean": float(np.mean(paired)),
        "error_diff_sd": float(np.std(paired, ddof=1)) if len(paired) > 1 else 0.0,
    }


def export_tflite(
    device_saved_model: str,
    out_dir: str | Path,
    representative: list[dict],
    sidecar: dict,
    variants: tuple[str, ...] = VARIANTS,
    thresholds: ParityThresholds | None = None,
    parity_examples: int = PARITY_EXAMPLES,
) -> dict:
    """Converts each variant of the device graph (components/export/device_graph.py) into
    `out_dir/model_<variant>.tflite` with its sidecar `model_<variant>.json` (`sidecar`: the
    inputs and output, the same for every variant). The parity is measured by the gate, on
    raw eval rows through LiteRT (components/export/device_parity.py). A variant that fails to
    convert is reported with the converter's reason."""
    thresholds = thresholds or ParityThresholds()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def calibration():
        yield from representative[:200]

    results = {}
    for variant in variants:
        path = out / f"model_{variant}.tflite"
        try:
            path.write_bytes(_converter(device_saved_model, variant, calibration).convert())
        except Exception as e:  # noqa: BLE001 - a failed variant is reported, not raised
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            logger.warning("TFLite %s failed to convert: %s", variant, reason)
            results[variant] = {"converted": False, "error": reason}
            continue
        results[variant] = {
            "converted": True,
            "path": str(path),
            "size_bytes": path.stat().st_size,
        }
        card = {"variant": variant, "signature": names.DEVICE_SIGNATURE, **sidecar}
        path.with_suffix(".json").write_text(json.dumps(card, indent=2))
    summary = {
        "task": sidecar["output"].get("task", "classification"),
        "thresholds": dataclasses.asdict(thresholds),
        "parity_examples": parity_examples,  # how many raw eval rows the gate runs through LiteRT
        "variants": results,
    }
    (out / names.TFLITE_REPORT_JSON).write_text(json.dumps(summary, indent=2))
    return summary
