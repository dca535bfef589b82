"""A dataset's files and totals against its manifest (no shard is opened here).

`layout_problems` takes the manifest and the paths found under the output
and reports (each line naming the file it is about): a listed shard or
index that is missing; a file the manifest
does not account for (a stray shard, a leftover of another run, a file
someone added); a run's temporary folder (a run in progress, or one that was
killed); per split, totals that are not the sum of its shards, or not the
examples the accounting says were written; and a dead-letter file whose
lines are not the manifest's count.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from transforms.format import manifest, tfds_metadata
from transforms.format.manifest import TEMP_PREFIX, DatasetInfo
from transforms.format.shard_format import ShardFormat
from transforms.tft.preprocessing import TRANSFORM_DIRS

__all__ = ["layout_problems", "manifest_problems"]

_METADATA = {manifest.MANIFEST, manifest.SCHEMA, tfds_metadata.TFDS_INFO,
             tfds_metadata.TFDS_FEATURES}


# What each part of a manifest must hold for the dataset to be verified against it.
_TOP = {"format_version": int, "features": list, "compression": str, "splits": dict,
        "accounting": dict, "failures": dict}
_SPLIT = {"num_examples": int, "num_bytes": int, "shards": list}
_SHARD = {"file": str, "num_examples": int, "num_bytes": int, "crc32c": str}
_INDEX = {"file": str, "crc32c": str}


def _lacking(entry: Any, fields: Mapping[str, type], what: str) -> list:
    if not isinstance(entry, dict):
        return [f"{what} is not an object"]
    return [f"{what} has no {name} ({kind.__name__})" for name, kind in fields.items()
            if not isinstance(entry.get(name), kind) or isinstance(entry.get(name), bool)]


def manifest_problems(document: Any) -> list:
    """What a parsed manifest lacks to verify the dataset against: the fields
    every writer of this format records, each shard's CRC32C among them (a
    checksum that was written is verified, so one taken away is a problem)."""
    problems = _lacking(document, _TOP, "the manifest")
    if problems:
        return [f"{manifest.MANIFEST}: {p}" for p in problems]
    for name, split in document["splits"].items():
        found = _lacking(split, _SPLIT, f"split {name}")
        for i, shard in enumerate(split.get("shards", []) if not found else []):
            what = shard.get("file", f"shard {i}") if isinstance(shard, dict) else f"shard {i}"
            found += _lacking(shard, _SHARD, f"split {name}: {what}")
            if isinstance(shard, dict) and "index" in shard:
                found += _lacking(shard["index"], _INDEX, f"split {name}: {what}'s index")
        problems += found
    if not isinstance(document["failures"].get("count"), int):
        problems.append("failures has no count (int)")
    try:
        ShardFormat(document.get("file_format", "tfrecord"), document["compression"])
    except ValueError as e:
        problems.append(str(e))
    return [f"{manifest.MANIFEST}: {p}" for p in problems]


def _accounted(info: DatasetInfo, path: str) -> bool:
    """Whether `path` (relative) is a file the manifest accounts for, shards aside."""
    if path in _METADATA:
        return True
    if path == manifest.FAILURES_FILE:
        return bool(info.document["failures"]["count"])
    if path == info.document.get("ledger"):
        return True
    if path == manifest.DUPLICATES_FILE:
        return bool(info.document.get("duplicates", {}).get("file"))
    if path in {tfds_metadata.labels_file(feature) for feature in info.class_names}:
        return True
    return bool(info.transform) and path.split("/", 1)[0] in TRANSFORM_DIRS


def layout_problems(info: DatasetInfo, found: Iterable[str],
                    failure_lines: int | None = None) -> list:
    """What is wrong with the files `found` (paths relative to the dataset) and
    the manifest's totals; `failure_lines` is the dead-letter file's line count
    (None: no such file)."""
    found = set(found)
    listed = info.stored_files()
    problems = [f"{path}: listed in the manifest, but missing" for path in sorted(listed - found)]
    temp_folders = sorted({p.split("/", 1)[0] for p in found if p.startswith(TEMP_PREFIX)})
    problems += [f"{folder}/: a run's temporary folder: a job is writing here, or one was killed"
                 for folder in temp_folders]
    problems += [f"{path}: not in the manifest" for path in sorted(found - listed)
                 if not path.startswith(TEMP_PREFIX) and not _accounted(info, path)]
    written = info.document["accounting"].get("examples_per_split", {})
    for name, split in info.splits.items():
        shards = split["shards"]
        totals = f"{manifest.MANIFEST}: split {name}"
        if shards and sum(s["num_examples"] for s in shards) != split["num_examples"]:
            problems.append(f"{totals}: its shards hold {sum(s['num_examples'] for s in shards)}"
                            f" examples, its total says {split['num_examples']}")
        if shards and sum(s["num_bytes"] for s in shards) != split["num_bytes"]:
            problems.append(f"{totals}: its shards hold {sum(s['num_bytes'] for s in shards)}"
                            f" bytes, its total says {split['num_bytes']}")
        if written.get(name, 0) != split["num_examples"]:
            problems.append(f"{totals}: {split['num_examples']} examples, the accounting "
                            f"says {written.get(name, 0)} were written")
    count = info.document["failures"]["count"]
    if count and failure_lines is None:
        problems.append(f"{manifest.FAILURES_FILE}: listed in the manifest, but missing")
    elif count and failure_lines != count:
        problems.append(f"{manifest.FAILURES_FILE}: {failure_lines} dead letters, the "
                        f"manifest counts {count}")
    return problems
