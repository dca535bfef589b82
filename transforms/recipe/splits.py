"""Deterministic splits: a split is a function of a group key, never of `random`.

Beam-free. The group key is a field's value (`__key__`, `cls`, `json.speaker`)
or the first capture of a regex over it. A SplitPlan assigns a sample's split
in one of three ways:

- by ratio (the default): the group key's stable hash, as a position in
  [0, 1), picks the split by the `--splits` ratios;
- by a split field (`--split_column`): the sample names its split, matched to
  the `--splits` names case-insensitively, `validation`/`val`/`dev` answering
  to a declared `eval` (and the reverse), `training` to `train`, `testing` to
  `test`; the ratios are then unused;
- stratified (`--stratify_by LABEL`): within each label, the groups sorted by
  hash are cut into consecutive runs holding the ratios of the label's samples
  (`stratum_cuts`); each cut falls on the group boundary nearest its target,
  so every split's count of a label is within one group's size of its share.
  The cuts are hash thresholds, computed from all groups once per job
  (transforms/checks/stratify.py) and looked up per sample (`Strata`). A group whose
  samples carry several labels is placed by its most frequent label.

Every example of one group lands in one split on every run and runner (an
explicit split field can break that; the leakage check, transforms/checks/leakage.py,
then fails the job).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from typing import Any, Iterable, Mapping

from transforms.format.arguments import ArgumentError, ArgumentTypeError, check_number
from transforms.format.sample import FieldReader, field_text
from transforms.format.spec import Feature, FeatureSpec
from transforms.format.stable_hash import stable_hash64

__all__ = ["DEFAULT_SPLITS", "SplitPlan", "Strata", "group_hash", "group_stratum", "parse_splits",
           "parse_split_by", "split_balance", "stratum_cuts"]

# The splits a dataset gets when none are given (--splits).
DEFAULT_SPLITS = "train=0.8,eval=0.1,test=0.1"

# Split names a split field may use for a declared split of another name.
_ALIASES = (frozenset({"eval", "validation", "valid", "val", "dev"}),
            frozenset({"train", "training"}),
            frozenset({"test", "testing"}))


# A split may be off its ratio by this fraction of it (and by one point) before
# the summary warns: beyond what cutting a few dozen groups by hash gives.
_BALANCE_MARGIN = 0.5


def group_hash(group_key: str) -> int:
    """The 64-bit hash that places a group (by ratio, or within its label's strata)."""
    return stable_hash64(group_key, b"datagen-split")


def _splits_text(splits: str | Mapping[str, float]) -> str:
    """'train=0.8,test=0.2' from itself or {'train': 0.8, 'test': 0.2}, whose
    ratios are numbers (text is refused, as for every number a parameter takes)."""
    if isinstance(splits, Mapping):
        for name, ratio in splits.items():
            check_number(f"splits[{name!r}]", ratio)
        return ",".join(f"{name}={ratio}" for name, ratio in splits.items())
    if not isinstance(splits, str):
        raise ArgumentTypeError("splits", "must be 'train=0.8,test=0.2' or {'train': 0.8, "
                                          f"'test': 0.2}}, got {splits!r}")
    return splits


def parse_splits(given: str | Mapping[str, float]) -> tuple:
    """'train=0.8,eval=0.1,test=0.1' (or {'train': 0.8, ...}) -> (('train',
    0.8), ('eval', 0.1), ('test', 0.1)).

    Ratios must be positive and sum to 1; names unique and path-safe.
    """
    text = _splits_text(given)
    splits = []
    for term in (t.strip() for t in text.split(",")):
        name, sep, ratio = term.partition("=")
        name = name.strip()
        try:
            value = float(ratio)
        except ValueError:
            value = math.nan
        if not sep or not re.fullmatch(r"[A-Za-z0-9_-]+", name) or not value > 0:
            raise ArgumentError("splits", f"term {term!r} is not name=ratio with a positive "
                                          "ratio, e.g. 'train=0.8,eval=0.1,test=0.1'")
        splits.append((name, value))
    names = [n for n, _ in splits]
    if len(set(names)) != len(names):
        raise ArgumentError("splits", f"{text!r} names a split twice")
    total = sum(r for _, r in splits)
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise ArgumentError("splits", f"{text!r}: ratios sum to {total:g}, not 1")
    return tuple(splits)


def parse_split_by(text: str) -> tuple:
    """'FIELD[:REGEX]' -> (field, compiled-regex pattern or None).

    The regex must have a capture group; its first capture is the group key.
    """
    if not isinstance(text, str):
        raise ArgumentTypeError("split_by", f"must be a field name, FIELD[:REGEX], got {text!r}")
    field, sep, pattern = text.partition(":")
    if not field:
        raise ArgumentError("split_by", f"{text!r} names no field")
    if not sep:
        return field, None
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise ArgumentError("split_by", f"{text!r}: bad regex: {e}") from None
    if regex.groups < 1:
        raise ArgumentError("split_by", f"{text!r}: the regex needs a capture group, "
                         f"e.g. '__key__:^([^_]+)'")
    return field, pattern


def stratum_cuts(groups: Iterable[tuple], ratios: Iterable[float]) -> tuple:
    """One label's groups, (hash, size) pairs -> the hash thresholds between its splits.

    Groups in hash order are cut into consecutive runs, run j holding about
    ratio j of the label's total size: each cut is the group boundary nearest
    its cumulative target (the lower one on a tie), so it misses by at most half
    a group and every run by at most one group's size. A threshold is the hash
    of the first group past the cut (2**64 when none is); a group's split is the
    number of thresholds at or below its hash. Groups sharing a hash are one group.
    """
    sizes: dict = {}
    for h, size in groups:
        sizes[h] = sizes.get(h, 0) + size
    hashes = sorted(sizes)
    bounds = [0]  # bounds[i]: total size of the groups before hashes[i]
    for h in hashes:
        bounds.append(bounds[-1] + sizes[h])
    cuts, target, start = [], 0.0, 0
    for ratio in list(ratios)[:-1]:
        target += ratio * bounds[-1]
        i = bisect.bisect_left(bounds, target, lo=start)  # bounds[i - 1] < target <= bounds[i]
        if i > start and (i == len(bounds) or target - bounds[i - 1] <= bounds[i] - target):
            i -= 1
        cuts.append(hashes[i] if i < len(hashes) else 2**64)
        start = i
    return tuple(cuts)


def group_stratum(label_counts: Mapping[str, int]) -> str:
    """The label a group is stratified under: its most frequent (the smallest on a tie)."""
    return min(label_counts, key=lambda label: (-label_counts[label], label))


@dataclasses.dataclass(frozen=True)
class Strata:
    """A stratified assignment: per label, the thresholds from `stratum_cuts`.

    `labels` names the stratum of each group whose samples carry several labels
    (usually none), so all of its samples follow one label's thresholds.
    """

    cuts: Mapping[str, tuple]
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def split_index(self, group_key: str, label: str) -> int | None:
        """The group's split index, or None when its label was not seen."""
        cuts = self.cuts.get(self.labels.get(group_key, label))
        if cuts is None:
            return None
        return bisect.bisect_right(cuts, group_hash(group_key))


@dataclasses.dataclass(frozen=True)
class SplitPlan:
    """Which split a sample belongs to: ratios, the group key's field and regex, and
    optionally the field naming the split (`column`) or the label to stratify by.

    `label_field` names a label to count per split without stratifying by it;
    `stratify_by` counts its label too (`label_source`). When an integer
    feature reads the label (`label_feature`), a label is that feature's
    value: `03`, `3.0` and `3` are the class 3 it holds.

    >>> import transforms as dg
    >>> plan = dg.SplitPlan.from_flags("train=0.8,eval=0.1,test=0.1", "__key__:^([^_]+)")
    >>> plan.names
    ['train', 'eval', 'test']
    >>> split, group, label = plan.assign({"__key__": "spk07_0001"})
    >>> group, split == plan.assign({"__key__": "spk07_0002"})[0]   # one speaker, one split
    ('spk07', True)
    """

    splits: tuple  # ((name, ratio), ...)
    field: str = "__key__"
    pattern: str | None = None
    column: str | None = None
    stratify_by: str | None = None
    label_field: str | None = None
    label_feature: Feature | None = None

    def __post_init__(self):
        if self.column and self.stratify_by:
            raise ArgumentError("split_column", "and {stratify_by} exclude each other: the split "
                             "field already fixes every split")
        if self.stratify_by and self.label_field and self.stratify_by != self.label_field:
            raise ArgumentError("label_field", f"{self.label_field!r} and {{stratify_by}} "
                             f"{self.stratify_by!r} name different labels; {{stratify_by}} "
                             f"alone counts its label")
        lowered = [n.lower() for n in self.names]
        if self.column and len(set(lowered)) != len(lowered):
            raise ArgumentError("split_column", f"matches split names case-insensitively, but "
                             f"{{splits}} names {', '.join(self.names)}")

    @classmethod
    def from_flags(cls, splits: str | Mapping[str, float], split_by: str, split_column: str = "",
                   stratify_by: str = "", label_field: str = "",
                   spec: FeatureSpec | None = None) -> "SplitPlan":
        """The plan the flags describe; `spec` finds the label's integer feature,
        and a feature's name given as `split_by` stands for its source
        (`speaker` for a feature `speaker=json.speaker`)."""
        field, pattern = parse_split_by(split_by)
        field = next((f.source for f in spec or () if f.name == field), field)
        label = stratify_by or label_field
        feature = next((f for f in spec or () if label and f.source == label and not f.shape
                        and f.dtype in ("int64", "int32")), None)
        return cls(parse_splits(splits), field, pattern, split_column or None,
                   stratify_by or None, label_field or None, feature)

    @property
    def names(self) -> list:
        return [n for n, _ in self.splits]

    @property
    def label_source(self) -> str | None:
        """The field whose values are counted per split (and stratified, if so asked)."""
        return self.stratify_by or self.label_field

    def group_key(self, sample: Mapping[str, Any], reader: FieldReader | None = None) -> str:
        """The sample's group key; ValueError when the field is missing or null, or
        the regex misses."""
        try:
            text = field_text((reader or FieldReader(sample)).get(self.field))
        except KeyError as e:
            raise ValueError(f"split key: {e.args[0]}") from None
        except ValueError as e:
            raise ValueError(f"split key {self.field!r}: {e}") from None
        if self.pattern is None:
            return text
        m = re.search(self.pattern, text)
        if not m or m.group(1) is None:
            raise ValueError(
                f"split key: the split_by regex {self.pattern!r} does not match "
                f"{self.field}={text[:80]!r}")
        return m.group(1)

    def label(self, sample: Mapping[str, Any], reader: FieldReader | None = None) -> str | None:
        """The sample's label (`label_source`) as text; None when no label is named."""
        if not self.label_source:
            return None
        flag = "--stratify_by" if self.stratify_by else "--label_field"
        try:
            value = (reader or FieldReader(sample)).get(self.label_source)
            if self.label_feature is not None:
                return str(self.label_feature.coerce(value)[0])
            return field_text(value)
        except KeyError as e:
            raise ValueError(f"{flag} label: {e.args[0]}") from None
        except ValueError as e:
            raise ValueError(f"{flag} label {self.label_source!r}: {e}") from None

    def split_of(self, group_key: str) -> str:
        """The split for a group key: its hash's position in [0, 1) against the ratios."""
        position = group_hash(group_key) / 2.0**64
        cumulative = 0.0
        for name, ratio in self.splits:
            cumulative += ratio
            if position < cumulative:
                return name
        return self.splits[-1][0]  # ratios summing to 1 - 1e-9

    def split_named(self, value: Any) -> str:
        """The declared split a split field's value names (see the module docstring)."""
        try:
            text = field_text(value)
        except ValueError as e:
            raise ValueError(f"split field {self.column!r}: {e}") from None
        wanted = text.lower()
        matches = [n for n in self.names if n.lower() == wanted]
        for aliases in _ALIASES:
            if not matches and wanted in aliases:
                matches = [n for n in self.names if n.lower() in aliases]
        if len(matches) != 1:
            raise ValueError(f"split field {self.column!r}: {text[:80]!r} is not one of "
                             f"the splits {', '.join(self.names)}")
        return matches[0]

    def assign(self, sample: Mapping[str, Any], strata: Strata | None = None) -> tuple:
        """(split, group key, label) of a sample; ValueError naming a missing or bad field.

        A stratified plan needs the job's `strata`; a label they did not see
        falls back to the ratio split.
        """
        reader = FieldReader(sample)
        group, label = self.group_key(sample, reader), self.label(sample, reader)
        if self.column:
            try:
                return self.split_named(reader.get(self.column)), group, label
            except KeyError as e:
                raise ValueError(f"split field: {e.args[0]}") from None
        if self.stratify_by:
            if strata is None:
                raise ValueError("a stratified split plan needs the job's strata")
            index = strata.split_index(group, label)
            if index is not None:
                return self.names[index], group, label
        return self.split_of(group), group, label


def split_balance(plan: SplitPlan, examples: Mapping[str, int],
                  groups: Mapping[str, int]) -> tuple[list, list]:
    """(empty, lopsided): one line for each split the ratios ask for that came out
    empty, and for each that is off its ratio by more than half of it (and at
    least a point), saying why and what to do, its {parameters} to be said in
    the caller's terms (DatasetConfig.said). `examples` and `groups` are
    per split. A split field (--split_column) names the splits itself: no
    ratios to miss."""
    total = sum(examples.values())
    if plan.column or not total:
        return [], []
    all_groups = sum(groups.values())
    grouping = "{split_by} " + plan.field + (f":{plan.pattern}" if plan.pattern else "")
    remedy = ("use more, smaller groups (a finer {split_by}), {stratify_by} a label, or "
              "{split_column}")
    empty, lopsided = [], []
    for name, ratio in plan.splits:
        achieved = examples.get(name, 0) / total
        if ratio > 0 and not examples.get(name):
            empty.append((name, ratio))
        elif abs(achieved - ratio) > max(_BALANCE_MARGIN * ratio, 0.01):
            lopsided.append(f"split {name!r} has {achieved:.1%} of the examples, asked "
                            f"{ratio:.0%} ({groups.get(name, 0)} of {all_groups} groups of "
                            f"{grouping}): splits cut whole groups; {remedy}")
    if not empty:
        return [], lopsided
    names = ", ".join(repr(name) for name, _ in empty)
    asked = ", ".join(f"{ratio:.0%}" for _, ratio in empty)
    return [f"{'split' if len(empty) == 1 else 'splits'} {names} came out empty (asked "
            f"{asked}): the {all_groups} groups of {grouping} are too few to cut at these "
            f"ratios; {remedy}"], lopsided
