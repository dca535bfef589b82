"""Shards from the temporary folder into place: named in order, moved idempotently.

Whichever writer made them (transforms/writer/convert.py where examples are built, or
transforms/writer/global_shards.py for the global layout), the shards of a split are
named `data-NNNNN-of-MMMMM` by their `order`, so names depend on the input
alone, never on which worker finished first; a shard's record index goes with
it (`<file>.idx`). The moves are batches any worker
can do (`move_shards`), so a commit of many thousand shards on gs://, a copy
and a delete each, runs in parallel; each batch may be retried.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from transforms.format.shard_format import ShardFormat
from transforms.writer.shard_files import ShardRecord, shard_name
from transforms.writer.tfrecord import INDEX_SUFFIX

__all__ = ["NamedShard", "name_shards", "move_shards", "remove_stale_shards", "split_entries"]

# What a split folder's data files are called (shard_name).
_DATA_GLOB = "data-*"


class NamedShard(NamedTuple):
    """A written shard and the file it becomes, relative to the output directory."""

    shard: ShardRecord
    file: str

    @property
    def index_file(self) -> str | None:
        """Its record index's file, if it has one."""
        return self.file + INDEX_SUFFIX if self.shard.index_crc32c else None

    def moves(self, output_dir: str) -> list[tuple[str, str]]:
        """(temp, final) paths of its data file and index."""
        pairs = [(self.shard.temp, FileSystems.join(output_dir, self.file))]
        if self.index_file:
            pairs.append((self.shard.temp + INDEX_SUFFIX,
                          FileSystems.join(output_dir, self.index_file)))
        return pairs

    def kept_files(self) -> set:
        """Its files, relative to the output directory."""
        return {self.file, self.index_file} - {None}


def name_shards(shards: Iterable[ShardRecord], shard_format: ShardFormat) -> list[NamedShard]:
    """Every shard with its final name, per split in `order`; sorted by split and name."""
    by_split: dict = {}
    for shard in shards:
        by_split.setdefault(shard.split, []).append(shard)
    named = []
    for split in sorted(by_split):
        ordered = sorted(by_split[split], key=lambda s: s.order)
        named += [NamedShard(s, shard_name(split, i, len(ordered), shard_format))
                  for i, s in enumerate(ordered)]
    return named


def move_shards(moves: Sequence[tuple[str, str]]) -> None:
    """Renames each (temp, final) pair; safe to run again after failing partway.

    A pair whose temp file is gone and whose final file is there was moved by
    an earlier attempt; one with neither is lost, an IOError.
    """
    try:
        FileSystems.rename([temp for temp, _ in moves], [final for _, final in moves])
    except BeamIOError as e:
        failed = e.exception_details or {}
        lost = [final for (temp, final) in failed if not FileSystems.exists(final)]
        if lost or not failed:
            raise IOError(f"shards {lost or [f for _, f in moves]} are neither in the temporary "
                          f"folder nor in place: {e}") from e


def remove_stale_shards(output_dir: str, kept: set) -> None:
    """Deletes the data files and indexes in the output's folders that are not in `kept`
    (files relative to `output_dir`): an earlier run's, in a split this run
    has too or in one it has not (a run with other --splits), so the output
    holds exactly what the manifest lists."""
    pattern = FileSystems.join(output_dir, "*", _DATA_GLOB)
    stale = [m.path for m in FileSystems.match([pattern])[0].metadata_list
             if "/".join(m.path.rsplit("/", 2)[-2:]) not in kept]
    if stale:
        FileSystems.delete(stale)


def split_entries(named: Iterable[NamedShard]) -> dict:
    """The manifest's per-split entries: totals, and each shard's file, counts,
    checksum and index."""
    result: dict = {}
    for named_shard in named:
        shard = named_shard.shard
        entry = result.setdefault(shard.split, {"num_examples": 0, "num_bytes": 0, "shards": []})
        entry["num_examples"] += shard.num_examples
        entry["num_bytes"] += shard.num_bytes
        entry["shards"].append({
            "file": named_shard.file, "num_examples": shard.num_examples,
            "num_bytes": shard.num_bytes, "crc32c": shard.crc32c,
            **({"index": {"file": named_shard.index_file, "crc32c": shard.index_crc32c}}
               if named_shard.index_file else {})})
    return result
