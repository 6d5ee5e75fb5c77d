"""amp-pipeline: components."""
