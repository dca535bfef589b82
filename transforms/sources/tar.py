"""Tar shards to Samples: streamed, WebDataset-compatible, nothing lost.

    import apache_beam as beam
    from transforms.format.dead_letters import FAILURES
    from transforms.sources.tar import ReadTarSamples

    with beam.Pipeline() as p:
        read = p | "ReadTar" >> ReadTarSamples(["gs://bucket/shards/train-*.tar",
                                                "/data/extra/*.tar.gz"])
        samples = read.samples        # {"__key__", "__url__", "flac": b"...", ...}
        failures = read[FAILURES]     # dead letters (transforms/format/dead_letters.py)

Three layers, each usable on its own:

- `iter_tar(fileobj, url)`: a pure generator (no Beam) over one archive. It
  streams (`tarfile` mode `r|`; .tar, .tar.gz/.tgz, .tar.bz2 and .tar.xz are
  told apart by content) and holds one member and one sample at a time.
- `TarReader`: reads a work unit (transforms/sources/units.py) - one tar file, or
  consecutive small ones (`plan_tar_units`) - opening each path or URL through
  Beam's filesystems (local, gs://, ...) and turning the generator's events
  into Samples, dead letters and counters.
- `ReadTarSamples`: matches file patterns when the job starts, spreads the
  files over workers and reads them.

Grouping follows WebDataset (webdataset/tariterators.py `base_plus_ext` and
`group_by_keys`): the key is the member path up to the first dot of its
basename, directories included (`corpus/spk1_0001.flac` -> key
`corpus/spk1_0001`, field `flac`); the extension is lower-cased; consecutive
members with one key form one Sample; WebDataset meta members (`__*__`) are
skipped. One deliberate difference: a leading `./` is stripped from member
names, because GNU `tar -C dir .` writes `./corpus/a.flac` where WebDataset's
TarWriter and `tar -C dir corpus` write `corpus/a.flac`, and the same data must
give the same keys whichever tool packed it.

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

- a duplicate field in one sample (two `a.cls` in a row), or a member whose
  name is not UTF-8: that sample becomes a SAMPLE dead letter (the name
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

Counters (namespace `datagen`): `tar_files_read`, `tar_members_read`,
`tar_members_skipped`, `tar_bytes_read`, `samples_read`. Every sample is
counted once in `samples_read`, whether it is yielded or becomes a SAMPLE dead
letter, so samples_read == samples yielded + SAMPLE dead letters.
"""

from __future__ import annotations

import collections
import functools
import re
import tarfile
from typing import IO, Iterator, MutableMapping, Sequence

import apache_beam as beam

from transforms.sources import compression
from transforms.sources.compression import MAGIC_BYTES, StreamCorrupt, codec_of_content
from transforms.runner.counters import counter
from transforms.format.dead_letters import FILE, MAX_MESSAGE, SAMPLE, dead_letter
from transforms.sources.file_match import as_patterns, matched_files
from transforms.sources.input_files import StorageGuard, open_input
from transforms.format.sample import KEY, URL, escape_name, is_text
from transforms.sources.units import Failed, ReadUnits, Source, WorkUnit, group_by_size

__all__ = ["ReadTarSamples", "TarReader", "iter_tar", "plan_tar_units", "SKIP_REASONS"]

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

# What reading a broken archive raises: tarfile's ReadError (a TarError), or
# the codec's own error while a member's data is read. Anything else is a bug
# or a storage error (StorageReadError) and propagates, so Beam retries the
# bundle instead of hiding it in a dead letter.
_READ_ERRORS = (tarfile.TarError, *compression.CORRUPT)


class _EndAwareTarInfo(tarfile.TarInfo):
    """A TarInfo whose header parsing records how the archive ended.

    `TarFile.next()` returns None not only at the end-of-archive marker (a zero
    block) but also, silently, when the file stops at a member boundary or in
    the middle of a header, or when a header is garbage - anywhere past the
    first member. Only the zero block means the last group is complete, so we
    note which one we met on the TarFile being read.
    """

    @classmethod
    def fromtarfile(cls, tarfile_obj):
        try:
            return super().fromtarfile(tarfile_obj)
        except tarfile.EOFHeaderError:
            tarfile_obj._datagen_end_marker = True
            raise
        except tarfile.HeaderError as e:
            tarfile_obj._datagen_header_error = e
            raise


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


def _finished(sample: dict, poisoned: dict | None) -> tuple[str, dict]:
    """The event for a completed group: the sample, or its dead letter."""
    return ("failure", poisoned) if poisoned is not None else ("sample", sample)


# C901: one loop over members and samples still; small WebDataset-style
# generators (members -> samples) would each be simple.
def iter_tar(fileobj: IO[bytes], url: str, *,  # noqa: C901
             stats: MutableMapping[str, int] | None = None,
             verify: bool = True) -> Iterator[tuple[str, object]]:
    """Streams one tar archive into Samples, skips and failures.

    Yields `("sample", sample)`, `("skipped", reason)` (one of SKIP_REASONS) or
    `("failure", dead_letter_record)`. `fileobj` is a binary file, not closed
    here, and seekable if compressed and verified; compression (gzip, bzip2, xz) is detected from the content. A
    compressed archive is first read to its end through its codec's checks
    (`verify`; see the module docstring), then streamed. If `stats` is given,
    `stats["members"]` and `stats["bytes"]` are increased by the members seen
    and the member bytes read. Memory holds one member and one sample, however
    large the archive.
    """
    stats = stats if stats is not None else collections.Counter()
    raw = StorageGuard(fileobj, url)
    codec = codec_of_content(raw.peek(MAGIC_BYTES))
    if codec is not None and verify:
        try:
            compression.verify(raw, codec)
        except StreamCorrupt as e:
            yield "failure", _failure(e, "compressed file corrupt, none of its samples used", url=url,
                                      key=None, member=None, unit=FILE)
            return
        raw.rewind()
    archive = raw if codec is None else compression.decompressed(raw, codec)
    try:
        stream = tarfile.open(fileobj=archive, mode="r|", tarinfo=_EndAwareTarInfo)
    except _READ_ERRORS as e:
        # Fails here only before the first member: the file yields no sample.
        if raw.bytes_read == 0:
            yield "failure", _failure(tarfile.ReadError("empty file is not a tar archive"),
                                      None, url=url, key=None, member=None, unit=FILE)
        else:
            yield "failure", _failure(e, "not a readable tar archive", url=url, key=None,
                                      member=None, unit=FILE)
        return

    current: dict | None = None   # the sample being grouped
    poisoned: dict | None = None  # its dead letter, once a member made it fail
    member: str | None = None     # last member header read, for error messages
    error: BaseException | None = None
    try:
        while True:
            info = stream.next()
            if info is None:
                break
            # TarFile keeps every TarInfo in `members` (for random access we do
            # not use); clearing it keeps memory flat, as WebDataset does.
            stream.members = []
            stats["members"] += 1
            member = info.name
            if not info.isreg():
                yield "skipped", _member_kind(info)
                continue
            name = _normalise(info.name)
            if ("/" not in name and name.startswith("__") and name.endswith("__")) or _META.match(name):
                yield "skipped", "meta"
                continue
            match = _KEY_EXT.match(name)
            if match is None:
                yield "skipped", "no_extension"
                continue
            key, ext = match.group(1), match.group(2).lower()
            if current is not None and key != current[KEY]:
                yield _finished(current, poisoned)
                current = poisoned = None
            if current is None:
                current = {KEY: key, URL: url}
            if poisoned is None and not is_text(info.name):
                # The name cannot be a key or field name: the sample is a dead letter.
                poisoned = _failure(
                    ValueError(f"member name {escape_name(info.name)!r} is not UTF-8 (written "
                               f"escaped, as transforms/format/sample.py says)"),
                    "sample has a member name that is not text", url=url, key=key,
                    member=info.name, unit=SAMPLE)
                current = {KEY: key, URL: url}
            if poisoned is not None:
                stats["bytes"] += info.size  # the rest of a failed sample: skipped, not kept
                continue
            data = stream.extractfile(info).read()
            stats["bytes"] += len(data)
            if ext in current:
                poisoned = _failure(
                    ValueError(f"duplicate field {ext!r}: member {info.name!r} repeats a field "
                               f"already read for this sample"),
                    "sample has a duplicate extension", url=url, key=key, member=info.name,
                    unit=SAMPLE)
                current = {KEY: key, URL: url}  # drop the fields read so far
                continue
            current[ext] = data
        if not getattr(stream, "_datagen_end_marker", False):
            header_error = getattr(stream, "_datagen_header_error", None)
            error = tarfile.ReadError(
                "no end-of-archive marker"
                + (f" ({header_error})" if header_error else ""))
    except _READ_ERRORS as e:
        error = e
    finally:
        stream.close()  # closes tarfile's buffers only, never `fileobj`
        archive.close()

    if error is None:
        if current is not None:
            yield _finished(current, poisoned)
        return
    context = f"archive truncated or corrupt near tar offset {stream.offset}"
    if current is None:
        yield "failure", _failure(error, context, url=url, key=None, member=member, unit=FILE)
    elif poisoned is not None:
        # Already a failure; count it once, with both reasons.
        record = dict(poisoned)
        record["message"] = f"{record['message']}; then {context}: {error}"[:MAX_MESSAGE]
        yield "failure", record
    else:
        yield "failure", _failure(error, f"sample incomplete, {context}", url=url,
                                  key=current[KEY], member=member, unit=SAMPLE)


class TarReader:
    """Reads tar units (transforms/sources/units.py): each file of the unit streamed by
    `iter_tar` into Samples and dead letters.

    Configuration only until setup() makes its counters; each file is opened
    through Beam's filesystems as stored: `iter_tar` tells and checks its
    compression.
    """

    splittable = False

    def setup(self, counting: bool = True) -> None:
        self._files = counter("tar_files_read", counting)
        self._members = counter("tar_members_read", counting)
        self._skipped = counter("tar_members_skipped", counting)
        self._samples = counter("samples_read", counting)
        self._bytes = counter("tar_bytes_read", counting)

    # UnitReader.read: a unit of this source is never split, so no tracker is used.
    def read(self, unit: WorkUnit, tracker=None) -> Iterator[dict | Failed]:  # noqa: ARG002
        for path in unit.inputs:
            yield from self._read_file(path)

    def _read_file(self, path: str) -> Iterator[dict | Failed]:
        if not is_text(path):
            yield Failed(_failure(ValueError("the file's name is not UTF-8"), "file not read",
                                  url=path, key=None, member=None, unit=FILE))
            return
        try:
            fileobj = open_input(path)
        except Exception as e:  # noqa: BLE001 - missing, forbidden, a FIFO: whatever the filesystem says
            yield Failed(_failure(e, "cannot open file", url=path, key=None, member=None,
                                  unit=FILE))
            return
        self._files.inc()
        stats = collections.Counter()
        try:
            for kind, value in iter_tar(fileobj, path, stats=stats):
                if kind == "sample":
                    self._samples.inc()
                    yield value
                elif kind == "skipped":
                    self._skipped.inc()
                else:
                    if value["unit"] == SAMPLE:
                        self._samples.inc()
                    yield Failed(value)
        finally:
            fileobj.close()
            self._members.inc(stats["members"])
            self._bytes.inc(stats["bytes"])

    def teardown(self) -> None:
        pass


def plan_tar_units(patterns: str | Sequence[str], target_bytes: int) -> tuple:
    """The work units of the tar files matching `patterns`: in path order, each file
    of at least `target_bytes` alone, smaller consecutive ones grouped up to it."""
    sizes = [(m.path, m.size_in_bytes) for m in matched_files(patterns)]
    size_of = dict(sizes)
    return tuple(WorkUnit(i, paths, sum(size_of[p] for p in paths))
                 for i, paths in enumerate(group_by_size(sizes, target_bytes)))


class ReadTarSamples(beam.PTransform):
    """Reads tar shards matching a pattern (or a list of them) into Samples.

        read = p | "ReadTar" >> ReadTarSamples("gs://bucket/shards/*.tar")
        read.samples      # PCollection of Sample dicts
        read[FAILURES]    # PCollection of dead letters (stage "read_tar")

    Patterns use Beam's filesystem syntax (`*`, `**`, `?`, `[...]`) and are
    matched when the job starts: one that matches nothing fails it (call
    `transforms.sources.file_match.match_files` first for the error before any work).
    Each file is read whole by one worker; the output is in no particular
    order.
    """

    def __init__(self, file_pattern: str | Sequence[str]):
        super().__init__()
        self._patterns = as_patterns(file_pattern)

    def expand(self, pbegin):
        # A unit per file: the samples go on to other transforms, not into shards.
        plan = functools.partial(plan_tar_units, self._patterns, 0)
        return pbegin | "ReadUnits" >> ReadUnits(Source(plan, TarReader()))
