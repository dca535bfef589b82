"""Choosing the runner: the DirectRunner without its Prism detour.

Beam 2.77's DirectRunner first tries the Prism runner, whose binary it downloads
at run time, and falls back when that fails. Here (and on any machine without
network) that attempt is wasted time and a stray worker pool, so a pipeline that
asks for the DirectRunner gets the FnApiRunner it would have fallen back to; it
honours --direct_num_workers and --direct_running_mode the same way.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

__all__ = ["make_pipeline", "local_runner"]

_DIRECT_NAMES = {None, "DirectRunner", "direct", "SwitchingDirectRunner", "FnApiRunner"}


def local_runner() -> FnApiRunner:
    """The in-process batch runner the DirectRunner would fall back to."""
    return FnApiRunner()


def make_pipeline(options: PipelineOptions) -> beam.Pipeline:
    """A Pipeline for `options`; DirectRunner requests go straight to the FnApiRunner.

    With --direct_num_workers > 1 and no explicit --direct_running_mode, workers
    are processes: threads would share one GIL and not run faster.
    """
    runner = options.view_as(StandardOptions).runner
    if runner not in _DIRECT_NAMES:
        return beam.Pipeline(options=options)
    direct = options.view_as(DirectOptions)
    if (direct.direct_num_workers or 1) != 1 and "direct_running_mode" not in options.get_all_options(
            drop_default=True):
        direct.direct_running_mode = "multi_processing"
    return beam.Pipeline(runner=local_runner(), options=options)
