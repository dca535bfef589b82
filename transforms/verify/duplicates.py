"""The duplicate check's list (duplicates.jsonl, transforms/checks/duplicates.py)
against the manifest's counts and against the shards.

`duplicates_problems` recounts the list's groups across and within splits,
and its similar pairs; `sought_keys` names the recordings the shards' check
looks for (by their examples' `source_key`), and `written_problems` checks
what it found: every listed sample the list says was kept is in its split's
shards, and with --duplicates drop none it says was dropped (a list from
before it said so: one sample of each group of identical content, at most
one of a near group); a similar pair's samples are all kept.
"""

from __future__ import annotations

import json
from typing import Iterable

from transforms.checks.near_groups import SIMILAR
from transforms.format import manifest
from transforms.format.manifest import DatasetInfo
from transforms.format.segments import recording_of
from transforms.media.near_duplicates import NEAR
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
    similar = [group for group in groups if group["kinds"] == [SIMILAR]]
    copies = len(groups) - len(similar)
    if copies != section["groups"]:
        problems.append(f"{where}: {copies} groups, the manifest says {section['groups']}")
    if len(similar) != section.get("similar", 0):
        problems.append(f"{where}: {len(similar)} similar pairs, the manifest says "
                        f"{section.get('similar', 0)}")
    across: dict = {}
    within: dict = {}
    names = list(info.splits)
    for number, group in enumerate(groups, 1):
        found = {m["split"] for m in group["members"]}
        if found - set(names) or len({m["key"] for m in group["members"]}) < 2:
            problems.append(f"{where}: line {number} is not two samples of known splits")
            continue
        if group["kinds"] == [SIMILAR]:
            continue
        splits = sorted(found, key=names.index)
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
        if dropped and group["kinds"] != [SIMILAR] and not all(
                "dropped" in m for m in group["members"]):
            problems += _dropped_before_problems(info, group, found, f"{where}: line {number}")
            continue
        for member in group["members"]:
            split, key = member["split"], _recording(info, member["key"])
            written = (split, key) in found
            if member.get("dropped"):
                # A segment's recording has other segments: only presence is checked.
                if written and not _segments(info):
                    problems.append(f"{where}: line {number}: {key} has examples in {split}, "
                                    "though it was dropped")
            elif not written:
                problems.append(f"{where}: line {number}: {key} has no examples in {split}")
    return problems


def _dropped_before_problems(info: DatasetInfo, group: dict, found: set, where: str) -> list:
    """A group a list from before members said whether they were dropped
    holds: one sample of identical content written, at most one of a near
    group."""
    if _segments(info):
        return []
    members = [(m["split"], _recording(info, m["key"])) for m in group["members"]]
    written = [member for member in members if member in found]
    near = group["kinds"] == [NEAR]
    if len(written) > 1 or (not near and not written):
        return [f"{where}: {len(written)} of its samples have examples; --duplicates drop "
                f"keeps {'at most one' if near else 'one'}"]
    return []
