"""amp-pipeline: kubeflow."""
