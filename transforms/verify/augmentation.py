"""Augmented examples (transforms/media/augment.py) against the manifest.

Each record's `aug.*` values must say one story: an original (copy 0) is
kind `none` at speed 1 and 0 dB, with no noise or RIR; a copy's kind names
what its speed, RIR, gain and noise did, its speed is one of the recipe's
speed factors, its gain within its gain range and its SNR within its SNR
range (`record_problems`). Counted per split, the
copies must be what the manifest's accounting says (`count_problems`).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from transforms.format.example_check import stored_values
from transforms.format.manifest import DatasetInfo

__all__ = ["AugmentedRange", "augmented_range", "count_problems", "record_problems"]

# float32 on the wire: the values a job chose, to the float's precision.
_TOLERANCE = 1e-4


class AugmentedRange(NamedTuple):
    """What a dataset's copies may hold: its speed factors, gain and SNR ranges."""

    speeds: tuple
    gain_db: tuple
    snr_db: tuple = ()


def augmented_range(info: DatasetInfo) -> AugmentedRange | None:
    """The dataset's augmentation, from the recipe its manifest records (the
    same from the command line and from Python); None without one."""
    augment = info.recipe["cut"].get("augment", {})
    if not augment.get("copies"):
        return None
    return AugmentedRange(*(tuple(map(float, augment.get(name) or ()))
                            for name in ("speeds", "gain_db", "snr_db")))


def record_problems(example, expected: AugmentedRange) -> tuple[bool, list]:
    """(whether the parsed `example` is an augmented copy, what is wrong with
    its aug.* values)."""
    copy = stored_values(example, "aug.copy", "int64")[0]
    kind = stored_values(example, "aug.kind", "bytes")[0].decode("utf-8", "replace")
    speed = stored_values(example, "aug.speed", "float")[0]
    gain = stored_values(example, "aug.gain_db", "float")[0]
    noised, reverberated = (_named(example, "aug.noise_key"), _named(example, "aug.rir_key"))
    sped, gained = abs(speed - 1) > _TOLERANCE, abs(gain) > _TOLERANCE
    said = "+".join(name for name, done in (("speed", sped), ("reverb", reverberated),
                                            ("gain", gained), ("noise", noised))
                    if done) or "none"
    problems = []
    if kind != said:
        problems.append(f"aug.kind {kind!r}, but aug.speed {speed:g}, aug.gain_db {gain:g} "
                        f"and its noise and RIR keys say {said!r}")
    if copy == 0 and said != "none":
        problems.append(f"an original (aug.copy 0) that is {said}")
    if copy > 0:
        if sped and not any(abs(speed - f) < _TOLERANCE for f in expected.speeds):
            problems.append(f"aug.speed {speed:g} is none of the recipe's "
                            f"{list(expected.speeds)}")
        for name, value, done, bounds in (("aug.gain_db", gain, gained, expected.gain_db),
                                          ("aug.snr_db", _snr(example), noised, expected.snr_db)):
            if done and not (bounds and bounds[0] - _TOLERANCE <= value
                             <= bounds[1] + _TOLERANCE):
                problems.append(f"{name} {value:g} is outside the recipe's {list(bounds)}")
    return copy > 0, problems


def _named(example, key_feature: str) -> bool:
    """Whether the example names a recording in `key_feature` (a noise's, an RIR's)."""
    return key_feature in example.features.feature and bool(
        stored_values(example, key_feature, "bytes")[0])


def _snr(example) -> float:
    if "aug.snr_db" not in example.features.feature:
        return 0.0
    return stored_values(example, "aug.snr_db", "float")[0]


def count_problems(info: DatasetInfo, counted: Mapping[str, int]) -> list:
    """The splits whose copies read back (`counted`, {split: augmented
    examples}) are not what the manifest's accounting says."""
    said = info.accounting.get("augmentation", {}).get("examples", {})
    return [f"split {split}: {counted.get(split, 0)} augmented examples in its shards, the "
            f"manifest says {said.get(split, {}).get('augmented', 0)}"
            for split in info.splits
            if counted.get(split, 0) != said.get(split, {}).get("augmented", 0)]
