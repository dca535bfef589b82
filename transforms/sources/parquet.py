"""Parquet files to Samples: a row a sample, read by row groups in parallel.

    import transforms as dg

    read = dg.ReadParquetSamples("gs://bucket/librispeech/train-*.parquet", ["audio"],
                                 key_column="id")
    with dg.make_pipeline() as p:
        samples = (p | read).samples   # {"__key__": "1272-128104-0000", "audio": b"fLaC...",
                                       #  "text": "MISTER QUILTER ...", "speaker_id": 1272}

A media column holds each row's media as one of:

- a struct of `bytes` and `path`, the Hugging Face `datasets` layout of an
  `Audio` or `Image` column: the bytes when they are there, else the file at
  `path` (relative to the Parquet file's folder, absolute, or gs://);
- binary: the bytes themselves;
- a string: a file path, resolved as above.

A row whose media column has neither bytes nor a path, or whose file cannot
be read, is a dead letter (stage `read_media`, naming the row's key and the
column); the other rows go on. The other columns are fields as they are
(numbers, text, a struct as a dict, which `--features` projects like JSON:
`meta.age`). A row's key is its `key_column`, else `<file stem>-<row number>`.

The launcher reads each file's footer only (`inspect_parquet`): every file
must have the columns the flags name. When the job starts, the files' row
groups are planned as work units of about `target_bytes` of stored data
each (consecutive row groups of a file, never split: the unit of a Parquet
read), so a rerun plans the same units and `--resume` reuses them.

Counters (namespace `datagen`): `parquet_rows_read`, `media_files_read`,
`media_bytes_read`, `samples_read`.
"""

from __future__ import annotations

import functools
import itertools
import posixpath
from typing import Any, Iterator, Mapping, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from transforms.format.dead_letters import StorageReadError
from transforms.format.sample import KEY, URL, field_text
from transforms.runner.counters import counter
from transforms.sources.file_match import as_patterns, file_version, match_files, matched_files
from transforms.sources.input_files import open_input, read_whole
from transforms.sources.listing import check_columns
from transforms.sources.listing_rows import (
    ListingLayout,
    field_value,
    media_column_list,
    resolve,
)
from transforms.sources.units import Failed, ReadUnits, Source, UnitReader, WorkUnit

__all__ = ["ParquetReader", "ReadParquetSamples", "inspect_parquet",
           "plan_parquet_units"]

_MEDIA_STAGE = "read_media"
_ROW_STAGE = "read_parquet"
# Rows converted to Python objects at a time: bounds the memory a row group of
# large embedded media takes beyond its own stored bytes.
_BATCH_ROWS = 64


def _parquet_file(path: str, f) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{path}: not a Parquet file: {e}") from None


def inspect_parquet(patterns: Sequence[str], media_columns: Sequence[str],
                    key_column: str | None = None) -> tuple:
    """(files, their ListingLayout, format "parquet") from the files' footers;
    ValueError before any work when a file is not Parquet or the files'
    columns differ or lack one named."""
    files = match_files(patterns)
    columns = {}
    for path in files:
        with open_input(path) as f:
            columns[path] = tuple(_parquet_file(path, f).schema_arrow.names)
    first = files[0]
    for path, found in columns.items():
        if found != columns[first]:
            raise ValueError(f"Parquet files {first!r} and {path!r} differ in their columns "
                             f"({', '.join(columns[first])} vs {', '.join(found)})")
    try:
        layout = ListingLayout("parquet", columns[first], tuple(media_columns), key_column or None)
    except ValueError as e:
        raise ValueError(f"{first}: {e}") from None
    return files, layout


def plan_parquet_units(patterns: str | Sequence[str], target_bytes: int) -> tuple:
    """Work units of consecutive row groups of a file, about `target_bytes` of
    data each: inputs (path, first row group, end row group, its first row)."""
    units = []
    for matched in sorted(matched_files(patterns), key=lambda m: m.path):
        with open_input(matched.path) as f:
            metadata = _parquet_file(matched.path, f).metadata
        version = ((matched.path, file_version(matched)),)
        group, size, first_row, row = 0, 0, 0, 0
        for index in range(metadata.num_row_groups):
            row_group = metadata.row_group(index)
            size += row_group.total_byte_size
            row += row_group.num_rows
            if size >= target_bytes or index == metadata.num_row_groups - 1:
                units.append(((matched.path, group, index + 1, first_row), size, version))
                group, size, first_row = index + 1, 0, row
    return tuple(WorkUnit(i, inputs, size, version)
                 for i, (inputs, size, version) in enumerate(units))


def _media(value: Any, parquet_url: str, read) -> bytes:
    """A media column's value as bytes: embedded, or read from its path."""
    if isinstance(value, Mapping):  # Hugging Face's {"bytes": ..., "path": ...}
        if value.get("bytes"):
            return bytes(value["bytes"])
        value = value.get("path")
    if isinstance(value, (bytes, bytearray)) and value:
        return bytes(value)
    if isinstance(value, str) and value:
        return read(resolve(parquet_url, value))
    raise ValueError("the row's media holds neither bytes nor a path")


class ParquetReader(UnitReader):
    """Reads Parquet units: each row of the unit's row groups into a Sample,
    its media embedded or read, or a dead letter."""

    def __init__(self, layout: ListingLayout):
        self._layout = layout

    def setup(self, counting: bool = True) -> None:
        self._rows = counter("parquet_rows_read", counting)
        self._samples = counter("samples_read", counting)
        self._files = counter("media_files_read", counting)
        self._bytes = counter("media_bytes_read", counting)

    def _read(self, path: str) -> bytes:
        data = read_whole(path)
        self._files.inc()
        self._bytes.inc(len(data))
        return data

    # UnitReader.read: a unit of this source is never split, so no tracker is used.
    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:  # noqa: ARG002
        url, first_group, end_group, first_row = unit.inputs
        stem = posixpath.basename(url).split(".", 1)[0]
        with open_input(url) as f:
            batches = _parquet_file(url, f).iter_batches(
                batch_size=_BATCH_ROWS, row_groups=range(first_group, end_group))
            rows = (row for batch in batches for row in batch.to_pylist())
            for number, row in zip(itertools.count(first_row), rows):
                self._rows.inc()
                self._samples.inc()
                yield self._sample(url, row, f"{stem}-{number:07d}")

    def _sample(self, url: str, row: dict, default_key: str) -> dict | Failed:
        layout = self._layout
        key = row.get(layout.key_column) if layout.key_column else default_key
        key = None if key is None else field_text(key)
        if not key:
            return Failed.of(_ROW_STAGE, ValueError(
                f"key column {layout.key_column!r} is empty"), url=url, key=default_key)
        sample = {KEY: key, URL: url}
        for column, value in row.items():
            if column.startswith("__"):
                return Failed.of(_ROW_STAGE, ValueError(
                    f"column {column!r}: names starting with __ are reserved"), url=url, key=key)
            if column in layout.media_columns:
                try:
                    sample[column] = _media(value, url, self._read)
                except StorageReadError:
                    raise
                except Exception as e:  # noqa: BLE001 - missing, forbidden, empty: the row's
                    return Failed.of(_MEDIA_STAGE, e, url=url, key=key, member=column,
                                     column=column)
            elif value is not None:
                sample[column] = value if isinstance(value, dict) else field_value(value)
        return sample


def _first_samples(files: Sequence[str], layout: ListingLayout) -> Iterator[dict]:
    """The readable samples of the first file's first units, in order (lazy)."""
    reader = ParquetReader(layout)
    reader.setup(counting=False)
    for unit in plan_parquet_units(files[:1], 1):
        for sample in reader.read(unit):
            if isinstance(sample, dict):
                yield sample


class ReadParquetSamples(beam.PTransform):
    """Reads the rows of Parquet files matching patterns into Samples.

        read = p | "ReadParquet" >> ReadParquetSamples("data/*.parquet", ["audio"])
        read.samples      # PCollection of Sample dicts
        read.failures     # dead letters (stages "read_parquet", "read_media")

    Made, it reads each file's footer (`inspect_parquet`): ValueError before
    any work when one is not Parquet, the files differ in their columns, or
    one named is missing. Units are runs of row groups of about
    `target_bytes` (`plan_parquet_units`), planned when the job starts.
    `source` is the Source it reads, for WriteDataset.

    >>> import pyarrow as pa, pyarrow.parquet as pq, transforms as dg
    >>> audio = pa.array([{"bytes": b"RIFF...", "path": "a.wav"}],
    ...                  pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    >>> pq.write_table(pa.table({"audio": audio, "text": ["hello"]}), "rows.parquet")
    >>> read = dg.ReadParquetSamples("rows.parquet", ["audio"])
    >>> read.layout.columns, read.describe()["num_files"]
    (('audio', 'text'), 1)
    """

    def __init__(self, file_pattern: str | Sequence[str], media_columns: str | Sequence[str],
                 key_column: str | None = None, target_bytes: int = 128 << 20):
        super().__init__()
        self._patterns = as_patterns(file_pattern)
        self.files, self.layout = inspect_parquet(self._patterns,
                                                  media_column_list(media_columns), key_column)
        plan = functools.partial(plan_parquet_units, self._patterns, target_bytes)
        self.source = Source(plan, ParquetReader(self.layout))

    def describe(self) -> dict:
        """What the manifest records of this input."""
        return {"type": "parquet", "input": ",".join(self._patterns),
                "num_files": len(self.files), "media_columns": list(self.layout.media_columns)}

    def first_samples(self) -> Iterator[dict]:
        """The readable samples of the first file, in order: lazy, so --features
        auto reads only the rows it looks at."""
        return _first_samples(self.files, self.layout)

    def check_fields(self, fields: Sequence[tuple]) -> None:
        """ValueError, before any work, naming each (flag, field) pair whose field
        no column provides."""
        check_columns(self.files[0], self.layout.columns, fields)

    def expand(self, pbegin):
        return pbegin | "ReadUnits" >> ReadUnits(self.source)
