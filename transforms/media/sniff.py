"""What kind of media a file is, by its first bytes.

Beam-free. A field a source fills from a media column (a listing's path, a
Parquet `Audio` struct, a Kaldi `wav.scp` entry) must hold media: audio,
video or an image. Its first bytes must be those of a format the decoders
read (libsndfile's and FFmpeg's common ones, JPEG and PNG); anything else -
a text file, a key, a page of HTML - is not taken, whatever the cut, so it
is never published as a `bytes` feature.

    >>> from transforms.media.sniff import media_format
    >>> media_format(b"fLaC\\x00\\x00\\x00\\x22"), media_format(b"root:x:0:0:root:/root")
    ('flac', None)
"""

from __future__ import annotations

from typing import Any

from transforms.format.sample import StoredBytes
from transforms.format.text import preview

__all__ = ["HEAD_BYTES", "MPEG_FRAMES", "NotMedia", "check_media", "head_of", "media_format"]

# Enough of a file to tell its format (an MPEG transport stream's second sync byte).
HEAD_BYTES = 189
# An MP3 known by its first frame only, with no ID3 tag before it.
MPEG_FRAMES = "mpeg_frames"

# (offset, magic, format): the first that matches names it.
_MAGIC = (
    (0, b"fLaC", "flac"), (0, b"OggS", "ogg"), (0, b"RF64", "wav"), (0, b"BW64", "wav"),
    (0, b"riff\x2e\x91\xcf\x11", "w64"), (0, b"ID3", "mp3"), (0, b".snd", "au"),
    (0, b"caff", "caf"), (0, b"NIST_1A", "sphere"), (0, b"#!AMR", "amr"),
    (0, b"MAC ", "ape"), (0, b"wvpk", "wavpack"), (0, b"TTA1", "tta"),
    (0, b"\x1a\x45\xdf\xa3", "matroska"), (4, b"ftyp", "mp4"), (4, b"moov", "mov"),
    (4, b"mdat", "mov"), (4, b"wide", "mov"), (4, b"free", "mov"),
    (0, b"\x30\x26\xb2\x75\x8e\x66\xcf\x11", "asf"), (0, b"FLV\x01", "flv"),
    (0, b"\x00\x00\x01\xba", "mpeg"), (0, b"\x00\x00\x01\xb3", "mpeg"),
    (0, b"\xff\xd8\xff", "jpeg"), (0, b"\x89PNG\r\n\x1a\n", "png"),
)
# RIFF and AIFF name their form after the chunk size.
_FORMS = {(b"RIFF", b"WAVE"): "wav", (b"RIFF", b"AVI "): "avi", (b"RIFF", b"WEBP"): "webp",
          (b"FORM", b"AIFF"): "aiff", (b"FORM", b"AIFC"): "aiff"}


def media_format(head: bytes) -> str | None:
    """The format whose signature `head` (a file's first bytes) starts with, or None."""
    form = _FORMS.get((head[:4], head[8:12]))
    if form:
        return form
    for offset, magic, name in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            return name
    if head[:1] == b"\x47" and head[188:189] == b"\x47":
        return "mpegts"
    if len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # an MPEG audio frame
        # (ADTS has layer 0). Eleven bits are a weak sign: a random payload has them
        # once in 2048, so these are media to take, not to check by decoding.
        return MPEG_FRAMES if head[1] & 0x06 else "aac"
    return None


class NotMedia(ValueError):
    """A field that should hold media holds bytes of no media format."""


def head_of(value: Any) -> bytes:
    """The first HEAD_BYTES of `value`, bytes or StoredBytes where they lie."""
    if isinstance(value, StoredBytes):
        with value.open() as f:
            return f.read(HEAD_BYTES)
    return bytes(value[:HEAD_BYTES])


def check_media(value: Any, where: str) -> Any:
    """`value` (bytes, or StoredBytes where they lie) when it starts as media
    does; NotMedia saying `where` it is (a file's path, quoted) otherwise."""
    head = head_of(value)
    if media_format(head) is None:
        raise NotMedia(f"{where} is not media: its first bytes {preview(head[:16])} are "
                       "no audio, video or image format's")
    return value
