"""Translating a pipeline into a Dataflow job without submitting it (tests' helper).

The DataflowRunner with `--dry_run True` does everything up to creating the
job - Dataflow's transform overrides, the portable pipeline proto, the worker
environment and its staged artifacts, the Job message - then returns a result
holding that Job instead of calling the service (Beam 2.77,
runners/dataflow/dataflow_runner.py `run_pipeline`). It needs no credentials
and no network; `dry_run` below keeps the Job it built, and the names of the
options read while the launcher ran.
"""

from typing import Callable

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability import common_urns, python_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.dataflow import dataflow_runner

__all__ = ["DATAFLOW", "IMAGE", "Translation", "dry_run", "translate"]

IMAGE = "us-central1-docker.pkg.dev/datagen-test/beam-datagen/beam-datagen:test"
DATAFLOW = ["--runner", "DataflowRunner", "--project", "datagen-test", "--region", "us-central1",
            "--temp_location", "gs://datagen-test/tmp", "--dry_run", "True"]

_PICKLED_FNS = {python_urns.PICKLED_DOFN_INFO, python_urns.PICKLED_COMBINE_FN}
_FN_PAYLOADS = {common_urns.primitives.PAR_DO.urn: (beam_runner_api_pb2.ParDoPayload, "do_fn"),
                common_urns.composites.COMBINE_PER_KEY.urn: (
                    beam_runner_api_pb2.CombinePayload, "combine_fn"),
                common_urns.composites.COMBINE_GLOBALLY.urn: (
                    beam_runner_api_pb2.CombinePayload, "combine_fn")}


class Translation:
    """What a dry run built: the Dataflow Job, and the option names read meanwhile."""

    def __init__(self, job, options_read: set):
        self.job = job
        self.proto = job.proto_pipeline
        self.options_read = options_read

    def transform_names(self) -> set:
        return {t.unique_name for t in self.proto.components.transforms.values()}

    def fn_payloads(self) -> list:
        """The pickled DoFns and CombineFns, as the workers receive them."""
        payloads = []
        for transform in self.proto.components.transforms.values():
            if transform.spec.urn not in _FN_PAYLOADS:
                continue
            message, field = _FN_PAYLOADS[transform.spec.urn]
            fn = getattr(message.FromString(transform.spec.payload), field)
            if fn.urn in _PICKLED_FNS:
                payloads.append(fn.payload)
        return payloads

    def environments(self) -> list:
        """(container image, [staged artifact names]) of every worker environment."""
        found = []
        for env in self.proto.components.environments.values():
            image = beam_runner_api_pb2.DockerPayload.FromString(env.payload).container_image
            names = [beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(
                d.role_payload).staged_name for d in env.dependencies]
            found.append((image, names))
        return found


def dry_run(monkeypatch, launch: Callable[[], object]) -> Translation:
    """Calls `launch()`, which must run exactly one pipeline with DATAFLOW's options."""
    jobs, read = [], set()
    run_pipeline = dataflow_runner.DataflowRunner.run_pipeline
    getattr_ = PipelineOptions.__getattr__

    def keep_job(self, pipeline, options, pipeline_proto=None):
        result = run_pipeline(self, pipeline, options, pipeline_proto)
        jobs.append(result.job)
        return result

    def note_read(self, name):
        read.add(name)
        return getattr_(self, name)

    with monkeypatch.context() as patch:
        patch.setattr(dataflow_runner.DataflowRunner, "run_pipeline", keep_job)
        patch.setattr(PipelineOptions, "__getattr__", note_read)
        launch()
    assert len(jobs) == 1, f"{len(jobs)} jobs"
    return Translation(jobs[0], read)


def translate(monkeypatch, module, argv: list) -> Translation:
    """`module.run(argv)` on a dry-run DataflowRunner."""
    return dry_run(monkeypatch, lambda: module.run([*argv, *DATAFLOW]))
