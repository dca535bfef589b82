"""Work units in a pipeline: a Source's units planned, spread and read.

The contract itself (`WorkUnit`, `Failed`, `UnitReader`, `Source`) is
Beam-free, in transforms/recipe/units.py. Every source plans its units when
the job starts, on a worker (so a corpus of a million files never passes
through the job graph), and reads one unit at a time on the workers:

    source = Source(functools.partial(plan_tar_units, patterns, target_bytes), TarReader())
    read = pipeline | "ReadSamples" >> ReadUnits(source)
    read.samples, read.failures
"""

from __future__ import annotations

from typing import Any, Dict

import apache_beam as beam
from apache_beam.transforms.core import RestrictionProvider

from transforms.format.dead_letters import FAILURES
from transforms.format.outputs import SampleResult
from transforms.recipe.units import Failed, Source, WorkUnit, units_in_order

__all__ = ["PlanUnits", "ReadUnits", "SplittableUnits"]


class SplittableUnits(RestrictionProvider):
    """Mixin for a DoFn over a splittable reader's units: the DoFn is its own
    restriction provider (`DoFn.RestrictionParam()`), delegating to the reader."""

    _reader: Any

    def initial_restriction(self, unit):
        return self._reader.initial_restriction(unit)

    def create_tracker(self, restriction):
        return self._reader.create_tracker(restriction)

    def restriction_size(self, unit, restriction):
        return self._reader.restriction_size(unit, restriction)


@beam.typehints.with_input_types(WorkUnit)
@beam.typehints.with_output_types(Dict[str, Any])
class _ReadUnitFn(beam.DoFn):
    """A unit -> its Samples (main output) and dead letters (FAILURES)."""

    def __init__(self, reader):
        self._reader = reader

    def setup(self):
        self._reader.setup()

    def _outputs(self, unit, tracker=None):
        for event in self._reader.read(unit, tracker):
            yield (beam.pvalue.TaggedOutput(FAILURES, event.record) if isinstance(event, Failed)
                   else event)

    def process(self, unit):
        yield from self._outputs(unit)

    def teardown(self):
        self._reader.teardown()


class _ReadSplittableUnitFn(SplittableUnits, _ReadUnitFn):
    def process(self, unit, tracker=beam.DoFn.RestrictionParam()):
        yield from self._outputs(unit, tracker)


class PlanUnits(beam.PTransform):
    """The pipeline root -> a Source's work units, planned by one worker when the
    job starts and spread over all of them, largest first."""

    def __init__(self, source: Source):
        super().__init__()
        self._plan = source.plan

    def expand(self, pbegin):
        plan = self._plan
        return (pbegin
                | "Start" >> beam.Create([None])
                | "Plan" >> beam.FlatMap(lambda _: units_in_order(plan()))
                # Planning yields every unit from one worker: spread them out.
                | "Spread" >> beam.Reshuffle())


class ReadUnits(beam.PTransform):
    """A Source -> its Samples and dead letters.

        read = pipeline | "ReadSamples" >> ReadUnits(source)
        read.samples      # PCollection of Sample dicts, in no particular order
        read.failures     # dead letters

    The units are planned when the job starts and spread over workers (largest
    first); each is read whole by one, or split further by the runner when the
    reader is splittable.
    """

    def __init__(self, source: Source):
        super().__init__()
        self._source = source

    def expand(self, pbegin):
        reader = self._source.reader
        fn = _ReadSplittableUnitFn(reader) if reader.splittable else _ReadUnitFn(reader)
        read = (pbegin
                | "Units" >> PlanUnits(self._source)
                | "ReadUnits" >> beam.ParDo(fn).with_outputs(FAILURES, main="samples"))
        return SampleResult(read.samples, read[FAILURES])
