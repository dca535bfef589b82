"""Benchmarks against peer tools, each installed in a venv of its own (make bench-peers)."""
