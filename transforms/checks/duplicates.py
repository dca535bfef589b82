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
  filtered as `duplicate`; the list says of each member whether it was
  dropped. Which to drop must be known before anything is
  written, so `DuplicatesToDrop` fingerprints every sample in a pass of its
  own first: the media are decoded twice;
- `off`: no fingerprint is taken.

Copies within one split are counted and listed; only `drop` drops them.

With --near_duplicates S, copies that are not identical (a lossy re-encode,
another gain, another start, a speed 2% off) are found too: pairs whose
`near` signatures (transforms/media/near_duplicates.py) are S or more alike
are proposed, and those the frame-by-frame check confirms as one recording
join a group (transforms/checks/near_groups.py: kind `near`, with the
similarity of its weakest pair), to which the policy above applies as to
identical content: `drop` keeps one sample of each. A pair proposed but not
confirmed (two calls that open with one greeting, one sentence in two
voices) is listed as `similar`, with why, and nothing is done to it: a
fuzzy likeness may report, only a verified copy is dropped.
"""

from __future__ import annotations

import hashlib
import json
from typing import Iterable, Iterator, Mapping, NamedTuple, Sequence

import apache_beam as beam

from transforms.checks.near_groups import SIMILAR, NearGroup, NearGroups
from transforms.format.sample import KEY, URL
from transforms.media.near_duplicates import NEAR
from transforms.recipe.driver import Converted, SampleDriver
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.units import WorkUnit, streaming
from transforms.sources.units import NO_DECISIONS, Decisions, decided_of

__all__ = ["POLICIES", "SIMILAR", "DuplicateGroup", "DuplicateGroups", "DuplicatesToDrop",
           "GroupsOfCopies", "Shared", "SharedContent", "copies_to_drop", "dropped_message",
           "duplicates_lines", "duplicates_message", "duplicates_summary", "group_tallies",
           "similar_message"]

POLICIES = ("off", "warn", "fail", "drop")


class Shared(NamedTuple):
    """Samples sharing one fingerprint (similarity 1.0), a near group or a
    similar pair: its kind, the members (tuples, each sample's key first),
    and for a similar pair why it is not one recording."""

    kind: str
    members: list
    similarity: float = 1.0
    why: str = ""

    @staticmethod
    def near(group: NearGroup) -> "Shared":
        return Shared(group.kind, list(group.members), group.similarity, group.why)


class DuplicateGroup(NamedTuple):
    """Samples of one content: the fingerprint kinds that matched, each
    member's (key, split, url), sorted, and for a `near` group the estimated
    similarity of its weakest pair (1.0 for identical content); a `similar`
    pair (kinds (SIMILAR,)) says `why` it is not one recording. With
    --duplicates drop, `dropped` holds the (url, key) of its members dropped."""

    kinds: tuple
    members: tuple
    similarity: float = 1.0
    why: str = ""
    dropped: tuple | None = None

    @property
    def splits(self) -> tuple:
        return tuple(sorted({split for _, split, _ in self.members}))


def _group_id(group: DuplicateGroup) -> str:
    return hashlib.sha256(repr(group.members).encode("utf-8")).hexdigest()[:16]


def _keyed_by_member(group: DuplicateGroup) -> Iterator[tuple]:
    return ((key, _group_id(group)) for key in {key for key, _, _ in group.members})


def _candidate_within(_, joined) -> Iterator[tuple]:
    """(candidate group, the covering groups a key of its is in), per candidate
    group of the key."""
    covering = frozenset(joined["covering"])
    return ((candidate, covering) for candidate in set(joined["candidate"]))


class _NotWithin(beam.PTransform):
    """(candidate groups, covering groups) -> the candidates not within one
    covering group (every member of theirs in it). Distributed: a candidate
    meets the covering groups by a join on its members' keys, so no worker
    holds more than one group's members."""

    def expand(self, groups):
        candidates, covering = groups
        within = (
            {"covering": covering | "CoveringByKey" >> beam.FlatMap(_keyed_by_member),
             "candidate": candidates | "CandidateByKey" >> beam.FlatMap(_keyed_by_member)}
            | "ByKey" >> beam.CoGroupByKey()
            | "CandidateWithin" >> beam.FlatMapTuple(_candidate_within)
            | "ByCandidate" >> beam.GroupByKey()
            # (candidate, the covering groups each of its keys is in): within one of them?
            | "WithinOne" >> beam.FlatMapTuple(lambda group, of_keys: (
                [(group, True)] if frozenset.intersection(*list(of_keys)) else [])))
        return (
            {"group": candidates | "ById" >> beam.Map(lambda group: (_group_id(group), group)),
             "within": within}
            | "GroupAndWithin" >> beam.CoGroupByKey()
            | "NotWithin" >> beam.FlatMapTuple(lambda _, joined: (
                [] if joined["within"] else list(joined["group"]))))


class DuplicateGroups(beam.PTransform):
    """Shared, members (key, split, url) -> a DuplicateGroup per set of identical
    samples, its kinds merged (a copied file matches by bytes and by content),
    and, when `near` ones were looked for, one per near group not within such
    a set, and one per similar pair not within either."""

    def __init__(self, near: bool = True):
        super().__init__()
        self._near = near

    def expand(self, shared):
        identical = (
            shared
            | "Identical" >> beam.Filter(lambda found: found.kind not in (NEAR, SIMILAR))
            | "ByMembers" >> beam.Map(lambda found: (tuple(sorted(set(found.members))),
                                                     found.kind))
            | "KindsOfMembers" >> beam.GroupByKey()
            | "IdenticalGroup" >> beam.MapTuple(lambda members, kinds: DuplicateGroup(
                tuple(sorted(set(kinds))), members)))
        if not self._near:
            return identical
        near, similar = (
            shared
            | f"Only{kind.title()}" >> beam.Filter(lambda found, kind: found.kind == kind, kind)
            | f"{kind.title()}Group" >> beam.Map(lambda found: DuplicateGroup(
                (found.kind,), tuple(sorted(set(found.members))), round(found.similarity, 3),
                found.why))
            for kind in (NEAR, SIMILAR))
        near = (near, identical) | "NearNotWithin" >> _NotWithin()
        copies = (identical, near) | "Copies" >> beam.Flatten()
        similar = (similar, copies) | "SimilarNotWithin" >> _NotWithin()
        return (copies, similar) | "AllGroups" >> beam.Flatten()


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


class GroupsOfCopies(beam.PTransform):
    """((kind, digest), (key, split, url)) of each written sample's content
    fingerprints -> the DuplicateGroups of the fingerprints two or more
    samples share, and of the near groups alike to `near_threshold` or more
    (see SharedContent)."""

    def __init__(self, near_threshold: float = 0.0):
        super().__init__()
        self._threshold = near_threshold

    def expand(self, fingerprints):
        return (fingerprints
                | "SharedContent" >> SharedContent(self._threshold)
                | "Groups" >> DuplicateGroups(bool(self._threshold)))


def _pair(splits: Sequence[str], order: Sequence[str]) -> str:
    rank = {name: i for i, name in enumerate(order)}
    first, second = sorted(splits, key=lambda s: (rank.get(s, len(rank)), s))[:2]
    return f"{first}/{second}"


def group_tallies(group: DuplicateGroup, split_order: Sequence[str]) -> Iterator[tuple]:
    """((what counted,), 1) of one group, summed over the job for
    `duplicates_summary` and the message: groups, near groups, groups within
    one split (by split) and across splits (by pair of splits); similar
    pairs, and those across splits, apart."""
    if group.kinds == (SIMILAR,):
        yield ("similar",), 1
        if len(group.splits) > 1:
            yield ("similar_across",), 1
        return
    near = group.kinds == (NEAR,)
    yield ("groups",), 1
    if _written(group) > 1:
        yield ("written_twice",), 1
    if near:
        yield ("near",), 1
    splits = group.splits
    if len(splits) == 1:
        yield ("within", splits[0]), 1
        return
    yield ("across_groups",), 1
    if near:
        yield ("near_across",), 1
    for i, a in enumerate(splits):
        for b in splits[i + 1:]:
            yield ("across", _pair((a, b), split_order)), 1


def _written(group: DuplicateGroup) -> int:
    """How many of a group's members were written: all but those dropped."""
    dropped = group.dropped or ()
    return sum((url, key) not in dropped for key, _, url in group.members)


def duplicates_summary(tallies: Mapping[tuple, int], kinds: Sequence[str],
                       features: Sequence[str] = ()) -> dict:
    """{"kinds", "features", "groups", "near": near groups, "similar": similar
    pairs, "across_splits": {"train/test": n}, "within_split": {"train": n}}
    from the groups' summed `group_tallies`; `features` those whose media
    were fingerprinted (ExampleRecipe.fingerprinted_features: none for a spec
    of text and numbers), `near` and `similar` only when `kinds` has near."""
    def by(what):
        return dict(sorted((name[1], n) for name, n in tallies.items() if name[0] == what))

    summary = {"kinds": list(kinds), "features": list(features),
               "groups": tallies.get(("groups",), 0),
               "across_splits": by("across"), "within_split": by("within")}
    if NEAR in kinds:
        summary["near"] = tallies.get(("near",), 0)
        summary["similar"] = tallies.get(("similar",), 0)
    return summary


def _member(key: str, split: str, url: str, dropped: tuple | None) -> dict:
    member = {"key": key, "split": split, "url": url}
    if dropped is not None:
        member["dropped"] = (url, key) in dropped
    return member


def duplicates_lines(groups: Iterable[DuplicateGroup]) -> str:
    """duplicates.jsonl: a line per group of identical content, near group
    (with its `similarity`) or similar pair (with it and `why` it is not one
    recording); with drop, each member says whether it was dropped."""
    return "".join(json.dumps({
        "kinds": list(group.kinds), "splits": list(group.splits),
        "members": [_member(*member, group.dropped) for member in group.members],
        **({"similarity": group.similarity} if group.kinds in ((NEAR,), (SIMILAR,)) else {}),
        **({"why": group.why} if group.why else {})},
        sort_keys=True) + "\n"
        for group in groups)


def duplicates_message(summary: dict, tallies: Mapping[tuple, int], first: DuplicateGroup,
                       where: str) -> str:
    """'3 recordings appear in more than one split (train/test 2, ...): first: a
    (train) = b (test); list in <where>', with how many of them are near;
    `first` the first group across splits."""
    pairs = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    shown = " = ".join(f"{key} ({split})" for key, split, *_ in first.members[:3])
    if first.kinds == (NEAR,):
        shown += f" (a near copy, similarity {first.similarity})"
    across = tallies.get(("across_groups",), 0)
    many = f"{across} recordings appear" if across > 1 else "1 recording appears"
    near = tallies.get(("near_across",), 0)
    alike = (f"; {near} of them as near copies, confirmed frame by frame, not identical"
             if near else "")
    return f"{many} in more than one split ({pairs}{alike}): first: {shown}; list in {where}"


def similar_message(summary: dict, where: str) -> str:
    """'3 pairs of recordings are alike but not one recording: listed as
    similar in <where>, none dropped' ('' when there are none)."""
    similar = summary.get("similar", 0)
    if not similar:
        return ""
    pairs = f"{similar} pairs of recordings are" if similar > 1 else "1 pair of recordings is"
    return (f"{pairs} alike but not one recording (their landmarks match, their frames do "
            f"not: a shared greeting, one sentence in two voices): listed as similar in "
            f"{where}, none dropped")


def dropped_message(summary: dict, where: str) -> str:
    """'{duplicates} drop: 2 groups of copies (1 of them near: confirmed frame
    by frame), one sample of each kept (across splits: train/test 1; within:
    test 1); list in <where>'."""
    across = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    within = ", ".join(f"{split} {n}" for split, n in summary["within_split"].items())
    near = (f" ({summary['near']} of them near copies: re-encoded, at another gain or start, "
            "confirmed frame by frame)" if summary.get("near") else "")
    return (f"{{duplicates}} drop: {summary['groups']} groups of copies{near}, "
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
        self._decided = ()

    def process(self, unit: WorkUnit, **decided):
        self._decided = decided_of(self._decided, **decided)
        work = self._driver.start()
        converted = (item for event in self._reader.read(unit)
                     for item in self._driver.take(event, work, self._decided[1])
                     if isinstance(item, Converted))
        for place, (sample, outcome, _) in enumerate(converted):
            if outcome.examples:
                member = (sample[KEY], outcome.split, sample.get(URL, ""), (unit.index, place))
                for fingerprint in outcome.learned:
                    yield fingerprint, member

    def teardown(self):
        self._reader.teardown()


class DuplicatesToDrop(beam.PTransform):
    """Work units -> {"groups": what GroupsOfCopies gives, "dropped": (url, key) of
    each copy `--duplicates drop` drops}: every sample fingerprinted in a pass
    before the conversion, by what the job decided before it (`decisions`:
    the stratified splits, the keys given more than once)."""

    def __init__(self, recipe: ExampleRecipe, reader, decisions: Decisions = NO_DECISIONS,
                 near_threshold: float = 0.0):
        super().__init__()
        self._recipe = recipe
        self._reader = reader
        self._decisions = decisions
        self._threshold = near_threshold

    def expand(self, units):
        order = self._recipe.split_plan.names
        shared = (
            units
            | "Fingerprint" >> beam.ParDo(_FingerprintFn(self._recipe, self._reader),
                                          **self._decisions.sides())
            # Shared, members (key, split, url, order)
            | "SharedContent" >> SharedContent(self._threshold))
        dropped = (shared
                   | "NotSimilar" >> beam.Filter(lambda found: found.kind != SIMILAR)
                   | "Copies" >> beam.FlatMap(lambda group: copies_to_drop(group.members, order))
                   | "Distinct" >> beam.Distinct())
        return {
            "groups": (shared
                       | "Members" >> beam.Map(lambda found: found._replace(
                           members=sorted({m[:3] for m in found.members})))
                       | "Groups" >> DuplicateGroups(bool(self._threshold))
                       | "SayDropped" >> beam.Map(
                           lambda group, dropped: group._replace(dropped=tuple(sorted(
                               (url, key) for key, _, url in group.members
                               if (url, key) in dropped))),
                           beam.pvalue.AsDict(dropped | "Dropped" >> beam.Map(
                               lambda copy: (copy, True))))),
            "dropped": dropped,
        }
