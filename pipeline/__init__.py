"""amp-pipeline: pipeline."""
