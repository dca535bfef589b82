"""Samples and encoded examples -> Cloud Bigtable rows, written by Beam's own writer.

    import apache_beam as beam
    from transforms.sources.bigtable.admin import ensure_table
    from transforms.sources.bigtable.sink import WriteSamplesToBigtable
    from transforms.sources.bigtable.table import BigtableTable

    table = BigtableTable(project="p", instance="i", table="raw")
    ensure_table(table, ["raw"], create=True)          # at launch, before any work
    with beam.Pipeline() as p:
        refused = samples | "ToBigtable" >> WriteSamplesToBigtable(table, family="raw")
        # refused: dead letters (stage "write_bigtable") for the caller to write

The writing itself is `apache_beam.io.gcp.bigtableio.WriteToBigTable`, which in
Beam 2.77 is native Python (a DoFn around the client's MutationsBatcher:
batching by count and bytes, flow control, retries of transient errors); only
its opt-in `use_cross_language=True` needs a Java expansion service, and we
never ask for it. It cannot take an app profile, so the write transforms refuse
a config that names one rather than silently writing through the default.

Rows of Samples (`sample_to_row`):

- row key = the Sample's `__key__` as UTF-8, unchanged, so a sample can be
  looked up by its id and the Bigtable source gives back the same keys. Keys
  from one tar shard are consecutive, so a load writes key ranges one after
  another; the Reshuffle in ReadTarSamples spreads the shards over workers.
- one cell per data field: family `family`, qualifier = the field name, value =
  the field's bytes (a str is stored as UTF-8); `columns` maps a field to
  another "family:qualifier". `__url__` and other `__*__` entries are not
  stored: where a tar member came from is not part of the data, and a reader
  of the table names its own source.
- every cell carries the same timestamp, fixed when the transform is built,
  so a retried write repeats a cell instead of adding a version, and the
  client's batcher may retry it (it retries only idempotent mutations, and a
  server-assigned timestamp is not).

Rows of examples (`example_row`): key `{split}#{order_key:016x}`, cells
`ex:example` (the serialized tf.Example) and `ex:split`. The order key is
BuildExamples' 64-bit hash of (sample key, example index), so within a split
the rows spread evenly over the key space (no write hotspot however the
samples were ordered), a split is one prefix scan (`train#`), and a scan
returns the split in the same shuffled order as its TFRecord shards. Split
names cannot contain '#' (transforms/format/stable_hash.py). Two examples whose 64-bit
hashes collide would share a row (the later write wins); the odds are about
n^2 / 2^65 for n examples in a split.

Size limits: Bigtable recommends at most 10 MiB per cell and 100 MiB per row
(hard limits: 100 MiB per cell, 256 MiB per row), 4 KiB row keys and 16 KiB
qualifiers. A Sample or example that would break one is refused whole, as a
dead letter (stage "write_bigtable", its key, member = the field, the sizes),
and its other cells are not written either: a row holds a complete sample or
nothing. We refuse rather than chunk: chunked cells would need a reassembly
convention that every reader of the table (cbt, the Bigtable source, other
tools) would have to know; media that large belongs in object storage.

Counters (namespace `datagen`): `bigtable_rows_written`,
`bigtable_cells_written`, `bigtable_bytes_written` (cell value bytes) and
`bigtable_rows_refused`. Rows are counted as they are handed to the writer; a
write error fails the bundle (Beam retries it, then fails the job), so in a
job that succeeds they are the rows written.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, Mapping

import apache_beam as beam
from apache_beam.io.gcp.bigtableio import WriteToBigTable
from google.cloud.bigtable.row import DirectRow

from transforms.format.dead_letters import FAILURES, SAMPLE, dead_letter
from transforms.format.sample import KEY, URL, data_fields
from transforms.recipe.examples import Example
from transforms.runner.counters import counter
from transforms.sources.bigtable.admin import ensure_table
from transforms.sources.bigtable.table import BigtableTable, check_family

__all__ = ["WriteSamplesToBigtable", "WriteExamplesToBigtable", "sample_to_row", "example_row",
           "example_row_key", "RowRefused", "STAGE", "EXAMPLE", "MAX_CELL_BYTES", "MAX_ROW_BYTES",
           "MAX_KEY_BYTES", "MAX_QUALIFIER_BYTES"]

STAGE = "write_bigtable"
# Dead-letter unit of a refused example (a sample is transforms.format.dead_letters.SAMPLE).
EXAMPLE = "example"

MAX_CELL_BYTES = 10 << 20      # Bigtable's recommended maximum per cell
MAX_ROW_BYTES = 100 << 20      # Bigtable's recommended maximum per row
MAX_KEY_BYTES = 4 << 10        # row key limit
MAX_QUALIFIER_BYTES = 16 << 10  # column qualifier limit

class RowRefused(ValueError):
    """A row Bigtable should not be sent; `member` names the field at fault, if one is."""

    def __init__(self, message: str, member: str | None = None):
        super().__init__(message)
        self.member = member


def _parse_column(field: str, target: str) -> tuple[str, bytes]:
    family, sep, qualifier = target.partition(":")
    if not sep or not qualifier:
        raise ValueError(f"columns[{field!r}] = {target!r} is not 'family:qualifier'")
    return check_family(family, f"columns[{field!r}] family"), qualifier.encode("utf-8")


def _check_cell(key: str, member: str, qualifier: bytes, value: bytes) -> None:
    if len(qualifier) > MAX_QUALIFIER_BYTES:
        raise RowRefused(f"qualifier is {len(qualifier)} bytes, over Bigtable's "
                         f"{MAX_QUALIFIER_BYTES}-byte limit", member)
    if len(value) > MAX_CELL_BYTES:
        raise RowRefused(
            f"cell {member!r} of {key!r} is {len(value)} bytes, over Bigtable's recommended "
            f"{MAX_CELL_BYTES} bytes (10 MiB) per cell; refused, not split", member)


def _row_key(key: Any) -> bytes:
    if not isinstance(key, str) or not key:
        raise RowRefused(f"sample has no usable {KEY} ({key!r}) for a row key")
    encoded = key.encode("utf-8")
    if len(encoded) > MAX_KEY_BYTES:
        raise RowRefused(f"row key is {len(encoded)} bytes, over Bigtable's "
                         f"{MAX_KEY_BYTES}-byte limit")
    return encoded


def _as_bytes(value: Any, member: str) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    # Numbers, arrays, None: no single obvious encoding, so the caller must choose one.
    raise RowRefused(f"field {member!r} holds {type(value).__name__}, not bytes or str", member)


def sample_to_row(sample: Mapping[str, Any], family: str = "raw",
                  columns: Mapping[str, str] | None = None) -> tuple[bytes, list]:
    """A Sample's row: `(row_key, [(family, qualifier, value), ...])`, all bytes but family.

    Row key = `__key__` (UTF-8); one cell per data field, qualifier = the field
    name unless `columns` maps the field to "family:qualifier". Raises
    RowRefused (naming the field as `.member` where one is at fault) for a
    missing or over-long key, a value that is not bytes or str, two fields in
    one column, a cell or row over the size limits, or no data field at all.
    """
    key = sample.get(KEY)
    row_key = _row_key(key)
    columns = columns or {}
    cells, seen, total = [], {}, 0
    for field in data_fields(sample):
        if field in columns:
            cell_family, qualifier = _parse_column(field, columns[field])
        else:
            cell_family, qualifier = family, field.encode("utf-8")
        if (cell_family, qualifier) in seen:
            raise RowRefused(f"fields {seen[cell_family, qualifier]!r} and {field!r} both map "
                             f"to column {cell_family}:{qualifier.decode('utf-8')}", field)
        seen[cell_family, qualifier] = field
        value = _as_bytes(sample[field], field)
        _check_cell(key, field, qualifier, value)
        total += len(value)
        cells.append((cell_family, qualifier, value))
    if not cells:
        raise RowRefused(f"sample {key!r} has no data field to store")
    if total > MAX_ROW_BYTES:
        raise RowRefused(f"row {key!r} holds {total} bytes, over Bigtable's recommended "
                         f"{MAX_ROW_BYTES} bytes (100 MiB) per row; refused, not split")
    return row_key, cells


def example_row_key(split: str, order_key: int) -> bytes:
    """`{split}#{order_key:016x}` as bytes (see the module docstring for why)."""
    return f"{split}#{order_key:016x}".encode("utf-8")


def example_row(split: str, order_key: int, serialized: bytes,
                family: str = "ex") -> tuple[bytes, list]:
    """An encoded example's row: `(row_key, [(family, b"example", ...), (family, b"split", ...)])`.

    Raises RowRefused (member "example") when the example is over the cell limit.
    """
    row_key = example_row_key(split, order_key)
    _check_cell(row_key.decode("utf-8"), "example", b"example", serialized)
    return row_key, [(family, b"example", bytes(serialized)),
                     (family, b"split", split.encode("utf-8"))]


def _write_timestamp() -> datetime.datetime:
    """Now, at millisecond granularity (Bigtable's default timestamp granularity)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class _RowsFn(beam.DoFn):
    """Elements -> DirectRows (main output) or dead letters (FAILURES); counts both.

    Subclasses say how an element becomes `(row_key, cells)` and how a refusal
    is described. The client library is only used to build rows; the
    connection is WriteToBigTable's.
    """

    def __init__(self, timestamp: datetime.datetime):
        self._timestamp = timestamp

    def setup(self):
        self._rows = counter("bigtable_rows_written")
        self._cells = counter("bigtable_cells_written")
        self._bytes = counter("bigtable_bytes_written")
        self._refused = counter("bigtable_rows_refused")

    def _to_row(self, element) -> tuple[bytes, list]:
        raise NotImplementedError

    def _dead_letter(self, element, error: RowRefused) -> dict:
        raise NotImplementedError

    def process(self, element):
        try:
            row_key, cells = self._to_row(element)
        except RowRefused as e:
            self._refused.inc()
            yield beam.pvalue.TaggedOutput(FAILURES, self._dead_letter(element, e))
            return
        row = DirectRow(row_key)
        for family, qualifier, value in cells:
            row.set_cell(family, qualifier, value, timestamp=self._timestamp)
        self._rows.inc()
        self._cells.inc(len(cells))
        self._bytes.inc(sum(len(value) for _, _, value in cells))
        yield row


@beam.typehints.with_input_types(Dict[str, Any])
@beam.typehints.with_output_types(DirectRow)
class _SampleRowsFn(_RowsFn):
    def __init__(self, timestamp, family: str, columns: Mapping[str, str]):
        super().__init__(timestamp)
        self._family = family
        self._columns = dict(columns)

    def _to_row(self, sample):
        return sample_to_row(sample, self._family, self._columns)

    def _dead_letter(self, sample, error):
        return dead_letter(STAGE, error, url=sample.get(URL, ""), key=sample.get(KEY),
                           member=error.member, unit=SAMPLE)


@beam.typehints.with_input_types(Example)
@beam.typehints.with_output_types(DirectRow)
class _ExampleRowsFn(_RowsFn):
    def __init__(self, timestamp, family: str, url: str):
        super().__init__(timestamp)
        self._family = family
        self._url = url

    def _to_row(self, example):
        return example_row(example.split, example.order, example.serialized, self._family)

    def _dead_letter(self, example, error):
        return dead_letter(STAGE, error, url=self._url,
                           key=example_row_key(example.split, example.order).decode("utf-8"),
                           member=error.member, unit=EXAMPLE, split=example.split)


def _check_no_app_profile(table: BigtableTable) -> None:
    if table.app_profile:
        raise ValueError(
            f"app profile {table.app_profile!r}: Beam's WriteToBigTable always writes "
            "through the instance's default app profile; leave app_profile unset to write")


class _WriteRows(beam.PTransform):
    """Elements -> rows -> WriteToBigTable; returns the dead letters."""

    def __init__(self, table: BigtableTable, rows_fn: _RowsFn):
        super().__init__()
        self._table = table
        self._rows_fn = rows_fn

    def expand(self, elements):
        rows = elements | "ToRows" >> beam.ParDo(self._rows_fn).with_outputs(
            FAILURES, main="rows")
        _ = rows.rows | "Write" >> WriteToBigTable(
            project_id=self._table.project, instance_id=self._table.instance,
            table_id=self._table.table)
        return rows[FAILURES]


class WriteSamplesToBigtable(beam.PTransform):
    """Samples -> one Bigtable row each; returns the dead letters of refused samples.

        refused = samples | "ToBigtable" >> WriteSamplesToBigtable(table, family="raw")

    Rows are laid out by `sample_to_row`; a refused sample is a SAMPLE dead
    letter with stage "write_bigtable" and is not written at all. The table and
    its families must exist (`ensure_table()`, at launch). `columns` maps a field
    to "family:qualifier"; those families must exist too.
    """

    def __init__(self, table: BigtableTable, family: str = "raw",
                 columns: Mapping[str, str] | None = None):
        super().__init__()
        _check_no_app_profile(table)
        check_family(family, "family")
        columns = dict(columns or {})
        for field, target in columns.items():
            _parse_column(field, target)
        self._table = table
        self._family = family
        self._columns = columns

    @property
    def families(self) -> list:
        """The column families this transform writes to."""
        return sorted({self._family} | {_parse_column(f, t)[0] for f, t in self._columns.items()})

    def ensure_table(self, create: bool = False, create_flag: str | None = None) -> list:
        """Checks, before any work, that the table and `families` exist, or with
        `create` makes what is missing (`admin.ensure_table`); returns the
        families it created."""
        return ensure_table(self._table, self.families, create=create, create_flag=create_flag)

    def expand(self, samples):
        return samples | "Rows" >> _WriteRows(
            self._table, _SampleRowsFn(_write_timestamp(), self._family, self._columns))


class WriteExamplesToBigtable(beam.PTransform):
    """Examples (transforms/recipe/examples.py `Example`) -> one row each.

        refused = built.examples | "ExamplesToBigtable" >> WriteExamplesToBigtable(table)

    Row key `{split}#{order_key:016x}`, cells `{family}:example` (the
    serialized tf.Example) and `{family}:split` (see `example_row`). Returns
    the dead letters of refused examples (unit "example", url = the table,
    key = the row key). The table and family must exist (`ensure_table()`, at launch).
    """

    def __init__(self, table: BigtableTable, family: str = "ex"):
        super().__init__()
        _check_no_app_profile(table)
        self._table = table
        self._family = check_family(family, "family")

    def ensure_table(self, create: bool = False, create_flag: str | None = None) -> list:
        """As WriteSamplesToBigtable.ensure_table, for the examples' family."""
        return ensure_table(self._table, [self._family], create=create, create_flag=create_flag)

    def expand(self, examples):
        return examples | "Rows" >> _WriteRows(
            self._table, _ExampleRowsFn(_write_timestamp(), self._family, self._table.url))
