"""The duplicate check: the same content under two keys, found on every run.

A group key keeps one speaker's samples in one split; it cannot see a clip
uploaded twice, a recording copied into two tar files, or a FLAC and a WAV of
one take. Each written sample's content fingerprints
(transforms/recipe/fingerprints.py) travel in its unit's receipt; here they
are grouped by fingerprint, distributed as the leakage check is (only
(fingerprint, split, key, url) records are shuffled, and only groups of two
or more keys go on), and the final step reports them by --duplicates:

- `warn` (the default): publishes, lists every group in duplicates.jsonl
  and warns of those across splits;
- `fail`: a group across splits fails the job before anything is published
  (the list is left beside the run's dead letters);
- `drop`: keeps one sample of each group, in the split that comes first in
  --splits (of those, the first in input order), and drops the others,
  filtered as `duplicate`. Which to drop must be known before anything is
  written, so `DuplicatesToDrop` fingerprints every sample in a pass of its
  own first: the media are decoded twice;
- `off`: no fingerprint is taken.

Copies within one split are counted and listed; only `drop` drops them.

With --near_duplicates S, samples whose audio is alike but not identical (a
lossy re-encode, another start) are found too: samples joined by pairs
whose `near` signatures (transforms/recipe/near_duplicates.py) are S or more
alike are a group (transforms/checks/near_groups.py: kind `near`, with the
similarity of its weakest pair), and the policy above applies to them as to
identical content: `drop` keeps one sample of each.
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Sequence

import apache_beam as beam

from transforms.checks.near_groups import NearGroup, NearGroups
from transforms.format.sample import KEY, URL
from transforms.recipe.driver import Converted, SampleDriver
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.near_duplicates import NEAR
from transforms.recipe.units import WorkUnit, streaming

__all__ = ["POLICIES", "DuplicateGroup", "DuplicatesToDrop", "FindDuplicates", "Shared",
           "SharedContent", "copies_to_drop", "dropped_message", "duplicates_lines",
           "duplicates_message", "duplicates_summary"]

POLICIES = ("off", "warn", "fail", "drop")


class Shared(NamedTuple):
    """Samples sharing one fingerprint (similarity 1.0), or a near group: its
    kind, and the members (tuples, each sample's key first)."""

    kind: str
    members: list
    similarity: float = 1.0

    @staticmethod
    def near(group: NearGroup) -> "Shared":
        return Shared(NEAR, list(group.members), group.similarity)


class DuplicateGroup(NamedTuple):
    """Samples of one content: the fingerprint kinds that matched, each
    member's (key, split, url), sorted, and for a `near` group the estimated
    similarity of its weakest pair (1.0 for identical content)."""

    kinds: tuple
    members: tuple
    similarity: float = 1.0

    @property
    def splits(self) -> tuple:
        return tuple(sorted({split for _, split, _ in self.members}))


def _merged(found: Iterable[Shared]) -> list[DuplicateGroup]:
    """Each shared fingerprint and near group, members (key, split, url) -> one
    group per set of identical samples, its kinds merged
    (a copied file matches by bytes and by content), and one per near group
    not within such a set."""
    by_members: dict = {}
    near = []
    for kind, members, similarity in found:
        members = tuple(sorted(set(members)))
        if kind == NEAR:
            near.append(DuplicateGroup((NEAR,), members, round(similarity, 3)))
        else:
            by_members.setdefault(members, set()).add(kind)
    identical = [DuplicateGroup(tuple(sorted(kinds)), members)
                 for members, kinds in by_members.items()]
    keys_of = [{key for key, _, _ in group.members} for group in identical]
    near = [group for group in near
            if not any({key for key, _, _ in group.members} <= keys for keys in keys_of)]
    return sorted(identical + near)


class SharedContent(beam.PTransform):
    """((kind, digest), member) of each sample's fingerprints, a member being a
    tuple (key, split, url, ...) -> a Shared of each digest two or more samples
    (keys, or one key in two urls) share and, with a `near_threshold`, of each near
    group. Only fingerprint-sized records are shuffled."""

    def __init__(self, near_threshold: float = 0.0):
        super().__init__()
        self._threshold = near_threshold

    def expand(self, fingerprints):
        identical = (
            fingerprints
            | "Exact" >> beam.Filter(lambda kv: kv[0][0] != NEAR)
            | "ByFingerprint" >> beam.GroupByKey()
            # ((kind, digest), [member, ...])
            # Two samples share it, told apart by key and url: one key may come from two tars.
            | "Shared" >> beam.Filter(lambda kv: len({(m[0], m[2]) for m in kv[1]}) > 1)
            | "Kind" >> beam.MapTuple(lambda fingerprint, members: Shared(fingerprint[0],
                                                                          sorted(members))))
        if not self._threshold:
            return identical
        near = (
            fingerprints
            | "Near" >> beam.Filter(lambda kv: kv[0][0] == NEAR)
            | "ByMember" >> beam.MapTuple(lambda fingerprint, member: (member, fingerprint[1]))
            | "NearGroups" >> NearGroups(self._threshold)
            | "NearKind" >> beam.Map(Shared.near))
        return (identical, near) | "Both" >> beam.Flatten()


class FindDuplicates(beam.PTransform):
    """Unit receipts -> a Shared, members (key, split, url), of every
    fingerprint two or more samples share, and of every near group alike to
    `near_threshold` or more (see SharedContent)."""

    def __init__(self, near_threshold: float = 0.0):
        super().__init__()
        self._threshold = near_threshold

    def expand(self, receipts):
        return (
            receipts
            | "Fingerprints" >> beam.FlatMap(
                lambda r: (((kind, digest), (key, split, url))
                           for kind, digest, split, key, url in r.fingerprints))
            | "SharedContent" >> SharedContent(self._threshold))


def _pair(splits: Sequence[str], order: Sequence[str]) -> str:
    rank = {name: i for i, name in enumerate(order)}
    first, second = sorted(splits, key=lambda s: (rank.get(s, len(rank)), s))[:2]
    return f"{first}/{second}"


def duplicates_summary(found: Iterable[tuple], split_order: Sequence[str],
                       kinds: Sequence[str], features: Sequence[str] = ()
                       ) -> tuple[dict, list[DuplicateGroup]]:
    """({"kinds", "features", "groups", "near": near groups, "across_splits":
    {"train/test": n}, "within_split": {"train": n}}, the merged groups) from
    FindDuplicates' output; `features` those whose media were fingerprinted
    (ExampleRecipe.fingerprinted_features: none for a spec of text and
    numbers), `near` only when `kinds` has it."""
    groups = _merged(found)
    across: dict = {}
    within: dict = {}
    for group in groups:
        splits = group.splits
        if len(splits) > 1:
            for i, a in enumerate(splits):
                for b in splits[i + 1:]:
                    pair = _pair((a, b), split_order)
                    across[pair] = across.get(pair, 0) + 1
        else:
            within[splits[0]] = within.get(splits[0], 0) + 1
    summary = {"kinds": list(kinds), "features": list(features), "groups": len(groups),
               "across_splits": dict(sorted(across.items())),
               "within_split": dict(sorted(within.items()))}
    if NEAR in kinds:
        summary["near"] = sum(group.kinds == (NEAR,) for group in groups)
    return summary, groups


def duplicates_lines(groups: Iterable[DuplicateGroup]) -> str:
    """duplicates.jsonl: a line per group of identical content, or near group
    (with its `similarity`)."""
    return "".join(json.dumps({
        "kinds": list(group.kinds), "splits": list(group.splits),
        "members": [{"key": key, "split": split, "url": url}
                    for key, split, url in group.members],
        **({"similarity": group.similarity} if group.kinds == (NEAR,) else {})},
        sort_keys=True) + "\n"
        for group in groups)


def duplicates_message(summary: dict, groups: Sequence[DuplicateGroup], where: str) -> str:
    """'3 recordings appear in more than one split (train/test 2, ...): first: a
    (train) = b (test); list in <where>', with how many of them are near."""
    across = [group for group in groups if len(group.splits) > 1]
    pairs = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    first = " = ".join(f"{key} ({split})" for key, split, _ in across[0].members[:3])
    if across[0].kinds == (NEAR,):
        first += f" (near, similarity {across[0].similarity})"
    many = f"{len(across)} recordings appear" if len(across) > 1 else "1 recording appears"
    near = sum(group.kinds == (NEAR,) for group in across)
    alike = f"; {near} of them near, not identical" if near else ""
    return f"{many} in more than one split ({pairs}{alike}): first: {first}; list in {where}"


def dropped_message(summary: dict, where: str) -> str:
    """'2 groups of identical content, one sample of each kept (across splits:
    train/test 1; within: test 1); list in <where>'."""
    across = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    within = ", ".join(f"{split} {n}" for split, n in summary["within_split"].items())
    near = f" ({summary['near']} of them near groups)" if summary.get("near") else ""
    return (f"{{duplicates}} drop: {summary['groups']} groups of identical content{near}, "
            f"one sample of each kept, the rest filtered as 'duplicate' (across splits: "
            f"{across or 'none'}; within: {within or 'none'}); list in {where}")


def copies_to_drop(members: Iterable[tuple], split_order: Sequence[str]) -> list[tuple]:
    """(url, key) of every copy `drop` drops from one fingerprint's samples,
    given as (key, split, url, order) with `order` their place in the input:
    all but the first by (split in --splits order, input order)."""
    rank = {name: i for i, name in enumerate(split_order)}
    ranked = sorted(set(members), key=lambda m: (rank.get(m[1], len(rank)), m[3]))
    kept_key = (ranked[0][2], ranked[0][0])
    return sorted({(url, key) for key, _, url, _ in ranked[1:]} - {kept_key})


class _FingerprintFn(beam.DoFn):
    """A work unit -> ((kind, digest), (key, split, url, (unit, place))) of each
    of its samples (or segments) that gives examples, as the converter builds
    them (the same driver); dead letters are the converter's to report."""

    def __init__(self, recipe: ExampleRecipe, reader):
        self._driver = SampleDriver(recipe)
        # Long recordings streamed by the decoders, as the converter reads them.
        self._reader = streaming(reader)

    def setup(self):
        self._reader.setup(counting=False)  # the converter's read is the job's
        self._driver.setup()

    def process(self, unit: WorkUnit, strata=None):
        work = self._driver.start(keys_seen=not self._reader.splittable)
        converted = (item for event in self._reader.read(unit)
                     for item in self._driver.take(event, work, strata)
                     if isinstance(item, Converted))
        for place, (sample, outcome, _) in enumerate(converted):
            if outcome.examples:
                member = (sample[KEY], outcome.split, sample.get(URL, ""), (unit.index, place))
                for fingerprint in outcome.fingerprints:
                    yield fingerprint, member

    def teardown(self):
        self._reader.teardown()


class DuplicatesToDrop(beam.PTransform):
    """Work units -> {"groups": what FindDuplicates gives, "dropped": (url, key) of
    each copy `--duplicates drop` drops}: every sample fingerprinted in a pass
    before the conversion (with `strata`, the stratified splits' side input)."""

    def __init__(self, recipe: ExampleRecipe, reader, strata=None, near_threshold: float = 0.0):
        super().__init__()
        self._recipe = recipe
        self._reader = reader
        self._strata = strata
        self._threshold = near_threshold

    def expand(self, units):
        side = {} if self._strata is None else {"strata": beam.pvalue.AsSingleton(self._strata)}
        order = self._recipe.split_plan.names
        shared = (
            units
            | "Fingerprint" >> beam.ParDo(_FingerprintFn(self._recipe, self._reader), **side)
            # Shared, members (key, split, url, order)
            | "SharedContent" >> SharedContent(self._threshold))
        return {
            "groups": shared | "Members" >> beam.Map(
                lambda group: group._replace(members=sorted({m[:3] for m in group.members}))),
            "dropped": (shared
                        | "Copies" >> beam.FlatMap(lambda group: copies_to_drop(group.members,
                                                                               order))
                        | "Distinct" >> beam.Distinct()),
        }
