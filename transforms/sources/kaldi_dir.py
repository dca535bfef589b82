"""Kaldi data directories as listings: `wav.scp`, `segments`, `text`, `utt2spk`.

A Kaldi (or ESPnet, icefall) data directory names its recordings in
`wav.scp` (`<recording> <path>`), optionally cuts them into utterances in
`segments` (`<utterance> <recording> <start> <end>`, seconds), and labels
the utterances in `text` (`<utterance> <transcript>`) and `utt2spk`
(`<utterance> <speaker>`). Given as a listing (`--input 'data/*/wav.scp'`),
each utterance is a row with the columns

    utterance, audio (the recording's path), text, speaker
    + recording, start, end   when the directory has `segments`

so `--key_column utterance` is its key (the default), `--media_columns
audio`, and with `segments` `--segment_columns start,end` cuts each row's
utterance out of its recording (a long recording read once for all of
them). The rows are those of `segments` when there is one, else of
`wav.scp`; a work unit is a byte range of that file (transforms/sources/listing.py).

A worker reading a directory's rows loads its other files whole, as dicts
(`KaldiTables`): memory in proportion to the directory's lines, about 100
bytes each. A path relative in `wav.scp` is taken relative to the data
directory (Kaldi takes it relative to the recipe's folder: write absolute
paths, or paths from the data directory).

What Kaldi runs instead of reading a file is refused: a `wav.scp` entry that
is a command (`sox a.flac -t wav - |`) is refused at launch when it is the
first, and is a dead letter naming its recording wherever else (convert the
audio first, or list the files the command reads). A `segments` end of -1
(to the recording's end) and an utterance missing from `text` or `utt2spk`
are dead letters too.

An id is on one line of each file: an utterance given twice in `segments`
(or `wav.scp`), `text` or `utt2spk`, or a recording twice in a segmented
directory's `wav.scp`, leaves it unknown which line holds it, so each row
of it is a dead letter, stage `duplicate_key`, naming the file and its lines.
A line of `text` or `utt2spk` in no UTF-8 fails its utterance alone: a
transcript's is a dead letter of stage `transcript`, as a tar's is.
"""

from __future__ import annotations

import posixpath
from typing import Mapping, NamedTuple

from apache_beam.io.filesystems import FileSystems

from transforms.format.dead_letters import DUPLICATE_KEY, RowError
from transforms.sources.input_files import read_whole

__all__ = ["KALDI", "KaldiTables", "is_kaldi_listing", "kaldi_columns",
           "kaldi_files", "recording_path", "rows_file"]

KALDI = "kaldi"
_LISTING = "wav.scp"
_OPTIONAL = ("segments", "text", "utt2spk")


def is_kaldi_listing(path: str) -> bool:
    """Whether `path` is a Kaldi data directory's `wav.scp`."""
    return posixpath.basename(path) == _LISTING


def kaldi_files(wav_scp: str) -> dict:
    """{name: path} of the directory's files this reads: wav.scp and those of
    segments, text and utt2spk it has."""
    directory = posixpath.dirname(wav_scp)
    files = {_LISTING: wav_scp}
    for name in _OPTIONAL:
        path = FileSystems.join(directory, name) if directory else name
        if FileSystems.exists(path):
            files[name] = path
    return files


def kaldi_columns(files: Mapping[str, str]) -> tuple:
    """The columns of a directory's rows."""
    columns = ("utterance", "audio")
    columns += ("text",) * ("text" in files) + ("speaker",) * ("utt2spk" in files)
    return columns + (("recording", "start", "end") if "segments" in files else ())


def rows_file(files: Mapping[str, str]) -> str:
    """The file whose lines are the rows: segments, else wav.scp."""
    return files.get("segments", files[_LISTING])


def _decode(line: bytes, name: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name} line is not UTF-8: {e}") from None


def _split(line: bytes, parts: int, name: str) -> list:
    text = _decode(line, name)
    fields = text.split(maxsplit=parts - 1)
    if len(fields) < parts:
        raise ValueError(f"{name} line has {len(fields)} fields, not {parts}: {text!r}")
    return fields


class _Table(NamedTuple):
    """A Kaldi table file (`<id> <rest of the line>` a line): each id's value,
    and the line numbers of the ids on more than one line."""

    values: dict    # id -> its value: text, or the bytes of a value in no UTF-8
    repeated: dict  # id -> its line numbers (1-based), for ids on two lines or more


def _table(path: str | None) -> _Table:
    """A table file read whole; a value in no UTF-8 is kept as bytes (a transcript's
    is the dead letter of its utterance, stage `transcript`, not the directory's)."""
    values, first, repeated = {}, {}, {}
    for number, line in enumerate(read_whole(path).splitlines() if path else (), 1):
        fields = line.split(maxsplit=1)
        if not fields:
            continue
        key = fields[0].decode("utf-8", "surrogateescape")
        if key in first:
            repeated.setdefault(key, [first[key]]).append(number)
            continue
        first[key] = number
        value = fields[1].strip() if len(fields) > 1 else b""
        try:
            values[key] = value.decode("utf-8")
        except UnicodeDecodeError:
            values[key] = value
    return _Table(values, repeated)


def _ids_repeated(path: str) -> dict:
    """{id: its line numbers} of the ids on two lines or more of a rows file."""
    return _table(path).repeated


def _duplicate(utterance: str, kind: str, name: str, file: str, table: _Table) -> RowError:
    """The dead letter of `utterance`, whose row needs the `kind` (utterance,
    recording) `name`, which `table`, the data directory's `file`, has on
    several lines."""
    lines = table.repeated[name]
    where = ", ".join(map(str, lines[:-1])) + f" and {lines[-1]}"
    return RowError(utterance, f"{kind} {name!r} is on lines {where} of {file}: which line "
                                    "holds it is unknown; give each id one line", DUPLICATE_KEY)


def recording_path(recording: str, entry: str) -> str:
    """A wav.scp entry's path; ValueError for a command."""
    if entry.endswith("|") or entry == "-":
        raise ValueError(f"wav.scp entry of recording {recording!r} is a command, not a "
                         f"file: {entry!r}; convert the audio to files first (or list the "
                         "files the command reads)")
    return entry


class KaldiTables:
    """One data directory's files loaded whole (of the rows file, its repeated
    ids), to complete its rows."""

    def __init__(self, files: Mapping[str, str]):
        self.segmented = "segments" in files
        self.recordings = _table(files[_LISTING]) if self.segmented else None
        self._rows = _Table({}, _ids_repeated(rows_file(files)))
        self._rows_name = posixpath.basename(rows_file(files))
        self.text = _table(files.get("text"))
        self.speakers = _table(files.get("utt2spk"))
        self._has_text, self._has_speakers = "text" in files, "utt2spk" in files

    def row(self, line: bytes) -> dict:
        """A rows-file line -> {column: value}; ValueError saying why it is not
        one (RowError, naming the utterance, once the line names one)."""
        if self.segmented:
            utterance, recording, start, end = _split(line, 4, "segments")
        else:
            utterance, entry = _split(line, 2, _LISTING)
        if utterance in self._rows.repeated:
            raise _duplicate(utterance, "utterance", utterance, self._rows_name, self._rows)
        try:
            return self._row(utterance, *((recording, start, end) if self.segmented
                                          else (entry.strip(),)))
        except RowError:
            raise
        except ValueError as e:
            raise RowError(utterance, str(e)) from None

    def _row(self, utterance: str, *fields: str) -> dict:
        if self.segmented:
            recording, start, end = fields
            recordings = self.recordings
            if recording in recordings.repeated:
                raise _duplicate(utterance, "recording", recording, _LISTING, recordings)
            if recording not in recordings.values:
                raise ValueError(f"segments: utterance {utterance!r} names recording "
                                 f"{recording!r}, which wav.scp does not have")
            if float(end) < 0:
                raise ValueError(f"segments: utterance {utterance!r} ends at {end} (to the "
                                 "recording's end), which is not read: give its end")
            entry = recordings.values[recording]
            if isinstance(entry, bytes):
                raise ValueError(f"wav.scp: the path of recording {recording!r} is not UTF-8")
            row = {"utterance": utterance, "recording": recording, "start": start, "end": end,
                   "audio": recording_path(recording, entry)}
        else:
            row = {"utterance": utterance, "audio": recording_path(utterance, fields[0])}
        for column, name, table, present in (
                ("text", "text", self.text, self._has_text),
                ("speaker", "utt2spk", self.speakers, self._has_speakers)):
            if present:
                if utterance in table.repeated:
                    raise _duplicate(utterance, "utterance", utterance, name, table)
                if utterance not in table.values:
                    raise ValueError(f"utterance {utterance!r} has no line in {name}")
                row[column] = table.values[utterance]
        return row
