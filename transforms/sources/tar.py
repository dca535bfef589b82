"""Tar shards to Samples: streamed, WebDataset-compatible, nothing lost.

    import apache_beam as beam
    from transforms.sources.tar import ReadTarSamples

    with beam.Pipeline() as p:
        read = p | "ReadTar" >> ReadTarSamples(["gs://bucket/shards/train-*.tar",
                                                "/data/extra/*.tar.gz"])
        samples = read.samples        # {"__key__", "__url__", "flac": b"...", ...}
        failures = read.failures      # dead letters (transforms/format/dead_letters.py)

Three layers, each usable on its own:

- `iter_tar(fileobj, url)` (transforms/sources/tar_stream.py): a pure
  generator (no Beam) over one archive; how members become Samples, and what
  becomes a dead letter, is written there.
- `TarReader`: reads a work unit (transforms/recipe/units.py) - one tar file, or
  consecutive small ones (`plan_tar_units`) - opening each path or URL through
  Beam's filesystems (local, gs://, ...) and turning the generator's events
  into Samples, dead letters and counters.
- `ReadTarSamples`: matches file patterns when the job starts, spreads the
  files over workers and reads them.

Counters (namespace `datagen`): `tar_files_read`, `tar_members_read`,
`tar_members_skipped`, `tar_bytes_read`, `samples_read`. Every sample is
counted once in `samples_read`, whether it is yielded or becomes a SAMPLE dead
letter, so samples_read == samples yielded + SAMPLE dead letters.
"""

from __future__ import annotations

import collections
import functools
from typing import Iterator, Sequence

import apache_beam as beam

from transforms.format.dead_letters import SAMPLE
from transforms.format.sample import is_text
from transforms.recipe.units import Failed, Source, UnitReader, WorkUnit, group_by_size
from transforms.runner.counters import counter
from transforms.sources.file_match import as_patterns, file_version, match_files, matched_files
from transforms.sources.input_files import open_input
from transforms.sources.tar_stream import Skipped, file_failed, iter_tar, tar_keys
from transforms.sources.units import ReadUnits

__all__ = ["ReadTarSamples", "TarReader", "plan_tar_units"]


class TarReader(UnitReader):
    """Reads tar units (transforms/recipe/units.py): each file of the unit streamed by
    `iter_tar` into Samples and dead letters.

    Configuration only until setup() makes its counters; each file is opened
    through Beam's filesystems as stored: `iter_tar` tells and checks its
    compression. `stored_from` > 0 leaves members of at least that many bytes
    in uncompressed archives stored (`leaving_stored`).
    """

    def __init__(self, stored_from: int = 0):
        self._stored_from = stored_from

    def leaving_stored(self, min_bytes: int) -> "TarReader":
        """This reader giving each member of at least `min_bytes` in an
        uncompressed archive as a StoredMember (transforms/sources/stored.py),
        for a caller that streams the fields it decodes."""
        return TarReader(min_bytes)

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

    def keys(self, unit: WorkUnit, fields: tuple = ()) -> Iterator[tuple]:
        """The unit's samples' keys by their members' headers (`tar_keys`): a
        local uncompressed tar is not read, only its headers; read whole when
        the keys are made with `fields` too."""
        if fields:
            yield from super().keys(unit, fields)
            return
        for path in unit.inputs:
            if not is_text(path):
                continue   # a dead letter when read
            try:
                fileobj = open_input(path)
            except Exception:  # noqa: BLE001 - the read's dead letter says what
                continue
            with fileobj:
                yield from ((key, place, ()) for key, place in tar_keys(fileobj, path))

    def _read_file(self, path: str) -> Iterator[dict | Failed]:
        if not is_text(path):
            yield file_failed(ValueError("the file's name is not UTF-8"), "file not read", path)
            return
        try:
            fileobj = open_input(path)
        except Exception as e:  # noqa: BLE001 - missing, forbidden, a FIFO: whatever the filesystem says
            yield file_failed(e, "cannot open file", path)
            return
        self._files.inc()
        stats = collections.Counter()
        try:
            for item in iter_tar(fileobj, path, stats=stats,
                                 reopen=functools.partial(open_input, path),
                                 stored_from=self._stored_from):
                if isinstance(item, Skipped):
                    self._skipped.inc()
                    continue
                if not isinstance(item, Failed) or item.record["unit"] == SAMPLE:
                    self._samples.inc()
                yield item
        finally:
            fileobj.close()
            self._members.inc(stats["members"])
            self._bytes.inc(stats["bytes"])


def plan_tar_units(patterns: str | Sequence[str], target_bytes: int) -> tuple:
    """The work units of the tar files matching `patterns`: in path order, each file
    of at least `target_bytes` alone, smaller consecutive ones grouped up to it."""
    matched = matched_files(patterns)
    sizes = [(m.path, m.size_in_bytes) for m in matched]
    size_of, version_of = dict(sizes), {m.path: file_version(m) for m in matched}
    return tuple(WorkUnit(i, paths, sum(size_of[p] for p in paths),
                          tuple((p, version_of[p]) for p in paths))
                 for i, paths in enumerate(group_by_size(sizes, target_bytes)))


class ReadTarSamples(beam.PTransform):
    """Reads tar shards matching a pattern (or a list of them) into Samples.

        read = p | "ReadTar" >> ReadTarSamples("gs://bucket/shards/*.tar")
        read.samples      # PCollection of Sample dicts
        read.failures     # PCollection of dead letters (stage "read_tar")

        p | WriteDataset(config, ReadTarSamples(patterns, target_bytes).source)

    Patterns use Beam's filesystem syntax (`*`, `**`, `?`, `[...]`) and are
    matched when the job starts: one that matches nothing fails it (`describe()`
    matches them now, for that error before any work).
    Each file is read whole by one worker, consecutive files smaller than
    `target_bytes` together (0: a unit per file); the output is in no
    particular order. `source` is the Source it reads, for WriteDataset.

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> from transforms.testing.corpus import write_corpus
    >>> _ = write_corpus("corpus", shards=2, samples_per_shard=3)
    >>> read = dg.ReadTarSamples("corpus/*.tar")
    >>> read.describe()["num_files"], sorted(next(read.first_samples()))
    (2, ['__key__', '__url__', 'bin', 'cls', 'json'])
    >>> with dg.make_pipeline() as p:
    ...     speakers = (p | read).samples | beam.Map(lambda s: s["__key__"][:5])
    ...     _ = assert_that(speakers | beam.Distinct(), equal_to(["spk00", "spk01", "spk02",
    ...                                                           "spk03", "spk04", "spk05"]))
    """

    def __init__(self, file_pattern: str | Sequence[str], target_bytes: int = 0):
        super().__init__()
        self._patterns = as_patterns(file_pattern)
        self.source = Source(functools.partial(plan_tar_units, self._patterns, target_bytes),
                             TarReader())

    def describe(self) -> dict:
        """What the manifest records of this input, matched now: ValueError naming
        a pattern that matches nothing."""
        matched = matched_files(self._patterns)
        return {"type": "tar", "input": ",".join(self._patterns), "num_files": len(matched),
                "input_bytes": sum(m.size_in_bytes for m in matched)}

    def first_samples(self) -> Iterator[dict]:
        """The readable samples of the matched files, in order: lazy, and unverified
        (they only show which fields there are, for --features auto)."""
        for path in match_files(self._patterns):
            with open_input(path) as f:
                yield from (item for item in iter_tar(f, path, verify=False,
                                                      reopen=functools.partial(open_input, path))
                            if isinstance(item, dict))

    def expand(self, pbegin):
        return pbegin | "ReadUnits" >> ReadUnits(self.source)
