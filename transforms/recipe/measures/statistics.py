"""Feature statistics: per-value mean and variance of what the cut computes, per split.

Beam-free. Kaldi's `compute-cmvn-stats` keeps, per feature dimension, the
count of frames, the sum and the sum of squares; so does this measure, in
the same pass that builds the examples:

- a work unit's examples are summed as they are encoded (float64, each
  example's rows at once), per (split, feature), into the unit's receipt, so
  `--resume` reuses them with the unit's shards;
- the final step merges the units' sums with exact rational arithmetic, so
  the result does not depend on the order the runner merged them in: the
  same manifest on every run and worker count.

A feature's rows are its frames (`fbank: [frames, 80]` has 80 values a
row); a waveform is rows of one value (its level). The manifest's
`statistics` are {feature: {split: {"count", "mean", "variance"}}}.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Iterable, NamedTuple

import numpy as np

from transforms.format.spec import unpacked
from transforms.recipe.measures import Measure, Seen, SeenExamples

__all__ = ["Moments", "Statistics", "merge_moments", "statistics_entry"]


class Moments(NamedTuple):
    """Sums over a feature's rows: how many, and per value of a row the sum and
    the sum of squares (floats; Fractions once merged across units)."""

    count: int
    sums: tuple
    squares: tuple


def merge_moments(parts: Iterable[Moments]) -> Moments:
    """The exact sum of `parts` (floats or Fractions), as Fractions: the same
    whatever their order."""
    count, sums, squares = 0, None, None
    for part in parts:
        count += part.count
        if sums is None:
            sums, squares = [Fraction(0)] * len(part.sums), [Fraction(0)] * len(part.squares)
        sums = [s + Fraction(x) for s, x in zip(sums, part.sums)]
        squares = [s + Fraction(x) for s, x in zip(squares, part.squares)]
    return Moments(count, tuple(sums or ()), tuple(squares or ()))


def statistics_entry(moments: Moments) -> dict:
    """The manifest's entry for merged moments: rows counted, and per value
    the mean and the (population) variance, computed exactly and then
    rounded to float."""
    count = moments.count
    means = [s / count for s in moments.sums]
    variances = [max(Fraction(0), q / count - m * m) for q, m in zip(moments.squares, means)]
    return {"count": count, "mean": [float(m) for m in means],
            "variance": [float(v) for v in variances]}


@dataclasses.dataclass(frozen=True)
class Statistics(Measure):
    """The moments of `features` ((name, values a row, declared dtype): the
    cut's CutOptions.measured_features) per split, of the values as the
    reader gives them (a float16 feature's after its rounding). A unit's accumulator is
    {(split, feature): [rows, sums, squares]} in float64 arrays; merged, it
    is {(split, feature): Moments} of Fractions."""

    features: tuple
    name = "statistics"

    def create(self) -> dict:
        return {}

    def add(self, accumulator: dict, seen: Seen) -> None:
        for feature, width, dtype in self.features:
            values = np.asarray(unpacked(seen.values[feature], dtype), np.float64)
            _add_moments(accumulator, (seen.split, feature), values.reshape(1, -1, width))

    def add_examples(self, accumulator: dict, seen: SeenExamples) -> None:
        # A column is an array only where its values were (never packed ones).
        if not all(isinstance(seen.columns[feature], np.ndarray)
                   for feature, _, _ in self.features):
            super().add_examples(accumulator, seen)
            return
        for feature, width, _ in self.features:
            values = np.asarray(seen.columns[feature], np.float64)
            _add_moments(accumulator, (seen.split, feature), values.reshape(seen.count, -1, width))

    def merge(self, accumulators: Iterable[dict]) -> dict:
        parts: dict = {}
        for accumulator in accumulators:
            for key, moments in accumulator.items():
                parts.setdefault(key, []).append(_moments(moments))
        return {key: merge_moments(found) for key, found in parts.items()}

    def section(self, accumulator: dict, split_names: list) -> dict | None:
        section: dict = {}
        for split in split_names:
            for (name, feature), moments in sorted(accumulator.items()):
                if name == split:
                    section.setdefault(feature, {})[split] = statistics_entry(moments)
        return section or None

    def to_json(self, accumulator: dict) -> list:
        return [[split, feature, *_moments(moments)]
                for (split, feature), moments in sorted(accumulator.items())]

    def from_json(self, data) -> dict:
        return {(split, feature): Moments(count, tuple(sums), tuple(squares))
                for split, feature, count, sums, squares in data}


def _add_moments(accumulator: dict, key: tuple, examples: np.ndarray) -> None:
    """Adds examples (an (examples, rows, width) float64 array) to the
    accumulator's [rows, sums, squares] under `key`: each example's sums
    taken alone, then added in order, so the float64 partial sums are the
    same however many examples come at once."""
    sums = examples.sum(axis=1)
    if examples.shape[2] == 1:
        # Over (examples, rows, 1) einsum sums each example's squares in
        # another order than over one example's rows: each one alone.
        squares = np.array([[np.einsum("i,i", rows, rows)] for rows in examples[:, :, 0]])
    else:
        squares = np.einsum("nij,nij->nj", examples, examples)
    width = examples.shape[2]
    found = accumulator.setdefault(key, [0, np.zeros(width), np.zeros(width)])
    found[0] += examples.shape[0] * examples.shape[1]
    # cumsum adds row after row, as one example after another would.
    found[1] = np.cumsum(np.vstack([found[1], sums]), axis=0)[-1]
    found[2] = np.cumsum(np.vstack([found[2], squares]), axis=0)[-1]


def _moments(found) -> Moments:
    """A unit's [rows, sums, squares] (or Moments already) as Moments."""
    if isinstance(found, Moments):
        return found
    count, sums, squares = found
    return Moments(count, tuple(sums.tolist()), tuple(squares.tolist()))
