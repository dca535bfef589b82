"""Feature statistics: per-value mean and variance of what the cut computes, per split.

Beam-free. Kaldi's `compute-cmvn-stats` keeps, per feature dimension, the
count of frames, the sum and the sum of squares; so does this, in the same
pass that builds the examples:

- `StatisticsTap` sums one sample's examples as they are encoded (float64,
  each example's rows at once), and its `Moments` travel in the sample's outcome;
- the converter adds its samples' moments per (split, feature) into the
  work unit's receipt (transforms/writer/convert.py), so `--resume` reuses
  them with the unit's shards;
- the final step merges the units' moments with exact rational arithmetic
  (`MergeMoments`), so the result does not depend on the order the runner
  merged them in: the same manifest on every run and worker count.

A feature's rows are its frames (`fbank: [frames, 80]` has 80 values a
row); a waveform is rows of one value (its level).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

__all__ = ["Moments", "StatisticsTap", "add_moments", "merge_moments", "statistics_entry"]


class Moments(NamedTuple):
    """Sums over a feature's rows: how many, and per value of a row the sum and
    the sum of squares (floats; Fractions once merged across units)."""

    count: int
    sums: tuple
    squares: tuple


def _sums_of(values: np.ndarray, width: int) -> tuple[int, np.ndarray, np.ndarray]:
    rows = np.asarray(values, np.float64).reshape(-1, width)
    return len(rows), rows.sum(axis=0), np.einsum("ij,ij->j", rows, rows)


class StatisticsTap:
    """One sample's running sums of the `features` ((name, values a row)
    pairs), fed each example's encoded values."""

    def __init__(self, features: Sequence[tuple[str, int]]):
        self._features = tuple(features)
        self._sums: dict = {}   # name -> [count, sums, squares]

    def update(self, values: Mapping[str, np.ndarray]) -> None:
        for name, width in self._features:
            count, sums, squares = _sums_of(values[name], width)
            found = self._sums.get(name)
            if found is None:
                self._sums[name] = [count, sums, squares]
            else:
                found[0] += count
                found[1] += sums
                found[2] += squares

    def moments(self) -> tuple:
        """((feature, Moments), ...) of what it was fed."""
        return tuple((name, Moments(count, tuple(sums.tolist()), tuple(squares.tolist())))
                     for name, (count, sums, squares) in self._sums.items())


def add_moments(a: Moments | None, b: Moments) -> Moments:
    """`a` + `b` in floats (a unit's samples, added in their reading order)."""
    if a is None:
        return b
    return Moments(a.count + b.count, tuple(x + y for x, y in zip(a.sums, b.sums)),
                   tuple(x + y for x, y in zip(a.squares, b.squares)))


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
