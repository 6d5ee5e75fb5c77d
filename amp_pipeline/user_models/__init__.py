"""Users' model modules, copied here by `amp-pipeline compile --model-module FILE.py` so that
`kubeflow/Dockerfile` puts them in the component image; the compiled spec names them by import
path (`amp_pipeline.user_models.<name>`). Files other than this one are not committed
(.gitignore)."""
