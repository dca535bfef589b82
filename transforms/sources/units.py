"""Work units in a pipeline: a Source's units planned, spread and read.

The contract itself (`WorkUnit`, `Failed`, `UnitReader`, `Source`) is
Beam-free, in transforms/recipe/units.py. Every source plans its units when
the job starts, on a worker (so a corpus of a million files never passes
through the job graph), and reads one unit at a time on the workers:

    source = Source(functools.partial(plan_tar_units, patterns, target_bytes), TarReader())
    read = pipeline | "ReadSamples" >> ReadUnits(source)
    read.samples, read.failures

Every pass over the units (the converter, and the light passes before it)
takes what the job decided before it as side inputs (`Decisions.sides`)
and drives its samples by the one `Decided` they make (`decided_of`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict

import apache_beam as beam
from apache_beam.transforms.core import RestrictionProvider

from transforms.format.dead_letters import FAILURES
from transforms.format.outputs import SampleResult
from transforms.recipe.driver import NOTHING_DECIDED, Decided
from transforms.recipe.units import Failed, Source, WorkUnit, units_in_order
from transforms.runner.launcher_steps import OnSmallRecords

__all__ = ["Decisions", "NO_DECISIONS", "PlanUnits", "ReadUnits", "SplittableUnits", "decided_of"]


@dataclasses.dataclass(frozen=True)
class Decisions:
    """The PCollections of what the job decides before a pass over its units
    (transforms/recipe/driver.py `Decided`): the stratified splits' Strata
    (a singleton), the (url, key) of the copies --duplicates drop drops, and
    the keys given more than once ((key, (times, places)) pairs,
    transforms/checks/keys.py). None where the job decides no such thing."""

    strata: beam.PCollection | None = None
    dropped: beam.PCollection | None = None
    repeated: beam.PCollection | None = None

    def sides(self) -> dict:
        """The pass's side inputs, by the names `decided_of` takes."""
        sides = {}
        if self.strata is not None:
            sides["strata"] = beam.pvalue.AsSingleton(self.strata)
        if self.dropped is not None:
            sides["dropped"] = beam.pvalue.AsList(self.dropped)
        if self.repeated is not None:
            sides["repeated"] = beam.pvalue.AsDict(self.repeated)
        return sides


NO_DECISIONS = Decisions()


def decided_of(last: tuple, strata=None, dropped=None, repeated=None) -> tuple:
    """(the side inputs' values, their Decided), made again only when a side
    input is not the very one `last` (the previous result, or ()) was made
    of: a worker makes the set of copies to drop once, not once a unit."""
    given = (strata, dropped, repeated)
    if last and all(a is b for a, b in zip(last[0], given)):
        return last
    if all(value is None for value in given):
        return given, NOTHING_DECIDED
    return given, Decided(strata, frozenset(map(tuple, dropped or ())), repeated or {})


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


class PlanUnits(OnSmallRecords, beam.PTransform):
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
