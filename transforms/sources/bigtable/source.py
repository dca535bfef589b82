"""Cloud Bigtable rows to Samples: key ranges read in parallel, nothing lost.

    import apache_beam as beam
    from transforms.sources.bigtable.source import BigtableReadConfig, ReadBigtableSamples, check_table
    from transforms.format.dead_letters import FAILURES

    config = BigtableReadConfig(project="my-project", instance="media", table="clips",
                                columns="raw:wav=wav,meta:label=cls", prefix="spk1/")
    check_table(config)  # launcher: ValueError before any pipeline work
    with beam.Pipeline() as p:
        read = p | "ReadBigtable" >> ReadBigtableSamples(config)
        samples = read.samples        # {"__key__": "spk1/0001", "__url__": "bigtable://...",
                                      #  "wav": b"...", "cls": b"3"}
        failures = read[FAILURES]     # dead letters (transforms/format/dead_letters.py)

Beam's own Python `ReadFromBigtable` is a cross-language transform needing a
Java expansion service; this one reads natively with google-cloud-bigtable's
data client (`google.cloud.bigtable.data`): its admin calls, channel and
`sample_row_keys`, with ReadRows itself decoded by transforms/sources/bigtable/rows.py.
Layers, each usable on its own:

- `BigtableReadConfig` / `parse_columns`: what to read (configuration only;
  it is pickled to workers).
- Pure functions: `row_to_sample` (a row -> a Sample), `key_ranges` (the
  requested range cut at the table's `sample_row_keys` into at most
  `max_ranges` ranges), `decode_key`.
- `read_range` / `read_samples`: one key range read with retries, resuming
  after the last row delivered; the reader and the benchmark both use them.
- `ByteKeyRange` / `ByteKeyRangeTracker`: the SDF restriction and its tracker
  (claims, dynamic splits, progress).
- `plan_key_ranges` / `BigtableReader`: the key ranges as work units
  (transforms/sources/units.py), planned when the job starts, and the splittable
  reader of one.
- `ReadBigtableSamples`: plans the ranges, spreads them over workers and reads
  them with a splittable DoFn.
- `check_table`: the launcher's check that instance, table and families exist.

What reaches the Sample:

- `__key__` is the row key as text, losslessly (transforms/format/sample.py
  `escape`): UTF-8 as it is, a backslash doubled, and every byte of a key that
  is not valid UTF-8 (salted or hashed binary prefixes) written as `\\xNN`, so
  b"\\x8aspk1/0001" becomes "\\\\x8aspk1/0001": still readable, still matched
  by a `--split_by` regex on its text, the same on every run, and no two row
  keys ever share one.
- `__url__` is `bigtable://project/instance/table`.
- One field per mapped column holding the newest cell's value (bytes). Only
  the newest version is read (server side, CellsColumnLimitFilter(1)); a Sample
  field holds one value, so older versions would have nowhere to go.
  `family:*` maps every qualifier of a family, field name = the qualifier
  decoded like a key.

Every row of the requested range is accounted for: the server filter adds
one value-stripped, labelled cell per row, so a row holding none of the mapped
columns still arrives and becomes a dead letter instead of silently vanishing.

Reading. The planner cuts the requested range at the table's
`sample_row_keys` (tablet boundaries), so each range is served by few
tablets, and merges them into at most `max_ranges`. Tablet boundaries move as
a table grows and splits, so two runs may cut the same rows differently:
each row is still read exactly once. Runners may
split a range while it is read (`ByteKeyRangeTracker.try_split`); a split
point is interpolated between keys, which balances well for evenly spread
keys but can cut off a key-space half that holds no rows when keys cluster.

Retries are ours, not the client's: `read_range` retries UNAVAILABLE,
DEADLINE_EXCEEDED, ABORTED (and reset streams) itself, with exponential backoff, resuming just after the
last row delivered - so none is lost or repeated, the restriction's claims
and dynamic splits stay the truth about what was read, and every retry is
counted in `bigtable_retries`. Attempts are bounded per stretch without
progress (`max_attempts`, default 8); then the error fails the bundle, as
does any other error, and Beam retries the bundle.

Failures (transforms/format/dead_letters.py, stage `read_bigtable`, unit SAMPLE): a
row missing a required column (message and `member` name the column), or
whose fields collide. Per-row mapping errors are the only dead letters.

Counters (namespace `datagen`): `bigtable_rows_read` (rows received, sampled
out or not), `bigtable_bytes_read` (keys + cell values), `bigtable_retries`,
and `samples_read`: every row kept by sampling, whether it became a Sample or a
dead letter, so samples_read == samples + SAMPLE dead letters.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import random
import re
import time
from typing import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence

import apache_beam as beam
import grpc
from apache_beam.io.iobase import RestrictionProgress, RestrictionTracker
from apache_beam.io.range_trackers import LexicographicKeyRangeTracker
from google.api_core import exceptions as api_exceptions
from google.cloud import bigtable
from google.cloud.bigtable.data import BigtableDataClient, row_filters

from transforms.sources.bigtable.rows import RowReader
from transforms.runner.counters import counter
from transforms.format.dead_letters import SAMPLE, dead_letter
from transforms.format.sample import KEY, URL, escape
from transforms.dataset.splits import stable_hash64
from transforms.sources.units import Failed, ReadUnits, Source, WorkUnit

__all__ = [
    "END_OF_RANGE",
    "BigtableReadConfig",
    "BigtableReader",
    "ByteKeyRange",
    "ByteKeyRangeTracker",
    "MissingColumnError",
    "ReadBigtableSamples",
    "check_table",
    "decode_key",
    "estimated_bytes",
    "is_transient",
    "key_ranges",
    "open_reader",
    "open_table",
    "parse_columns",
    "plan_key_ranges",
    "read_range",
    "read_samples",
    "row_filter",
    "row_to_sample",
]

_STAGE = "read_bigtable"
_SAMPLE_SALT = b"datagen-sample"
# Label of the one value-stripped cell the filter adds to every row (see row_filter).
_ROW_MARKER = "datagen-row"
# Bigtable column family names (the admin API's rule).
_FAMILY = re.compile(r"[_a-zA-Z0-9][-_.a-zA-Z0-9]*")
# try_claim(END_OF_RANGE) claims the rest of a range: the reader found no more
# rows (the convention of Java's ByteKeyRangeTracker; row keys are never empty).
END_OF_RANGE = b""
# The smallest row key.
_FIRST_KEY = b"\x00"
# Smaller split fractions split at the next unclaimed key (see try_split).
_MIN_SPLIT_FRACTION = 1e-9

# Backoff between attempts at one range: base * 2**n, capped, with jitter.
_BACKOFF_BASE_S = 0.1
_BACKOFF_CAP_S = 10.0
# Deadline of one ReadRows call. A range taking longer is resumed after its
# last row like any transient error, so this bounds a stalled stream, not a
# range's size.
_ATTEMPT_TIMEOUT_S = 600.0
# What an INTERNAL error says when a connection was reset under the stream;
# the data client retries these too (google.cloud.bigtable.data._helpers).
_RESET_MESSAGES = ("rst_stream", "rst stream", "received unexpected eos on data frame from server")
_TRANSIENT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                              grpc.StatusCode.ABORTED})


def _as_bytes(value: bytes | str | None) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value or b"")


def decode_key(key: bytes) -> str:
    """A row key (or qualifier) as text, losslessly: `escape` (transforms/format/sample.py)."""
    return escape(key)


def parse_columns(text: str) -> dict:
    """'raw:wav=wav,raw:label=cls,meta:*' -> {'raw:wav': 'wav', 'raw:label': 'cls', 'meta:*': '*'}.

    Each term is `family:qualifier[=field]`; without `=field` the field is
    named `family:qualifier`. `family:*` maps every qualifier of the family,
    each to a field named after the qualifier (its value here is '*').
    """
    columns = {}
    for term in (t.strip() for t in text.split(",")):
        spec, sep, field = (s.strip() for s in term.partition("="))
        if sep and not field:
            raise ValueError(f"--columns term {term!r} has an empty field name after '='")
        if spec in columns:
            raise ValueError(f"--columns {text!r} names column {spec!r} twice")
        columns[spec] = field or ("*" if spec.endswith(":*") else spec)
        _split_column(spec, columns[spec])
    return columns


def _split_column(spec: str, field: str) -> tuple:
    """'raw:wav', 'wav' -> ('raw', 'wav'); ValueError naming what is wrong."""
    family, colon, qualifier = spec.partition(":")
    if not colon or not _FAMILY.fullmatch(family) or not qualifier:
        raise ValueError(f"column {spec!r} is not family:qualifier or family:*, "
                         f"e.g. 'raw:wav=wav,raw:label=cls'")
    if qualifier == "*" and field != "*":
        raise ValueError(f"column {spec!r}: family:* takes its field names from the "
                         f"qualifiers and cannot be renamed to {field!r}")
    if qualifier != "*" and (not field or field == "*" or field.startswith("__")):
        raise ValueError(f"column {spec!r}: field name {field!r} is empty, '*' or reserved "
                         f"(starts with '__')")
    return family, qualifier


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with `prefix` (b"" = no such key)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else b""


@dataclasses.dataclass(frozen=True)
class BigtableReadConfig:
    """What to read from one table. Configuration only: it is pickled to workers.

    - `columns`: `family:qualifier` -> field name, or the `--columns` text
      (see `parse_columns`); kept as ((column, field), ...) pairs.
    - `start_key`/`end_key` (end exclusive; empty = table start/end) and
      `prefix` select keys; given together, the intersection is read.
    - `key_regex`: RE2 over the whole key, applied by the server (Bigtable
      anchors it; `\\C` matches any byte).
    - `required`: field names (or `family:*` entries) a row must have, else it
      is a dead letter; None = every mapped column; () = none.
    - `max_rows` (0 = all): the first `max_rows` rows in key order that pass
      the key filters and sampling, found by a keys-only scan when the job
      starts; exact unless rows are written to the range while it runs.
    - `sample_fraction`: keep a row iff the stable hash of its `__key__` is
      below the fraction: the same rows on every run. Applied as rows arrive,
      so the whole range is still read.
    - `max_ranges`: how many key ranges (parallel reads) the range is cut into.
    - `max_attempts`: attempts at a range without progress before a transient
      error fails the bundle.
    """

    project: str
    instance: str
    table: str
    columns: Mapping[str, str] | str
    app_profile: str | None = None
    start_key: bytes | str = b""
    end_key: bytes | str = b""
    prefix: bytes | str = b""
    key_regex: bytes | str = b""
    required: Sequence[str] | None = None
    max_rows: int = 0
    sample_fraction: float = 1.0
    max_ranges: int = 64
    max_attempts: int = 8
    # Derived in __post_init__: (family, qualifier) -> field; families read whole.
    _named: Mapping = dataclasses.field(init=False, repr=False, compare=False)
    _whole_families: tuple = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        columns = parse_columns(self.columns) if isinstance(self.columns, str) else dict(self.columns)
        if not columns:
            raise ValueError("BigtableReadConfig needs at least one column, e.g. 'raw:wav=wav'")
        named, whole = {}, []
        for spec, field in columns.items():
            family, qualifier = _split_column(spec, field)
            if qualifier == "*":
                whole.append(family)
            elif field in named.values():
                raise ValueError(f"columns map two columns to field {field!r}")
            else:
                named[(family, qualifier.encode("utf-8"))] = field
        names = [spec if field == "*" else field for spec, field in columns.items()]
        required = tuple(names) if self.required is None else tuple(self.required)
        if unknown := sorted(set(required) - set(names)):
            raise ValueError(f"required fields {unknown} are not mapped columns "
                             f"(fields: {', '.join(names)})")
        if not (isinstance(self.max_rows, int) and self.max_rows >= 0):
            raise ValueError(f"max_rows must be an integer >= 0, got {self.max_rows!r}")
        if not 0 < self.sample_fraction <= 1:
            raise ValueError(f"sample_fraction must be in (0, 1], got {self.sample_fraction!r}")
        if not (isinstance(self.max_ranges, int) and self.max_ranges >= 1):
            raise ValueError(f"max_ranges must be an integer >= 1, got {self.max_ranges!r}")
        if not (isinstance(self.max_attempts, int) and self.max_attempts >= 1):
            raise ValueError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        fields = {"columns": tuple(columns.items()), "required": required,
                  "_named": named, "_whole_families": tuple(whole)}
        for name in ("start_key", "end_key", "prefix", "key_regex"):
            fields[name] = _as_bytes(getattr(self, name))
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @property
    def table_name(self) -> str:
        """`projects/P/instances/I/tables/T`, the table's resource name."""
        return f"projects/{self.project}/instances/{self.instance}/tables/{self.table}"

    @property
    def url(self) -> str:
        """`bigtable://project/instance/table`, the Samples' `__url__`."""
        return f"bigtable://{self.project}/{self.instance}/{self.table}"

    @property
    def families(self) -> tuple:
        """The column families the mapped columns live in, sorted."""
        return tuple(sorted({f for f, _ in self._named} | set(self._whole_families)))

    def key_range(self) -> tuple:
        """(start, end) of the keys to read: start/end intersected with the prefix.

        b"" as end means the end of the table; the range is empty when
        end and start >= end.
        """
        start, end = self.start_key, self.end_key
        if self.prefix:
            start = max(start, self.prefix)
            prefix_end = _prefix_end(self.prefix)
            if prefix_end and (not end or prefix_end < end):
                end = prefix_end
        return start, end


def row_filter(config: BigtableReadConfig) -> row_filters.RowFilter:
    """The server-side filter: key regex, mapped columns, newest version, one marker cell.

    The marker branch returns the row's first cell with its value stripped and
    labelled, so a row holding none of the mapped columns still arrives (as a
    dead letter) instead of being dropped by the server.
    """
    columns = [row_filters.ColumnRangeFilter(family, qualifier, qualifier)
               for family, qualifier in config._named]
    columns += [row_filters.ColumnRangeFilter(family) for family in config._whole_families]
    selected = columns[0] if len(columns) == 1 else row_filters.RowFilterUnion(columns)
    data = row_filters.RowFilterChain([selected, row_filters.CellsColumnLimitFilter(1)])
    marker = row_filters.RowFilterChain([row_filters.CellsRowLimitFilter(1),
                                         row_filters.StripValueTransformerFilter(True),
                                         row_filters.ApplyLabelFilter(_ROW_MARKER)])
    both = row_filters.RowFilterUnion([data, marker])
    if config.key_regex:
        return row_filters.RowFilterChain([row_filters.RowKeyRegexFilter(config.key_regex), both])
    return both


def _keys_only_filter(config: BigtableReadConfig) -> row_filters.RowFilter:
    keys = [row_filters.CellsRowLimitFilter(1), row_filters.StripValueTransformerFilter(True)]
    if config.key_regex:
        keys.insert(0, row_filters.RowKeyRegexFilter(config.key_regex))
    return row_filters.RowFilterChain(keys)


def _is_sampled(key: str, fraction: float) -> bool:
    return fraction >= 1 or stable_hash64(key, _SAMPLE_SALT) < fraction * 2 ** 64


class MissingColumnError(ValueError):
    """A row lacks required columns; `columns` names them ('raw:wav', 'meta:*')."""

    def __init__(self, message: str, columns: list):
        super().__init__(message)
        self.columns = columns


def row_to_sample(row, config: BigtableReadConfig) -> dict:
    """One row (`transforms.sources.bigtable.rows.Row`: `row_key`, `cells`) -> a Sample.

    Fields hold the newest cell's value of each mapped column. Raises
    ValueError naming the key and column when a required column is missing or
    two columns would fill one field.
    """
    key = decode_key(row.row_key)
    newest = {}  # (family, qualifier) -> newest cell
    for cell in row.cells:
        if _ROW_MARKER in cell.labels:
            continue
        column = (cell.family, cell.qualifier)
        if column not in newest or cell.timestamp_micros > newest[column].timestamp_micros:
            newest[column] = cell
    sample = {KEY: key, URL: config.url}
    source = {}  # field -> the column it came from, for collision messages
    present = set()
    for (family, qualifier), cell in sorted(newest.items(), key=lambda item: item[0]):
        field = config._named.get((family, qualifier))
        if field is None:
            if family not in config._whole_families:
                continue  # not mapped; the server filter normally drops these
            field = decode_key(qualifier)
            present.add(f"{family}:*")
            if field.startswith("__"):
                raise ValueError(f"row {key!r}: column {family}:{field} would be field "
                                 f"{field!r}, a reserved name (starts with '__')")
        column = f"{family}:{decode_key(qualifier)}"
        if field in source:
            raise ValueError(f"row {key!r}: columns {source[field]} and {column} both map "
                             f"to field {field!r}")
        source[field] = column
        present.add(field)
        sample[field] = cell.value
    missing = [name for name in config.required if name not in present]
    if missing:
        columns = _columns_of(config, missing)
        described = ", ".join(c if c == f else f"{c} (field {f!r})" for c, f in zip(columns, missing))
        raise MissingColumnError(f"row {key!r} has no cell in required column"
                                 f"{'s' if len(columns) > 1 else ''} {described}", columns)
    return sample


def _columns_of(config: BigtableReadConfig, fields: Iterable[str]) -> list:
    """Field names -> their columns ('raw:wav'); `family:*` names stay as they are."""
    by_field = {field: f"{family}:{decode_key(qualifier)}"
                for (family, qualifier), field in config._named.items()}
    return [by_field.get(field, field) for field in fields]


def key_ranges(sample_keys: Iterable[bytes], start: bytes = b"", end: bytes = b"",
               max_ranges: int = 64) -> list:
    """[start, end) cut at the sample keys into at most `max_ranges` contiguous
    ranges, in key order.

    `sample_keys` are the keys of `table.sample_row_keys()` (tablet
    boundaries; any order, duplicates and b"" ignored). b"" as `end` is the end
    of the table. When there are more pieces than `max_ranges`, adjacent pieces
    are merged into `max_ranges` ranges of (nearly) equal piece counts. An
    empty range gives [].
    """
    if max_ranges < 1:
        raise ValueError(f"max_ranges must be >= 1, got {max_ranges}")
    if end and start >= end:
        return []
    cuts = sorted({k for k in sample_keys if k and k > start and (not end or k < end)})
    bounds = [start, *cuts, end]
    pieces = len(bounds) - 1
    count = min(pieces, max_ranges)
    # Integer steps: floor((i+1)p/n) - floor(ip/n) >= 1 whenever p >= n.
    edges = [bounds[i * pieces // count] for i in range(count + 1)]
    return list(zip(edges, edges[1:]))


def estimated_bytes(samples: Sequence[tuple], start: bytes, end: bytes) -> int:
    """Bytes in [start, end) by `table.sample_row_keys()`: (key, bytes before it) pairs."""
    keys = [k for k, _ in samples if k]
    offsets = [o for k, o in samples if k]
    total = max((o for _, o in samples), default=0)

    def offset(key: bytes) -> int:
        if not key:
            return 0
        i = bisect.bisect_right(keys, key)
        return offsets[i - 1] if i else 0

    return max(0, (total if not end else offset(end)) - offset(start))


def is_transient(error: BaseException) -> bool:
    """True for UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED and reset streams: retry these."""
    code = getattr(error, "code", None)
    if not (isinstance(error, grpc.RpcError) and callable(code)):
        return False
    if code() == grpc.StatusCode.INTERNAL:
        return any(m in (error.details() or "").lower() for m in _RESET_MESSAGES)
    return code() in _TRANSIENT_CODES


def _backoff(failures: int) -> float:
    delay = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (failures - 1))
    return delay / 2 + random.uniform(0, delay / 2)


def read_range(reader: RowReader, start: bytes, end: bytes,
               filter_: row_filters.RowFilter | None = None, *,
               limit: int = 0, max_attempts: int = 8,
               on_retry: Callable[[BaseException], None] | None = None) -> Iterator:
    """The rows of [start, end) (b"" end = table end) in key order, each exactly once.

    `reader` is a `RowReader` (`open_reader(config)`); rows are
    `transforms.sources.bigtable.rows.Row`s. Transient errors are retried here: a
    new ReadRows call starts just after the last row delivered (last key +
    b"\\x00"), after an exponential backoff, and `on_retry(error)` is called
    for each retry. After `max_attempts` consecutive failures with no row
    delivered, the error is raised; any other error is raised at once.
    `limit` (0 = none) caps the rows delivered.
    """
    resume, delivered, failures = start, 0, 0
    while not (end and resume >= end) and not (limit and delivered >= limit):
        rows = reader.read(resume, end, filter_, limit - delivered if limit else 0,
                           timeout=_ATTEMPT_TIMEOUT_S)
        try:
            for row in rows:
                resume = row.row_key + b"\x00"
                delivered += 1
                failures = 0
                yield row
            return
        except Exception as e:  # noqa: BLE001 - sorted by is_transient, the rest re-raised
            failures += 1
            if not is_transient(e) or failures >= max_attempts:
                raise
            if on_retry is not None:
                on_retry(e)
            time.sleep(_backoff(failures))
        finally:
            # Ends the call now when the caller stops early or an error is
            # handled, rather than whenever the generator is collected - an
            # error's traceback keeps it alive.
            rows.close()


def read_samples(reader: RowReader, config: BigtableReadConfig, start: bytes, end: bytes, *,
                 claim: Callable[[bytes], bool] | None = None,
                 stats: MutableMapping[str, int] | None = None) -> Iterator[tuple]:
    """One key range -> `("sample", sample)` and `("failure", dead_letter)` events.

    What the splittable DoFn runs for a restriction. Each row key is passed
    to `claim` (a tracker's try_claim) before the row is used; reading stops
    when it returns False, and `claim(END_OF_RANGE)` is called when the range
    is exhausted. `stats` (if given) gains "rows", "bytes", "samples" (rows
    kept by sampling) and "retries".
    """
    stats = stats if stats is not None else collections.Counter()
    url = config.url

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
            key = decode_key(row.row_key)
            if not _is_sampled(key, config.sample_fraction):
                continue
            stats["samples"] += 1
            try:
                yield "sample", row_to_sample(row, config)
            except ValueError as e:
                member = ", ".join(e.columns) if isinstance(e, MissingColumnError) else None
                yield "failure", dead_letter(_STAGE, e, url=url, key=key, member=member,
                                             unit=SAMPLE)
        if claim is not None:
            claim(END_OF_RANGE)
    finally:
        rows.close()  # cancels the stream when the claim stopped us early


def open_reader(config: BigtableReadConfig) -> RowReader:
    """A RowReader of the table (honours BIGTABLE_EMULATOR_HOST). Close it."""
    return RowReader(config.table_name, config.app_profile)


def open_table(config: BigtableReadConfig):
    """(client, table) of the data API; honours BIGTABLE_EMULATOR_HOST. Close the client."""
    client = BigtableDataClient(project=config.project)
    return client, client.get_table(config.instance, config.table,
                                    app_profile_id=config.app_profile or None)


def check_table(config: BigtableReadConfig) -> None:
    """Raises ValueError if the instance or table is missing or a mapped family unknown.

    For launchers, before any pipeline work; uses the admin API.
    """
    client = bigtable.Client(project=config.project, admin=True)
    try:
        instance = client.instance(config.instance)
        table = instance.table(config.table)
        if not table.exists():
            try:
                instance_exists = instance.exists()
            except api_exceptions.MethodNotImplemented:
                instance_exists = True  # the emulator has no instance admin API; any name works
            if not instance_exists:
                raise ValueError(f"Bigtable instance {config.instance!r} does not exist "
                                 f"in project {config.project!r}")
            raise ValueError(f"table {config.table!r} does not exist in Bigtable instance "
                             f"{config.project}/{config.instance}")
        families = sorted(table.list_column_families())
        for family in config.families:
            if family not in families:
                raise ValueError(f"table {config.table!r} has no column family {family!r} "
                                 f"(families: {', '.join(families) or 'none'})")
    finally:
        client.close()


@dataclasses.dataclass(frozen=True)
class ByteKeyRange:
    """The keys [start, end) of a table; b"" as end = the end of the table."""

    start: bytes = b""
    end: bytes = b""

    def __post_init__(self):
        if self.end and self.start > self.end:
            raise ValueError(f"key range start {self.start!r} is after its end {self.end!r}")

    @property
    def is_empty(self) -> bool:
        # No row key sorts before b"\x00": keys are never empty.
        return bool(self.end) and (self.start >= self.end or self.end == _FIRST_KEY)

    def fraction_of(self, key: bytes) -> float:
        """Where `key` lies in the range by key interpolation, 0..1."""
        if self.is_empty or key <= self.start:
            return 0.0
        if self.end and key >= self.end:
            return 1.0
        fraction = LexicographicKeyRangeTracker.position_to_fraction(key, self.start,
                                                                     self.end or None)
        return min(1.0, max(0.0, fraction))


class ByteKeyRangeTracker(RestrictionTracker):
    """Claims row keys of a ByteKeyRange in increasing order; splits dynamically.

    `try_claim(key)` is True while `key` is inside the range; a key at or past
    the end, or END_OF_RANGE (b"", "no more rows"), finishes the range and is
    False. `try_split(f)` cuts the unclaimed rest at a key interpolated `f` of
    the way from just after the last claimed key to the end (for an unbounded
    end, toward the top of the key space).
    """

    def __init__(self, restriction: ByteKeyRange):
        self._range = restriction
        self._last_claimed: bytes | None = None
        self._done = False  # the end was claimed: nothing left to read

    def current_restriction(self) -> ByteKeyRange:
        return self._range

    def try_claim(self, key: bytes) -> bool:
        if self._done:
            return False
        if key == END_OF_RANGE:
            self._done = True
            return False
        if self._last_claimed is not None and key <= self._last_claimed:
            raise ValueError(f"key {key!r} claimed after {self._last_claimed!r}: keys must "
                             f"be claimed in increasing order")
        if key < self._range.start:
            raise ValueError(f"key {key!r} is before the range start {self._range.start!r}")
        if self._range.end and key >= self._range.end:
            self._done = True
            return False
        self._last_claimed = key
        return True

    def _next_unclaimed(self) -> bytes:
        # The smallest key that may still be claimed. Never b"", which as an
        # end would mean "unbounded" where a checkpoint needs "nothing".
        if self._last_claimed is None:
            return self._range.start or _FIRST_KEY
        return self._last_claimed + b"\x00"

    def try_split(self, fraction_of_remainder: float):
        if self._done:
            return None
        start, end = self._range.start, self._range.end
        rest = self._next_unclaimed()
        if end and rest >= end:
            return None
        split = rest
        # Below this, interpolation needs more precision than a float holds
        # (Beam's helper overflows); the split point is `rest` anyway.
        if fraction_of_remainder > _MIN_SPLIT_FRACTION:
            split = LexicographicKeyRangeTracker.fraction_to_position(
                min(fraction_of_remainder, 1.0), rest, end or None)
            # Interpolation never returns a key before `rest`; an unbounded end
            # at fraction 1 gives None - nothing sensible to split off.
            if not split or split < rest:
                return None
        if end and split >= end:
            return None
        primary, residual = ByteKeyRange(start, split), ByteKeyRange(split, end)
        self._range = primary
        return primary, residual

    def check_done(self) -> None:
        if self._done or self._range.is_empty:
            return
        where = (f"after key {self._last_claimed!r}" if self._last_claimed is not None
                 else "before any key was claimed")
        raise ValueError(f"key range [{self._range.start!r}, {self._range.end!r}) not fully "
                         f"read: stopped {where} without claiming the end")

    def current_progress(self) -> RestrictionProgress:
        if self._done:
            done = 1.0
        elif self._last_claimed is None:
            done = 0.0
        else:
            done = self._range.fraction_of(self._last_claimed)
        return RestrictionProgress(completed=done, remaining=1.0 - done)

    def is_bounded(self) -> bool:
        return True


def _max_rows_end(reader: RowReader, config: BigtableReadConfig, start: bytes,
                  end: bytes) -> bytes:
    """The end key that leaves exactly max_rows rows in [start, end), by a keys-only scan."""
    sampling = config.sample_fraction < 1
    kept = 0
    for row in read_range(reader, start, end, _keys_only_filter(config),
                          limit=0 if sampling else config.max_rows,
                          max_attempts=config.max_attempts):
        if sampling and not _is_sampled(decode_key(row.row_key), config.sample_fraction):
            continue
        kept += 1
        if kept == config.max_rows:
            return row.row_key + b"\x00"
    return end


def plan_key_ranges(config: BigtableReadConfig) -> tuple:
    """The requested key range as work units (transforms/sources/units.py):
    cut at the table's `sample_row_keys` into at most `max_ranges` ranges,
    indexed in key order, each sized by the samples' byte offsets.

    With `max_rows`, a keys-only scan first finds the end key that leaves that
    many rows.
    """
    start, end = config.key_range()
    if end and start >= end:
        return ()
    client, table = open_table(config)
    reader = open_reader(config)
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


class BigtableReader:
    """Reads key-range units (transforms/sources/units.py) into Samples and dead letters;
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
        self._reader = open_reader(self._config)
        self._rows = counter("bigtable_rows_read", counting)
        self._bytes = counter("bigtable_bytes_read", counting)
        self._retries = counter("bigtable_retries", counting)
        self._samples = counter("samples_read", counting)

    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:
        restriction = tracker.current_restriction() if tracker else self.initial_restriction(unit)
        stats = collections.Counter()
        try:
            for kind, value in read_samples(self._reader, self._config, restriction.start,
                                            restriction.end,
                                            claim=tracker.try_claim if tracker else None,
                                            stats=stats):
                yield value if kind == "sample" else Failed(value)
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

        read = p | "ReadBigtable" >> ReadBigtableSamples(BigtableReadConfig(
            project="my-project", instance="media", table="clips", columns="raw:wav=wav"))
        read.samples      # PCollection of Sample dicts
        read[FAILURES]    # PCollection of dead letters (stage "read_bigtable")

    When the job starts, the table's `sample_row_keys` cut the requested range
    into at most `config.max_ranges` ranges (`plan_key_ranges`); they are
    spread over workers and each is read by a
    splittable DoFn (runners may split a range further while it is read). The
    output is in no particular order. Call `check_table(config)` first for a
    clear error on a missing table or family.
    """

    def __init__(self, config: BigtableReadConfig):
        super().__init__()
        self._config = config

    def expand(self, pbegin):
        source = Source(functools.partial(plan_key_ranges, self._config),
                        BigtableReader(self._config))
        return pbegin | "ReadUnits" >> ReadUnits(source)
