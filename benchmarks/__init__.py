"""amp-pipeline: benchmarks."""
