"""One row of a CSV/JSONL listing -> a Sample: its columns, its key, its media.

A listing is a CSV file (`.csv`; `.tsv` for tabs) with a header row, or a
JSONL file (`.jsonl`, `.ndjson`) of one JSON object per line, either optionally
compressed (`.gz`, `.bz2`, ...), local or `gs://`. Each row is one sample:

- media columns (`media_columns`) hold a file path or URI; the file is read
  whole through Beam's filesystems into the field named by the column - not
  by the file's extension, so one column may mix `.wav` and `.flac` and the
  spec still names one field (the decoders tell formats apart by content). A
  relative path is relative to the listing's directory; a path leading out
  of that directory and of every media root is not read
  (transforms/sources/media_paths.py), and a file whose first bytes are no
  media format's is not taken (transforms/media/sniff.py): both are the
  row's dead letter;
- every other column becomes a field of the same name: CSV cells and JSON
  strings as UTF-8 bytes (as tar members are), JSON numbers, booleans and
  lists as they are, JSON objects as JSON text (so `meta.age` projects into
  them), JSON nulls left out;
- `__key__` is the `key_column`'s value, or else the first media column's
  path up to the first dot of its basename, as written in the listing
  (`clips/spk01_0001.flac` -> `clips/spk01_0001`, the key the same file would
  have in a WebDataset tar); `__url__` is the listing's path.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from typing import Any, Callable, Mapping, Sequence

from transforms.format.arguments import ArgumentError, check_option_types
from transforms.format.sample import CHANNEL, KEY, URL, StoredBytes, field_text, field_value
from transforms.format.text import comma_list, preview
from transforms.media.sniff import NotMedia, check_media
from transforms.sources.compression import codec_of_name
from transforms.sources.input_files import StorageReadError
from transforms.sources.listing_sets import LISTING_SETS, listing_set_of
from transforms.sources.media_paths import MediaRoots, OutsideCorpus

__all__ = ["ListingLayout", "MediaReadError", "header_columns", "listing_format",
           "media_column_list", "parse_row", "row_key", "row_to_sample"]

_DELIMITERS = {"csv": ",", "tsv": "\t"}
_FORMATS = {"csv": "csv", "tsv": "tsv", "jsonl": "jsonl", "ndjson": "jsonl"}
_PREVIEW = 200


def _record_pattern(delimiter: str) -> re.Pattern:
    """One RFC 4180 record on one line: fields quoted ("" escapes a quote) or
    free of quotes and delimiters."""
    d = re.escape(delimiter)
    field = rf'(?:"(?:[^"]|"")*"|[^"{d}]*)'
    return re.compile(rf"{field}(?:{d}{field})*")


_RECORDS = {fmt: _record_pattern(d) for fmt, d in _DELIMITERS.items()}


@dataclasses.dataclass(frozen=True)
class ListingLayout:
    """How to read a listing's rows; pickled to workers, so configuration only.

    `columns` is the CSV header, or a JSONL file's first row's keys;
    `media_roots` where media paths may lead besides the listing's folder
    (transforms/sources/media_paths.py).
    """

    format: str  # csv, tsv, jsonl, parquet, or a listing set (transforms/sources/listing_sets.py)
    columns: tuple
    media_columns: tuple
    key_column: str | None = None
    media_roots: MediaRoots = MediaRoots()

    def __post_init__(self):
        check_option_types(self)
        if not self.media_columns:
            raise ArgumentError("media_columns", "names no column; which columns hold file paths?")
        missing = [c for c in (*self.media_columns, self.key_column or "")
                   if c and c not in self.columns]
        if missing:
            where = "Parquet files" if self.format == "parquet" else "listing"
            raise ValueError(f"no column {', '.join(map(repr, missing))} in the {where} "
                             f"(columns: {', '.join(self.columns)})")

    @property
    def has_header(self) -> bool:
        """Whether the file's first line names the columns (CSV and TSV)."""
        return self.format in _DELIMITERS


def media_column_list(media_columns: str | Sequence[str]) -> list:
    """The media columns as a list: 'audio,video' or ['audio', 'video']."""
    return list(comma_list(media_columns) if isinstance(media_columns, str) else media_columns)


def listing_format(path: str) -> str:
    """'a/b.csv.gz' -> 'csv', 'data/train/wav.scp' -> 'kaldi',
    'data/x_recordings_dev.jsonl.gz' -> 'lhotse'; ValueError for an extension
    that is not a listing's."""
    listing_set = listing_set_of(path)
    if listing_set is not None:
        return listing_set
    name = path.rsplit("/", 1)[-1]
    if codec_of_name(path) is not None:
        name = name.rsplit(".", 1)[0]
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if ext not in _FORMATS:
        raise ValueError(f"listing {path!r}: cannot tell its format; name it .csv, .tsv, "
                         f".jsonl or .ndjson, optionally compressed as .gz, .bz2 or .xz "
                         f"(e.g. rows.csv.gz), or give a Kaldi data directory's wav.scp or "
                         f"a Lhotse recordings manifest")
    return _FORMATS[ext]


def _text(line: bytes) -> str:
    """A line as text, without a UTF-8 BOM (spreadsheets and editors put one at the
    start of a file: a CSV header's, a JSONL file's first row)."""
    try:
        return line.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise ValueError(f"line is not UTF-8 ({e}): {preview(line, _PREVIEW)}") from None


def _json_object(text: str) -> dict:
    try:
        row = json.loads(text)
    except ValueError as e:
        raise ValueError(f"line is not JSON ({e}): {preview(text, _PREVIEW)}") from None
    except RecursionError:
        raise ValueError(f"line is JSON nested too deeply to read: "
                         f"{preview(text, _PREVIEW)}") from None
    if not isinstance(row, dict):
        raise ValueError(f"line is not a JSON object: {preview(text, _PREVIEW)}")
    return row


def _csv_record(text: str, fmt: str) -> list:
    if not _RECORDS[fmt].fullmatch(text):
        raise ValueError(
            f"line is not one CSV row: an unterminated quote, or a quote inside an unquoted "
            f"field (a quoted field may not span lines): {preview(text, _PREVIEW)}")
    return next(csv.reader([text], delimiter=_DELIMITERS[fmt]))


def header_columns(line: bytes, fmt: str) -> tuple:
    """A listing's first line -> its columns: a CSV header, or a JSONL row's keys."""
    text = _text(line)
    return tuple(_json_object(text) if fmt == "jsonl" else _csv_record(text, fmt))


def parse_row(line: bytes, layout: ListingLayout) -> dict:
    """One line -> {column: value}; ValueError saying why it is not a row."""
    text = _text(line)
    if layout.format == "jsonl":
        return _json_object(text)
    values = _csv_record(text, layout.format)
    if len(values) != len(layout.columns):
        raise ValueError(f"line has {len(values)} fields, the header {len(layout.columns)}: "
                         f"{preview(text, _PREVIEW)}")
    return dict(zip(layout.columns, values))


def _key_of_path(path: str) -> str:
    # WebDataset's key: the path up to the first dot of its basename.
    directory, sep, name = path.rpartition("/")
    return directory + sep + name.split(".", 1)[0]


class MediaReadError(Exception):
    """A media file that cannot be read, or is not to be (outside the corpus,
    not media); names the row's key, the column and the path."""

    def __init__(self, key: str, column: str, path: str, cause: BaseException):
        reason = (str(cause) if isinstance(cause, (OutsideCorpus, NotMedia))
                  else f"cannot read {path!r}: {type(cause).__name__}: {cause}")
        super().__init__(f"column {column!r}: {reason}")
        self.key = key
        self.column = column
        self.path = path


def _media_paths(row: Mapping[str, Any], layout: ListingLayout) -> dict:
    """{media column: the path it holds}; ValueError for one that holds none."""
    media = {}
    for column in layout.media_columns:
        path = row.get(column)
        if not isinstance(path, str) or not path:
            raise ValueError(f"media column {column!r} holds no path: {path!r}")
        media[column] = path
    return media


def row_key(row: Mapping[str, Any], layout: ListingLayout) -> str:
    """The key of a parsed row's sample (the module docstring); ValueError for
    a row that names none."""
    key = row.get(layout.key_column) if layout.key_column else _key_of_path(
        _media_paths(row, layout)[layout.media_columns[0]])
    key = None if key is None else field_text(key)
    if not key:
        raise ValueError(f"key column {layout.key_column!r} is empty")
    return key


def row_to_sample(row: Mapping[str, Any], listing_url: str, layout: ListingLayout,
                  read: Callable[[str], bytes | StoredBytes]) -> dict:
    """A parsed row -> a Sample, its media read with `read(path)` (or left
    stored, as `read` decides).

    Raises ValueError for a row that cannot name a sample (no key, a media
    column empty or not a path) and MediaReadError for a file `read` fails on,
    except that StorageReadError (the storage's fault) propagates.
    """
    for column in row:
        # A listing set's rows may name the channel of its file a row is on.
        if column.startswith("__") and not (column == CHANNEL and layout.format in LISTING_SETS):
            raise ValueError(f"column {column!r}: names starting with __ are reserved")
    media = _media_paths(row, layout)
    sample = {KEY: row_key(row, layout), URL: listing_url}
    for column, value in row.items():
        if column in media:
            path = media[column]
            try:
                path = layout.media_roots.place(listing_url, path)
                sample[column] = check_media(read(path), repr(path))
            except StorageReadError:
                raise
            except Exception as e:  # noqa: BLE001 - outside, missing, not media: the row's
                raise MediaReadError(sample[KEY], column, path, e) from e
        elif value is not None:
            sample[column] = field_value(value)
    return sample
