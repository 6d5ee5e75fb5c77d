"""The gate's noise: repeated runs of one configuration, and how often the decision changes."""
