"""The quality measures' distributions per split: what --quality found, and what --keep cost.

Each measure (transforms/media/quality.py) is counted in fixed bins (its
`BINS`: low, high, width; a value outside goes to the first or last bin), of
every example measured and of those kept, so units merge exactly in any
order; the least and greatest value are kept too. The manifest's `quality`
section is {measure: {"bins": [low, high, width], "splits": {split: {"all":
counts, "kept": counts, "min", "max", "p5", "p50", "p95"}}}} (percentiles to
a bin's middle), with the --keep clauses; `pipelines.inspect --report` draws
them with the thresholds on them. Beam-free.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

import numpy as np

from transforms.recipe.measures import TOP, Measure, Seen

__all__ = ["BINS", "QualityDistributions", "quality_lines"]

# measure -> (low, high, width) of its bins.
BINS = {
    "snr_db": (-20.0, 60.0, 1.0),
    "clipping": (0.0, 0.05, 0.0005),
    "loudness_lufs": (-70.0, 0.0, 1.0),
    "dc_offset": (-0.05, 0.05, 0.001),
    "bandwidth_hz": (0.0, 24000.0, 250.0),
    "speech_ratio": (0.0, 1.0, 0.02),
}


def _bins(name: str) -> int:
    low, high, width = BINS[name]
    return round((high - low) / width)


def _bin(name: str, value: float) -> int:
    low, _, width = BINS[name]
    return min(_bins(name) - 1, max(0, int((value - low) // width)))


def _value(value: Any) -> float:
    return float(np.asarray(value).reshape(-1)[0])


@dataclasses.dataclass(frozen=True)
class QualityDistributions(Measure):
    """The `quality` section (module docstring) of the measures `names`, with
    the --keep clauses `keep` (as text)."""

    names: tuple
    keep: tuple = ()
    name = "quality"
    place = TOP

    def create(self) -> dict:
        return {}

    def _entry(self, accumulator: dict, split: str, name: str) -> dict:
        entries = accumulator.setdefault(split, {})
        if name not in entries:
            entries[name] = {"all": [0] * _bins(name), "kept": [0] * _bins(name),
                             "min": None, "max": None}
        return entries[name]

    def _count(self, accumulator: dict, seen: Seen, kept: bool) -> None:
        for name in self.names:
            value = _value(seen.values[name])
            entry = self._entry(accumulator, seen.split, name)
            at = _bin(name, value)
            entry["all"][at] += 1
            if kept:
                entry["kept"][at] += 1
            entry["min"] = value if entry["min"] is None else min(entry["min"], value)
            entry["max"] = value if entry["max"] is None else max(entry["max"], value)

    def add(self, accumulator: dict, seen: Seen) -> None:
        self._count(accumulator, seen, kept=True)

    def add_removed(self, accumulator: dict, seen: Seen, reason: str) -> None:  # noqa: ARG002
        self._count(accumulator, seen, kept=False)

    def merge(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for accumulator in accumulators:
            for split, entries in accumulator.items():
                for name, entry in entries.items():
                    into = self._entry(merged, split, name)
                    for kind in ("all", "kept"):
                        into[kind] = [a + b for a, b in zip(into[kind], entry[kind])]
                    for bound, pick in (("min", min), ("max", max)):
                        if entry[bound] is not None:
                            into[bound] = (entry[bound] if into[bound] is None
                                           else pick(into[bound], entry[bound]))
        return merged

    def section(self, accumulator: dict, split_names: list) -> dict | None:
        if not accumulator:
            return None
        section: dict = {}
        for name in self.names:
            low, high, width = BINS[name]
            splits = {}
            for split in split_names:
                entry = accumulator.get(split, {}).get(name)
                if entry is not None:
                    splits[split] = {**entry, **_percentiles(entry["all"], low, width)}
            section[name] = {"bins": [low, high, width], "splits": splits}
        return {"measures": section, "keep": list(self.keep)}

    def to_json(self, accumulator: dict) -> dict:
        return accumulator

    def from_json(self, data: Mapping) -> dict:
        return {split: {name: {**entry, "all": list(entry["all"]), "kept": list(entry["kept"])}
                        for name, entry in entries.items()} for split, entries in data.items()}


def _percentiles(counts: list, low: float, width: float) -> dict:
    """p5, p50 and p95 of a histogram, each its bin's middle."""
    total = sum(counts)
    cumulative = np.cumsum(counts)
    return {f"p{p}": float(low + (np.searchsorted(cumulative, total * p / 100) + 0.5) * width)
            for p in (5, 50, 95)}


def quality_lines(section: Mapping, filtered: Mapping[str, int]) -> list:
    """What a `quality` section says, a line a measure (every split's examples
    measured: p5, p50 and p95 to a bin), then what each --keep clause removed
    (`filtered`: the accounting's examples_filtered_per_reason)."""
    lines = []
    for name, entry in section["measures"].items():
        low, _, width = entry["bins"]
        counts = np.sum([found["all"] for found in entry["splits"].values()], axis=0)
        found = _percentiles(list(counts), low, width)
        lines.append(f"{name:14s} {int(counts.sum())} examples: p5 {found['p5']:g}, "
                     f"p50 {found['p50']:g}, p95 {found['p95']:g}")
    measured = max((int(np.sum([f["all"] for f in e["splits"].values()]))
                    for e in section["measures"].values()), default=0)
    for clause in section["keep"]:
        removed = filtered.get(f"keep: {clause}", 0)
        lines.append(f"--keep {clause!r} removed {removed} of {measured} examples"
                     f" ({removed / max(1, measured):.0%})")
    return lines
