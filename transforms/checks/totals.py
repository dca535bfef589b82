"""The policies over the dataset's totals: checks that need no record of a sample.

- `FailureFraction`: no more than --max_failure_fraction of the inputs
  failed (where the dead letters are kept, and the first, said);
- `SomeExamples`: an example was written, unless --allow_empty_splits;
- `SplitBalance`: no split the ratios ask for came out empty, unless
  --allow_empty_splits; one off its ratio is a warning (why, and what to do).

Each judges the accounting section alone, so verify judges a published
manifest's as the writer judged its run's.
"""

from __future__ import annotations

from typing import Any, Mapping

from transforms.checks.check import DatasetCheck, Judging, Policy, Verdict
from transforms.format.dead_letters import failure_fraction_problem
from transforms.recipe.accounting import inputs_and_failed, what_came
from transforms.recipe.measures.augmentation import AugmentedCopies
from transforms.recipe.splits import split_balance

__all__ = ["FailureFraction", "SomeExamples", "SplitBalance", "original_examples"]


def original_examples(accounting: Mapping[str, Any]) -> dict:
    """Examples per split but augmented copies (their measure's section,
    transforms/recipe/measures/augmentation.py): what the split ratios are of."""
    augmented = (accounting.get(AugmentedCopies.name) or {}).get("examples", {})
    return {split: n - augmented.get(split, {}).get("augmented", 0)
            for split, n in accounting["examples_per_split"].items()}


class FailureFraction(DatasetCheck):
    """No more than max_failure_fraction of the inputs failed."""

    name = "failure_fraction"

    def judge(self, found: list, judging: Judging) -> Verdict:  # noqa: ARG002
        inputs, failed = inputs_and_failed(judging.accounting)
        # A rerun (a job's --resume) with a higher fraction publishes the work.
        advice = (f"; {judging.rerun} a higher {{max_failure_fraction}} publishes this run's "
                  "work" if judging.rerun else "")
        return Verdict(failure_fraction_problem(
            failed, inputs, judging.policy.max_failure_fraction, judging.first_failure,
            judging.failures_in, judging.said, advice))


class SomeExamples(DatasetCheck):
    """An example was written, unless allow_empty_splits."""

    name = "some_examples"

    def judge(self, found: list, judging: Judging) -> Verdict:  # noqa: ARG002
        if sum(judging.accounting["examples_per_split"].values()) or (
                judging.policy.allow_empty_splits):
            return Verdict()
        return Verdict(judging.said(f"no example was written ({what_came(judging.accounting)}); "
                                    "or pass {allow_empty_splits}"))


class SplitBalance(DatasetCheck):
    """No split the ratios ask for came out empty, unless allow_empty_splits;
    those off their ratio are warned of (their groups: the leakage check's
    facts)."""

    name = "split_balance"

    def applies(self, policy: Policy) -> bool:
        return policy.split_plan is not None

    def judge(self, found: list, judging: Judging) -> Verdict:  # noqa: ARG002
        policy = judging.policy
        empty, lopsided = (list(map(judging.said, lines)) for lines in split_balance(
            policy.split_plan, original_examples(judging.accounting),
            judging.facts.get("group_counts", {})))
        refusal = (judging.said(f"{empty[0]}; or pass {{allow_empty_splits}}")
                   if empty and not policy.allow_empty_splits else "")
        return Verdict(refusal, warnings=tuple(empty + lopsided))
