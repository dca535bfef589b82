"""Side-by-side throughput and memory measurements (run, never timed in tests)."""
