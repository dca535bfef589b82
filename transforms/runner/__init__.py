"""Running a job: the local runner, its progress lines, the job's counters."""

from transforms.runner.runtime import wait_for

# What a job of its own needs beside `make_pipeline` (transforms/__init__.py).
__all__ = ["wait_for"]
