"""The duplicate check's list (duplicates.jsonl, transforms/checks/duplicates.py)
against the manifest's counts and against the shards.

`duplicates_problems` recounts the list's groups across and within splits;
`sought_keys` names the recordings the shards' check looks for (by their
examples' `source_key`), and `written_problems` checks what it found: with
--duplicates warn or fail every listed sample is in its split's shards;
with drop one sample of each group of identical content is, and at most one
of a near group.
"""

from __future__ import annotations

import json
from typing import Iterable

from transforms.format import manifest
from transforms.format.manifest import DatasetInfo
from transforms.format.segments import recording_of
from transforms.verify.shards import SOURCE_KEY

__all__ = ["duplicates_problems", "sought_keys", "written_problems"]


def _groups(text: str) -> list:
    return [json.loads(line) for line in text.splitlines()]


def duplicates_problems(info: DatasetInfo, text: str | None) -> list:
    """What is wrong with duplicates.jsonl (`text`, None: no such file) against
    the manifest's duplicates section: its groups, their splits, the counts."""
    section = info.document.get("duplicates")
    if not section or not section.get("file"):
        return []
    where = manifest.DUPLICATES_FILE
    if text is None:
        return []  # listed as missing by the layout check
    try:
        groups = _groups(text)
    except ValueError as e:
        return [f"{where}: not JSON lines: {e}"]
    problems = []
    if len(groups) != section["groups"]:
        problems.append(f"{where}: {len(groups)} groups, the manifest says {section['groups']}")
    across: dict = {}
    within: dict = {}
    names = list(info.splits)
    for number, group in enumerate(groups, 1):
        splits = sorted({m["split"] for m in group["members"]}, key=names.index)
        if any(s not in names for s in splits) or len({m["key"] for m in group["members"]}) < 2:
            problems.append(f"{where}: line {number} is not two samples of known splits")
            continue
        if len(splits) == 1:
            within[splits[0]] = within.get(splits[0], 0) + 1
        for i, first in enumerate(splits):
            for second in splits[i + 1:]:
                across[f"{first}/{second}"] = across.get(f"{first}/{second}", 0) + 1
    if (across, within) != (section["across_splits"], section["within_split"]):
        problems.append(f"{where}: its groups count {across} across splits and {within} "
                        f"within, the manifest {section['across_splits']} and "
                        f"{section['within_split']}")
    return problems


def _recording(info: DatasetInfo, key: str) -> str:
    """The source key of a sample's examples: a segment's is its recording's."""
    return recording_of(key) if _segments(info) else key


def _segments(info: DatasetInfo) -> bool:
    """Whether its samples are segments of recordings (any cut inside them)."""
    segments = info.recipe.get("segments", {})
    return bool(segments.get("field") or segments.get("columns"))


def sought_keys(info: DatasetInfo, text: str | None) -> frozenset:
    """The source keys of the listed samples, when the examples carry theirs."""
    if not text or SOURCE_KEY not in info.spec.names:
        return frozenset()
    try:
        groups = _groups(text)
    except ValueError:
        return frozenset()  # reported by duplicates_problems
    return frozenset(_recording(info, m["key"]) for group in groups for m in group["members"])


def written_problems(info: DatasetInfo, text: str | None, found: Iterable[tuple]) -> list:
    """What is wrong with the listed samples' examples, given the (split,
    source key) pairs the shards hold (see the module docstring). A segment's
    recording has other segments, so only its presence is checked."""
    if not sought_keys(info, text):
        return []
    found = set(found)
    dropped = info.recipe.get("writing", {}).get("duplicates") == "drop"
    where, problems = manifest.DUPLICATES_FILE, []
    for number, group in enumerate(_groups(text), 1):
        members = [(m["split"], _recording(info, m["key"])) for m in group["members"]]
        written = [member for member in members if member in found]
        if not dropped:
            problems += [f"{where}: line {number}: {key} has no examples in {split}"
                         for split, key in members if (split, key) not in found]
        elif not _segments(info):
            near = group["kinds"] == ["near"]
            if len(written) > 1 or (not near and not written):
                problems.append(f"{where}: line {number}: {len(written)} of its samples have "
                                f"examples; --duplicates drop keeps "
                                f"{'at most one' if near else 'one'}")
    return problems
