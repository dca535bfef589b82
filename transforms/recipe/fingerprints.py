"""Content fingerprints: what finds the same recording under two keys.

Beam-free. Four kinds, each a 128-bit xxh3 digest (hex), fast enough to take
on every sample (about 18 GB/s, against the converter's ~100 MB/s):

- `bytes:<field>`: the bytes of one media member as stored, so a file copied
  under another key, or into another tar file, matches itself;
- `streams:<field>`: the coded streams of a video member (each stream's
  codec and packets, read without decoding), so one clip remuxed into
  another container (MP4 to MKV, `ffmpeg -c copy`) matches, though the
  remux may move its frames on the timeline (an MP4 edit list dropped);
- `content`: the media a sample's examples hold, in order (the cut's audio,
  after resampling and channel choice, and its frames), so a FLAC and a WAV
  of one take match;
- `feature:<name>`: with no cut, the bytes of each bytes feature whose value
  is media (by its first bytes: transforms/media/sniff.py), wherever in the
  sample it comes from: a FLAC written whole matches itself under another
  member name or key. A feature of other bytes (a payload, JSON) is not
  fingerprinted: the same metadata is no copy.

A segment of a recording (transforms/recipe/segments.py) gets only `content`:
its recording's bytes and streams are every segment's, and would make them
all one.

Samples alike but not identical (a lossy re-encode, another start) are
transforms/media/near_duplicates.py's.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import av
import numpy as np
import xxhash

from transforms.format.sample import SPAN, FieldReader, StoredBytes
from transforms.format.spec import Feature
from transforms.media.decoded import media_file
from transforms.media.sniff import head_of, media_format

__all__ = ["ContentHash", "FEATURE", "feature_fingerprints", "member_fingerprints",
           "stream_fingerprints"]

FEATURE = "feature"

_READ = 1 << 24


def _member_digest(value: Any) -> str:
    digest = xxhash.xxh3_128()
    if isinstance(value, StoredBytes):
        with value.open() as f:
            for chunk in iter(lambda: f.read(_READ), b""):
                digest.update(chunk)
    else:
        digest.update(bytes(value))
    return digest.hexdigest()


def member_fingerprints(sample: Mapping[str, Any], fields: Iterable[str]) -> tuple:
    """(`bytes:<field>`, digest) of each of the sample's media `fields`; none
    for a segment."""
    if SPAN in sample:
        return ()
    return tuple((f"bytes:{field}", _member_digest(sample[field]))
                 for field in sorted(fields) if field in sample)


def feature_fingerprints(sample: Mapping[str, Any], features: Sequence[Feature]) -> tuple:
    """(`feature:<name>`, digest) of each of the bytes `features` whose value in
    the sample is media; none for a segment."""
    if SPAN in sample:
        return ()
    reader, found = FieldReader(sample), []
    for feature in features:
        try:
            value = reader.get(feature.source)
        except KeyError:
            continue   # the encoder names the missing feature
        if isinstance(value, (bytes, bytearray, memoryview, StoredBytes)) and media_format(
                head_of(value)):
            found.append((f"{FEATURE}:{feature.name}", _member_digest(value)))
    return tuple(found)


def _streams_digest(value: Any) -> str | None:
    with media_file(value) as file, av.open(file, metadata_errors="ignore") as container:
        streams = [s for s in container.streams if s.type in ("video", "audio")]
        digests = {s.index: xxhash.xxh3_128(f"{s.type}:{s.codec_context.name}".encode())
                   for s in streams}
        for packet in container.demux(streams):
            if packet.size:
                digests[packet.stream.index].update(bytes(packet))
    combined = xxhash.xxh3_128()
    for index in sorted(digests):
        combined.update(digests[index].digest())
    return combined.hexdigest() if digests else None


def stream_fingerprints(sample: Mapping[str, Any], video_field: str) -> tuple:
    """((`streams:<field>`, digest),) of the sample's video member; none for a
    segment, a sample without one, or a member the demuxer cannot read (the
    cut reports it)."""
    if SPAN in sample or not video_field or video_field not in sample:
        return ()
    try:
        digest = _streams_digest(sample[video_field])
    except (av.FFmpegError, ValueError):
        return ()
    return ((f"streams:{video_field}", digest),) if digest else ()


class ContentHash:
    """The `content` fingerprint of one sample, fed its examples' media values
    (arrays, or lists of bytes) as they are encoded."""

    def __init__(self, names: Iterable[str]):
        self._names = tuple(names)
        self._digest = xxhash.xxh3_128()
        self._fed = False

    def update(self, columns: Mapping[str, Any], count: int) -> None:
        """Feeds `count` consecutive examples, their values as columns (a 2-D
        array with a row per example, or a list of a value per example)."""
        for i in range(count):
            for name in self._names:
                value = columns[name][i]
                if isinstance(value, np.ndarray):
                    self._digest.update(np.ascontiguousarray(value).data)
                else:
                    for item in value:
                        self._digest.update(bytes(item))
        self._fed = bool(self._names)

    def fingerprints(self) -> tuple:
        """(("content", digest),) once media were fed, else ()."""
        return (("content", self._digest.hexdigest()),) if self._fed else ()
