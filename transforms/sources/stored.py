"""A field left in its input file: a byte range opened when a decoder reads it.

A reader asked to (`TarReader.leaving_stored`, `ListingReader.leaving_stored`)
gives a tar member or a listed media file of many megabytes as a
`StoredMember` instead of its bytes: the url of the file and where in it the
data lies. A decoder opens it as a seekable file of exactly those bytes
(local files and gs:// alike, through Beam's filesystems) and reads it block
by block, so a 4-hour recording is never held whole. It is a plain record,
so it pickles; it is valid while the file is unchanged (a file that has
become shorter is a StorageReadError when read).
"""

from __future__ import annotations

import dataclasses
import io
from typing import IO

from transforms.format.sample import StoredBytes
from transforms.sources.input_files import StorageGuard, StorageReadError, open_input

__all__ = ["StoredMember", "stored_or_read"]


@dataclasses.dataclass(frozen=True)
class StoredMember(StoredBytes):
    """`size` bytes of the file at `url` from byte `offset`."""

    url: str
    offset: int
    size: int

    def open(self) -> IO[bytes]:
        return _StoredFile(_Range(open_input(self.url), self), buffer_size=1 << 20)


def stored_or_read(path: str, stored_from: int) -> bytes | StoredMember:
    """A whole file: its bytes, or, when it has `stored_from` bytes or more, a
    StoredMember of it. Raises what opening raises (missing, forbidden);
    a failing read is StorageReadError."""
    with open_input(path) as f:
        size = f.seek(0, io.SEEK_END)
        if size >= stored_from:
            return StoredMember(path, 0, size)
        f.seek(0)
        return StorageGuard(f, path).read()


class _StoredFile(io.BufferedReader):
    """A StoredMember opened: `read_failure` is the StorageReadError of a read the
    storage failed, which a decoder calling back into it may have hidden."""

    @property
    def read_failure(self) -> StorageReadError | None:
        return self.raw.read_failure


class _Range(io.RawIOBase):
    """A read-only, seekable view of one byte range of an open file, which it closes."""

    def __init__(self, file: IO[bytes], member: StoredMember):
        self._file = file
        self._member = member
        self._position = 0
        self.read_failure: StorageReadError | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._member.size}
        position = base[whence] + offset
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._position = position
        return position

    def readinto(self, buffer) -> int:
        wanted = min(len(buffer), self._member.size - self._position)
        if wanted <= 0:
            return 0
        start = self._member.offset + self._position
        try:
            self._file.seek(start)
            data = self._file.read(wanted)
        except Exception as e:  # noqa: BLE001 - whatever the filesystem raises
            raise self._failed(f"reading {self._member.url} at byte {start} failed: "
                               f"{type(e).__name__}: {e}") from e
        if not data:
            raise self._failed(f"{self._member.url} ends before byte {start}: the file "
                               f"changed since it was read")
        buffer[:len(data)] = data
        self._position += len(data)
        return len(data)

    def _failed(self, message: str) -> StorageReadError:
        self.read_failure = StorageReadError(message)
        return self.read_failure

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()
