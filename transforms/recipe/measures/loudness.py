"""How loud each split's recordings are: a measure that hears the audio.

Each sample whose cut decodes audio is heard as it streams
(transforms/media/loudness.py: its peak, and the power of its active part,
the 20 ms frames within 40 dB of its loudest), once, whatever examples it is
cut into; its active level is that power in dB full scale. Each split's
`loudness` entry gives how many samples were heard, the 10th, 50th and 90th
percentiles of their active levels (to 0.5 dB), how many clipped (a peak at
full scale) and how many were silent. A unit's accumulator is
{split: {"levels": {half-dB bin: samples}, "clipped": n, "silent": n}}: a
few numbers however many samples. Not among the recipe's own: give it,
`WriteDataset(measures=[Loudness()])`. Beam-free.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Iterable, Mapping

from transforms.recipe.measures import PER_SPLIT, Measure, Seen

__all__ = ["Loudness"]

# A peak this close to full scale is a clipped recording.
_CLIPPED = 0.999
_BINS_PER_DB = 2
_PERCENTILES = (10, 50, 90)


def _new() -> dict:
    return {"levels": collections.Counter(), "clipped": 0, "silent": 0}


@dataclasses.dataclass(frozen=True)
class Loudness(Measure):
    """Each split's loudness entry (module docstring).

    >>> import apache_beam as beam, json, numpy as np, soundfile, io, transforms as dg
    >>> from transforms.recipe.measures.loudness import Loudness
    >>> def tone(amplitude):           # a second of 440 Hz at `amplitude`, as FLAC
    ...     out = io.BytesIO()
    ...     t = np.arange(16000) / 16000
    ...     soundfile.write(out, amplitude * np.sin(2 * np.pi * 440 * t), 16000, format="FLAC")
    ...     return out.getvalue()
    >>> rows = [{"__key__": f"t{i}", "flac": tone(0.5), "spk": "a"} for i in range(3)]
    >>> with dg.make_pipeline() as p:
    ...     _ = p | beam.Create(rows) | dg.WriteDataset(
    ...         "loud", features="spk:string", splits="train=1", measures=[Loudness()],
    ...         cut=dg.CutOptions(mode="audio_windows", audio_fields=("flac",)))
    >>> entry = json.load(open("loud/manifest.json"))["splits"]["train"]["loudness"]
    >>> entry["samples"], entry["active_level_dbfs"]["p50"], entry["clipped"]
    (3, -9.0, 0)
    """

    name = "loudness"
    place = PER_SPLIT
    hears_audio = True

    def create(self) -> dict:
        return {}

    def add(self, accumulator: dict, seen: Seen) -> None:
        """Examples tell it nothing: it hears each sample's audio (`heard`)."""

    def heard(self, accumulator: dict, split: str, label: str | None, heard: Any) -> None:  # noqa: ARG002
        found = accumulator.get(split)
        if found is None:
            found = accumulator[split] = _new()
        if heard.peak >= _CLIPPED:
            found["clipped"] += 1
        if heard.power <= 0:
            found["silent"] += 1
            return
        found["levels"][round(10 * math.log10(heard.power) * _BINS_PER_DB)] += 1

    def merge(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for accumulator in accumulators:
            for split, found in accumulator.items():
                into = merged.setdefault(split, _new())
                into["levels"].update(found["levels"])
                into["clipped"] += found["clipped"]
                into["silent"] += found["silent"]
        return merged

    def section(self, accumulator: dict, split_names: list) -> dict | None:  # noqa: ARG002
        return {split: _entry(found) for split, found in sorted(accumulator.items())} or None

    def to_json(self, accumulator: dict) -> dict:
        return {split: {**found, "levels": sorted(found["levels"].items())}
                for split, found in accumulator.items()}

    def from_json(self, data: Mapping) -> dict:
        return {split: {**found, "levels": collections.Counter(dict(found["levels"]))}
                for split, found in data.items()}


def _entry(found: Mapping) -> dict:
    """A split's entry: its samples heard, their active levels' percentiles,
    the clipped and the silent."""
    levels = sorted(found["levels"].items())
    heard = sum(n for _, n in levels)
    entry: dict = {"samples": heard + found["silent"]}
    if heard:
        entry["active_level_dbfs"] = {f"p{p}": _percentile(levels, heard, p)
                                      for p in _PERCENTILES}
    return {**entry, "clipped": found["clipped"], "silent": found["silent"]}


def _percentile(levels: list, total: int, percent: int) -> float:
    """The level (dBFS) below which `percent` of the `total` samples lie, by
    their (bin, samples) pairs in order."""
    wanted, seen = math.ceil(total * percent / 100), 0
    for level, samples in levels:
        seen += samples
        if seen >= wanted:
            return level / _BINS_PER_DB
    return levels[-1][0] / _BINS_PER_DB
