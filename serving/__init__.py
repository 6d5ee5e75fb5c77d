"""amp-pipeline: serving."""
