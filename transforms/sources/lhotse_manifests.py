"""Lhotse manifests as listings: a RecordingSet and the SupervisionSet beside it, or a CutSet.

Lhotse's recipes (`lhotse.recipes.prepare_librispeech`, VoxCeleb, CommonVoice,
...) write a corpus as JSON lines, gzipped: `{prefix}_recordings_{part}.jsonl.gz`,
a recording a line (its id, its audio `sources`, sampling rate, length), and
beside it `{prefix}_supervisions_{part}.jsonl.gz`, a supervision a line (a
segment of a recording: id, recording_id, start, duration, channel, text,
speaker, language, gender, custom). Given as a listing (`--input
'data/*_recordings_*.jsonl.gz'`), each supervision is a row with the columns

    utterance, audio (its recording's file or URL), recording, start, end,
    channel + text, speaker, language, gender, custom where it has them

so `--key_column utterance` is its key (the default), `--media_columns audio`,
and `--segment_columns start,end` cuts it out of its recording (a recording is
read once for its consecutive supervisions). A recordings manifest with no
supervisions manifest beside it (its name with `supervisions` for
`recordings`) lists whole recordings: the columns utterance (the recording's
id) and audio. The rows are the supervisions manifest's lines, else the
recordings manifest's; a work unit is a byte range of that file (of a gzipped
manifest's text, as Lhotse writes them: transforms/sources/listing.py).

A CutSet (`--input 'data/*_cuts_*.jsonl.gz'`, `CutSet.to_file`'s) lists its
cuts, each holding its recording: each cut is a row of the same columns,
the segment the cut spans, labelled by its supervisions (one's labels; of
several, their texts joined in time order and the labels they all share).

Neither Lhotse nor torch is needed: the manifests are JSON lines. A worker
reading a supervisions manifest loads its recordings manifest whole
(`LhotseTables`), a few hundred bytes a recording. A relative `file` source
is taken relative to the manifest's folder (Lhotse takes it relative to the
working directory: write manifests with absolute paths, or paths from their
folder), and must lie in the corpus as every listing's media must.

Dead letters, each naming the cut, supervision or recording: a line that is not
a JSON object with the fields of its kind; a supervision whose recording the
recordings manifest lacks; a segment outside its recording (one that ends at
most 25 ms past it, as Lhotse's loader tolerates, is cut at the recording's
end and counted: `CLAMPED`); a recording whose
audio is a `command` (refused as wav.scp commands are: convert the audio
first) or held in memory, or which Lhotse would transform (speed, volume) as
it loads it. A recording of several sources (a file a channel, as AMI's
headsets) gives each supervision the file of its channel; a supervision on
one channel of a file holding several (a stereo telephone call, as
Switchboard's and Fisher's) is decoded from that channel alone, whatever
`--channel` says (the sample's `__channel__`); one on some channels of a file
holding more is a dead letter too, as mixing them is not what it means.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Mapping, Sequence

from apache_beam.io.filesystems import FileSystems

from transforms.format.dead_letters import DUPLICATE_KEY, RowError
from transforms.format.sample import CHANNEL
from transforms.format.text import preview
from transforms.sources.compression import StreamCorrupt
from transforms.sources.input_files import open_decompressed

__all__ = ["CLAMPED", "LHOTSE", "LhotseTables", "is_lhotse_listing", "lhotse_columns",
           "lhotse_files", "first_recording_path", "no_supervisions", "rows_file",
           "supervisions_given_alone"]

LHOTSE = "lhotse"
# A row's mark that its segment ended past its recording and was cut at its
# end: the reader counts it (`segments_clamped`) and leaves it out.
CLAMPED = "__clamped__"
# How far past its recording a segment may end and be cut there: what Lhotse
# itself tolerates as it loads audio (LHOTSE_AUDIO_DURATION_MISMATCH_TOLERANCE).
_TOLERANCE_S = 0.025
_RECORDINGS = "recordings"
_SUPERVISIONS = "supervisions"
_CUTS = "cuts"
# Lhotse's manifest names: `recordings.jsonl.gz`, `librispeech_recordings_dev-clean.jsonl`,
# `librispeech_cuts_dev-clean.jsonl.gz`.
_MANIFEST_NAME = re.compile(r"(^|[_.-])(recordings|cuts)([_.-].*)?\.jsonl(\.gz)?$")
_ANY_MANIFEST = re.compile(r"(^|[_.-])(recordings|cuts|supervisions)([_.-].*)?\.jsonl(\.gz)?$")
_SEGMENTED = ("utterance", "audio", "recording", "start", "end", "channel")
_LABELS = ("text", "speaker", "language", "gender", "custom")
_PREVIEW = 200


def is_lhotse_listing(path: str) -> bool:
    """Whether `path` is a Lhotse recordings manifest or CutSet (by Lhotse's naming)."""
    return bool(_MANIFEST_NAME.search(posixpath.basename(path)))


def _beside(manifest: str, kind: str) -> list:
    """The names a manifest of `kind` (supervisions, recordings) beside the
    Lhotse `manifest` may have: its own with `kind` for its kind, gzipped or
    not (the one compressed as `manifest` first)."""
    directory, name = posixpath.split(manifest)
    match = _ANY_MANIFEST.search(name)
    stem = name[:match.start()] + match.group(0).replace(match.group(2), kind, 1)
    stem = stem.removesuffix(".gz")
    names = [stem + ".gz", stem] if name.endswith(".gz") else [stem, stem + ".gz"]
    return [posixpath.join(directory, n) if directory else n for n in names]


def lhotse_files(manifest: str) -> dict:
    """{"cuts": path} of a CutSet; of a recordings manifest {"recordings":
    path, "supervisions": path when a manifest beside it exists, gzipped or
    not}."""
    if _MANIFEST_NAME.search(posixpath.basename(manifest)).group(2) == _CUTS:
        return {_CUTS: manifest}
    files = {_RECORDINGS: manifest}
    found = next((path for path in _beside(manifest, _SUPERVISIONS)
                  if FileSystems.exists(path)), None)
    if found is not None:
        files[_SUPERVISIONS] = found
    return files


def supervisions_given_alone(path: str) -> ValueError | None:
    """The error of a Lhotse supervisions manifest given where its recordings
    manifest belongs (its rows name no file: their recordings' do); None for
    any other file."""
    match = _ANY_MANIFEST.search(posixpath.basename(path))
    if not match or match.group(2) != _SUPERVISIONS:
        return None
    return ValueError(f"{path} is a Lhotse supervisions manifest: give its recordings "
                      f"manifest ({' or '.join(_beside(path, _RECORDINGS))}) as the input, and "
                      "the supervisions beside it are read with it")


def no_supervisions(manifest: str, missing: Sequence[str]) -> ValueError:
    """The error of a recordings manifest read with no supervisions manifest
    beside it, whose rows are whole recordings, asked for `missing` fields a
    supervision has."""
    return ValueError(f"{manifest} has no Lhotse supervisions manifest beside it (looked for "
                      f"{' and '.join(_beside(manifest, _SUPERVISIONS))}): its rows are its "
                      f"recordings whole (columns {', '.join(lhotse_columns({}))}), with no "
                      f"{', '.join(missing)}; write the supervisions beside it, or give a "
                      "CutSet")


def lhotse_columns(files: Mapping[str, str]) -> tuple:
    """The columns of the manifests' rows (a supervision's labels where it has them)."""
    return ("utterance", "audio") if not set(files) - {_RECORDINGS} else _SEGMENTED + _LABELS


def rows_file(files: Mapping[str, str]) -> str:
    """The file whose lines are the rows: the cuts, the supervisions, else the recordings."""
    return files.get(_CUTS) or files.get(_SUPERVISIONS) or files[_RECORDINGS]


def _manifest_lines(path: str) -> list:
    """A manifest's lines, read whole (decompressed by its name's suffix);
    StreamCorrupt naming it for compressed data that fails its checks."""
    try:
        with open_decompressed(path) as stream:
            return stream.read().splitlines()
    except StreamCorrupt as e:
        raise StreamCorrupt(f"{path}: {e}") from None


def _object(line: bytes, kind: str) -> dict:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{kind} line is not JSON ({e}): {preview(line, _PREVIEW)}") from None
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not value["id"]:
        raise ValueError(f"{kind} line is not a JSON object with an id: "
                         f"{preview(line, _PREVIEW)}")
    return value


def _number(record: Mapping[str, Any], field: str, kind: str) -> float:
    value = record.get(field)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{kind} {record['id']!r}: {field} {value!r} is not a number")
    return float(value)


def _source(recording: Mapping[str, Any], channels: tuple) -> tuple[str, int | None]:
    """(the file or URL holding `channels` of `recording`, the one channel of
    that file to decode, or None for all of it); ValueError naming why there
    is none (see the module docstring)."""
    name = recording["id"]
    if recording.get("transforms"):
        kinds = ", ".join(str(t.get("name", t)) if isinstance(t, dict) else str(t)
                          for t in recording["transforms"])
        raise ValueError(f"recording {name!r} has transforms ({kinds}) Lhotse applies as it "
                         "loads the audio; they are not applied here: store the transformed "
                         "audio, or give the recording without them")
    sources = recording.get("sources")
    if not isinstance(sources, list) or not sources:
        raise ValueError(f"recording {name!r} has no sources")
    for source in sources:
        held = source.get("channels") if isinstance(source, dict) else None
        if not isinstance(held, list) or not set(channels) & set(held):
            continue
        if set(channels) - set(held):
            raise ValueError(f"recording {name!r}: channels {list(channels)} are in several of "
                             "its files; the job reads one file a row (give supervisions of "
                             "one channel each)")
        if set(held) != set(channels) and len(channels) > 1:
            raise ValueError(f"recording {name!r}: channels {list(channels)} are part of a "
                             f"source holding channels {held}; a row is one channel of a "
                             "file, or all of them")
        kind, where = source.get("type"), source.get("source")
        if kind not in ("file", "url"):
            raise ValueError(f"recording {name!r}: a {kind!r} source is not read (only files "
                             f"and URLs); convert the audio to files first")
        if not isinstance(where, str) or not where:
            raise ValueError(f"recording {name!r}: its source names no file")
        return where, (held.index(channels[0]) if set(held) != set(channels) else None)
    raise ValueError(f"recording {name!r} has no source of channels {list(channels)}")


def first_recording_path(line: bytes) -> str:
    """The file of a recordings manifest's (or a CutSet's) first line's first
    source, for the launcher's corpus check; ValueError when it cannot be read
    (a command, say)."""
    recording = _object(line, "recording")
    if "recording" in recording:   # a cut
        recording = _recording_of(recording)
    sources = recording.get("sources")
    first = sources[0] if isinstance(sources, list) and sources else {}
    held = first.get("channels") if isinstance(first, dict) else None
    return _source({**recording, "sources": [first]}, tuple(held or (0,)))[0]


def _channels(recording: Mapping[str, Any]) -> list:
    """Every channel a recording's sources hold."""
    return sorted({c for s in recording.get("sources") or () if isinstance(s, dict)
                   for c in s.get("channels") or ()})


def _recording_of(cut: Mapping[str, Any]) -> dict:
    recording = cut.get("recording")
    if "tracks" in cut:
        raise ValueError(f"cut {cut['id']!r} is a MixedCut, its tracks mixed as Lhotse loads "
                         "it: mixes are not read here; store the mixed audio "
                         "(CutSet.save_audios) and give those cuts")
    if not isinstance(recording, dict) or not isinstance(recording.get("id"), str):
        raise ValueError(f"cut {cut['id']!r} has no recording (a cut of stored features "
                         "alone is not read)")
    return recording


def _segment(name: str, kind: str, recording: Mapping[str, Any], start: float,
             duration: float, channel) -> dict:
    """The row of `name`, a `kind` (supervision, cut) of `recording` from
    `start` for `duration` seconds on `channel` (an int, or a list of them)."""
    end, length = start + duration, _number(recording, "duration", "recording")
    if start < 0 or end <= start or end > length + _TOLERANCE_S:
        raise ValueError(f"{kind} {name!r} spans {start:g}-{end:g} s, outside its recording "
                         f"{recording['id']!r} of {length:g} s")
    channels = tuple(channel) if isinstance(channel, list) else (channel,)
    path, in_file = _source(recording, channels)
    # More than a sample's worth of float rounding (start + duration) past the end.
    clamped = end > length + 1 / _number(recording, "sampling_rate", "recording")
    return {"utterance": name, "audio": path, "recording": recording["id"], "start": start,
            "end": min(end, length), "channel": channel,
            **({CHANNEL: in_file} if in_file is not None else {}),
            **({CLAMPED: True} if clamped else {})}


def _labels(supervisions: list) -> dict:
    """A cut's labels from its supervisions: one's, all of them; of several
    (in time order), their texts joined by spaces and each other label all
    of them share."""
    if len(supervisions) == 1:
        return {label: supervisions[0][label] for label in _LABELS if label in supervisions[0]}
    ordered = sorted(supervisions, key=lambda s: s.get("start", 0))
    labels = {}
    texts = [s["text"] for s in ordered if isinstance(s.get("text"), str)]
    if texts:
        labels["text"] = " ".join(texts)
    for label in _LABELS[1:]:
        values = [s.get(label) for s in ordered]
        if values and values[0] is not None and all(v == values[0] for v in values):
            labels[label] = values[0]
    return labels


class LhotseTables:
    """How a set's rows are read: a CutSet's lines alone, supervisions with
    their recordings manifest loaded whole, or recordings whole."""

    def __init__(self, files: Mapping[str, str]):
        self._kind = ("cut" if _CUTS in files else
                      "supervision" if _SUPERVISIONS in files else "recording")
        self._recordings_name = posixpath.basename(files.get(_RECORDINGS, ""))
        self._recordings: dict = {}
        self._repeated: dict = {}
        if self._kind == "supervision":
            for number, line in enumerate(_manifest_lines(files[_RECORDINGS]), 1):
                if not line.strip():
                    continue
                recording = _object(line, "recording")   # a bad line fails the manifest
                found = self._recordings.setdefault(recording["id"], (number, recording))
                if found[0] != number:
                    self._repeated.setdefault(recording["id"], [found[0]]).append(number)

    def row(self, line: bytes) -> dict:
        """A rows-file line -> {column: value}; ValueError saying why it is not
        one (RowError, naming the cut, supervision or recording, once the line
        names one)."""
        record = _object(line, self._kind)
        try:
            if self._kind == "cut":
                return self._cut(record)
            if self._kind == "supervision":
                return self._supervision(record)
            return {"utterance": record["id"],
                    "audio": _source(record, tuple(_channels(record)))[0]}
        except RowError:
            raise
        except ValueError as e:
            raise RowError(record["id"], str(e)) from None

    def _cut(self, cut: Mapping[str, Any]) -> dict:
        row = _segment(cut["id"], "cut", _recording_of(cut), _number(cut, "start", "cut"),
                       _number(cut, "duration", "cut"), cut.get("channel", 0))
        supervisions = [s for s in cut.get("supervisions") or () if isinstance(s, dict)]
        row.update(_labels(supervisions) if supervisions else {})
        if "custom" in cut and "custom" not in row:
            row["custom"] = cut["custom"]
        return row

    def _supervision(self, supervision: Mapping[str, Any]) -> dict:
        name, recording_id = supervision["id"], supervision.get("recording_id")
        if recording_id in self._repeated:
            lines = self._repeated[recording_id]
            raise RowError(name, f"recording {recording_id!r} is on lines "
                                 f"{', '.join(map(str, lines))} of {self._recordings_name}: "
                                 "which line holds it is unknown; give each id one line",
                           DUPLICATE_KEY)
        if recording_id not in self._recordings:
            raise ValueError(f"supervision {name!r} names recording {recording_id!r}, which "
                             f"{self._recordings_name} does not have")
        row = _segment(name, "supervision", self._recordings[recording_id][1],
                       _number(supervision, "start", "supervision"),
                       _number(supervision, "duration", "supervision"),
                       supervision.get("channel", 0))
        row.update((label, supervision[label]) for label in _LABELS if label in supervision)
        return row
