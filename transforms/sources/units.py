"""Work units: a source's input cut into pieces that one worker reads whole.

Every source plans its units when the job starts, on a worker (so a corpus of
a million files never passes through the job graph), and reads one unit at a
time on the workers:

- tar shards: a tar file, or consecutive small ones grouped to a target size
  (transforms/sources/tar.py);
- CSV/JSONL listings: a byte range of a listing, sized so that its rows' media
  come to about the target (transforms/sources/listing.py);
- Bigtable: a key range cut at the table's tablet boundaries
  (transforms/sources/bigtable/source.py).

A unit's `index` is its place in the source's order, fixed by the input alone,
so whatever worker reads it and whenever, what it yields and where that lands
in the dataset are the same on every run (transforms/writer/convert.py writes shards
named in unit order).

A `UnitReader` is the source's configuration, pickled to workers, that turns a
unit into Samples and `Failed` dead letters. A splittable reader (Bigtable's
key ranges) also provides restrictions, so a runner may split a unit while it
is read: it then reads the tracker's current restriction, claiming each key.

    source = Source(functools.partial(plan_tar_units, patterns, target_bytes), TarReader())
    read = pipeline | "ReadSamples" >> ReadUnits(source)
    read.samples, read.failures

A planning function must give the same units for the same input: their
indexes name the shards.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Iterator, NamedTuple, Sequence

import apache_beam as beam
from apache_beam.transforms.core import RestrictionProvider

from transforms.format.arguments import ArgumentTypeError
from transforms.format.dead_letters import FAILURES, FILE, SAMPLE, dead_letter
from transforms.format.outputs import SampleResult
from transforms.recipe.examples import ExampleRecipe, StageError, recipe_samples

__all__ = ["STORED_FIELD_BYTES", "TARGET_BYTES",
           "WorkUnit", "Failed", "UnitReader", "Source", "PlanUnits",
           "ReadUnits", "SplittableUnits", "group_by_size", "recipe_samples_of", "streaming",
           "units_in_order"]

# The size a work unit's input and a shard aim at, unless told otherwise: big
# enough that a unit's fixed costs vanish, small enough to spread over workers.
TARGET_BYTES = 128 << 20
# A field this large is left stored by a reader that can (a tar member of an
# uncompressed archive) and streamed by the decoders, so memory does not grow
# with a recording's length; smaller ones are read whole, one read each.
STORED_FIELD_BYTES = 32 << 20


class WorkUnit(NamedTuple):
    """One piece of a source's input, read whole by one worker.

    >>> import transforms as dg
    >>> unit = dg.WorkUnit(index=0, inputs=("a.jsonl", "b.jsonl"), size=2 << 20)
    >>> unit.index, unit.inputs[0]   # shards are named in index order
    (0, 'a.jsonl')
    """

    index: int      # place in the source's order: shards are named in this order
    inputs: tuple   # what to read: tar paths, (listing, start, end), (start key, end key)
    size: int       # estimated input bytes, to spread the work
    # (path, file_version) of each file read, as planned: a receipt of the unit is
    # reused only for the same versions (transforms/writer/ledger.py). Empty for
    # a key range: a table has no version to read.
    versions: tuple = ()


class Failed(NamedTuple):
    """What a reader yields for input that did not become a Sample: its dead letter.

    >>> import transforms as dg
    >>> failed = dg.Failed.of("read_jsonl", ValueError("not JSON"), url="a.jsonl", key="line 3")
    >>> failed.record["stage"], failed.record["key"], failed.record["message"]
    ('read_jsonl', 'line 3', 'not JSON')
    """

    record: dict

    @classmethod
    def of(cls, stage: str, error: BaseException | str, *, url: str, key: str | None = None,
           member: str | None = None, file: bool = False, **extra) -> "Failed":
        """The dead letter of one sample (of a whole `file` that yielded none) that
        failed at `stage`, naming the input, with any `extra` fields
        (transforms/format/dead_letters.py)."""
        return cls(dead_letter(stage, error, url=url, key=key, member=member,
                               unit=FILE if file else SAMPLE, **extra))


class UnitReader:
    """Reads units into Samples: subclass it and write `read`. Configuration
    only until setup() makes its clients, so it pickles to workers.

    >>> import transforms as dg
    >>> class Numbers(dg.UnitReader):          # a unit's inputs are numbers here
    ...     def read(self, unit, tracker=None):
    ...         for n in unit.inputs:
    ...             yield {"__key__": f"n{n}", "n": n}
    >>> [s["__key__"] for s in Numbers().read(dg.WorkUnit(0, (1, 2), 2))]
    ['n1', 'n2']

    The defaults: a unit is read whole (`splittable` False), setup(),
    teardown() and check_recipe() do nothing. A splittable reader (Bigtable's key ranges) also
    gives restrictions (`SplittableUnits`). A reader may also have
    `leaving_stored(min_bytes)`: a copy of itself that gives fields of at least
    `min_bytes` as StoredBytes (transforms/format/sample.py) rather than bytes
    (`streaming`).
    """

    splittable = False

    def check_recipe(self, recipe) -> None:
        """ArgumentError when the recipe would misread this input; WriteDataset
        asks before any work. By default any recipe will do."""

    def setup(self, counting: bool = True) -> None:
        """Makes clients and counters; `counting` false for a light pass whose
        reads are not the job's (transforms/runner/counters.py)."""

    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:
        """The unit's Samples and dead letters (`Failed`); a splittable reader
        given the tracker of a restriction reads that restriction only."""
        raise NotImplementedError(f"{type(self).__name__} must define read(unit, tracker=None)")

    def teardown(self) -> None:
        """Closes what setup() opened."""


def streaming(reader: UnitReader) -> UnitReader:
    """The reader leaving fields of STORED_FIELD_BYTES or more stored, where it
    can: for a caller that builds examples, whose decoders stream them."""
    leaving_stored = getattr(reader, "leaving_stored", None)
    return leaving_stored(STORED_FIELD_BYTES) if leaving_stored else reader


def recipe_samples_of(reader: UnitReader, unit: WorkUnit, recipe: ExampleRecipe) -> Iterator:
    """The samples of `unit` the recipe converts (a recording's segments one by
    one, transforms/recipe/examples.py `recipe_samples`), for a pass of its own
    beside the converter's: what the converter makes a dead letter of (a
    reader's Failed, a recording whose segments cannot be read) is left out."""
    for event in reader.read(unit):
        if isinstance(event, Failed):
            continue
        try:
            samples = recipe_samples(event, recipe)
        except StageError:
            continue
        yield from samples


@dataclasses.dataclass(frozen=True)
class Source:
    """A source: the function that plans its units and the reader of one unit.
    Both are pickled to workers, so configuration only.

    A Source of your own keeps what the project's readers have: the output is
    the same bytes on every run and runner (units are read whole and their
    shards named in unit order), no sample crosses a shuffle, and --resume
    can reuse units. Here, a JSONL listing of texts read two lines a unit:

    >>> import json, transforms as dg
    >>> with open("texts.jsonl", "w") as f:
    ...     _ = f.write("".join(json.dumps({"id": i, "text": "hi " * i}) + "\\n"
    ...                     for i in range(6)) + "{broken\\n")
    >>> def plan():
    ...     lines = open("texts.jsonl").read().splitlines()
    ...     return [dg.WorkUnit(i, tuple(lines[2 * i:2 * i + 2]), 2) for i in range(4)]
    >>> class LineReader(dg.UnitReader):   # a unit -> its Samples and dead letters
    ...     def read(self, unit, tracker=None):
    ...         for line in unit.inputs:
    ...             try:
    ...                 row = json.loads(line)
    ...             except ValueError as e:
    ...                 yield dg.Failed.of("read_jsonl", e, url="texts.jsonl", key=line)
    ...                 continue
    ...             yield {"__key__": str(row["id"]), "text": row["text"]}
    >>> with dg.make_pipeline() as p:
    ...     _ = p | dg.WriteDataset("texts", dg.Source(plan, LineReader()),
    ...                             features="text:string", max_failure_fraction=0.5)
    >>> accounting = json.load(open("texts/manifest.json"))["accounting"]
    >>> accounting["samples_read"], accounting["samples_written"], accounting["samples_failed"]
    (7, 6, 1)
    """

    plan: Callable[[], Sequence[WorkUnit]]
    reader: UnitReader

    def __post_init__(self):
        if not callable(self.plan):
            raise ArgumentTypeError("plan", f"must be a function giving the WorkUnits, got "
                                            f"{self.plan!r}")
        if not isinstance(self.reader, UnitReader):
            # A reader with read() alone (as the v0 docs had it) lacks what the
            # writer asks of every reader: the base class gives it the defaults.
            kind = type(self.reader).__name__
            hint = (f": subclass it, class {kind}(dg.UnitReader), for the defaults of "
                    "setup, teardown and check_recipe" if callable(
                        getattr(self.reader, "read", None)) else "")
            raise ArgumentTypeError("reader", f"must be a UnitReader, got {kind}{hint}")


def group_by_size(sizes: Sequence[tuple[Any, int]], target: int) -> list[tuple]:
    """(item, bytes) pairs, in order -> groups of consecutive items for units.

    >>> import transforms as dg
    >>> dg.group_by_size([("a", 5), ("b", 5), ("big", 40), ("c", 3)], target=10)
    [('a', 'b'), ('big',), ('c',)]

    An item of at least `target` bytes is a group of its own; smaller ones are
    gathered until their group reaches `target` (the last group may stay
    smaller), so a corpus of tiny files does not become tiny units.
    """
    groups, current, total = [], [], 0
    for item, size in sizes:
        if size >= target:
            if current:
                groups.append(tuple(current))
                current, total = [], 0
            groups.append((item,))
            continue
        current.append(item)
        total += size
        if total >= target:
            groups.append(tuple(current))
            current, total = [], 0
    if current:
        groups.append(tuple(current))
    return groups


def units_in_order(units: Sequence[WorkUnit]) -> list:
    """The order to hand units to workers: largest first, so the last to start are
    small and workers finish together (names follow `index`, not this order).
    ValueError unless the indexes are 0..n-1."""
    indexes = sorted(u.index for u in units)
    if indexes != list(range(len(indexes))):
        raise ValueError(f"unit indexes must be 0..{len(indexes) - 1}, got {indexes[:10]}")
    return sorted(units, key=lambda u: (-u.size, u.index))


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
