"""Which steps of a pooled local run stay in the launcher: those over small records.

With more than one local worker, every step ran on the pool's worker
processes (transforms/runner/worker_pool.py), so each of the final step's
small stages (a check's join, the ledger's parts, the moves) was a round
trip to another process and a second build of the stage there: a 2-worker
job's final step took nearly twice a 1-worker one's (docs/performance.md,
"Small records in the launcher"). A transform whose every step handles only
small records (receipts, tallies, keys, the plan of the units) says so by
being an `OnSmallRecords`; in a pooled run its steps run in the launcher's
own process, as a 1-worker job runs them all. Everything else (converting
units or elements, the light passes over the media, a user's own steps)
runs on the workers, as before.

`launcher_steps` finds those steps in a Beam pipeline; `steps_in_process`
rewrites the pipeline's runner-API proto (Beam's portable format: each step
names the environment it runs in) to run them in an in-process environment.
"""

from __future__ import annotations

from apache_beam.pipeline import AppliedPTransform, Pipeline, PipelineVisitor
from apache_beam.portability import python_urns
from apache_beam.portability.api import beam_runner_api_pb2

__all__ = ["IN_PROCESS", "OnSmallRecords", "launcher_steps", "steps_in_process"]

# The environment id of the steps run in the launcher.
IN_PROCESS = "datagen-in-process"


class OnSmallRecords:
    """A mixin for a PTransform each of whose steps handles only small records:
    a pooled local run runs them in the launcher (module docstring)."""


def launcher_steps(pipeline: Pipeline) -> frozenset:
    """The full labels of `pipeline`'s steps (composite or not) that lie within
    an OnSmallRecords, itself included."""
    found = set()

    class _Within(PipelineVisitor):
        def enter_composite_transform(self, applied: AppliedPTransform) -> None:
            self.visit_transform(applied)

        def visit_transform(self, applied: AppliedPTransform) -> None:
            node = applied
            while node is not None:
                if isinstance(node.transform, OnSmallRecords):
                    found.add(applied.full_label)
                    return
                node = node.parent

    pipeline.visit(_Within())
    return frozenset(found)


def steps_in_process(proto: beam_runner_api_pb2.Pipeline,
                     in_launcher: frozenset) -> beam_runner_api_pb2.Pipeline:
    """`proto` with the steps named in `in_launcher` moved from its one worker
    environment to an in-process one (IN_PROCESS, with the workers'
    capabilities). Changed in place, and returned; a pipeline with no such
    step, or whose steps run in more than one environment, is left as it is."""
    environments = proto.components.environments
    used = {t.environment_id for t in proto.components.transforms.values() if t.environment_id}
    if not in_launcher or len(used) != 1:
        return proto
    workers = used.pop()
    in_process = environments[IN_PROCESS]
    in_process.CopyFrom(environments[workers])
    in_process.urn = python_urns.EMBEDDED_PYTHON
    in_process.ClearField("payload")
    for transform in proto.components.transforms.values():
        if transform.environment_id == workers and transform.unique_name in in_launcher:
            transform.environment_id = IN_PROCESS
    return proto
