"""Request logs in TF Serving's format: every served request (or a sampled share) with its answer
as a `tensorflow_serving.apis.PredictionLog`, in TFRecord files that TF Serving's own request
logging, TFX's BulkInferrer and `amp-pipeline monitor` all read (`records.py`); written off the
answer's path by one thread from a bounded queue, rotated by size, bounded in total, owner-only,
with named features left out (`writer.py`).

May import: `core`, and `serving`'s own modules.
"""
