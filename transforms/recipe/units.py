"""The contract between a source and the converter: work units, and their reader.

Beam-free. A source plans its input as `WorkUnit`s, pieces one worker reads
whole (transforms/sources/units.py plans and reads them in a pipeline):

- tar shards: a tar file, or consecutive small ones grouped to a target size
  (transforms/sources/tar.py);
- CSV/JSONL listings: a byte range of a listing, sized so that its rows' media
  come to about the target (transforms/sources/listing.py);
- Bigtable: a key range cut at the table's tablet boundaries
  (transforms/sources/bigtable/source.py).

A unit's `index` is its place in the source's order, fixed by the input alone,
so whatever worker reads it and whenever, what it yields and where that lands
in the dataset are the same on every run (the converter writes shards named in
unit order). A planning function must give the same units for the same input.

A `UnitReader` is the source's configuration, pickled to workers, that turns a
unit into Samples and `Failed` dead letters; a `Source` is a planning function
and a reader. A splittable reader (Bigtable's key ranges) also provides
restrictions, so a runner may split a unit while it is read: it then reads
the tracker's current restriction, claiming each key.
"""

from __future__ import annotations

import collections
import dataclasses
import types
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from transforms.format.arguments import ArgumentTypeError
from transforms.format.dead_letters import FILE, SAMPLE, dead_letter
from transforms.format.keys import KeyPlace
from transforms.format.sample import CONTENT_KEY_PREFIX, KEY, URL

__all__ = ["STORED_FIELD_BYTES", "SHARD_SIZE_BYTES", "Failed", "Source", "UnitReader", "WorkUnit",
           "group_by_size", "streaming", "unit_coverage_errors", "units_in_order"]

# The size a work unit's input and a shard aim at, unless told otherwise: big
# enough that a unit's fixed costs vanish, small enough to spread over workers.
SHARD_SIZE_BYTES = 128 << 20
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
    teardown() and check_recipe() do nothing, and `keys` reads the unit for
    its samples' keys. A splittable reader (Bigtable's key ranges) also
    gives restrictions (`SplittableUnits`). A reader may also have
    `leaving_stored(min_bytes)`: a copy of itself that gives fields of at least
    `min_bytes` as StoredBytes (transforms/format/sample.py) rather than bytes
    (`streaming`).
    """

    splittable = False
    # {field: the names of its classes 0..n-1} the input declares (a Hugging
    # Face ClassLabel column): WriteDataset's recipe holds its values to them.
    class_names: Mapping[str, tuple] = types.MappingProxyType({})

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

    def keys(self, unit: WorkUnit, fields: tuple = ()) -> Iterator[tuple]:
        """(key, KeyPlace, the values of its `fields`) of each sample of the
        unit, for the check that a key is given once in the dataset
        (transforms/checks/keys.py; `fields` are those the key a sample is
        converted under is made with, a row's segment columns); a dead letter
        has none. By default the unit is read: a reader that can list its keys
        without reading its media says so here; one whose keys are unique by
        construction (a table's row keys) gives none. A dict with no key of
        its own is keyed by its content: identical content is the duplicate
        check's to find."""
        for place, event in enumerate(self.read(unit)):
            key = event.get(KEY) if isinstance(event, Mapping) else None
            if isinstance(key, str) and not key.startswith(CONTENT_KEY_PREFIX):
                url = event.get(URL)
                yield key, (KeyPlace(str(url), place, f"sample {place + 1} of unit {unit.index}")
                            if url else KeyPlace(f"unit {unit.index}", place,
                                                 f"sample {place + 1}")), tuple(
                    event.get(field) for field in fields)

    def place_names(self, places: Sequence[KeyPlace]) -> list[KeyPlace]:
        """`places`, each with its `where` in words: what `keys` gave (a
        listing reader counts the lines of those it left unnamed)."""
        return list(places)

    def teardown(self) -> None:
        """Closes what setup() opened."""


def streaming(reader: UnitReader) -> UnitReader:
    """The reader leaving fields of STORED_FIELD_BYTES or more stored, where it
    can: for a caller that builds examples, whose decoders stream them."""
    leaving_stored = getattr(reader, "leaving_stored", None)
    return leaving_stored(STORED_FIELD_BYTES) if leaving_stored else reader


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


def unit_coverage_errors(planned: Mapping[int, tuple | None],
                         reported: Iterable[tuple]) -> list[str]:
    """What is wrong with the (unit, span) reports against the planned units.

    A unit planned with span None must report once; a key range (start, end)
    may have been split by the runner, and its parts' spans must tile it.
    """
    spans = collections.defaultdict(list)
    for unit, span in reported:
        spans[unit].append(span)
    problems = [f"unit {u} was never planned" for u in sorted(set(spans) - set(planned))]
    for unit, whole in sorted(planned.items()):
        parts = spans.get(unit, [])
        if whole is None:
            if len(parts) != 1:
                problems.append(f"unit {unit} reported {len(parts)} times, not once")
            continue
        edges = [whole[0]]
        for start, end in sorted(parts):
            if start != edges[-1]:
                break
            edges.append(end)
        if not parts or edges[-1] != whole[1] or len(edges) != len(parts) + 1:
            problems.append(f"unit {unit} {whole!r}: its reported parts {sorted(parts)!r} do "
                            "not cover it exactly once")
    return problems
