"""Serving under load: the local server's throughput and latency."""
