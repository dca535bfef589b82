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
"""

from __future__ import annotations

import json
from typing import Iterable, NamedTuple, Sequence

import apache_beam as beam

from transforms.format.encoder import ExampleEncoder
from transforms.format.sample import KEY, URL
from transforms.recipe.examples import ExampleRecipe, convert_sample
from transforms.sources.units import WorkUnit, recipe_samples_of, streaming

__all__ = ["POLICIES", "DuplicateGroup", "DuplicatesToDrop", "FindDuplicates", "copies_to_drop",
           "dropped_message", "duplicates_lines", "duplicates_message",
           "duplicates_summary"]

POLICIES = ("off", "warn", "fail", "drop")


class DuplicateGroup(NamedTuple):
    """Samples of one content: the fingerprint kinds that matched, and each
    member's (key, split, url), sorted."""

    kinds: tuple
    members: tuple

    @property
    def splits(self) -> tuple:
        return tuple(sorted({split for _, split, _ in self.members}))


def _merged(fingerprint_groups: Iterable[tuple]) -> list[DuplicateGroup]:
    """(kind, [(key, split, url), ...]) per fingerprint -> one group per set of
    samples, its kinds merged (a copied file matches by bytes and by content)."""
    by_members: dict = {}
    for kind, members in fingerprint_groups:
        by_members.setdefault(tuple(sorted(set(members))), set()).add(kind)
    return sorted(DuplicateGroup(tuple(sorted(kinds)), members)
                  for members, kinds in by_members.items())


class FindDuplicates(beam.PTransform):
    """Unit receipts -> (kind, [(key, split, url), ...]) of every fingerprint
    two or more samples share."""

    def expand(self, receipts):
        return (
            receipts
            | "Fingerprints" >> beam.FlatMap(
                lambda r: (((kind, digest), (key, split, url))
                           for kind, digest, split, key, url in r.fingerprints))
            | "ByFingerprint" >> beam.GroupByKey()
            # ((kind, digest), [(key, split, url), ...])
            | "Shared" >> beam.Filter(lambda kv: len({key for key, _, _ in kv[1]}) > 1)
            | "Kind" >> beam.MapTuple(lambda fingerprint, members: (fingerprint[0],
                                                                    sorted(members))))


def _pair(splits: Sequence[str], order: Sequence[str]) -> str:
    rank = {name: i for i, name in enumerate(order)}
    first, second = sorted(splits, key=lambda s: (rank.get(s, len(rank)), s))[:2]
    return f"{first}/{second}"


def duplicates_summary(fingerprint_groups: Iterable[tuple], split_order: Sequence[str],
                       kinds: Sequence[str]) -> tuple[dict, list[DuplicateGroup]]:
    """({"kinds", "groups", "across_splits": {"train/test": n}, "within_split":
    {"train": n}}, the merged groups) from FindDuplicates' output."""
    groups = _merged(fingerprint_groups)
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
    return ({"kinds": list(kinds), "groups": len(groups),
             "across_splits": dict(sorted(across.items())),
             "within_split": dict(sorted(within.items()))}, groups)


def duplicates_lines(groups: Iterable[DuplicateGroup]) -> str:
    """duplicates.jsonl: a line per group of identical content."""
    return "".join(json.dumps({
        "kinds": list(group.kinds), "splits": list(group.splits),
        "members": [{"key": key, "split": split, "url": url}
                    for key, split, url in group.members]}, sort_keys=True) + "\n"
        for group in groups)


def duplicates_message(summary: dict, groups: Sequence[DuplicateGroup], where: str) -> str:
    """'3 recordings appear in more than one split (train/test 2, ...): first: a
    (train) = b (test); list in <where>'."""
    across = [group for group in groups if len(group.splits) > 1]
    pairs = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    first = " = ".join(f"{key} ({split})" for key, split, _ in across[0].members[:3])
    many = f"{len(across)} recordings appear" if len(across) > 1 else "1 recording appears"
    return f"{many} in more than one split ({pairs}): first: {first}; list in {where}"


def dropped_message(summary: dict, where: str) -> str:
    """'2 groups of identical content, one sample of each kept (across splits:
    train/test 1; within: test 1); list in <where>'."""
    across = ", ".join(f"{pair} {n}" for pair, n in summary["across_splits"].items())
    within = ", ".join(f"{split} {n}" for split, n in summary["within_split"].items())
    return (f"--duplicates drop: {summary['groups']} groups of identical content, one sample "
            f"of each kept, the rest filtered as 'duplicate' (across splits: {across or 'none'}; "
            f"within: {within or 'none'}); list in {where}")


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
    them; dead letters are the converter's to report."""

    def __init__(self, recipe: ExampleRecipe, reader):
        self._recipe = recipe
        # Long recordings streamed by the decoders, as the converter reads them.
        self._reader = streaming(reader)

    def setup(self):
        self._reader.setup(counting=False)  # the converter's read is the job's
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in self._recipe.spec])
        self._sample_fn, self._example_fn = self._recipe.load_functions()

    def process(self, unit: WorkUnit, strata=None):
        for place, sample in enumerate(recipe_samples_of(self._reader, unit, self._recipe)):
            outcome = _outcome(convert_sample(sample, self._recipe, self._encoder,
                                              self._sample_fn, self._example_fn, strata=strata))
            if outcome.examples:
                member = (sample[KEY], outcome.split, sample.get(URL, ""), (unit.index, place))
                for fingerprint in outcome.fingerprints:
                    yield fingerprint, member

    def teardown(self):
        self._reader.teardown()


def _outcome(examples):
    """Runs a convert_sample generator to its end; its outcome."""
    while True:
        try:
            next(examples)
        except StopIteration as done:
            return done.value


class DuplicatesToDrop(beam.PTransform):
    """Work units -> {"groups": what FindDuplicates gives, "dropped": (url, key) of
    each copy `--duplicates drop` drops}: every sample fingerprinted in a pass
    before the conversion (with `strata`, the stratified splits' side input)."""

    def __init__(self, recipe: ExampleRecipe, reader, strata=None):
        super().__init__()
        self._recipe = recipe
        self._reader = reader
        self._strata = strata

    def expand(self, units):
        side = {} if self._strata is None else {"strata": beam.pvalue.AsSingleton(self._strata)}
        order = self._recipe.split_plan.names
        shared = (
            units
            | "Fingerprint" >> beam.ParDo(_FingerprintFn(self._recipe, self._reader), **side)
            | "ByFingerprint" >> beam.GroupByKey()
            # ((kind, digest), [(key, split, url, order), ...])
            | "Shared" >> beam.Filter(lambda kv: len({m[0] for m in kv[1]}) > 1))
        return {
            "groups": shared | "Kind" >> beam.MapTuple(
                lambda fingerprint, members: (fingerprint[0],
                                              sorted({m[:3] for m in members}))),
            "dropped": (shared
                        | "Copies" >> beam.FlatMap(lambda kv: copies_to_drop(kv[1], order))
                        | "Distinct" >> beam.Distinct()),
        }
