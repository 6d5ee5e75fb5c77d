"""The served SavedModel's dtypes are checked on the artifact as written, read back from disk."""

import tensorflow as tf

from amp_pipeline.components.export.saved_model import artifact_dtypes, check_artifact


def _save(path, compute_dtype):
    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.ones([3, 2]))

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, examples):
            x = tf.ones([tf.shape(examples)[0], 3])
            logits = tf.matmul(tf.cast(x, compute_dtype), tf.cast(self.w, compute_dtype))
            return {"probabilities": tf.cast(tf.nn.softmax(logits), tf.float32)}

    module = Module()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return str(path)


def test_a_float32_artifact_passes_and_one_computing_in_bfloat16_is_named(tmp_path):
    clean = artifact_dtypes(_save(tmp_path / "f32", tf.float32))
    assert clean["signatures"]["serving_default"]["outputs"] == {"probabilities": "float32"}
    assert clean["variables"] == {"float32": 1}
    assert clean["reduced_precision_ops"] == {}
    assert check_artifact(clean, "float32") == []

    mixed = artifact_dtypes(_save(tmp_path / "bf16", tf.bfloat16))
    assert "MatMul" in mixed["reduced_precision_ops"]
    (problem,) = check_artifact(mixed, "float32")
    assert problem.startswith("the float32 serving model computes in reduced precision: ")
    assert "MatMul x1" in problem
    # Served as trained (--serving-precision mixed), reduced precision is what was asked for.
    assert check_artifact(mixed, "mixed") == []
