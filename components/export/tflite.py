"""TFLite variants of the trained model, each checked against the float32 SavedModel.

Mixed-precision graphs do not convert (`invalid TFLite type: 'tensor<16xbf16>'`), so
the converter always reads a float32 rebuild of the model: same architecture, same weights (the
variables of a mixed-precision model are float32 already).

The TFLite models take the Transform output `x` (the preprocessed feature vector); a sidecar
`<variant>.json` and `labels.txt` describe inputs and classes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
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
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    if variant == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif variant == "dynamic_int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif variant == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    elif variant != "float32":
        raise ValueError(
            f"Invalid value for argument variant: expected one of {', '.join(VARIANTS)}. "
            f"Received: variant={variant!r}"
        )
    return converter


BATCH = 256  # rows per interpreter call in the parity checks (latency is timed one at a time)
# Parity is measured on the first PARITY_EXAMPLES of the eval split by default
# (--tflite-parity-examples): at 5,000 a 100% agreement proves the 99.5% floor, and a BERT-base
# encoder at ~50 ms a call checks each variant in minutes, not hours.
PARITY_EXAMPLES = 5_000


class TFLiteRunner:
    """Runs a .tflite file on float inputs, quantizing and dequantizing where the model is int8."""

    def __init__(self, path: str | Path):
        import tensorflow as tf

        self.interpreter = tf.lite.Interpreter(model_path=str(path))
        self.interpreter.allocate_tensors()
        self.input = self.interpreter.get_input_details()[0]
        self.output = self.interpreter.get_output_details()[0]

    def _quantize(self, x: np.ndarray) -> np.ndarray:
        scale, zero = self.input["quantization"]
        if self.input["dtype"] in (np.int8, np.uint8) and scale:
            info = np.iinfo(self.input["dtype"])
            q = np.round(x / scale + zero)
            return np.clip(q, info.min, info.max).astype(self.input["dtype"])
        return x.astype(self.input["dtype"])

    def _dequantize(self, y: np.ndarray) -> np.ndarray:
        scale, zero = self.output["quantization"]
        if self.output["dtype"] in (np.int8, np.uint8) and scale:
            return (y.astype(np.float32) - zero) * scale
        return y.astype(np.float32)

    def predict_one(self, x: np.ndarray) -> np.ndarray:
        self.interpreter.set_tensor(self.input["index"], self._quantize(x[None, :]))
        self.interpreter.invoke()
        return self._dequantize(self.interpreter.get_tensor(self.output["index"]))[0]

    def predict_batched(self, xs: np.ndarray, batch: int = BATCH) -> np.ndarray:
        """Outputs for every row, `batch` rows per interpreter call (the input resized; the
        models take [None, width]); one row at a time where the model cannot be resized."""
        index = self.input["index"]
        try:
            outputs = []
            for start in range(0, len(xs), batch):
                rows = xs[start : start + batch]
                self.interpreter.resize_tensor_input(index, [len(rows), xs.shape[1]])
                self.interpreter.allocate_tensors()
                self.interpreter.set_tensor(index, self._quantize(rows))
                self.interpreter.invoke()
                outputs.append(self._dequantize(self.interpreter.get_tensor(self.output["index"])))
        except (ValueError, RuntimeError):
            logger.info("TFLite model not resizable: one example per call")
            outputs = [self.predict(xs)[0]]
        finally:
            self.interpreter.resize_tensor_input(index, [1, xs.shape[1]])
            self.interpreter.allocate_tensors()
        return np.concatenate(outputs) if outputs else np.zeros((0, 0), np.float32)

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, float]:
        """Probabilities for every row, and the median latency per example in milliseconds."""
        outputs, seconds = [], []
        for x in xs:
            t0 = time.perf_counter()
            outputs.append(self.predict_one(x))
            seconds.append(time.perf_counter() - t0)
        return np.stack(outputs), float(np.median(seconds) * 1000.0)


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
    float32_saved_model: str,
    out_dir: str | Path,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    reference_probs: np.ndarray,
    representative_x: np.ndarray,
    class_names: list[str],
    input_description: dict,
    variants: tuple[str, ...] = VARIANTS,
    thresholds: ParityThresholds | None = None,
    latency_examples: int = 200,
    label_scale: tuple[float, float] | None = None,
) -> dict:
    """Converts each variant and measures it on the eval split against the reference (the
    exported serving SavedModel's probabilities): the counts the gate's TFLite rules decide on
    (components/gate/rules.py::tflite_rules). A variant that fails to convert is reported with
    the converter's reason.

    For a regression label, `label_scale` is (label_mean, label_std): the TFLite models output
    the standardised label, `reference_probs` and `eval_y` are in the label's units, and each
    variant's predictions are compared with them there (regression_parity).
    """
    thresholds = thresholds or ParityThresholds()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if label_scale is None:
        (out / "labels.txt").write_text("\n".join(class_names) + "\n")
        reference = {
            "accuracy": float(np.mean(reference_probs.argmax(axis=1) == eval_y)),
            "examples": int(len(eval_y)),
        }
    else:
        reference = {
            "mae": float(np.mean(np.abs(reference_probs - eval_y))),
            "examples": int(len(eval_y)),
        }

    def representative():
        for row in representative_x[:200]:
            yield [row[None, :].astype(np.float32)]

    results = {}
    for variant in variants:
        path = out / f"model_{variant}.tflite"
        try:
            path.write_bytes(_converter(float32_saved_model, variant, representative).convert())
        except Exception as e:  # noqa: BLE001 - a failed variant is reported, not raised
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            logger.warning("TFLite %s failed to convert: %s", variant, reason)
            results[variant] = {"converted": False, "error": reason}
            continue
        runner = TFLiteRunner(path)
        started = time.perf_counter()
        probs = runner.predict_batched(eval_x)
        parity_s = time.perf_counter() - started
        _, latency = runner.predict(eval_x[:latency_examples])
        if label_scale is None:
            measured = parity(probs, reference_probs, eval_y)
        else:
            predicted = probs.reshape(-1).astype(np.float64) * label_scale[1] + label_scale[0]
            measured = regression_parity(predicted, reference_probs, eval_y, label_scale[1])
        result = {
            "converted": True,
            "path": str(path),
            "size_bytes": path.stat().st_size,
            **measured,
            "latency_ms": latency,
            "parity_seconds": parity_s,
            "input_dtype": np.dtype(runner.input["dtype"]).name,
        }
        results[variant] = result
        sidecar = {
            "variant": variant,
            "input": {
                **input_description,
                "tensor_dtype": result["input_dtype"],
                "quantization": list(runner.input["quantization"]),
            },
            "output": {
                "name": names.PROBABILITIES,
                "classes": class_names,
                "labels_file": "labels.txt",
            }
            if label_scale is None
            else {
                "name": names.PREDICTIONS,
                "standardised": True,
                "label_mean": label_scale[0],
                "label_std": label_scale[1],
                "to_label_units": "prediction = output * label_std + label_mean",
            },
        }
        path.with_suffix(".json").write_text(json.dumps(sidecar, indent=2))
    summary = {
        "reference": reference,
        "sample": f"the first {len(eval_y)} examples of the eval split",
        "task": "classification" if label_scale is None else "regression",
        "thresholds": dataclasses.asdict(thresholds),
        "variants": results,
    }
    (out / names.TFLITE_REPORT_JSON).write_text(json.dumps(summary, indent=2))
    return summary
