"""Opening input files through Beam's filesystems (local, gs://, ...), safely.

Two faults of the input must not pass for something else:

- a local path that is not a regular file: opening a FIFO blocks until some
  writer comes, reading a device such as /dev/zero never ends, so
  `check_regular` refuses them before they are opened;
- a read the storage fails (a gs:// read still failing after the client's
  retries, a disk's EIO) is not bad data: `StorageGuard` raises it as
  StorageReadError, which the readers let propagate so the runner retries the
  bundle, instead of making the input a dead letter for good. It is not an
  OSError on purpose: the codecs' "bad data" errors are OSErrors too.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import IO, Iterator

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.format.dead_letters import StorageReadError
from transforms.sources import compression
from transforms.storage.folders import is_local

__all__ = ["NotARegularFile", "StorageGuard", "StorageReadError", "check_regular",
           "open_decompressed", "open_input", "read_whole"]

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


class NotARegularFile(ValueError):
    """A local input path names a FIFO, a device, a socket or a directory."""

    def __init__(self, path: str, kind: str):
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path = path
        self.kind = kind


def check_regular(path: str) -> None:
    """Raises NotARegularFile for a local `path` that exists but is not a regular
    file (symlinks are followed); object stores hold only regular objects."""
    if not is_local(path):
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or forbidden: opening it says so
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise NotARegularFile(path, kind)


class StorageGuard:
    """A read-only wrapper of an open file that counts the bytes read, raises the
    file's own read errors as StorageReadError, and lets its first bytes be
    peeked at. Closing it leaves the file open: its opener closes it."""

    def __init__(self, fileobj: IO[bytes], path: str):
        self._fileobj = fileobj
        self._path = path
        self._head = b""  # peeked bytes the next read returns
        self.bytes_read = 0

    def _read(self, size: int) -> bytes:
        try:
            data = self._fileobj.read(size)
        except Exception as e:  # noqa: BLE001 - whatever the filesystem raises
            raise StorageReadError(f"reading {self._path} at byte {self.bytes_read} failed: "
                                   f"{type(e).__name__}: {e}") from e
        self.bytes_read += len(data)
        return data

    def peek(self, size: int) -> bytes:
        """The file's first `size` bytes (fewer if it is shorter), read again next."""
        if len(self._head) < size:
            self._head += self._read(size - len(self._head))
        return self._head[:size]

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._read(size)
        if size < 0:
            data, self._head = self._head + self._read(-1), b""
        elif size <= len(self._head):
            data, self._head = self._head[:size], self._head[size:]
        else:
            data, self._head = self._head + self._read(size - len(self._head)), b""
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def rewind(self) -> None:
        """Back to the first byte, to read the file again (it must be seekable)."""
        self.seek(0)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        seekable = getattr(self._fileobj, "seekable", None)  # a bare stream may have none
        return bool(seekable and seekable())

    def tell(self) -> int:
        return self._fileobj.tell() - len(self._head)

    def seek(self, offset: int, whence: int = 0) -> int:
        self._head = b""
        return self._fileobj.seek(offset, whence)

    @property
    def closed(self) -> bool:
        return self._fileobj.closed

    def close(self) -> None:
        pass


def open_input(path: str) -> IO[bytes]:
    """`path` opened for reading as stored (never decompressed by Beam); raises
    NotARegularFile first, and whatever the filesystem raises for a missing or
    forbidden file."""
    check_regular(path)
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_whole(path: str) -> bytes:
    """A file's bytes as stored; a read failing once the file is open raises
    StorageReadError."""
    with open_input(path) as f:
        return StorageGuard(f, path).read()


@contextlib.contextmanager
def open_decompressed(path: str, verify: bool = False) -> Iterator[IO[bytes]]:
    """`path` opened for reading, decompressed by its name's suffix (a
    listing, a manifest); bad compressed data raises StreamCorrupt, a failing
    read StorageReadError. With `verify`, a compressed one is first read to
    its end through its codec's checks (transforms/sources/compression.py)."""
    codec = compression.codec_of_name(path)
    with open_input(path) as f:
        if codec is None:
            yield f
            return
        raw = StorageGuard(f, path)
        try:
            if verify:
                compression.verify(raw, codec)
                raw.rewind()
            with compression.decompressed(raw, codec) as stream:
                yield stream
        except compression.CORRUPT as e:  # the codec's: the storage's are StorageReadError
            raise compression.corrupt(codec, e) from None
