"""Model quality against simple baselines: text (TF-IDF), regression, ratings."""
