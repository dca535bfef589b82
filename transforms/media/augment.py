"""Offline augmentation of a sample's decoded audio: speed perturbation and gain.

Beam-free. `AugmentOptions` says what a job does; `plan(key, copy)` gives
the `Augmentation` of one copy of one sample, every choice drawn from the
stable hash of (sample key, copy, seed) and never from `random`, so a
dataset is the same on every run, runner and worker count.
`augment_blocks` applies it to the audio as the cut decodes it, block by
block, before any cut (transforms/media/cutting.py), so windows, utterances,
segments and features all see the augmented audio.

- Speed perturbation is Kaldi's (`sox speed`): the audio resampled from
  `rate` to `rate / factor` and played at `rate`, so its duration is divided
  by the factor and its pitch multiplied. Copy c takes the factors in turn
  (`speeds[(c - 1) % len(speeds)]`), as Kaldi writes one copy per factor.
- Gain in dB, drawn uniformly from `gain_db`'s range. When the gained audio
  would clip (its peak above full scale) it is scaled to a peak of 0.99
  instead, and the example says so (`aug.peak_normalized`); the peak is the
  sample's, measured as its original examples were cut.

Every example records what was done to it: `aug.copy` (0 for the original),
`aug.kind` (none, speed, gain or speed+gain), `aug.speed`, `aug.gain_db`,
`aug.peak_normalized`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Iterator

import numpy as np
import soxr

from transforms.format.arguments import ArgumentError
from transforms.format.spec import Feature
from transforms.format.stable_hash import stable_hash64
from transforms.media.decoded import Audio

__all__ = ["AUGMENT_FEATURES", "ORIGINAL", "AugmentOptions", "Augmentation", "augment_blocks",
           "augmentation_tallies", "peak_of"]

AUGMENT_FEATURES = (Feature("aug.copy", "int64"), Feature("aug.kind", "string"),
                    Feature("aug.speed", "float"), Feature("aug.gain_db", "float"),
                    Feature("aug.peak_normalized", "bool"))
_PEAK = 0.99
_INT16 = 32767


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What is done to one copy of one sample."""

    copy: int
    speed: float = 1.0
    gain_db: float = 0.0
    peak: float = 0.0   # the sample's peak (full scale 1), for the clipping check

    @property
    def kind(self) -> str:
        kinds = [name for name, on in (("speed", self.speed != 1.0), ("gain", self.gain_db))
                 if on]
        return "+".join(kinds) or "none"

    @property
    def scale(self) -> float:
        """The factor the audio is multiplied by: the gain, or less where it would clip."""
        gain = 10 ** (self.gain_db / 20)
        return min(gain, _PEAK / self.peak) if self.peak * gain > 1 else gain

    @property
    def peak_normalized(self) -> bool:
        return self.peak * 10 ** (self.gain_db / 20) > 1

    def fields(self) -> dict:
        """The aug.* values of this copy's examples."""
        return {"aug.copy": self.copy, "aug.kind": self.kind, "aug.speed": self.speed,
                "aug.gain_db": self.gain_db, "aug.peak_normalized": self.peak_normalized}


ORIGINAL = Augmentation(0)


@dataclasses.dataclass(frozen=True)
class AugmentOptions:
    """Augmented copies of the samples of `splits`: `copies` each, every copy
    speed-perturbed by one of `speeds` (factors > 0, none for no
    perturbation) and gained by a draw from `gain_db` ((low, high) dB, or ()).

    >>> import transforms as dg
    >>> augment = dg.AugmentOptions(copies=2, speeds=(0.9, 1.1), gain_db=(-6, 6), seed=1)
    >>> [(a.copy, a.speed, round(a.gain_db, 2)) for a in (augment.plan("spk1_0001", c)
    ...                                                    for c in (1, 2))]
    [(1, 0.9, -2.18), (2, 1.1, -0.41)]
    """

    copies: int = 0
    speeds: tuple = ()
    gain_db: tuple = ()
    seed: int = 0
    splits: tuple = ("train",)

    def __post_init__(self):
        object.__setattr__(self, "speeds", tuple(float(f) for f in self.speeds))
        object.__setattr__(self, "gain_db", tuple(float(g) for g in self.gain_db))
        if not isinstance(self.copies, int) or self.copies < 0:
            raise ArgumentError("augment.copies", f"must be an int >= 0, got {self.copies!r}")
        bad = [f for f in self.speeds if not (math.isfinite(f) and f > 0)]
        if bad:
            raise ArgumentError("augment.speeds", f"{bad[0]:g}: a speed factor must be above 0")
        if self.gain_db and (len(self.gain_db) != 2 or self.gain_db[0] > self.gain_db[1]
                             or not all(map(math.isfinite, self.gain_db))):
            raise ArgumentError("augment.gain_db", f"{list(self.gain_db)}: a range LOW,HIGH in dB, "
                                "LOW not above HIGH")
        if self.copies and not (self.speeds or self.gain_db):
            raise ArgumentError("augment.copies", f"{self.copies} augmented copies of what? give "
                                "{augment.speeds} or {augment.gain_db}")
        if (self.speeds or self.gain_db) and not self.copies:
            raise ArgumentError("augment.copies", "must be at least 1 for {augment.speeds} or "
                                "{augment.gain_db} to make anything")
        if self.copies and not self.splits:
            raise ArgumentError("augment.splits", "names no split to augment")

    def __bool__(self) -> bool:
        return self.copies > 0

    def plan(self, key: str, copy: int, peak: float = 0.0) -> Augmentation:
        """Copy `copy` (1..copies) of the sample `key`: the same on every run."""
        draw = np.random.Generator(np.random.PCG64(
            stable_hash64(f"{key}#{copy}#{self.seed}", b"datagen-augment")))
        speed = self.speeds[(copy - 1) % len(self.speeds)] if self.speeds else 1.0
        gain = float(draw.uniform(*self.gain_db)) if self.gain_db else 0.0
        return Augmentation(copy, speed, gain, peak)


def augmentation_tallies(split: str, augmentation: Augmentation) -> dict:
    """A copy's {(what, detail): 1} tallies: its parameters, by split (the
    manifest's accounting of augmentation, transforms/writer/finalise.py)."""
    tallies = {("augment_copies", split): 1,
               ("augment_speed", (split, f"{augmentation.speed:g}")): 1}
    if augmentation.gain_db:
        tallies[("augment_gain_db", (split, f"{round(augmentation.gain_db):d}"))] = 1
    if augmentation.peak_normalized:
        tallies[("augment_peak_normalized", split)] = 1
    return tallies


def peak_of(block: Audio) -> float:
    """A block's peak, full scale 1 (int16 blocks as the decoder scales them)."""
    if not len(block.samples):
        return 0.0
    peak = float(np.max(np.abs(block.samples)))
    return peak / _INT16 if block.samples.dtype == np.int16 else peak


def augment_blocks(blocks: Iterator[Audio], augmentation: Augmentation) -> Iterator[Audio]:
    """The blocks of a sample's audio, augmented; in the dtype they came in,
    the first starting where they started, each on the augmented timeline."""
    resampler = origin = rate = dtype = None
    emitted = 0
    scale = np.float32(augmentation.scale)
    # A None after the last block is the resampler's cue to flush.
    for block in itertools.chain(blocks, [None]):
        if block is not None and origin is None:
            origin, rate, dtype = block.start, block.sample_rate, block.samples.dtype
            if augmentation.speed != 1.0:
                resampler = soxr.ResampleStream(rate, rate / augmentation.speed, 1,
                                                dtype="float32", quality="HQ")
        if origin is None:
            return
        samples = (np.empty(0, np.float32) if block is None else
                   block.samples.astype(np.float32) / _INT16 if dtype == np.int16
                   else block.samples)
        if resampler is not None:
            samples = resampler.resample_chunk(samples, last=block is None)
        elif block is None:
            return
        out = np.clip(samples * scale, -1.0, 1.0)
        out = (np.rint(out * _INT16).astype(np.int16) if dtype == np.int16
               else out.astype(np.float32))
        if len(out):
            yield Audio(out, rate, origin + emitted / rate)
            emitted += len(out)
