"""Choosing the runner, and running a job on it the same way locally and on Dataflow.

Beam 2.77's DirectRunner first tries the Prism runner, whose binary it downloads
at run time, and falls back when that fails. Here (and on any machine without
network) that attempt is wasted time and a stray worker pool, so a pipeline that
asks for the DirectRunner gets the FnApiRunner it would have fallen back to; it
honours --direct_num_workers and --direct_running_mode the same way.

More than one local worker, and no --direct_running_mode: the workers are
processes (threads would share one GIL), forked from one process that holds
Beam already (transforms/runner/worker_pool.py: forked from a job's command
line as it starts, or started as the pipeline is made) instead of Beam's own
`multi_processing` ones, which start only when the first step runs and cost
seconds of start-up and shut-down (docs/performance.md has the timeline).
The steps of a transform over small records (the final step, the plan of
the units) run in this process instead, on one in-process worker
(transforms/runner/launcher_steps.py). `--direct_running_mode
multi_processing` still asks for Beam's.

On a service runner (Dataflow) two Beam defaults change here:

- `--save_main_session` defaults to off. Beam turns it on for Dataflow (with
  cloudpickle); our DoFns live in importable modules and pickle only their
  configuration, so nothing needs `__main__`'s globals on the workers, and a
  launcher's session (a flex template's, say) is not shipped to them.
- `--no_wait_until_finish` (Beam's flag) is honoured by `wait_for`: a flex
  template launcher must return once the job is submitted, not wait for it.
"""

from __future__ import annotations

import logging
import weakref

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DirectOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
)
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineResult, PipelineState

from transforms.runner.beam_internals import (
    OneWorkerStages,
    raised_in_worker,
    remember_dofn_specs,
    remember_option_views,
)
from transforms.runner.launcher_steps import IN_PROCESS, launcher_steps, steps_in_process
from transforms.runner.worker_pool import LocalWorkerPool, discard_ahead

__all__ = ["announce_job", "make_pipeline", "local_runner", "runs_locally", "wait_for"]

_LOG = logging.getLogger(__name__)

_DIRECT_NAMES = {None, "DirectRunner", "direct", "SwitchingDirectRunner", "FnApiRunner"}


def local_runner(progress_s: float | None = None) -> FnApiRunner:
    """The in-process batch runner the DirectRunner would fall back to; with
    `progress_s`, asking its workers for their counters that often
    (transforms/runner/progress.py)."""
    return FnApiRunner(progress_request_frequency=progress_s)


class _PooledRunner(OneWorkerStages, FnApiRunner):
    """The FnApiRunner with its workers from a LocalWorkerPool, started with it
    and ended with its one run. The steps of transforms over small records
    run in this process instead (transforms/runner/launcher_steps.py)."""

    one_worker_environment = IN_PROCESS

    def __init__(self, progress_s: float | None):
        pool = LocalWorkerPool()
        super().__init__(default_environment=pool.environment,
                         progress_request_frequency=progress_s)
        self._pool = pool
        self._in_launcher = frozenset()   # run_pipeline finds them
        # A pipeline made and never run (refused while being built) ends its pool too.
        self._close_pool = weakref.finalize(self, pool.close)

    def run_pipeline(self, pipeline, options):
        beam_runner_log = logging.getLogger(FnApiRunner.__module__)
        beam_runner_log.addFilter(_not_about_running_mode)
        self._in_launcher = launcher_steps(pipeline)
        try:
            with self._pool.interrupting():
                return super().run_pipeline(pipeline, options)
        except KeyboardInterrupt:
            if self._pool.died:  # the pool's signal (transforms/runner/worker_pool.py)
                raise RuntimeError(self._pool.died) from None
            raise
        except RuntimeError as e:
            raised = raised_in_worker(e)
            if raised is None:
                raise
            _LOG.debug("raised in a worker process: %s", e)
            raise raised from None
        finally:
            beam_runner_log.removeFilter(_not_about_running_mode)
            self._close_pool()

    def run_via_runner_api(self, pipeline_proto, options):
        return super().run_via_runner_api(steps_in_process(pipeline_proto, self._in_launcher),
                                          options)


def _not_about_running_mode(record: logging.LogRecord) -> bool:
    # The runner warns that workers in its default running mode share one
    # process; the pool's are processes of their own.
    return "direct_running_mode should be" not in record.getMessage()


def runs_locally(options: PipelineOptions) -> bool:
    """Whether the job runs in this process (a DirectRunner request), not on a service."""
    return options.view_as(StandardOptions).runner in _DIRECT_NAMES


def make_pipeline(options: PipelineOptions | None = None,
                  progress_s: float | None = None) -> beam.Pipeline:
    """A Pipeline for `options` (none: run here); DirectRunner requests go straight
    to the FnApiRunner (asking for progress every `progress_s` seconds, if given).

    With --direct_num_workers > 1 and no explicit --direct_running_mode, workers
    are processes from a pool started now; on a service runner,
    --save_main_session is off unless asked for (module docstring).

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.options.pipeline_options import PipelineOptions
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> with dg.make_pipeline(PipelineOptions(["--direct_num_workers", "2"])) as p:
    ...     _ = assert_that(p | beam.Create([1, 2, 3]) | beam.Map(lambda x: x * x),
    ...                     equal_to([1, 4, 9]))
    """
    options = options if options is not None else PipelineOptions([])
    remember_dofn_specs()   # the graph about to be built checks each DoFn once
    remember_option_views()  # and views the options once per class
    if not runs_locally(options):
        discard_ahead()
        setup = options.view_as(SetupOptions)
        if setup.save_main_session is None:
            setup.save_main_session = False
        return beam.Pipeline(options=options)
    direct = options.view_as(DirectOptions)
    chosen = options.get_all_options(drop_default=True)
    # 0 is Beam's "one a core".
    workers = 1 if direct.direct_num_workers is None else direct.direct_num_workers
    if workers != 1 and "direct_running_mode" not in chosen:
        return beam.Pipeline(runner=_PooledRunner(progress_s), options=options)
    discard_ahead()
    return beam.Pipeline(runner=local_runner(progress_s), options=options)


def announce_job(result: PipelineResult, options: PipelineOptions) -> None:
    """Prints where a job submitted to Dataflow can be watched: its console page
    shows the job's counters live (nothing to print for a dry run)."""
    job_id = getattr(result, "job_id", lambda: None)()
    if job_id:
        cloud = options.view_as(GoogleCloudOptions)
        print(f"job {job_id}: https://console.cloud.google.com/dataflow/jobs/{cloud.region}/"
              f"{job_id}?project={cloud.project}")


def wait_for(result: PipelineResult, options: PipelineOptions) -> bool:
    """Waits for the job to finish; True if it finished successfully.

    With --no_wait_until_finish it returns False at once: the job was
    submitted and goes on without this process (a flex template launch). A
    Dataflow dry run (--dry_run) has nothing to wait for and gives False too.
    """
    if options.view_as(StandardOptions).no_wait_until_finish:
        _LOG.info("job submitted; not waiting for it to finish (--no_wait_until_finish)")
        return False
    return result.wait_until_finish() == PipelineState.DONE
