"""Compiling the pipeline for Kubeflow Pipelines and Vertex AI: the cluster target
(`target.py`: images, machine types, accelerators), the runner that turns `create_pipeline` into a
KFP/Vertex spec with runtime parameters and places the trainers and SideBySide on the same
accelerator (`runner.py`), submission (`submit.py`), the user's model module baked into the image
(`user_module.py`) and the `compile`/`submit` commands (`cli.py`).

May import `pipeline`, `components`, `serving` and `core`; not `benchmarks`.
"""
