"""Example durations per split: the histogram and bucket boundaries of each
split's `durations` entry (transforms/format/durations.py says what they are).

An example's duration is its `duration_s` (a whole sample's), else its
`end_time - start_time` (a cut's); examples with neither are not counted.
A unit's accumulator is {split: {"bins": {bin: examples}, "ms": summed
milliseconds}}: a few numbers however many examples. Beam-free.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Iterable, Mapping

import numpy as np

from transforms.format.durations import duration_bin, split_durations
from transforms.recipe.measures import PER_SPLIT, Measure, Seen, SeenExamples

__all__ = ["Durations", "example_duration"]


def example_duration(values: Mapping[str, Any]) -> float | None:
    """An example's duration in seconds, from its encoded values (module docstring)."""
    if "duration_s" in values:
        return float(values["duration_s"][0])
    if "start_time" in values and "end_time" in values:
        return float(values["end_time"][0] - values["start_time"][0])
    return None


@dataclasses.dataclass(frozen=True)
class Durations(Measure):
    """Each split's durations entry (module docstring)."""

    name = "durations"
    place = PER_SPLIT

    def create(self) -> dict:
        return {}

    def add(self, accumulator: dict, seen: Seen) -> None:
        seconds = example_duration(seen.values)
        if seconds is not None:
            _add_seconds(accumulator, seen.split, (seconds,))

    def add_examples(self, accumulator: dict, seen: SeenExamples) -> None:
        starts, ends = seen.columns.get("start_time"), seen.columns.get("end_time")
        if "duration_s" in seen.columns or not (isinstance(starts, np.ndarray)
                                                and isinstance(ends, np.ndarray)):
            super().add_examples(accumulator, seen)
            return
        # float32 differences, as example_duration takes them one at a time.
        _add_seconds(accumulator, seen.split, (ends[:, 0] - starts[:, 0]).tolist())

    def merge(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for accumulator in accumulators:
            for split, found in accumulator.items():
                into = merged.setdefault(split, {"bins": collections.Counter(), "ms": 0})
                into["bins"].update(found["bins"])
                into["ms"] += found["ms"]
        return merged

    def section(self, accumulator: dict, split_names: list) -> dict | None:  # noqa: ARG002
        return {split: split_durations(found["bins"], found["ms"])
                for split, found in sorted(accumulator.items())} or None

    def to_json(self, accumulator: dict) -> dict:
        return {split: {"bins": sorted(found["bins"].items()), "ms": found["ms"]}
                for split, found in accumulator.items()}

    def from_json(self, data: Mapping) -> dict:
        return {split: {"bins": collections.Counter(dict(found["bins"])), "ms": found["ms"]}
                for split, found in data.items()}


def _add_seconds(accumulator: dict, split: str, durations: Iterable[float]) -> None:
    """Adds examples of these durations (seconds) in `split`."""
    found = accumulator.get(split)
    if found is None:
        found = accumulator[split] = {"bins": collections.Counter(), "ms": 0}
    for seconds in durations:
        found["bins"][duration_bin(seconds)] += 1
        found["ms"] += round(seconds * 1000)
