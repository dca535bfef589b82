"""Cloud Bigtable rows to Samples: key ranges read in parallel, nothing lost.

    import transforms as dg

    read_table = dg.ReadBigtableSamples("my-project/media/clips",
                                        columns="raw:wav=wav,meta:label=cls", prefix="spk1/")
    read_table.describe()  # launcher: ValueError before any work, naming what is missing
    with dg.make_pipeline() as p:
        read = p | "ReadBigtable" >> read_table
        samples = read.samples        # {"__key__": "spk1/0001", "__url__": "bigtable://...",
                                      #  "wav": b"...", "cls": b"3"}
        failures = read.failures      # dead letters (transforms/format/dead_letters.py)

Beam's own Python `ReadFromBigtable` is a cross-language transform needing a
Java expansion service; this one reads natively. The rooms of bigtable/:

- table.py: which table (`BigtableTable`); admin.py: the launcher's check;
- read_config.py: what to read, the server filter, a row -> a Sample;
- rows.py: ReadRows on the raw protobuf, retried after the last row;
- key_ranges.py (Bigtable-free): ranges cut at tablet boundaries, and the
  splittable read's restriction tracker;
- here: the ranges as work units (transforms/recipe/units.py), planned when
  the job starts, and the splittable reader of one.

Reading. The planner cuts the requested range at the table's
`sample_row_keys` (tablet boundaries), so each range is served by few
tablets, and merges them into at most `max_ranges`. Tablet boundaries move as
a table grows and splits, so two runs may cut the same rows differently:
each row is still read exactly once. Runners may split a range while it is
read (`ByteKeyRangeTracker.try_split`). Retries are ours (rows.py
`read_range`), each counted in `bigtable_retries`; an error past them fails
the bundle, and Beam retries the bundle.

Failures (transforms/format/dead_letters.py, stage `read_bigtable`, unit SAMPLE): a
row missing a required column (message and `member` name the column), or
whose fields collide. Per-row mapping errors are the only dead letters.

Counters (namespace `datagen`): `bigtable_rows_read` (rows received, sampled
out or not), `bigtable_bytes_read` (keys + cell values), `bigtable_retries`,
and `samples_read`: every row kept by sampling, whether it became a Sample or a
dead letter, so samples_read == samples + SAMPLE dead letters.
"""

from __future__ import annotations

import collections
import functools
from typing import Callable, Iterator, Mapping, MutableMapping

import apache_beam as beam
from google.cloud.bigtable.data import BigtableDataClient

from transforms.format.sample import escape
from transforms.recipe.units import Failed, Source, UnitReader, WorkUnit
from transforms.runner.counters import counter
from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.key_ranges import (
    END_OF_RANGE,
    ByteKeyRange,
    ByteKeyRangeTracker,
    estimated_bytes,
    key_ranges,
)
from transforms.sources.bigtable.read_config import (
    BigtableReadConfig,
    MissingColumnError,
    is_sampled,
    keys_only_filter,
    row_filter,
    row_to_sample,
)
from transforms.sources.bigtable.rows import RowReader, read_range
from transforms.sources.bigtable.table import BigtableTable
from transforms.sources.units import ReadUnits

__all__ = ["BigtableReader", "ReadBigtableSamples", "open_table", "plan_key_ranges",
           "read_samples"]

_STAGE = "read_bigtable"


def read_samples(reader: RowReader, config: BigtableReadConfig, start: bytes, end: bytes, *,
                 claim: Callable[[bytes], bool] | None = None,
                 stats: MutableMapping[str, int] | None = None) -> Iterator[dict | Failed]:
    """One key range -> Samples, and `Failed` dead letters for rows that map to none.

    What the splittable DoFn runs for a restriction. Each row key is passed
    to `claim` (a tracker's try_claim) before the row is used; reading stops
    when it returns False, and `claim(END_OF_RANGE)` is called when the range
    is exhausted. `stats` (if given) gains "rows", "bytes", "samples" (rows
    kept by sampling) and "retries".
    """
    stats = stats if stats is not None else collections.Counter()

    def retried(_error):
        stats["retries"] += 1

    rows = read_range(reader, start, end, row_filter(config), max_attempts=config.max_attempts,
                      on_retry=retried)
    try:
        for row in rows:
            if claim is not None and not claim(row.row_key):
                return
            stats["rows"] += 1
            stats["bytes"] += len(row.row_key) + sum(len(c.value) for c in row.cells)
            key = escape(row.row_key)
            if not is_sampled(key, config.sample_fraction):
                continue
            stats["samples"] += 1
            try:
                yield row_to_sample(row, config)
            except ValueError as e:
                member = ", ".join(e.columns) if isinstance(e, MissingColumnError) else None
                yield Failed.of(_STAGE, e, url=config.table.url, key=key, member=member)
        if claim is not None:
            claim(END_OF_RANGE)
    finally:
        rows.close()  # cancels the stream when the claim stopped us early


def open_table(table: BigtableTable):
    """(client, table) of the data API; honours BIGTABLE_EMULATOR_HOST. Close the client."""
    client = BigtableDataClient(project=table.project)
    return client, client.get_table(table.instance, table.table,
                                    app_profile_id=table.app_profile or None)


def _max_rows_end(reader: RowReader, config: BigtableReadConfig, start: bytes,
                  end: bytes) -> bytes:
    """The end key that leaves exactly max_rows rows in [start, end), by a keys-only scan."""
    sampling = config.sample_fraction < 1
    kept = 0
    for row in read_range(reader, start, end, keys_only_filter(config),
                          limit=0 if sampling else config.max_rows,
                          max_attempts=config.max_attempts):
        if sampling and not is_sampled(escape(row.row_key), config.sample_fraction):
            continue
        kept += 1
        if kept == config.max_rows:
            return row.row_key + b"\x00"
    return end


def plan_key_ranges(config: BigtableReadConfig) -> tuple:
    """The requested key range as work units (transforms/recipe/units.py):
    cut at the table's `sample_row_keys` into at most `max_ranges` ranges,
    indexed in key order, each sized by the samples' byte offsets.

    With `max_rows`, a keys-only scan first finds the end key that leaves that
    many rows.
    """
    start, end = config.key_range()
    if end and start >= end:
        return ()
    client, table = open_table(config.table)
    reader = RowReader(config.table)
    try:
        if config.max_rows:
            end = _max_rows_end(reader, config, start, end)
        samples = table.sample_row_keys()
    finally:
        reader.close()
        client.close()
    ranges = key_ranges([k for k, _ in samples], start, end, config.max_ranges)
    return tuple(WorkUnit(i, (range_start, range_end),
                          estimated_bytes(samples, range_start, range_end))
                 for i, (range_start, range_end) in enumerate(ranges))


class BigtableReader(UnitReader):
    """Reads key-range units (transforms/recipe/units.py) into Samples and dead letters;
    splittable: with a restriction's tracker it reads that restriction, claiming
    every row key, so a runner may split a range while it is read.

    Initial splitting is done before this, by `plan_key_ranges`: ranges cut at
    tablet boundaries and bounded by max_ranges. Cutting them again here could
    only interpolate blindly between keys and would break that bound, so
    restrictions start as the whole unit; runners split a straggler
    dynamically through `ByteKeyRangeTracker.try_split`.
    """

    splittable = True

    def __init__(self, config: BigtableReadConfig):
        self._config = config

    def setup(self, counting: bool = True) -> None:
        self._reader = RowReader(self._config.table)
        self._rows = counter("bigtable_rows_read", counting)
        self._bytes = counter("bigtable_bytes_read", counting)
        self._retries = counter("bigtable_retries", counting)
        self._samples = counter("samples_read", counting)

    def keys(self, unit: WorkUnit, fields: tuple = ()) -> Iterator:  # noqa: ARG002 - none to give
        """None: a table's row keys are unique by construction."""
        return iter(())

    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:
        restriction = tracker.current_restriction() if tracker else self.initial_restriction(unit)
        stats = collections.Counter()
        try:
            yield from read_samples(self._reader, self._config, restriction.start,
                                    restriction.end, claim=tracker.try_claim if tracker else None,
                                    stats=stats)
        finally:
            self._rows.inc(stats["rows"])
            self._bytes.inc(stats["bytes"])
            self._retries.inc(stats["retries"])
            self._samples.inc(stats["samples"])

    def teardown(self) -> None:
        self._reader.close()

    # -- restrictions (transforms.sources.units.SplittableUnits) --

    def initial_restriction(self, unit: WorkUnit) -> ByteKeyRange:
        return ByteKeyRange(*unit.inputs)

    def create_tracker(self, restriction: ByteKeyRange) -> ByteKeyRangeTracker:
        return ByteKeyRangeTracker(restriction)

    def restriction_size(self, unit: WorkUnit, restriction: ByteKeyRange) -> float:
        whole = self.initial_restriction(unit)
        share = whole.fraction_of(restriction.end) if restriction.end else 1.0
        share -= whole.fraction_of(restriction.start)
        # Never 0: a range the samples saw no bytes in may still hold rows.
        return max(1.0, unit.size * share)


class ReadBigtableSamples(beam.PTransform):
    """Reads rows of one Bigtable table into Samples, key ranges in parallel.

        read = p | "ReadBigtable" >> ReadBigtableSamples(
            "my-project/media/clips", columns="raw:wav=wav,meta:label=cls", prefix="spk1/")
        read.samples      # PCollection of Sample dicts
        read.failures     # PCollection of dead letters (stage "read_bigtable")

    `table` is `project/instance/table` (or `bigtable://...`; `app_profile`
    routes its reads), a BigtableTable, or a whole BigtableReadConfig;
    `columns` and `read_options` are the config's other fields
    (transforms/sources/bigtable/read_config.py).
    When the job starts, the table's `sample_row_keys` cut the requested range
    into at most `max_ranges` ranges (`plan_key_ranges`); they are spread over
    workers and each is read by a splittable DoFn (runners may split a range
    further while it is read). The output is in no particular order.
    `describe()` checks the table and its families now, for a clear error
    before any work. `source` is the Source it reads, for WriteDataset.

    On the Bigtable emulator, a table `docs` whose rows `spk1/0`, `spk1/1`, ...
    hold a label in the cell raw:cls:

    >>> import transforms as dg
    >>> read = dg.ReadBigtableSamples("p/i/docs", columns="raw:cls=cls", prefix="spk1/")
    >>> read.describe()["table"], next(read.first_samples())["cls"]
    ('bigtable://p/i/docs', b'0')
    """

    def __init__(self, table: str | BigtableTable | BigtableReadConfig,
                 columns: Mapping[str, str] | str | None = None, **read_options):
        super().__init__()
        if isinstance(table, BigtableReadConfig):
            if columns is not None or read_options:
                raise ValueError("ReadBigtableSamples(config) takes no other settings: "
                                 "they are the config's")
            self.config = table
        else:
            if isinstance(table, str):
                table = BigtableTable(*_table_path(table),
                                      app_profile=read_options.pop("app_profile", None))
            self.config = BigtableReadConfig(table, columns or {}, **read_options)
        # As given, for the manifest; a mapping as the text that says the same.
        self._columns = columns if isinstance(columns, str) else ",".join(
            c if f == "*" else f"{c}={f}" for c, f in self.config.columns)
        self.source = Source(functools.partial(plan_key_ranges, self.config),
                             BigtableReader(self.config))

    def describe(self) -> dict:
        """What the manifest records of this input, once the table and the
        families its columns name are found: ValueError naming what is missing."""
        ensure_table(self.config.table, self.config.families)
        return {"type": "bigtable", "table": self.config.table.url, "columns": self._columns}

    def first_samples(self) -> Iterator[dict]:
        """The table's first readable samples, in key order (for --features auto)."""
        reader = RowReader(self.config.table)
        try:
            for item in read_samples(reader, self.config, *self.config.key_range()):
                if not isinstance(item, Failed):
                    yield item
        finally:
            reader.close()

    def expand(self, pbegin):
        return pbegin | "ReadUnits" >> ReadUnits(self.source)


def _table_path(text: str) -> tuple:
    """'bigtable://p/i/t' or 'p/i/t' -> (project, instance, table)."""
    parts = text.removeprefix("bigtable://").split("/")
    if len(parts) != 3:
        raise ValueError(f"Bigtable table {text!r}: expected project/instance/table")
    return tuple(parts)
