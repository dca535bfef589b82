"""CSV and JSONL listings to Samples: rows naming media files, read in parallel.

    import transforms as dg

    # Reads each listing's first line now: a missing column fails here.
    read_listing = dg.ReadListingSamples("gs://bucket/lists/train-*.csv", ["audio"])
    with dg.make_pipeline() as p:
        read = p | "ReadListing" >> read_listing
        samples = read.samples        # {"__key__": "clips/spk01_0001",
                                      #  "__url__": "gs://bucket/lists/train-0.csv",
                                      #  "audio": b"fLaC...", "label": b"3", "speaker": b"spk01"}
        failures = read.failures      # dead letters (transforms/format/dead_letters.py)

A listing is a CSV or JSONL file naming one sample per row; how a row becomes
a Sample is transforms/sources/listing_rows.py's.

Large listings never pass through the launching machine: the launcher reads
one line of each file (`inspect_listings`, when ReadListingSamples is made).
When the job starts, a worker reads a few rows of the first to size the work
units (`plan_listing_units`): byte ranges of the listings, each holding about
`target_bytes` of media by the first rows' sizes (a gzip listing's ranges are
of its text, whose size its trailer gives, each unit decompressing up to its
own; a bzip2 or xz one is one unit). Workers read a unit's rows - the lines
that start in its range - and their media. So a row is one physical line. CSV follows RFC 4180
on that line (quoted fields may hold the delimiter and doubled quotes), but a
quoted field may not span lines: the line holding the opening quote fails as
unterminated, and the one holding the closing quote as a quote inside an
unquoted field;
both become dead letters, as does any fragment whose field count is wrong.
Use JSONL for text with newlines (JSON escapes them). Rows are identified by
their key, not a line number: a split read does not know line numbers.
Blank lines are skipped.

Failures (transforms/format/dead_letters.py, unit SAMPLE, `url` = the listing):
stage `read_manifest` for a row that does not parse (not UTF-8, bad CSV or
JSON, wrong field count, no key, a media column empty or not a path; the
message quotes the line), stage `read_media` for a file that is missing,
unreadable, or a FIFO or device (`key` the row's, `member` the file's path or
URI, `column` its column). A compressed listing (.gz, .bz2, .xz) is read to
its end through its codec's checks before its first row is used, as a
compressed tar is (transforms/sources/tar.py): one that fails them is one FILE
dead letter (its first unit's), stage `read_manifest`, and gives no row. As in the tar source, a
file that opens but whose bytes then fail to arrive (a gs:// read still
failing after the client's retries, a disk error) is the storage's fault, not
the row's: StorageReadError propagates and the runner retries the bundle.

Counters (namespace `datagen`): `manifest_rows_read`, `media_files_read`,
`media_bytes_read`, and `samples_read` (every row, whether it became a Sample
or a dead letter). Consecutive rows naming the same file (segments of one
recording, NeMo-style) share one read of it: it is counted once.
"""

from __future__ import annotations

import functools
import itertools
import logging
from typing import Callable, Iterator, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems

from transforms.format.arguments import ArgumentError
from transforms.format.keys import KeyPlace
from transforms.format.sample import KEY, URL, escape_name, is_text
from transforms.recipe.units import SHARD_SIZE_BYTES, Failed, Source, UnitReader, WorkUnit
from transforms.runner.counters import counter
from transforms.sources.compression import StreamCorrupt, codec_of_name
from transforms.sources.file_match import as_patterns, file_version, match_files, matched_files
from transforms.sources.input_files import open_decompressed, open_input, read_whole
from transforms.sources.lhotse_manifests import (
    CLAMPED,
    LHOTSE,
    no_supervisions,
    supervisions_given_alone,
)
from transforms.sources.listing_rows import (
    ListingLayout,
    MediaReadError,
    field_value,
    header_columns,
    listing_format,
    media_column_list,
    parse_row,
    row_key,
    row_to_sample,
)
from transforms.sources.listing_sets import LISTING_SETS
from transforms.sources.media_paths import MediaRoots
from transforms.sources.stored import StoredMember, stored_or_read
from transforms.sources.units import ReadUnits

__all__ = ["ListingReader", "ReadLhotseSamples", "ReadListingSamples", "check_columns",
           "inspect_listings",
           "iter_samples", "missing_fields", "plan_listing_units", "read_media"]

_LOG = logging.getLogger(__name__)
_ROW_STAGE = "read_manifest"
_MEDIA_STAGE = "read_media"
# Rows of the first listing whose media sizes estimate a unit's range.
_SIZING_ROWS = 16
# What a range skips at a time of a line begun before it.
_SKIP_BYTES = 1 << 16
# Rows a unit holds when no sized row was found to estimate from.
_DEFAULT_UNIT_ROWS = 1000
# A media file's bytes, as stored: what opening raises (missing, forbidden, a
# FIFO or device) passes through, a failing read is StorageReadError.
read_media = read_whole


def _first_line(path: str) -> bytes:
    with open_decompressed(path) as f:
        return f.readline().rstrip(b"\r\n")


def inspect_listings(patterns: Sequence[str], media_columns: Sequence[str],
                     key_column: str | None = None,
                     media_roots: MediaRoots | None = None) -> tuple:
    """(files, ListingLayout) for the launcher; ValueError before any pipeline work.

    Reads only the first line of each file: every file must have one format
    and the same header (a JSONL file's first row's keys stand for its header),
    holding the media and key columns; and the first file's first row, whose
    media must lie in the corpus (`MediaRoots.first_row_outside`).
    """
    files = match_files(patterns)
    layouts = {}
    for path in files:
        if not is_text(path):
            raise ValueError(f"listing {escape_name(path)!r}: its name is not UTF-8; rename "
                             f"it (rows name their listing as text)")
        if (alone := supervisions_given_alone(path)) is not None:
            raise alone
        fmt = listing_format(path)
        if fmt in LISTING_SETS:
            layouts[path] = (fmt, _inspect_set(path, LISTING_SETS[fmt]))
            continue
        try:
            line = _first_line(path)
        except StreamCorrupt as e:
            # Not the launcher's to judge: the job makes it a dead letter.
            _LOG.warning("listing %s is corrupt, so it will be a dead letter: %s", path, e)
            continue
        if not line:
            raise ValueError(f"listing {path!r} has no header row")
        try:
            columns = header_columns(line, fmt)
        except ValueError as e:
            raise ValueError(f"listing {path!r}, first line: {e}") from None
        if len(set(columns)) != len(columns) or "" in columns:
            hint = ("; a first column with no name is the index pandas writes: "
                    "to_csv(..., index=False) leaves it out" if columns[0] == "" else "")
            raise ValueError(f"listing {path!r}: header columns must be unique and named: "
                             f"{', '.join(columns)}{hint}")
        layouts[path] = (fmt, columns)
    if not layouts:
        raise ValueError(f"no listing matching {', '.join(patterns)} can be read: every one "
                         f"is corrupt")
    first = next(iter(layouts))
    fmt, columns = layouts[first]
    for path, found in layouts.items():
        if found != (fmt, columns):
            raise ValueError(f"listings {first!r} and {path!r} differ in format or columns "
                             f"({', '.join(columns)} vs {', '.join(found[1])})")
    reserved = [c for c in columns if c.startswith("__")]
    if reserved:
        raise ValueError(f"listing {first!r}: column names starting with __ are reserved: "
                         f"{', '.join(reserved)}")
    if fmt in LISTING_SETS:  # its rows are utterances, their recording's path in `audio`
        media_columns, key_column = media_columns or ("audio",), key_column or "utterance"
    try:
        layout = ListingLayout(fmt, columns, tuple(media_columns), key_column or None,
                               media_roots or MediaRoots())
    except ValueError as e:
        raise ValueError(f"listing {first!r}: {e}") from None
    _check_first_row(first, layout)
    return files, layout


def _check_first_row(path: str, layout: ListingLayout) -> None:
    """ArgumentError when the first row of the listing at `path` names media
    outside the corpus (a listing set's: its first recording, without
    loading its tables); a row that does not parse is left to be a dead letter."""
    try:
        if layout.format in LISTING_SETS:
            row = {"audio": LISTING_SETS[layout.format].first_media(_first_line(path))}
        else:
            line = next((line for line in _lines(path, skip_header=layout.has_header)
                         if line.strip()), None)
            row = parse_row(line, layout) if line is not None else {}
    except (ValueError, StreamCorrupt):
        return
    for column in layout.media_columns:
        if isinstance(row.get(column), str):
            layout.media_roots.first_row_outside(path, "the first row", row[column])


def _inspect_set(path: str, listing_set) -> tuple:
    """A listing set's columns; ValueError when its first recording cannot be
    read (a command, say: ListingSet.first_media). A corrupt one is not the
    launcher's to judge: the job makes it a dead letter."""
    columns = listing_set.columns(listing_set.files(path))
    try:
        line = _first_line(path)
    except StreamCorrupt as e:
        _LOG.warning("listing %s is corrupt, so it will be a dead letter: %s", path, e)
        return columns
    if not line.strip():
        raise ValueError(f"listing {path!r} has no recording on its first line")
    try:
        listing_set.first_media(line)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return columns


def _rows_source(path: str, layout: ListingLayout) -> tuple[str, Callable[[bytes], dict]]:
    """(the file whose lines are the listing's rows, line -> row): the listing
    itself and its format's parser, or a listing set's rows file and its
    tables."""
    if layout.format in LISTING_SETS:
        listing_set = LISTING_SETS[layout.format]
        files = listing_set.files(path)
        return listing_set.rows_file(files), listing_set.tables(files).row
    return path, functools.partial(parse_row, layout=layout)


def missing_fields(columns: Sequence[str], fields: Sequence[tuple]) -> list:
    """The (flag, field) pairs whose field none of `columns` provides, as
    'field (flag)' texts.

    A field is a column, a projection into one (`meta.age` with a `meta`
    column), or `__key__` / `__url__`.
    """
    def provided(field: str) -> bool:
        return field in (KEY, URL) or any(
            field == c or field.startswith(c + ".") for c in columns)

    return [f"{field!r} ({flag})" for flag, field in fields if field and not provided(field)]


def check_columns(first_file: str, columns: Sequence[str], fields: Sequence[tuple]) -> None:
    """ValueError naming each (flag, field) pair whose field none of the
    `columns` of the input (`first_file` and those like it) provides."""
    missing = missing_fields(columns, fields)
    if missing:
        raise ValueError(f"{first_file!r} has no column for {', '.join(missing)} "
                         f"(columns: {', '.join(columns)})")


def _placed_lines(path: str, start: int = 0, end: int | None = None,
                  skip_header: bool = False, verify: bool = False) -> Iterator[tuple[int, bytes]]:
    """(offset, line) of the lines (without line ends) that start in [start,
    end) of a listing, offset where the line starts in its text; `end` None
    reads to the end (how a compressed listing, one unit, is read).

    `skip_header` leaves out the file's first line (a CSV header) when the range
    starts at 0; `verify` checks a compressed listing whole first (`open_decompressed`).
    Reads through Beam's filesystems: local or gs://.
    """
    with open_decompressed(path, verify) as f:
        if start:
            f.seek(start - 1)
            # The rest of the line that byte start-1 is in: a range before ours.
            if not _past_line(f, end):
                return
        elif skip_header:
            f.readline()
        while end is None or f.tell() < end:
            offset = f.tell()
            line = f.readline()
            if not line:
                return
            yield offset, line.rstrip(b"\r\n")


def _past_line(f, end: int | None) -> bool:
    """Reads past the rest of the line `f` is in, a chunk at a time; False
    when it runs past `end` first: no line starts in the range, and the rest
    of a long line (a 6 MB row) is the range's that holds its start."""
    while True:
        chunk = f.readline(_SKIP_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return True
        if end is not None and f.tell() >= end:
            return False


def _lines(path: str, start: int = 0, end: int | None = None,
           skip_header: bool = False, verify: bool = False) -> Iterator[bytes]:
    """The lines of `_placed_lines`, without their offsets."""
    return (line for _, line in _placed_lines(path, start, end, skip_header, verify))


@functools.lru_cache(maxsize=4)
def _line_starts(path: str) -> np.ndarray:
    """Where each line of a listing's text starts (the first at 0), read once;
    `searchsorted(starts, offset, "right")` is the number of the line at
    `offset`, from 1."""
    starts = [0]
    with open_decompressed(path) as f:
        for line in iter(f.readline, b""):
            starts.append(starts[-1] + len(line))
    return np.asarray(starts[:-1], np.int64)


def _row(parse: Callable[[bytes], dict], line: bytes) -> tuple[dict, bool]:
    """A line's row, and whether its segment was cut at its recording's end
    (a listing set's mark, CLAMPED, taken out of it)."""
    row = parse(line)
    return row, bool(row.pop(CLAMPED, False))


def iter_samples(files: Sequence[str], layout: ListingLayout,
                 read: Callable[[str], bytes] = read_media) -> Iterator[dict]:
    """The readable samples of `files`, in order; lazy, so the launcher's
    --features auto reads only the few rows it looks at."""
    for path in files:
        try:
            rows, parse = _rows_source(path, layout)
            for line in _lines(rows, skip_header=layout.has_header):
                if not line.strip():
                    continue
                try:
                    yield row_to_sample(_row(parse, line)[0], path, layout, read)
                except (ValueError, MediaReadError):
                    continue
        except StreamCorrupt:
            continue


def _sizing(path: str, layout: ListingLayout) -> tuple:
    """(mean row bytes, media bytes per listing byte) over the first rows of
    `path`; the ratio counts the rows whose media exist (sized from their
    metadata, not read), None when none do."""
    media = sized_text = 0
    row_bytes = []
    try:
        rows_path, parse = _rows_source(path, layout)
    except ValueError:   # a listing set's file that does not read: its dead letter is the unit's
        return 1, None
    rows = (line for line in _lines(rows_path, skip_header=layout.has_header) if line.strip())
    try:
        for line in itertools.islice(rows, _SIZING_ROWS):
            row_bytes.append(len(line) + 1)
            try:
                row = parse(line)
                sizes = [FileSystems.match([layout.media_roots.place(path, row[c])])[0]
                         .metadata_list[0].size_in_bytes for c in layout.media_columns]
            except Exception:  # noqa: BLE001 - a row that will be a dead letter does not size units
                continue
            media += sum(sizes)
            sized_text += row_bytes[-1]
    except StreamCorrupt:
        pass  # sized by the rows before the damage; the listing is a dead letter

    mean_row = sum(row_bytes) // len(row_bytes) if row_bytes else 1
    return mean_row, (media / sized_text if sized_text else None)


def _rows_metadata(listing: FileMetadata, layout: ListingLayout) -> FileMetadata:
    """The matched file whose lines are the listing's rows (byte ranges of it
    are the units): the listing, or a listing set's rows file."""
    if layout.format not in LISTING_SETS:
        return listing
    listing_set = LISTING_SETS[layout.format]
    rows = listing_set.rows_file(listing_set.files(listing.path))
    return FileSystems.match([rows])[0].metadata_list[0]


def _read_files(matched: Sequence[FileMetadata], layout: ListingLayout) -> dict:
    """{listing: the matched files a unit of it reads}: itself, or every file of
    its listing set (a change to any converts its units again)."""
    if layout.format not in LISTING_SETS:
        return {m.path: (m,) for m in matched}
    files = LISTING_SETS[layout.format].files
    return {m.path: tuple(FileSystems.match([path])[0].metadata_list[0]
                          for _, path in sorted(files(m.path).items()))
            for m in matched}


def plan_listing_units(patterns: str | Sequence[str], layout: ListingLayout,
                       target_bytes: int) -> tuple:
    """The work units of the listings matching `patterns`: byte ranges of about
    `target_bytes` of media each, by the sizes of the first listing's first
    rows' media: ranges of a gzip listing's text (`_gzip_text_bytes`), and a
    bzip2 or xz listing one unit whatever its size."""
    matched = matched_files(patterns)
    rows = {m.path: _rows_metadata(m, layout) for m in matched}
    sizes = {path: m.size_in_bytes for path, m in rows.items()}
    versions = {path: tuple((m.path, file_version(m)) for m in files)
                for path, files in _read_files(matched, layout).items()}
    files = sorted(sizes)
    row_bytes, ratio = _sizing(files[0], layout)
    range_bytes = (max(row_bytes, int(target_bytes / ratio)) if ratio
                   else row_bytes * _DEFAULT_UNIT_ROWS)
    spans = []
    for path in files:
        # A listing set's rows are in a file of its own (Lhotse's supervisions).
        rows_path = rows[path].path
        codec = codec_of_name(rows_path)
        text_bytes = sizes[path] if codec is None else (
            _gzip_text_bytes(rows_path, sizes[path], range_bytes) if codec == "gzip" else None)
        if text_bytes is None:   # bzip2, xz: their text's size is known only at the end
            spans.append(((path, 0, None), sizes[path]))
            continue
        # Each range of a gzip listing decompresses its text from the start.
        step = range_bytes if codec is None else max(range_bytes,
                                                    -(-text_bytes // _GZIP_MOST_RANGES))
        for start in range(0, max(1, text_bytes), step):
            end = min(start + step, text_bytes)
            # A gzip listing's last range runs to its end: the size its trailer
            # gives may fall short (a file of several members, or over 4 GiB).
            last = codec is not None and end == text_bytes
            spans.append(((path, start, None if last else end),
                          int((end - start) * (ratio or 1))))
    return tuple(WorkUnit(i, inputs, size, versions[inputs[0]])
                 for i, (inputs, size) in enumerate(spans))


# Ranges of one gzip listing at most: each decompresses the text before it, so
# n ranges cost n/2 reads of the whole (a 6 MB row had made 5,119 of them).
_GZIP_MOST_RANGES = 32
# Deflate shrinks text at most 1032 times: a trailer claiming more is not one.
_DEFLATE_MOST = 1032
# Listings' text rarely shrinks more than this: a gzip listing stored in less
# than a range's share of it is taken as one unit, its trailer not read (a
# plan of many small listings opens none of them).
_LISTING_SHRINKS = 8


def _gzip_text_bytes(path: str, stored_bytes: int, range_bytes: int) -> int | None:
    """The size of a gzip listing's text, from its trailer (ISIZE: the last
    member's size, modulo 4 GiB, so never more than the text); None (one
    unit) for a listing too small to cut, or a trailer no gzip file could
    have."""
    if stored_bytes < 18 or stored_bytes * _LISTING_SHRINKS < range_bytes:
        return None
    with open_input(path) as f:
        f.seek(stored_bytes - 4)
        size = int.from_bytes(f.read(4), "little")
    return size if 0 < size <= stored_bytes * _DEFLATE_MOST else None


class ListingReader(UnitReader):
    """Reads listing units (transforms/recipe/units.py): each row of the unit's byte
    range into a Sample, its media read, or a dead letter."""

    def __init__(self, layout: ListingLayout, stored_from: int = 0):
        self._layout = layout
        self._stored_from = stored_from

    def leaving_stored(self, min_bytes: int) -> "ListingReader":
        """This reader giving each media file of at least `min_bytes` as a
        StoredMember (transforms/sources/stored.py), for a caller that streams
        the fields it decodes."""
        return ListingReader(self._layout, min_bytes)

    def check_recipe(self, recipe) -> None:
        """A listing set whose rows are segments (a Kaldi directory with
        `segments`, Lhotse supervisions) lists utterances of its recordings:
        refused unless the recipe cuts each row's segment out of its recording."""
        listing_set = LISTING_SETS.get(self._layout.format)
        if listing_set and "start" in self._layout.columns and (
                recipe.segments.columns != ("start", "end")):
            raise ArgumentError("segments.columns", f"must be start,end for "
                                f"{listing_set.describes}: each row is an utterance of its "
                                "recording, from start to end")

    def setup(self, counting: bool = True) -> None:
        self._rows_of = functools.lru_cache(maxsize=1)(
            functools.partial(_rows_source, layout=self._layout))
        self._rows = counter("manifest_rows_read", counting)
        self._clamped = counter("segments_clamped", counting)
        self._samples = counter("samples_read", counting)
        self._files = counter("media_files_read", counting)
        self._bytes = counter("media_bytes_read", counting)
        self._last = None   # (path, what it read): the last file read

    def _read(self, path: str) -> bytes | StoredMember:
        # Consecutive rows naming one file (the segments of a long recording,
        # --segment_columns) share one read of it.
        if self._last is not None and self._last[0] == path:
            return self._last[1]
        data = stored_or_read(path, self._stored_from) if self._stored_from else read_media(path)
        self._files.inc()
        self._bytes.inc(len(data))
        self._last = (path, data)
        return data

    # UnitReader.read: a unit of this source is never split, so no tracker is used.
    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:  # noqa: ARG002
        self._last = None
        url, start, end = unit.inputs
        # A file that cannot be read is one dead letter: its first unit's.
        try:
            rows, parse = self._rows_of(url)
        except ValueError as e:  # a listing set's file that does not parse
            if not start:
                yield Failed.of(_ROW_STAGE, e, url=url, file=True)
            return
        lines = _placed_lines(rows, start, end, skip_header=self._layout.has_header,
                              verify=True)
        try:
            for offset, line in lines:
                if line.strip():  # a blank line (often the last) is not a row
                    yield self._sample(url, KeyPlace(rows, offset), line, parse)
        except StreamCorrupt as e:  # raised before the first line: no row was read
            if not start:
                yield Failed.of(_ROW_STAGE, e, url=url, file=True,
                                member=rows if rows != url else None)

    def keys(self, unit: WorkUnit, fields: tuple = ()) -> Iterator[tuple]:
        """The keys of the unit's rows and the values of their `fields`, their
        media not read: each placed by where its line starts in the rows'
        text (`place_names` counts the lines). A row that names no key is a
        dead letter when read."""
        url, start, end = unit.inputs
        try:
            rows, parse = self._rows_of(url)
            # Verified as `read` verifies it: a listing failing its checksum gives no row.
            for offset, line in _placed_lines(rows, start, end, verify=True,
                                              skip_header=self._layout.has_header):
                try:
                    row = parse(line)
                    yield row_key(row, self._layout), KeyPlace(rows, offset), tuple(
                        field_value(row.get(field)) for field in fields)
                except ValueError:
                    continue
        except (ValueError, StreamCorrupt):
            return

    def place_names(self, places: Sequence[KeyPlace]) -> list[KeyPlace]:
        """The places `keys` gave, each named by its line's number: the lines
        of a file are counted once a worker (`_line_starts`), when a key of
        it is given twice."""
        return [p._replace(where=f"line {np.searchsorted(_line_starts(p.url), p.at, 'right')}")
                for p in places]

    def _sample(self, url: str, place: KeyPlace, line: bytes,
                parse: Callable[[bytes], dict]) -> dict | Failed:
        """The row's Sample, or its dead letter (a row that does not read
        naming its line: `place`, where it starts)."""
        self._rows.inc()
        self._samples.inc()
        try:
            row, clamped = _row(parse, line)
            self._clamped.inc(clamped)
            return row_to_sample(row, url, self._layout, self._read)
        except MediaReadError as e:
            return Failed.of(_MEDIA_STAGE, e, url=url, key=e.key, member=e.path,
                             column=e.column)
        except ValueError as e:  # a listing set's row names its key (and may its stage)
            (named,) = self.place_names([place])
            return Failed.of(getattr(e, "stage", _ROW_STAGE), e, url=url,
                             key=getattr(e, "key", None), member=named.where)


class ReadListingSamples(beam.PTransform):
    """Reads the rows of CSV/JSONL listings matching patterns into Samples.

        read = p | "ReadListing" >> ReadListingSamples("lists/*.csv", ["audio"])
        read.samples      # PCollection of Sample dicts
        read.failures     # dead letters (stages "read_manifest", "read_media")

    Made, it reads the first line of each listing and the first row of the
    first (`inspect_listings`): ValueError before any work when one names no
    `media_columns` or `key_column`, the listings disagree, or the first row's
    media lie outside the listing's folder and every `media_root` (a folder,
    or a list of them, its media paths may also lead into:
    transforms/sources/media_paths.py). The listings are cut into units of
    about `target_bytes` of media (`plan_listing_units`) when the job starts;
    workers read the units' rows and media. The output is in no particular
    order. `source` is the Source it reads, for WriteDataset.

    >>> import transforms as dg
    >>> with open("clips.csv", "w") as f:
    ...     _ = f.write("audio,label\\na.wav,3\\n")
    >>> read = dg.ReadListingSamples("clips.csv", ["audio"])
    >>> read.describe()["format"], read.layout.columns
    ('csv', ('audio', 'label'))
    """

    def __init__(self, file_pattern: str | Sequence[str], media_columns: str | Sequence[str],
                 key_column: str | None = None, target_bytes: int = SHARD_SIZE_BYTES,
                 media_root: str | Sequence[str] | None = None):
        super().__init__()
        self._patterns = as_patterns(file_pattern)
        self.files, self.layout = inspect_listings(self._patterns,
                                                   media_column_list(media_columns), key_column,
                                                   MediaRoots.of(media_root))
        plan = functools.partial(plan_listing_units, self._patterns, self.layout, target_bytes)
        self.source = Source(plan, ListingReader(self.layout))

    @property
    def flag_defaults(self) -> dict:
        """{flag: value} the input itself implies where the command line gives
        none: a listing set (Lhotse manifests, a Kaldi data directory) holds
        its media in `audio`, the field a cut decodes, and where its rows are
        utterances of their recordings, their `start` and `end` are the
        segment columns."""
        if self.layout.format not in LISTING_SETS:
            return {}
        segments = {"segment_columns": "start,end"} if "start" in self.layout.columns else {}
        return {"audio_fields": ",".join(self.layout.media_columns), **segments}

    def describe(self) -> dict:
        """What the manifest records of this input."""
        return {"type": "manifest", "input": ",".join(self._patterns),
                "num_files": len(self.files), "format": self.layout.format,
                "media_columns": list(self.layout.media_columns)}

    def first_samples(self) -> Iterator[dict]:
        """The readable samples of the listings, in order: lazy, so --features auto
        reads only the rows it looks at."""
        return iter_samples(self.files, self.layout)

    def check_fields(self, fields: Sequence[tuple]) -> None:
        """ValueError, before any work, naming each (flag, field) pair whose field
        no column of the listings provides (`missing_fields`): of Lhotse
        recordings read whole, which supervisions manifest was not there."""
        missing = missing_fields(self.layout.columns, fields)
        if missing and self.layout.format == LHOTSE and "start" not in self.layout.columns:
            raise no_supervisions(self.files[0], missing)
        check_columns(self.files[0], self.layout.columns, fields)

    def expand(self, pbegin):
        return pbegin | "ReadUnits" >> ReadUnits(self.source)


class ReadLhotseSamples(ReadListingSamples):
    """Reads Lhotse manifests into Samples: each supervision of the recordings
    manifests matching `manifests` (the supervisions manifest beside each),
    or each cut of a CutSet, as a segment of its recording with its labels
    (transforms/sources/lhotse_manifests.py). Write them with
    `segments=SegmentOptions(columns=("start", "end"))`, which cuts each out of
    its recording. ValueError, made, for a file that is neither.

    >>> import json, transforms as dg
    >>> with open("demo_recordings_a.jsonl", "w") as f:   # as Lhotse's recipes write them
    ...     _ = f.write(json.dumps({"id": "r1", "sampling_rate": 16000, "num_samples": 32000,
    ...         "duration": 2.0, "sources": [{"type": "file", "channels": [0],
    ...                                       "source": "r1.flac"}]}) + "\\n")
    >>> with open("demo_supervisions_a.jsonl", "w") as f:
    ...     _ = f.write(json.dumps({"id": "r1-0", "recording_id": "r1", "start": 0.5,
    ...                             "duration": 1.0, "channel": 0, "text": "HI"}) + "\\n")
    >>> read = dg.ReadLhotseSamples("demo_recordings_*.jsonl")
    >>> read.describe()["format"], read.layout.columns[:6]
    ('lhotse', ('utterance', 'audio', 'recording', 'start', 'end', 'channel'))
    """

    def __init__(self, manifests: str | Sequence[str], target_bytes: int = SHARD_SIZE_BYTES,
                 media_root: str | Sequence[str] | None = None):
        other = next((path for path in match_files(as_patterns(manifests, "manifests"),
                                                   "manifests")
                      if listing_format(path) != LHOTSE), None)
        if other is not None:
            raise supervisions_given_alone(other) or ValueError(
                f"{other!r} is not a Lhotse recordings manifest or CutSet (named like "
                "*_recordings_*.jsonl.gz, *_cuts_*.jsonl.gz)")
        super().__init__(manifests, (), None, target_bytes, media_root)
