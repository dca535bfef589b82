"""A dataset's files and totals against its manifest (no shard is opened here).

`layout_problems` takes the manifest and the paths found under the output
and reports: a listed shard or index that is missing; a file the manifest
does not account for (a stray shard, a leftover of another run, a file
someone added); a run's temporary folder (a run in progress, or one that was
killed); per split, totals that are not the sum of its shards, or not the
examples the accounting says were written; and a dead-letter file whose
lines are not the manifest's count.
"""

from __future__ import annotations

from typing import Iterable

from transforms.dataset.ledger import TEMP_PREFIX
from transforms.format import manifest, tfds_metadata
from transforms.format.manifest import DatasetInfo
from transforms.tft.preprocessing import TRANSFORM_DIRS

__all__ = ["layout_problems"]

_METADATA = {manifest.MANIFEST, manifest.SCHEMA, tfds_metadata.TFDS_INFO,
             tfds_metadata.TFDS_FEATURES}


def _accounted(info: DatasetInfo, path: str) -> bool:
    """Whether `path` (relative) is a file the manifest accounts for, shards aside."""
    if path in _METADATA:
        return True
    if path == manifest.FAILURES_FILE:
        return bool(info.document["failures"]["count"])
    if path == info.document.get("ledger"):
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
        if shards and sum(s["num_examples"] for s in shards) != split["num_examples"]:
            problems.append(f"split {name}: its shards hold {sum(s['num_examples'] for s in shards)}"
                            f" examples, its total says {split['num_examples']}")
        if shards and sum(s["num_bytes"] for s in shards) != split["num_bytes"]:
            problems.append(f"split {name}: its shards hold {sum(s['num_bytes'] for s in shards)}"
                            f" bytes, its total says {split['num_bytes']}")
        if written.get(name, 0) != split["num_examples"]:
            problems.append(f"split {name}: {split['num_examples']} examples, the accounting "
                            f"says {written.get(name, 0)} were written")
    count = info.document["failures"]["count"]
    if count and failure_lines is None:
        problems.append(f"{manifest.FAILURES_FILE}: listed in the manifest, but missing")
    elif count and failure_lines != count:
        problems.append(f"{manifest.FAILURES_FILE}: {failure_lines} dead letters, the "
                        f"manifest counts {count}")
    return problems
