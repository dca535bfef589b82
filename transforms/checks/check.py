"""What a check over the whole dataset is: the seam every dataset-wide rule takes.

A `DatasetCheck` either judges the dataset's totals alone (its `observer`
None: the share of failed inputs, a split left empty), or has a keyed
observer (transforms/recipe/observers.py) that every unit's driver tells
what became of each sample; it then reads what the observer kept in each
unit's receipt (the writer's UnitReceipt, or a line of a published ledger)
as small records (`records`), joins them over the dataset in one Beam step
(`join`), sums what it found into a few records (`summarise`), and judges
them (`judge`): a `Verdict` that may refuse the dataset, warn, and give the
manifest facts. It judges by `Judging`, which a writer makes of its
DatasetConfig and its totals and verify of a published manifest, so the
same rule holds where the dataset is written and where it is read back
(transforms/checks/dataset_checks.py runs them).
"""

from __future__ import annotations

import types
from typing import Any, Callable, Iterable, Mapping, NamedTuple

import apache_beam as beam

from transforms.recipe.observers import KeyedObserver, observed
from transforms.recipe.splits import SplitPlan

__all__ = ["DatasetCheck", "Judging", "Policy", "Verdict"]


class Verdict(NamedTuple):
    """What a check made of what it found: `refusal`, the one line that stops
    the dataset being published ("" when it may be); `final` when no rerun
    can lift it (the run's work is then discarded); `facts` the manifest
    takes (build_manifest's keywords); `warnings`, lines said when it is
    published."""

    refusal: str = ""
    final: bool = False
    facts: Mapping[str, Any] = types.MappingProxyType({})
    warnings: tuple = ()


class Policy(NamedTuple):
    """What the dataset's checks go by, as DatasetConfig.describe records it
    (the manifest's recipe): the split plan, the share of inputs that may
    fail, whether an empty split is published, what is done with copies."""

    split_plan: SplitPlan | None          # None: not recorded (no split is judged)
    max_failure_fraction: float = 0.01
    allow_empty_splits: bool = False
    duplicates: str = "warn"
    near_duplicates: float = 0.0
    fingerprint_kinds: tuple = ()         # ExampleRecipe.fingerprint_kinds
    fingerprinted_features: tuple = ()    # ExampleRecipe.fingerprinted_features

    @classmethod
    def of_config(cls, config) -> "Policy":
        """The Policy of a DatasetConfig (transforms/writer/config.py)."""
        recipe = config.recipe
        return cls(recipe.split_plan, config.max_failure_fraction, config.allow_empty_splits,
                   config.duplicates, config.near_duplicates, tuple(recipe.fingerprint_kinds),
                   tuple(recipe.fingerprinted_features))

    @classmethod
    def of_recipe(cls, recipe: Mapping[str, Any], duplicates: Mapping[str, Any]) -> "Policy":
        """The Policy a published manifest's `recipe` section records, its
        `duplicates` section naming what was fingerprinted."""
        splits, writing = recipe["splits"], recipe["writing"]
        plan = SplitPlan(tuple((name, ratio) for name, ratio in splits["splits"]),
                         splits["field"], splits["pattern"], splits["column"])
        return cls(plan, writing["max_failure_fraction"], writing["allow_empty_splits"],
                   writing["duplicates"], writing["near_duplicates"],
                   tuple(duplicates.get("kinds", ())), tuple(duplicates.get("features", ())))


class Judging(NamedTuple):
    """What every check judges by beside what it found: the policy, the
    manifest's accounting section (its measures' sections placed there
    included), the caller's terms (`said`: a
    {parameter} as a flag or a Python name), how a rerun is asked for, and
    where a refused run keeps its dead letters (`first_failure` the first)
    and its list of duplicates. `facts` are those of the checks judged
    before (a published manifest's, in verify)."""

    policy: Policy
    accounting: Mapping[str, Any]
    said: Callable[[str], str]
    rerun: str = ""     # "{resume} with": a job's; "" where none is (verify)
    first_failure: Mapping | None = None
    failures_in: str = ""
    duplicates_in: str = ""
    facts: Mapping[str, Any] | None = None


class DatasetCheck:
    """A rule over the whole dataset (module docstring). `name` names its
    steps and what it found; `observer` is what it learns of each sample
    (None: it judges the totals alone)."""

    name: str
    observer: KeyedObserver | None = None

    def applies(self, policy: Policy) -> bool:  # noqa: ARG002
        """Whether the dataset's `policy` asks for it at all."""
        return True

    def records(self, receipt) -> Iterable:
        """The small records one unit's receipt gives the check: by default
        what its observer kept."""
        return observed(receipt, self.observer.name)

    def join(self, policy: Policy) -> beam.PTransform:
        """The step joining every unit's records into what the check found."""
        raise NotImplementedError

    def summarise(self, policy: Policy) -> beam.PTransform | None:  # noqa: ARG002
        """What it found -> the few records `judge` is given; None (the
        default): all of them, as found. A check that may find many sums them
        here."""
        return None

    def judge(self, found: list, judging: Judging) -> Verdict:
        """The Verdict of what the check `found`."""
        raise NotImplementedError

    def published(self, document: Mapping[str, Any],  # noqa: ARG002
                  policy: Policy) -> Mapping[str, Any] | None:  # noqa: ARG002
        """The facts a published manifest holds of this check, which verify
        compares with what the check finds on the ledger (None: none to
        compare)."""
        return None
