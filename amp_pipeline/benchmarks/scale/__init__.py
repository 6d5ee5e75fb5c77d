"""The pipeline at scale: rows and images against time and memory, Beam batches, the shuffled copy,
the trainer's overhead."""
