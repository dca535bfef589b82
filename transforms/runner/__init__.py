"""Running a job: the local runner, its progress lines, the job's counters."""

from transforms.format.exports import exports_on_first_use

# What a job of its own needs beside `make_pipeline` (transforms/__init__.py),
# loaded on first use: the runner's modules load Beam's, and every Beam step
# imports the counters from here.
_EXPORTS = {"wait_for": "transforms.runner.runtime"}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports_on_first_use(__name__, _EXPORTS)
