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
"""

from __future__ import annotations

import posixpath
from typing import Mapping

from apache_beam.io.filesystems import FileSystems

from transforms.sources.input_files import read_whole

__all__ = ["KALDI", "KaldiRowError", "KaldiTables", "is_kaldi_listing", "kaldi_columns",
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


def _table(path: str | None, name: str) -> dict:
    """A Kaldi table file (`<id> <rest of the line>` a line) as a dict."""
    table = {}
    for line in read_whole(path).splitlines() if path else ():
        fields = _decode(line, name).split(maxsplit=1)
        if fields:
            table[fields[0]] = fields[1].strip() if len(fields) > 1 else ""
    return table


class KaldiRowError(ValueError):
    """A row that cannot be read, and the utterance it is (its dead letter's key)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def recording_path(recording: str, entry: str) -> str:
    """A wav.scp entry's path; ValueError for a command."""
    if entry.endswith("|") or entry == "-":
        raise ValueError(f"wav.scp entry of recording {recording!r} is a command, not a "
                         f"file: {entry!r}; convert the audio to files first (or list the "
                         "files the command reads)")
    return entry


class KaldiTables:
    """One data directory's files loaded whole (but the rows file), to complete its rows."""

    def __init__(self, files: Mapping[str, str]):
        self.segmented = "segments" in files
        self.recordings = _table(files[_LISTING], _LISTING) if self.segmented else None
        self.text = _table(files.get("text"), "text")
        self.speakers = _table(files.get("utt2spk"), "utt2spk")
        self._has_text, self._has_speakers = "text" in files, "utt2spk" in files

    def row(self, line: bytes) -> dict:
        """A rows-file line -> {column: value}; ValueError saying why it is not
        one (KaldiRowError, naming the utterance, once the line names one)."""
        if self.segmented:
            utterance, recording, start, end = _split(line, 4, "segments")
        else:
            utterance, entry = _split(line, 2, _LISTING)
        try:
            return self._row(utterance, *((recording, start, end) if self.segmented
                                          else (entry.strip(),)))
        except ValueError as e:
            raise KaldiRowError(utterance, str(e)) from None

    def _row(self, utterance: str, *fields: str) -> dict:
        if self.segmented:
            recording, start, end = fields
            if recording not in self.recordings:
                raise ValueError(f"segments: utterance {utterance!r} names recording "
                                 f"{recording!r}, which wav.scp does not have")
            if float(end) < 0:
                raise ValueError(f"segments: utterance {utterance!r} ends at {end} (to the "
                                 "recording's end), which is not read: give its end")
            row = {"utterance": utterance, "recording": recording, "start": start, "end": end,
                   "audio": recording_path(recording, self.recordings[recording])}
        else:
            row = {"utterance": utterance, "audio": recording_path(utterance, fields[0])}
        for column, name, table, present in (
                ("text", "text", self.text, self._has_text),
                ("speaker", "utt2spk", self.speakers, self._has_speakers)):
            if present:
                if utterance not in table:
                    raise ValueError(f"utterance {utterance!r} has no line in {name}")
                row[column] = table[utterance]
        return row
