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

A row group that does not decode (a damaged page; the footer read) makes
each of its rows not read before the damage a dead letter (stage
`read_parquet`, keyed `<file stem>-<row number>`, naming the row group); the
other row groups go on. A read the storage fails is not the data's: it
raises StorageReadError, and the runner retries.

A path must lie under the Parquet file's folder or a `media_root`
(transforms/sources/media_paths.py), and what a column holds must start as
media does (transforms/media/sniff.py); otherwise the row is a dead letter.

A row whose media column has neither bytes nor a path, or whose file cannot
be read, is a dead letter (stage `read_media`, naming the row's key and the
column); the other rows go on. The other columns are fields as they are
(numbers, text, a struct as a dict, which `--features` projects like JSON:
`meta.age`). A row's key is its `key_column`, else `<file stem>-<row number>`,
the stem being the file's path below the folder all the files are in, up to
the first dot of its name (`data/train-00000-of-00001.parquet` ->
`train-00000-of-00001`; `default/train/0000.parquet` and
`default/test/0000.parquet` -> `train/0000`, `test/0000`): a key is the
dataset's, unique in it (transforms/format/keys.py).

A Hugging Face hub layout names each file's split (`data/train-00000-of-
00002.parquet`, `default/test/0000.parquet`): when its files name two
splits or more, each row gets the field `file_split` (FILE_SPLIT), the split
its file's name says, and the job keeps the dataset's own splits by it
(`flag_defaults`: --split_column file_split, unless --splits or
--stratify_by asks for new ones).

A Hugging Face `datasets` export says what its columns are in the schema's
`huggingface` metadata (`huggingface_features`): its `Audio` and `Image`
columns are the media columns when none are named, the Audio ones the
job's default `--audio_fields` and their `sampling_rate` its default
`--sample_rate` (`flag_defaults`); a `Value` column's dtype, and a
`ClassLabel`'s int64, are what `--features auto` gives it (`declared_dtypes`).
Without media columns named or so declared, the launcher says which columns
hold bytes, Hugging Face's bytes-and-path structs, or text that may be paths.

The launcher reads each file's footer only (`inspect_parquet`): every file
must have the columns the flags name. When the job starts, the files' row
groups are planned as work units of about `target_bytes` of stored data
each (consecutive row groups of a file, never split: the unit of a Parquet
read), so a rerun plans the same units and `--resume` reuses them.

Counters (namespace `datagen`): `parquet_rows_read`, `media_files_read`,
`media_bytes_read`, `samples_read`.
"""

from __future__ import annotations

import collections
import functools
import json
import posixpath
import re
from typing import Any, Iterator, Mapping, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq

from transforms.format.dead_letters import StorageReadError
from transforms.format.keys import KeyPlace
from transforms.format.sample import KEY, URL, field_text
from transforms.media.sniff import check_media
from transforms.recipe.units import SHARD_SIZE_BYTES, Failed, Source, UnitReader, WorkUnit
from transforms.runner.counters import counter
from transforms.sources.file_match import as_patterns, file_version, match_files, matched_files
from transforms.sources.input_files import StorageGuard, open_input, read_whole
from transforms.sources.listing import check_columns
from transforms.sources.listing_rows import ListingLayout, field_value, media_column_list
from transforms.sources.media_paths import MediaRoots
from transforms.sources.units import ReadUnits

__all__ = ["FILE_SPLIT", "ParquetReader", "ReadParquetSamples", "file_splits",
           "inspect_parquet", "plan_parquet_units"]

# The field holding the split a row's file is named for (a hub layout's).
FILE_SPLIT = "file_split"
# A hub file's name: `<split>-00000-of-00002.parquet`; or its folder is the split.
_HUB_FILE = re.compile(r"^([A-Za-z][\w.]*?)-\d{5}-of-\d{5}\.parquet$")
_SPLIT_FOLDERS = ("train", "test", "validation", "valid", "dev", "eval")

_MEDIA_STAGE = "read_media"
_ROW_STAGE = "read_parquet"
# Rows converted to Python objects at a time: bounds the memory a row group of
# large embedded media takes beyond its own stored bytes.
_BATCH_ROWS = 64
# Keys read at a time (a column of text alone).
_KEY_ROWS = 65536


def _parquet_file(path: str, f) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(f)
    except (pa.ArrowException, OSError) as e:
        raise ValueError(f"{path}: not a Parquet file: {e}") from None


# Hugging Face `datasets` feature types whose columns hold media.
_HF_MEDIA = ("Audio", "Image", "Video")
# A `Value` column's dtype -> the spec's (a ClassLabel's values are int64).
_HF_DTYPES = {"string": "string", "large_string": "string", "bool": "bool",
              "binary": "bytes", "large_binary": "bytes", "int32": "int32", "int64": "int64",
              **{t: "int64" for t in ("int8", "int16", "uint8", "uint16", "uint32")},
              "float16": "float", "float32": "float", "float64": "double"}


def declared_class_names(huggingface: Mapping[str, Any]) -> dict:
    """{column: the names of its classes} of a Hugging Face schema's ClassLabel
    columns (`huggingface_features`)."""
    return {name: tuple(feature["names"]) for name, feature in huggingface.items()
            if feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list)}


def huggingface_features(schema: pa.Schema) -> dict:
    """{column: its `datasets` feature (a dict with `_type`)} from a Parquet
    schema's `huggingface` metadata; {} for plain Parquet (or metadata that
    does not read)."""
    text = (schema.metadata or {}).get(b"huggingface")
    try:
        features = json.loads(text)["info"]["features"] if text else {}
    except (ValueError, KeyError, TypeError):
        return {}
    return {name: f for name, f in features.items() if isinstance(f, dict)} if isinstance(
        features, dict) else {}


def _no_media_columns(path: str, schema: pa.Schema) -> ValueError:
    """The launcher's error when no column is named or declared media: what
    each column holds, so the user can tell which is."""
    def holds(field: pa.Field) -> str:
        kind = field.type
        if pa.types.is_struct(kind) and {"bytes", "path"} <= {c.name for c in kind}:
            return "bytes or a path a row (Hugging Face's media struct)"
        if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
            return "bytes"
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return "text (file paths?)"
        return str(kind)
    found = "; ".join(f"{field.name}: {holds(field)}" for field in schema)
    return ValueError(f"{path}: name the columns that hold each row's media with "
                      f"--media_columns (its schema declares no Hugging Face Audio or Image "
                      f"column); the columns hold {found}")


def inspect_parquet(patterns: Sequence[str], media_columns: Sequence[str],
                    key_column: str | None = None,
                    media_roots: MediaRoots | None = None) -> tuple:
    """(files, their ListingLayout, the first file's `huggingface_features`)
    from the files' footers and the first file's first row; ValueError before
    any work when a file is not Parquet, the files' columns differ or lack one
    named, no media column is named or declared, or the first row's media is
    a path outside the corpus (`MediaRoots.first_row_outside`)."""
    files = match_files(patterns)
    schemas = {}
    for path in files:
        with open_input(path) as f:
            schemas[path] = _parquet_file(path, f).schema_arrow
    columns = {path: tuple(schema.names) for path, schema in schemas.items()}
    first = files[0]
    for path, found in columns.items():
        if found != columns[first]:
            raise ValueError(f"Parquet files {first!r} and {path!r} differ in their columns "
                             f"({', '.join(columns[first])} vs {', '.join(found)})")
    declared = huggingface_features(schemas[first])
    media_columns = tuple(media_columns) or tuple(
        name for name, feature in declared.items() if feature.get("_type") in _HF_MEDIA)
    if not media_columns:
        raise _no_media_columns(first, schemas[first])
    try:
        layout = ListingLayout("parquet", columns[first], tuple(media_columns), key_column or None,
                               media_roots or MediaRoots())
    except ValueError as e:
        raise ValueError(f"{first}: {e}") from None
    _check_first_row(first, layout)
    return files, layout, declared


def _check_first_row(path: str, layout: ListingLayout) -> None:
    with open_input(path) as f:
        batch = next(_parquet_file(path, f).iter_batches(
            batch_size=1, columns=list(layout.media_columns)), None)
    row = batch.to_pylist()[0] if batch is not None and batch.num_rows else {}
    for column in layout.media_columns:
        written = _media_path(row.get(column))
        if written:
            layout.media_roots.first_row_outside(path, "row 0", written)


def file_splits(paths: Sequence[str]) -> dict:
    """{path: the split its name gives} when the files name two splits or more
    (a Hugging Face hub layout: `<split>-00000-of-00002.parquet`, or a folder
    named as a split); {} otherwise."""
    found = {}
    for path in paths:
        folder, name = posixpath.split(path)
        hub = _HUB_FILE.match(name)
        split = hub.group(1) if hub else posixpath.basename(folder)
        if not (hub or split in _SPLIT_FOLDERS):
            return {}
        found[path] = split
    return found if len(set(found.values())) > 1 else {}


def _key_stems(paths: Sequence[str]) -> dict:
    """{path: the stem of its rows' default keys}: its path below the folder
    all `paths` are in, up to the first dot of its name; the whole of that
    path for files whose stems would be one (`x.parquet`, `x.v2.parquet`)."""
    folders = [path.rsplit("/", 1)[0].split("/") for path in paths]
    common = 0
    while all(len(f) > common and f[common] == folders[0][common] for f in folders):
        common += 1
    below = {path: "/".join(path.split("/")[common:]) for path in paths}
    stems = {path: posixpath.join(posixpath.dirname(rest),
                                  posixpath.basename(rest).split(".", 1)[0])
             for path, rest in below.items()}
    shared = collections.Counter(stems.values())
    return {path: below[path] if shared[stem] > 1 else stem for path, stem in stems.items()}


def plan_parquet_units(patterns: str | Sequence[str], target_bytes: int) -> tuple:
    """Work units of consecutive row groups of a file, about `target_bytes` of
    data each: inputs (path, first row group, end row group, its first row,
    its rows' key stem)."""
    units = []
    matched_all = sorted(matched_files(patterns), key=lambda m: m.path)
    stems = _key_stems([m.path for m in matched_all])
    for matched in matched_all:
        with open_input(matched.path) as f:
            metadata = _parquet_file(matched.path, f).metadata
        version = ((matched.path, file_version(matched)),)
        group, size, first_row, row = 0, 0, 0, 0
        for index in range(metadata.num_row_groups):
            row_group = metadata.row_group(index)
            size += row_group.total_byte_size
            row += row_group.num_rows
            if size >= target_bytes or index == metadata.num_row_groups - 1:
                units.append(((matched.path, group, index + 1, first_row, stems[matched.path]),
                              size, version))
                group, size, first_row = index + 1, 0, row
    return tuple(WorkUnit(i, inputs, size, version)
                 for i, (inputs, size, version) in enumerate(units))


def _media_path(value: Any) -> str | None:
    """The path a media column's value names, when it holds no bytes."""
    if isinstance(value, Mapping) and not value.get("bytes"):  # Hugging Face's struct
        value = value.get("path")
    return value if isinstance(value, str) and value else None


def _media(value: Any, parquet_url: str, layout: ListingLayout, read) -> bytes:
    """A media column's value as bytes, checked to be media: embedded, or read
    from its path (which must lie in the corpus: transforms/sources/media_paths.py)."""
    path = _media_path(value)
    if path is not None:
        placed = layout.media_roots.place(parquet_url, path)
        return check_media(read(placed), repr(placed))
    if isinstance(value, Mapping):  # Hugging Face's {"bytes": ..., "path": ...}
        value = value.get("bytes")
    if isinstance(value, (bytes, bytearray)) and value:
        return check_media(bytes(value), "the row's embedded media")
    raise ValueError("the row's media holds neither bytes nor a path")


class ParquetReader(UnitReader):
    """Reads Parquet units: each row of the unit's row groups into a Sample,
    its media embedded or read, or a dead letter."""

    def __init__(self, layout: ListingLayout, class_names: Mapping[str, tuple] | None = None,
                 splits: Mapping[str, str] | None = None):
        self._layout = layout
        self._splits = dict(splits or {})   # path -> the split its name gives
        if class_names:
            self.class_names = dict(class_names)

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
        url, first_group, end_group, first_row, stem = unit.inputs
        with open_input(url) as f:
            # A read the storage fails is StorageReadError (pyarrow raises it as it
            # came), so what pyarrow raises itself is the data's: a damaged page.
            parquet = _parquet_file(url, StorageGuard(f, url))
            row = first_row
            for group in range(first_group, end_group):
                size = parquet.metadata.row_group(group).num_rows
                yield from self._row_group(parquet, url, group, stem, row, size)
                row += size

    def keys(self, unit: WorkUnit, fields: tuple = ()) -> Iterator[tuple]:
        """The keys of the unit's rows from its `key_column` (and `fields`)
        alone; none for rows keyed by their file and number, unique by
        construction, unless `fields` make their keys."""
        key_column = self._layout.key_column
        if not (key_column or fields):
            return
        url, first_group, end_group, row, stem = unit.inputs
        columns = [key_column] if key_column else []
        try:
            with open_input(url) as f:
                parquet = _parquet_file(url, StorageGuard(f, url))
                found = [c for c in fields if c in parquet.schema_arrow.names]
                for group in range(first_group, end_group):
                    for batch in parquet.iter_batches(batch_size=_KEY_ROWS, row_groups=[group],
                                                      columns=columns + found):
                        for values in batch.to_pylist():
                            key = field_text(values[key_column]) if key_column and values[
                                key_column] is not None else f"{stem}-{row:07d}"
                            if key:
                                yield key, KeyPlace(url, row, f"row {row}"), tuple(
                                    field_value(values.get(c)) for c in fields)
                            row += 1
        except (ValueError, pa.ArrowException, OSError):
            return   # a dead letter when read

    def _row_group(self, parquet: pq.ParquetFile, url: str, group: int, stem: str,
                   first_row: int, size: int) -> Iterator[dict | Failed]:
        """The samples of one row group, and a dead letter for each of its rows
        after a part of it that does not decode."""
        read = 0
        try:
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group]):
                for row in batch.to_pylist():
                    self._rows.inc()
                    self._samples.inc()
                    yield self._sample(url, row, f"{stem}-{first_row + read:07d}")
                    read += 1
        except (pa.ArrowException, OSError) as e:
            error = ValueError(f"row group {group} does not decode from row "
                               f"{first_row + read} on ({type(e).__name__}: "
                               f"{' '.join(str(e).split())}): its rows up to "
                               f"{first_row + size - 1} are lost")
            for number in range(first_row + read, first_row + size):
                self._rows.inc()
                self._samples.inc()
                yield Failed.of(_ROW_STAGE, error, url=url, key=f"{stem}-{number:07d}",
                                member=f"row group {group}")

    def _sample(self, url: str, row: dict, default_key: str) -> dict | Failed:
        layout = self._layout
        key = row.get(layout.key_column) if layout.key_column else default_key
        key = None if key is None else field_text(key)
        if not key:
            return Failed.of(_ROW_STAGE, ValueError(
                f"key column {layout.key_column!r} is empty"), url=url, key=default_key)
        sample = {KEY: key, URL: url}
        if url in self._splits:
            sample[FILE_SPLIT] = self._splits[url].encode("utf-8")
        for column, value in row.items():
            if column.startswith("__"):
                return Failed.of(_ROW_STAGE, ValueError(
                    f"column {column!r}: names starting with __ are reserved"), url=url, key=key)
            if column in layout.media_columns:
                try:
                    sample[column] = _media(value, url, layout, self._read)
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

    Made, it reads each file's footer and the first row's media columns
    (`inspect_parquet`): ValueError before any work when one is not Parquet,
    the files differ in their columns, one named is missing, none is named
    (`media_columns` empty) or declared (a Hugging Face Audio or Image
    column: `huggingface` holds the declared features), or the first
    row's media is a path outside the file's folder and every `media_root`
    (a folder, or a list of them, the paths may also lead into). Units are
    runs of row groups of about `target_bytes` (`plan_parquet_units`),
    planned when the job starts.
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
                 key_column: str | None = None, target_bytes: int = SHARD_SIZE_BYTES,
                 media_root: str | Sequence[str] | None = None):
        super().__init__()
        self._patterns = as_patterns(file_pattern)
        self.files, self.layout, self.huggingface = inspect_parquet(
            self._patterns, media_column_list(media_columns), key_column,
            MediaRoots.of(media_root))
        self.splits = file_splits(self.files)
        if self.splits and FILE_SPLIT in self.layout.columns:
            raise ValueError(f"{self.files[0]}: a column is named {FILE_SPLIT!r}, the field that "
                             "says which split a hub file's name gives; rename it")
        plan = functools.partial(plan_parquet_units, self._patterns, target_bytes)
        self.source = Source(plan, ParquetReader(self.layout, declared_class_names(
            self.huggingface), self.splits))

    @property
    def flag_defaults(self) -> dict:
        """{flag: value} the files' own metadata suggests where the command
        line gives none: their Hugging Face Audio columns as the fields a cut
        decodes, the sample rate those declare (when they agree on one), and
        the splits their names give (`file_splits`)."""
        audio = [c for c in self.layout.media_columns
                 if self.huggingface.get(c, {}).get("_type") == "Audio"]
        rates = {self.huggingface[c].get("sampling_rate") for c in audio}
        rate = rates.pop() if len(rates) == 1 else None
        return ({"audio_fields": ",".join(audio)} if audio else {}) | (
            {"sample_rate": rate} if isinstance(rate, int) and rate > 0 else {}) | (
            {"split_column": FILE_SPLIT} if self.splits else {})

    @property
    def declared_dtypes(self) -> dict:
        """{column: the spec's dtype} of the columns a Hugging Face schema
        declares a `Value` of a known dtype, or a `ClassLabel` (int64)."""
        declared = {}
        for name, feature in self.huggingface.items():
            kind = feature.get("_type")
            dtype = "int64" if kind == "ClassLabel" else (
                _HF_DTYPES.get(feature.get("dtype")) if kind == "Value" else None)
            if dtype:
                declared[name] = dtype
        return declared

    def describe(self) -> dict:
        """What the manifest records of this input (its declared classes are
        the recipe's: the reader declares them, `class_names`)."""
        return {"type": "parquet", "input": ",".join(self._patterns),
                "num_files": len(self.files), "media_columns": list(self.layout.media_columns)}

    def first_samples(self) -> Iterator[dict]:
        """The readable samples of the first file, in order: lazy, so --features
        auto reads only the rows it looks at."""
        return _first_samples(self.files, self.layout)

    def check_fields(self, fields: Sequence[tuple]) -> None:
        """ValueError, before any work, naming each (flag, field) pair whose field
        no column (nor the split the files' names give) provides."""
        check_columns(self.files[0], self.layout.columns + ((FILE_SPLIT,) if self.splits
                                                            else ()), fields)

    def expand(self, pbegin):
        return pbegin | "ReadUnits" >> ReadUnits(self.source)
