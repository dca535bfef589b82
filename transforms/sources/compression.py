"""Compressed inputs read through their checksums: gzip, bzip2 and xz.

Beam-free. Each codec's stream ends with a check of the data it held: gzip a
CRC-32 and the length, bzip2 a CRC per block and one over the stream, xz a
CRC-64 (by default). Nothing is verified until the stream's end is reached, so
two traps lie in wait for a reader:

- tarfile stops at the archive's end-of-archive marker, before the gzip
  trailer: a flipped byte in a member then passes unseen;
- Beam's CompressedFile never says that a stream stopped early: a cut .gz,
  .bz2 or .xz reads as a shorter, valid file.

The readers here are the standard library's (and ISA-L's gzip, the same checks
and several times faster) read to the very end, so a corrupt or cut stream
raises. They handle concatenated streams (`cat a.gz b.gz`, pigz, pbzip2) as the
command-line tools do.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from typing import IO

from isal import igzip, isal_zlib

__all__ = ["CODECS", "CORRUPT", "MAGIC_BYTES", "StreamCorrupt", "codec_of_content",
           "codec_of_name", "corrupt", "decompressed", "verify"]

# Leading bytes -> codec, as file(1) and tarfile's "r|*" tell them apart.
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"))
# File name suffix -> codec, for inputs named by their compression (listings).
_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz", ".lzma": "xz"}
CODECS = ("gzip", "bzip2", "xz")
MAGIC_BYTES = max(len(m) for m, _ in _MAGIC)

# What a codec raises for bad data: a failed check or an invalid stream
# (BadGzipFile and bz2's "Invalid data stream" are OSErrors, ISA-L's invalid
# deflate blocks an IsalError), or EOFError for a stream that stops before its
# end-of-stream marker.
CORRUPT = (OSError, EOFError, zlib.error, isal_zlib.error, lzma.LZMAError)
_READ_SIZE = 1 << 20


class StreamCorrupt(ValueError):
    """A compressed stream failed its check or stopped early: its data cannot be trusted."""


def codec_of_content(head: bytes) -> str | None:
    """The codec whose magic number `head` starts with, or None (not compressed)."""
    return next((codec for magic, codec in _MAGIC if head.startswith(magic)), None)


def codec_of_name(path: str) -> str | None:
    """'rows.csv.gz' -> 'gzip'; None for a name with no compression suffix."""
    name = path.rsplit("/", 1)[-1].lower()
    return next((codec for suffix, codec in _SUFFIXES.items() if name.endswith(suffix)), None)


def decompressed(fileobj: IO[bytes], codec: str) -> IO[bytes]:
    """A binary file reading `fileobj` decompressed; it raises one of CORRUPT
    when the data is bad, at the latest when read to the end. Closing it
    leaves `fileobj` open."""
    if codec == "gzip":
        return igzip.IGzipFile(fileobj=fileobj, mode="rb")
    if codec == "bzip2":
        return bz2.BZ2File(fileobj, mode="rb")
    if codec == "xz":
        return lzma.LZMAFile(fileobj, mode="rb")
    raise ValueError(f"unknown codec {codec!r} (expected one of {', '.join(CODECS)})")


def verify(fileobj: IO[bytes], codec: str) -> int:
    """Reads `fileobj` to its end through the codec's checks; the decompressed
    size, or StreamCorrupt saying what failed. Memory: one read buffer.

    Only the codec's errors become StreamCorrupt: an error of `fileobj` itself
    (the storage's) propagates as it is.
    """
    size = 0
    try:
        with decompressed(fileobj, codec) as stream:
            while chunk := stream.read(_READ_SIZE):
                size += len(chunk)
    except CORRUPT as e:
        raise corrupt(codec, e) from None
    return size


def corrupt(codec: str, error: BaseException) -> StreamCorrupt:
    """The StreamCorrupt for one of CORRUPT raised while reading a `codec` stream."""
    if isinstance(error, EOFError):
        return StreamCorrupt(f"{codec} stream ends before its end-of-stream marker "
                             f"(a cut file?)")
    return StreamCorrupt(f"{codec} stream fails its checks: {type(error).__name__}: {error}")
