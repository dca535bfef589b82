"""One tar archive streamed into Samples: pure, no Beam (transforms/sources/tar.py
reads work units of them).

Grouping follows WebDataset (webdataset/tariterators.py `base_plus_ext` and
`group_by_keys`): the key is the member path up to the first dot of its
basename, directories included (`corpus/spk1_0001.flac` -> key
`corpus/spk1_0001`, field `flac`); the extension is lower-cased; consecutive
members with one key form one Sample; WebDataset meta members (`__*__`) are
skipped. Two deliberate differences, so the same data gives the same samples
whichever tool packed it:

- a leading `./` is stripped from member names, because GNU `tar -C dir .`
  writes `./corpus/a.flac` where WebDataset's TarWriter and `tar -C dir
  corpus` write `corpus/a.flac`;
- a link member that names a field is read as the file it links to: GNU tar
  stores the second name of a hard-linked file (a corpus deduplicated with
  `cp -al`, rsync's --link-dest, `rdfind`) as a hard link with no data, and a
  symbolic link as its target's path. WebDataset skips both, and the sample
  loses that field. The target must be a regular member earlier in the same
  archive (GNU tar always stores a hard-linked file's first name so); it is
  read again from the archive (`reopen`), by its offset, which the stream
  remembers for every regular member. A link to anything else (a path
  outside the archive, a member further on) cannot be followed by a streamed
  read: its sample is a dead letter saying to pack with `tar --dereference
  --hard-dereference`.

A member of at least `stored_from` bytes in an uncompressed archive is not
read at all: its sample holds a `StoredMember` (transforms/sources/stored.py),
where its data lies in the file, for a decoder to stream, so memory does not
grow with a recording's length. An uncompressed archive is read with seeks
(tarfile's "r:" mode) where the file can seek, so such a member's data is
skipped, not read twice. A compressed archive holds every member whole: its
members can only be reached by decompressing from its start.

A compressed archive is held back until it is verified: its codec's checks
(gzip's CRC-32 and length, bzip2's block and stream CRCs, xz's check) are at
the end of the stream, after the tar's own end-of-archive marker, so the file
is first read to its very end through them (transforms/sources/compression.py), and
only then streamed into samples. It is read twice - fast next to decoding
media, and the reason to store media tars uncompressed: FLAC, MP4 and JPEG
barely compress anyway. A file that fails its check (a flipped byte, a cut
upload) is one FILE dead letter and gives no sample: none of its bytes can be
trusted.

Failures (transforms/format/dead_letters.py, stage `read_tar`):

- a duplicate field in one sample (two `a.cls` in a row), a member whose
  name is not UTF-8, or a link that cannot be followed: that sample becomes
  a SAMPLE dead letter (the name
  escaped, see transforms/format/sample.py), the rest of the archive is read;
- a truncated or corrupt tar (short data, bad header): reading that file
  stops; the samples completed before the error were already yielded; the
  sample in progress becomes a SAMPLE dead letter - its last group is complete
  only at the end-of-archive marker, so even a cut that falls exactly between
  two members fails it; with no sample in progress, one FILE dead letter;
- a compressed file failing its check, not a tar at all, an empty (zero-byte)
  file, a file that cannot be opened or whose name is not UTF-8: one FILE dead
  letter. A valid but empty tar (only end-of-archive blocks) yields nothing
  and is not a failure. A FIFO or device is refused when the files are
  matched, before the job starts (transforms/sources/file_match.py).

Not a failure of the data, so no dead letter: an error of the storage while
reading the bytes (a gs:// read that still fails after the client's retries,
a disk error) raises StorageReadError, and the runner retries the bundle.
"""

from __future__ import annotations

import collections
import contextlib
import posixpath
import re
import tarfile
from typing import IO, Callable, ContextManager, Iterator, MutableMapping, NamedTuple

from transforms.format.dead_letters import FILE, MAX_MESSAGE, SAMPLE, dead_letter
from transforms.format.keys import KeyPlace
from transforms.format.sample import KEY, URL, escape_name, is_text
from transforms.recipe.units import Failed
from transforms.sources import compression
from transforms.sources.compression import MAGIC_BYTES, StreamCorrupt, codec_of_content
from transforms.sources.input_files import StorageGuard
from transforms.sources.stored import StoredMember

__all__ = ["SKIP_REASONS", "Skipped", "UnfollowedLink", "file_failed", "iter_tar", "tar_keys"]

_STAGE = "read_tar"

# Why a member was skipped: its kind when it is not a regular file, or why a
# regular file is not a sample field.
SKIP_REASONS = ("directory", "symlink", "hardlink", "device", "fifo", "other",
                "meta", "no_extension")

# WebDataset's `base_plus_ext`: key = path up to the first dot of the basename,
# extension = the rest. No match (no dot in the basename) -> not a field.
_KEY_EXT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
# WebDataset's `skip_meta` default for `__key__`-style meta members.
_META = re.compile(r"__[^/]*__($|/)")

# Links followed from one to the next before a link is taken for a loop.
_MAX_LINK_HOPS = 16

# What reading a broken archive raises: tarfile's ReadError (a TarError), or
# the codec's own error while a member's data is read. Anything else is a bug
# or a storage error (StorageReadError) and propagates, so Beam retries the
# bundle instead of hiding it in a dead letter.
_READ_ERRORS = (tarfile.TarError, *compression.CORRUPT)


def _member_kind(info: tarfile.TarInfo) -> str:
    if info.isdir():
        return "directory"
    if info.issym():
        return "symlink"
    if info.islnk():
        return "hardlink"
    if info.ischr() or info.isblk():
        return "device"
    if info.isfifo():
        return "fifo"
    return "other"


def _normalise(name: str) -> str:
    # GNU `tar -C dir .` writes "./a.flac"; WebDataset's TarWriter writes "a.flac".
    while name.startswith("./"):
        name = name[2:]
    return name


def _failure(error: BaseException | str, context: str | None, *, url: str,
             key: str | None, member: str | None, unit: str) -> dict:
    """A dead letter keeping the error's type, its message prefixed with `context`."""
    record = dead_letter(_STAGE, error, url=url, key=key, member=member, unit=unit)
    if context:
        record["message"] = f"{context}: {record['message']}"[:MAX_MESSAGE]
    return record


def file_failed(error: BaseException, context: str | None, url: str) -> Failed:
    """The FILE dead letter of a file that gave no sample."""
    return Failed(_failure(error, context, url=url, key=None, member=None, unit=FILE))


class Skipped(NamedTuple):
    """A member that is not a sample field; `reason` is one of SKIP_REASONS."""

    reason: str


class UnfollowedLink(ValueError):
    """A link member whose target is not a regular member earlier in the archive."""


class _Field(NamedTuple):
    """A member that is a sample field, `key`.`ext`: a regular file, or a link to one."""

    info: tarfile.TarInfo
    key: str
    ext: str


class _TarStream:
    """One archive's members in order, streamed, and how the archive ended.

    `TarFile.next()` returns None not only at the end-of-archive marker (a zero
    block) but also, silently, when the file stops at a member boundary or in
    the middle of a header, or when a header is garbage - anywhere past the
    first member. Only the zero block means the last group is complete, so the
    header parser of this stream notes which one it met.
    """

    def __init__(self, fileobj: IO[bytes],
                 archive_again: Callable[[], ContextManager[IO[bytes]]] | None = None, *,
                 seekable: bool = False, url: str = "", stored_from: int = 0):
        self._archive_again = archive_again
        self._url = url
        self._stored_from = stored_from
        # Where each regular member's data is, and where each link points: what
        # a later link member is read through. A few dozen bytes a member.
        self._files: dict[str, tuple[int, int]] = {}
        self._links: dict[str, str] = {}
        self.end_marker = False
        self.header_error: tarfile.HeaderError | None = None
        self.last_member: str | None = None  # for error messages
        stream = self

        class _EndAwareTarInfo(tarfile.TarInfo):
            @classmethod
            def fromtarfile(cls, tarfile_obj):
                try:
                    return super().fromtarfile(tarfile_obj)
                except tarfile.EOFHeaderError:
                    stream.end_marker = True
                    raise
                except tarfile.HeaderError as e:
                    stream.header_error = e
                    raise

        self._tar = tarfile.open(fileobj=fileobj, mode="r:" if seekable else "r|",
                                 tarinfo=_EndAwareTarInfo)

    def members(self, stats: MutableMapping[str, int]) -> Iterator[tarfile.TarInfo]:
        while (info := self._tar.next()) is not None:
            # TarFile keeps every TarInfo in `members` (for random access we do
            # not use); clearing it keeps memory flat, as WebDataset does.
            self._tar.members = []
            stats["members"] += 1
            self.last_member = info.name
            name = _normalise(info.name)
            if info.isreg():
                self._files[name] = (info.offset_data, info.size)
            elif info.islnk() or info.issym():
                self._links[name] = _link_target(name, info)
            yield info

    def read(self, info: tarfile.TarInfo) -> bytes | StoredMember:
        """A regular member's data, or a link member's target's (left stored when
        large, see `stored`); UnfollowedLink."""
        if info.isreg():
            if self._left_stored(info.size):
                return StoredMember(self._url, info.offset_data, info.size)
            return self._tar.extractfile(info).read()
        target = self._links[_normalise(info.name)]
        for _ in range(_MAX_LINK_HOPS):
            if target not in self._links:
                break
            target = self._links[target]
        if target not in self._files or self._archive_again is None:
            kind = "symbolic" if info.issym() else "hard"
            raise UnfollowedLink(
                f"member {info.name!r} is a {kind} link to {info.linkname!r}, which is not a "
                f"file earlier in the archive, where a streamed read could follow it; pack the "
                f"corpus with tar --dereference --hard-dereference")
        offset, size = self._files[target]
        if self._left_stored(size):
            return StoredMember(self._url, offset, size)
        with self._archive_again() as archive:
            archive.seek(offset)
            data = archive.read(size)
        if len(data) != size:
            raise tarfile.ReadError(f"member {target!r} ends early when read again for the "
                                    f"link {info.name!r}")
        return data

    def _left_stored(self, size: int) -> bool:
        """Whether a member of `size` bytes is given as a StoredMember of `url`."""
        return 0 < self._stored_from <= size

    def ending_error(self) -> tarfile.ReadError | None:
        """None if the members ended at the end-of-archive marker."""
        if self.end_marker:
            return None
        detail = f" ({self.header_error})" if self.header_error else ""
        return tarfile.ReadError(f"no end-of-archive marker{detail}")

    @property
    def offset(self) -> int:
        return self._tar.offset

    def close(self) -> None:
        self._tar.close()  # closes tarfile's buffers only, never the file


def _link_target(name: str, info: tarfile.TarInfo) -> str:
    """The archive path a link member points to: a hard link names it from the
    archive's root, a symbolic link from the link's folder ('' when it leaves
    the archive: absolute, or above its root)."""
    if info.islnk():
        return _normalise(info.linkname)
    if info.linkname.startswith("/"):
        return ""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(name), info.linkname))
    return "" if target == ".." or target.startswith("../") else target


def _fields(members: Iterator[tarfile.TarInfo]) -> Iterator[_Field | Skipped]:
    """Members -> sample fields, or why a member is none (WebDataset's naming).
    A link is a field when its name is one (`_TarStream.read` follows it)."""
    for info in members:
        linked = info.islnk() or info.issym()
        if not (info.isreg() or linked):
            yield Skipped(_member_kind(info))
            continue
        name = _normalise(info.name)
        if ("/" not in name and name.startswith("__") and name.endswith("__")) or _META.match(name):
            yield Skipped(_member_kind(info) if linked else "meta")
            continue
        match = _KEY_EXT.match(name)
        if match is None:
            yield Skipped(_member_kind(info) if linked else "no_extension")
            continue
        yield _Field(info, match.group(1), match.group(2).lower())


class _SampleGroup:
    """Consecutive fields with one key -> one Sample, or its dead letter."""

    def __init__(self, url: str):
        self._url = url
        self._sample: dict | None = None    # the sample being grouped
        self._failure: dict | None = None   # its dead letter, once a member made it fail

    def finish_before(self, key: str) -> dict | Failed | None:
        """The group so far, finished, if `key` starts a new one."""
        return self.finish() if self._sample and key != self._sample[KEY] else None

    def add(self, field: _Field, stream: _TarStream, stats: MutableMapping[str, int]) -> None:
        """Reads one field of the group (after `finish_before` its key)."""
        if self._sample is None:
            self._sample = {KEY: field.key, URL: self._url}
        if self._failure is None and not is_text(field.info.name):
            self._fail(ValueError(f"member name {escape_name(field.info.name)!r} is not UTF-8 "
                                  f"(written escaped, as transforms/format/sample.py says)"),
                       "sample has a member name that is not text", field)
        # The member's own bytes: a link has none (its target's were counted as read).
        stats["bytes"] += field.info.size
        if self._failure is not None:
            return  # the rest of a failed sample: skipped, not kept
        try:
            data = stream.read(field.info)
        except UnfollowedLink as e:
            self._fail(e, "sample has a link that cannot be followed", field)
            return
        if field.ext in self._sample:
            self._fail(ValueError(f"duplicate field {field.ext!r}: member {field.info.name!r} "
                                  f"repeats a field already read for this sample"),
                       "sample has a duplicate extension", field)
        else:
            self._sample[field.ext] = data

    def _fail(self, error: ValueError, context: str, field: _Field) -> None:
        self._failure = _failure(error, context, url=self._url, key=field.key,
                                 member=field.info.name, unit=SAMPLE)
        self._sample = {KEY: field.key, URL: self._url}  # drop the fields read so far

    def finish(self) -> dict | Failed | None:
        """The completed group: its Sample or its dead letter (None if no group)."""
        done = Failed(self._failure) if self._failure is not None else self._sample
        self._sample = self._failure = None
        return done

    def broken(self, error: BaseException, context: str, member: str | None) -> Failed:
        """The dead letter of an archive that broke off during this group."""
        if self._sample is None:
            return Failed(_failure(error, context, url=self._url, key=None, member=member,
                                   unit=FILE))
        if self._failure is not None:
            # Already a failure; count it once, with both reasons.
            record = dict(self._failure)
            record["message"] = f"{record['message']}; then {context}: {error}"[:MAX_MESSAGE]
            return Failed(record)
        return Failed(_failure(error, f"sample incomplete, {context}", url=self._url,
                               key=self._sample[KEY], member=member, unit=SAMPLE))


def _samples(stream: _TarStream, url: str,
             stats: MutableMapping[str, int]) -> Iterator[dict | Skipped | Failed]:
    """Fields grouped into Samples; the last group is complete only at the end marker."""
    group = _SampleGroup(url)
    try:
        for item in _fields(stream.members(stats)):
            if isinstance(item, Skipped):
                yield item
                continue
            # Yielded before the field is read: a read error then fails only the new group.
            if (done := group.finish_before(item.key)) is not None:
                yield done
            group.add(item, stream, stats)
        error = stream.ending_error()
    except _READ_ERRORS as e:
        error = e
    if error is not None:
        yield group.broken(error, f"archive truncated or corrupt near tar offset "
                                  f"{stream.offset}", stream.last_member)
    elif (last := group.finish()) is not None:
        yield last


def iter_tar(fileobj: IO[bytes], url: str, *, stats: MutableMapping[str, int] | None = None,
             verify: bool = True, reopen: Callable[[], IO[bytes]] | None = None,
             stored_from: int = 0) -> Iterator[dict | Skipped | Failed]:
    """Streams one tar archive into Samples, `Skipped` members and `Failed` dead letters.

    `fileobj` is a binary file, not closed here, and seekable if compressed and
    verified; compression (gzip, bzip2, xz) is detected from the content. A
    compressed archive is first read to its end through its codec's checks
    (`verify`; see the module docstring), then streamed. `reopen()` opens the
    same file again, seekable, to read a link member's target (without it a
    link is a dead letter). If `stats` is given, `stats["members"]` and
    `stats["bytes"]` are increased by the members seen and the member bytes
    read. With `stored_from` > 0, a member of at least that many bytes in an
    uncompressed archive is given as a StoredMember of `url` (which must open
    with Beam's filesystems). Memory holds one member and one sample, however
    large the archive, and the offset of each member.
    """
    stats = stats if stats is not None else collections.Counter()
    raw = StorageGuard(fileobj, url)
    codec = codec_of_content(raw.peek(MAGIC_BYTES))
    if codec is not None and verify:
        try:
            compression.verify(raw, codec)
        except StreamCorrupt as e:
            yield file_failed(e, "compressed file corrupt, none of its samples used", url)
            return
        raw.rewind()
    archive = raw if codec is None else compression.decompressed(raw, codec)

    @contextlib.contextmanager
    def archive_again() -> Iterator[IO[bytes]]:
        with reopen() as again:
            if codec is None:
                yield again
            else:
                with compression.decompressed(again, codec) as decompressed:
                    yield decompressed

    try:
        stream = _TarStream(archive, archive_again if reopen is not None else None,
                            seekable=codec is None and raw.seekable(), url=url,
                            stored_from=stored_from if codec is None else 0)
    except _READ_ERRORS as e:
        # Fails here only before the first member: the file yields no sample.
        archive.close()
        if raw.bytes_read == 0:
            yield file_failed(tarfile.ReadError("empty file is not a tar archive"), None, url)
        else:
            yield file_failed(e, "not a readable tar archive", url)
        return
    try:
        yield from _samples(stream, url, stats)
    finally:
        stream.close()
        archive.close()


def tar_keys(fileobj: IO[bytes], url: str) -> Iterator[tuple[str, KeyPlace]]:
    """(key, KeyPlace) of each sample `iter_tar` makes of the archive, by the
    same grouping, from its members' headers alone: an uncompressed archive
    that can seek is read header by header, its members' data skipped; a
    compressed one is verified first, as `iter_tar` verifies it (one that
    fails gives no sample). The samples of a file that breaks off are those
    before the break, and a sample whose member's name is not text is a dead
    letter anyway: what becomes of them is `iter_tar`'s to say."""
    raw = StorageGuard(fileobj, url)
    codec = codec_of_content(raw.peek(MAGIC_BYTES))
    if codec is not None:
        try:
            compression.verify(raw, codec)
        except StreamCorrupt:
            return
        raw.rewind()
    archive = raw if codec is None else compression.decompressed(raw, codec)
    last = None
    try:
        stream = _TarStream(archive, seekable=codec is None and raw.seekable(), url=url)
        for item in _fields(stream.members(collections.Counter())):
            if (isinstance(item, _Field) and item.key != last
                    and is_text(item.info.name)):
                last = item.key
                yield item.key, KeyPlace(url, item.info.offset, f"member {item.info.name}")
    except _READ_ERRORS:
        return
    finally:
        archive.close()
