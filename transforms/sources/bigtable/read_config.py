"""What to read from a table, and how a row becomes a Sample.

    config = BigtableReadConfig(BigtableTable("my-project", "media", "clips"),
                                columns="raw:wav=wav,meta:label=cls", prefix="spk1/")
    row_filter(config)          # the server-side filter of every ReadRows call
    row_to_sample(row, config)  # {"__key__": "spk1/0001", "__url__": "bigtable://...",
                                #  "wav": b"...", "cls": b"3"}

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
  escaped like a key.

Every row of the requested range is accounted for: the server filter adds
one value-stripped, labelled cell per row, so a row holding none of the mapped
columns still arrives and becomes a dead letter instead of silently vanishing.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Mapping, Sequence

from google.cloud.bigtable.data import row_filters

from transforms.format.arguments import ArgumentError
from transforms.format.sample import KEY, URL, escape
from transforms.format.stable_hash import stable_hash64
from transforms.sources.bigtable.key_ranges import prefix_end
from transforms.sources.bigtable.rows import Row
from transforms.sources.bigtable.table import ID, BigtableTable

__all__ = ["BigtableReadConfig", "MissingColumnError", "is_sampled", "keys_only_filter",
           "parse_columns", "row_filter", "row_to_sample"]

_SAMPLE_SALT = b"datagen-sample"
# Label of the one value-stripped cell the filter adds to every row (see row_filter).
_ROW_MARKER = "datagen-row"


def _as_bytes(value: bytes | str | None) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value or b"")


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
            raise ArgumentError("columns", f"term {term!r} has an empty field name after '='")
        if spec in columns:
            raise ArgumentError("columns", f"{text!r} names column {spec!r} twice")
        columns[spec] = field or ("*" if spec.endswith(":*") else spec)
        _split_column(spec, columns[spec])
    return columns


def _split_column(spec: str, field: str) -> tuple:
    """'raw:wav', 'wav' -> ('raw', 'wav'); ValueError naming what is wrong."""
    family, colon, qualifier = spec.partition(":")
    if not colon or not re.fullmatch(ID, family) or not qualifier:
        raise ValueError(f"column {spec!r} is not family:qualifier or family:*, "
                         f"e.g. 'raw:wav=wav,raw:label=cls'")
    if qualifier == "*" and field != "*":
        raise ValueError(f"column {spec!r}: family:* takes its field names from the "
                         f"qualifiers and cannot be renamed to {field!r}")
    if qualifier != "*" and (not field or field == "*" or field.startswith("__")):
        raise ValueError(f"column {spec!r}: field name {field!r} is empty, '*' or reserved "
                         f"(starts with '__')")
    return family, qualifier


@dataclasses.dataclass(frozen=True)
class BigtableReadConfig:
    """What to read from one table. Configuration only: it is pickled to workers.

    - `table`: which table, and the app profile its reads go through.
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

    table: BigtableTable
    columns: Mapping[str, str] | str
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
        columns = (parse_columns(self.columns) if isinstance(self.columns, str)
                   else dict(self.columns))
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
            prefix_end_key = prefix_end(self.prefix)
            if prefix_end_key and (not end or prefix_end_key < end):
                end = prefix_end_key
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


def keys_only_filter(config: BigtableReadConfig) -> row_filters.RowFilter:
    keys = [row_filters.CellsRowLimitFilter(1), row_filters.StripValueTransformerFilter(True)]
    if config.key_regex:
        keys.insert(0, row_filters.RowKeyRegexFilter(config.key_regex))
    return row_filters.RowFilterChain(keys)


def is_sampled(key: str, fraction: float) -> bool:
    return fraction >= 1 or stable_hash64(key, _SAMPLE_SALT) < fraction * 2 ** 64


class MissingColumnError(ValueError):
    """A row lacks required columns; `columns` names them ('raw:wav', 'meta:*')."""

    def __init__(self, message: str, columns: list):
        super().__init__(message)
        self.columns = columns


def row_to_sample(row: Row, config: BigtableReadConfig) -> dict:
    """One row -> a Sample.

    Fields hold the newest cell's value of each mapped column. Raises
    ValueError naming the key and column when a required column is missing or
    two columns would fill one field.
    """
    key = escape(row.row_key)
    newest = {}  # (family, qualifier) -> newest cell
    for cell in row.cells:
        if _ROW_MARKER in cell.labels:
            continue
        column = (cell.family, cell.qualifier)
        if column not in newest or cell.timestamp_micros > newest[column].timestamp_micros:
            newest[column] = cell
    sample = {KEY: key, URL: config.table.url}
    source = {}  # field -> the column it came from, for collision messages
    present = set()
    for (family, qualifier), cell in sorted(newest.items(), key=lambda item: item[0]):
        field = config._named.get((family, qualifier))
        if field is None:
            if family not in config._whole_families:
                continue  # not mapped; the server filter normally drops these
            field = escape(qualifier)
            present.add(f"{family}:*")
            if field.startswith("__"):
                raise ValueError(f"row {key!r}: column {family}:{field} would be field "
                                 f"{field!r}, a reserved name (starts with '__')")
        column = f"{family}:{escape(qualifier)}"
        if field in source:
            raise ValueError(f"row {key!r}: columns {source[field]} and {column} both map "
                             f"to field {field!r}")
        source[field] = column
        present.add(field)
        sample[field] = cell.value
    missing = [name for name in config.required if name not in present]
    if missing:
        columns = _columns_of(config, missing)
        described = ", ".join(c if c == f else f"{c} (field {f!r})"
                              for c, f in zip(columns, missing))
        raise MissingColumnError(f"row {key!r} has no cell in required column"
                                 f"{'s' if len(columns) > 1 else ''} {described}", columns)
    return sample


def _columns_of(config: BigtableReadConfig, fields: Iterable[str]) -> list:
    """Field names -> their columns ('raw:wav'); `family:*` names stay as they are."""
    by_field = {field: f"{family}:{escape(qualifier)}"
                for (family, qualifier), field in config._named.items()}
    return [by_field.get(field, field) for field in fields]
