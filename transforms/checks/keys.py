"""Keys once per dataset: a key given twice is found wherever its samples lie.

A unit's reader sees only its own samples, so whether two rows of one key
were both written used to depend on the unit boundaries (--shard_size_mb, row
order, which file). Two checks make it the dataset's rule
(transforms/format/keys.py), each a keyed step of small records:

- `KeysGivenTwice`, before any example is built: each unit's reader lists
  its samples' keys (`UnitReader.keys`: a tar's member names, a listing's
  key column, without reading media), the keys given more than once are
  found by a shuffle of (key, place) records, and every pass over the units
  makes each of their samples a `duplicate_key` dead letter naming all its
  places (transforms/recipe/driver.py `Decided.repeated`);
- `KeysWrittenTwice`, after: the keys each unit's (or bundle's) samples
  gave, from their receipts, one record per sample. A PCollection's
  elements cannot be read twice, so this is where a key given twice there
  is found, and the job fails before publishing, naming it; over a Source
  it finds nothing unless a reader's `keys` and `read` disagree. verify runs
  the same count over the published ledger (transforms/verify/ledger_checks.py).
"""

from __future__ import annotations

from typing import Iterable, Iterator

import apache_beam as beam

from transforms.checks.check import DatasetCheck, Judging, Policy, Verdict
from transforms.format.keys import places_text
from transforms.recipe.observers import KEYS, observed
from transforms.recipe.segments import SegmentOptions, converted_key
from transforms.recipe.units import WorkUnit

__all__ = ["KeysGivenTwice", "KeysOnce", "KeysWrittenTwice", "written_twice_message"]


class _UnitKeysFn(beam.DoFn):
    """A unit -> (key, KeyPlace) of each of its samples (UnitReader.keys), by
    the key it is converted under (a row that is a segment: the segment's)."""

    def __init__(self, reader, segments: SegmentOptions):
        self._reader = reader
        self._segments = segments

    def setup(self):
        self._reader.setup(counting=False)   # the converter's read is the job's

    def process(self, unit: WorkUnit) -> Iterator[tuple]:
        segments = self._segments
        for key, place, values in self._reader.keys(unit, segments.columns):
            converted = converted_key(key, values, segments)
            if converted is not None:
                yield converted, place

    def teardown(self):
        self._reader.teardown()


class _NamePlacesFn(beam.DoFn):
    """(key, its places) -> (key, (times, its places in words)) when there are
    two or more, the places named by the reader (a listing's lines)."""

    def __init__(self, reader):
        self._reader = reader

    def setup(self):
        self._reader.setup(counting=False)

    def process(self, keyed):
        key, places = keyed
        if _more_than_one(places):
            places = sorted(places)
            yield key, (len(places), places_text(self._reader.place_names(places)))

    def teardown(self):
        self._reader.teardown()


class KeysGivenTwice(beam.PTransform):
    """Work units -> (key, (times, its places in words)) of each key that
    `reader` gives more than once, as `segments` convert its samples: none as
    a rule, taken as a dict (`beam.pvalue.AsDict`). Only (key, place) records
    are shuffled."""

    def __init__(self, reader, segments: SegmentOptions):
        super().__init__()
        self._reader = reader
        self._segments = segments

    def expand(self, units):
        reader = self._reader
        return (units
                | "UnitKeys" >> beam.ParDo(_UnitKeysFn(reader, self._segments))
                | "ByKey" >> beam.GroupByKey()
                # (key, [KeyPlace, ...])
                | "Repeated" >> beam.ParDo(_NamePlacesFn(reader)))


def _more_than_one(items: Iterable) -> bool:
    """Whether `items` (a grouped value, read once) holds two or more."""
    iterator = iter(items)
    return next(iterator, None) is not None and next(iterator, None) is not None


def written_twice_message(repeated: list) -> str:
    """Why a dataset some key of which its samples gave twice is not published:
    `repeated` holds (key, [unit, ...]) pairs."""
    key, units = sorted(repeated)[0]
    return (f"{len(repeated)} key(s) given more than once, e.g. {key!r} {len(units)} times: "
            "each sample needs its own __key__ (examples are named, ordered and split by "
            "it); give your elements distinct keys, or drop the copies")


class KeysWrittenTwice(beam.PTransform):
    """(key, unit) of each sample a unit (or a bundle) was given, from its
    receipt or the published ledger -> (key, [unit, ...]) of each key given
    more than once (a bundle of a PCollection counts each time it holds it)."""

    def expand(self, keys):
        return (keys
                | "UnitsOfKey" >> beam.GroupByKey()
                # (key, [unit, ...])
                | "GivenTwice" >> beam.FlatMapTuple(lambda key, units: (
                    [(key, sorted(units))] if _more_than_one(units) else [])))


class KeysOnce(DatasetCheck):
    """A key once in the dataset: the keys each unit's samples gave, counted
    over every unit."""

    name = "keys"
    observer = KEYS

    def records(self, receipt) -> Iterable:
        return ((key, receipt.unit) for key in observed(receipt, KEYS.name))

    def join(self, policy: Policy) -> beam.PTransform:  # noqa: ARG002
        return KeysWrittenTwice()

    def judge(self, found: list, judging: Judging) -> Verdict:  # noqa: ARG002
        # A repeat is the data's: every rerun would find it again.
        return Verdict(written_twice_message(found) if found else "", final=bool(found))
