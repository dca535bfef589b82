"""Offline augmentation of a sample's decoded audio: speed, gain and noise.

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

- Additive noise from a noise corpus (`NoiseRecording`s, listed when the
  job starts: transforms/sources/noise_corpus.py): a recording drawn for the
  copy, an excerpt of it from a drawn offset (looped when it is shorter than
  the speech), scaled so that the speech-to-noise ratio is an SNR drawn from
  `snr_db`. The speech's power is that of its active part: the mean power
  of its 20 ms frames whose power is within 40 dB of its loudest frame's
  (`ActivePower`), measured as the original's examples are cut, times the
  copy's gain squared; the noise's is the mean power of the excerpt. Where
  speech and noise together would clip, both are scaled down alike (the
  SNR kept). Noise recordings are decoded where they are used, a recording
  at a time, and kept in a cache of at most `cache_mb` per process.

Every example records what was done to it: `aug.copy` (0 for the original),
`aug.kind` (none, or speed, gain and noise joined by +), `aug.speed`,
`aug.gain_db`, `aug.peak_normalized`, and with noise `aug.noise_key` and
`aug.snr_db`.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import threading
from typing import Any, Iterator, NamedTuple

import numpy as np
import soxr

from transforms.format.arguments import ArgumentError, ArgumentTypeError, check_names
from transforms.format.spec import Feature
from transforms.format.stable_hash import stable_hash64
from transforms.media.audio import AudioOptions, decode_audio
from transforms.media.decoded import Audio

__all__ = ["AUGMENT_FEATURES", "ORIGINAL", "ActivePower", "AugmentOptions", "Augmentation",
           "Heard", "Mix", "NOISE_FEATURES", "NOTHING_HEARD", "NoiseRecording", "active_power",
           "augment_blocks", "augmentation_fields", "augmentation_tallies", "mix_of"]

AUGMENT_FEATURES = (Feature("aug.copy", "int64"), Feature("aug.kind", "string"),
                    Feature("aug.speed", "float"), Feature("aug.gain_db", "float"),
                    Feature("aug.peak_normalized", "bool"))
NOISE_FEATURES = (Feature("aug.noise_key", "string"), Feature("aug.snr_db", "float"))
_PEAK = 0.99
_INT16 = 32767
# The speech's active part: 20 ms frames within 40 dB of the loudest.
_FRAME_S = 0.02
_ACTIVE_DB = 40.0


class NoiseRecording(NamedTuple):
    """One recording of a noise corpus: its key, its bytes where they are
    stored (read when used), its length."""

    key: str
    audio: Any          # bytes or StoredBytes
    seconds: float


class Heard(NamedTuple):
    """What the original's cut measured of the sample's audio (`ActivePower`)."""

    peak: float = 0.0       # full scale 1
    power: float = 0.0      # of its active part
    samples: int = 0        # at the cut's rate


NOTHING_HEARD = Heard()


class Mix(NamedTuple):
    """How a copy's audio is made: speech times `speech_scale`, plus `excerpt`
    (the noise at the cut's rate, as long as the copy) times `noise_scale`."""

    speech_scale: float
    noise_scale: float = 0.0
    excerpt: np.ndarray | None = None
    peak_normalized: bool = False


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What is done to one copy of one sample."""

    copy: int
    speed: float = 1.0
    gain_db: float = 0.0
    noise: NoiseRecording | None = None
    snr_db: float = 0.0
    noise_start: float = 0.0     # where its noise excerpt starts, 0 to 1 of the room left
    mix: Mix | None = None       # how its audio is made (None: the original's)

    @property
    def kind(self) -> str:
        kinds = [name for name, on in (("speed", self.speed != 1.0), ("gain", self.gain_db),
                                       ("noise", self.noise is not None)) if on]
        return "+".join(kinds) or "none"


ORIGINAL = Augmentation(0)


def mix_of(augmentation: Augmentation, heard: Heard, rate: int, cache_mb: int) -> Mix:
    """How a copy's audio is made at `rate`, from what the original's cut
    `heard` (see the module docstring)."""
    gain = 10 ** (augmentation.gain_db / 20)
    noise_scale, excerpt, noise_peak = 0.0, None, 0.0
    if augmentation.noise is not None:
        length = max(1, round(heard.samples / augmentation.speed))
        excerpt = _excerpt(_noise_samples(augmentation.noise, rate, cache_mb),
                           augmentation.noise_start, length)
        noise_power = float(np.mean(excerpt.astype(np.float64) ** 2))
        if noise_power > 0:
            noise_scale = math.sqrt(heard.power * gain ** 2
                                    / (noise_power * 10 ** (augmentation.snr_db / 10)))
        noise_peak = float(np.max(np.abs(excerpt)))
    peak = heard.peak * gain + noise_peak * noise_scale
    shrink = _PEAK / peak if peak > 1 else 1.0
    return Mix(gain * shrink, noise_scale * shrink, excerpt, peak > 1)


def _excerpt(noise: np.ndarray, start: float, length: int) -> np.ndarray:
    """`length` samples of `noise` from `start` (0 to 1 of the room it leaves),
    the recording looped when it is shorter."""
    offset = round(start * max(0, len(noise) - length))
    if offset + length <= len(noise):
        return noise[offset:offset + length]
    return np.resize(noise, length)


# Decoded noise recordings by (recording, rate), least recently used first; a
# Dataflow worker's threads share it.
_NOISE_CACHE: collections.OrderedDict = collections.OrderedDict()
_NOISE_CACHE_LOCK = threading.Lock()


def _noise_samples(noise: NoiseRecording, rate: int, cache_mb: int) -> np.ndarray:
    """A noise recording decoded (mono float32 at `rate`), through the cache:
    at most `cache_mb` of them kept in this process (one, if it alone is more)."""
    key = (noise.audio, rate)   # a StoredMember, or bytes: both hash
    with _NOISE_CACHE_LOCK:
        if key in _NOISE_CACHE:
            _NOISE_CACHE.move_to_end(key)
            return _NOISE_CACHE[key]
    samples = decode_audio(noise.audio, AudioOptions(sample_rate=rate), name=noise.key).samples
    with _NOISE_CACHE_LOCK:
        _NOISE_CACHE[key] = samples
        while (sum(a.nbytes for a in _NOISE_CACHE.values()) > cache_mb << 20
               and len(_NOISE_CACHE) > 1):
            _NOISE_CACHE.popitem(last=False)
    return samples


def augmentation_fields(augmentation: Augmentation, noise: bool) -> dict:
    """The aug.* values of a copy's examples, with the noise's when the job adds
    noise."""
    mix = augmentation.mix
    fields = {"aug.copy": augmentation.copy, "aug.kind": augmentation.kind,
              "aug.speed": augmentation.speed, "aug.gain_db": augmentation.gain_db,
              "aug.peak_normalized": bool(mix and mix.peak_normalized)}
    if noise:
        fields.update({"aug.noise_key": augmentation.noise.key if augmentation.noise else "",
                       "aug.snr_db": augmentation.snr_db if augmentation.noise else 0.0})
    return fields


class ActivePower:
    """A tap measuring the audio a cut decodes: its peak, and the power of its
    active part (see the module docstring)."""

    def __init__(self):
        self._peak, self._samples = 0.0, 0
        self._frames: list = []   # each 20 ms frame's mean power

    def __call__(self, block: Audio) -> None:
        samples = _floats(block.samples)
        self._samples += len(samples)
        if len(samples):
            self._peak = max(self._peak, float(np.max(np.abs(samples))))
        size = max(1, round(_FRAME_S * block.sample_rate))
        whole = len(samples) // size * size
        if whole:
            frames = samples[:whole].reshape(-1, size)
            self._frames.append(np.square(frames).mean(axis=1, dtype=np.float64))

    def heard(self) -> Heard:
        powers = np.concatenate(self._frames) if self._frames else np.empty(0)
        return Heard(self._peak, active_power(powers), self._samples)


def active_power(frame_powers: np.ndarray) -> float:
    """The mean of the frame powers within 40 dB of the largest (0 for silence)."""
    if not len(frame_powers) or not frame_powers.max() > 0:
        return 0.0
    active = frame_powers[frame_powers >= frame_powers.max() * 10 ** (-_ACTIVE_DB / 10)]
    return float(active.mean())


def _floats(samples: np.ndarray) -> np.ndarray:
    """Samples as float32 at full scale 1 (int16 as the decoder scales them)."""
    return samples.astype(np.float32) / _INT16 if samples.dtype == np.int16 else samples


@dataclasses.dataclass(frozen=True)
class AugmentOptions:
    """Augmented copies of the samples of `splits`: `copies` each, every copy
    speed-perturbed by one of `speeds` (factors > 0, none for no
    perturbation), gained by a draw from `gain_db` ((low, high) dB, or ()),
    and with `noise` (NoiseRecordings: `transforms.sources.noise_corpus.list_noise`)
    one of them added at an SNR drawn from `snr_db`, decoded through a cache
    of at most `cache_mb` per process.

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
    # NoiseRecordings (transforms/sources/noise_corpus.py) and the SNR range, dB.
    noise: tuple = ()
    snr_db: tuple = ()
    cache_mb: int = 256

    def __post_init__(self):
        for name in ("speeds", "gain_db", "snr_db"):
            object.__setattr__(self, name, _numbers(f"augment.{name}", getattr(self, name)))
        object.__setattr__(self, "splits", check_names("augment.splits", self.splits))
        if not isinstance(self.noise, (tuple, list)) or not all(
                isinstance(n, NoiseRecording) for n in self.noise):
            raise ArgumentTypeError("augment.noise", "must be NoiseRecordings "
                                    "(transforms.sources.noise_corpus.list_noise)")
        object.__setattr__(self, "noise", tuple(self.noise))
        if self.snr_db and (len(self.snr_db) != 2 or self.snr_db[0] > self.snr_db[1]
                            or not all(map(math.isfinite, self.snr_db))):
            raise ArgumentError("augment.snr_db", f"{list(self.snr_db)}: a range LOW,HIGH in "
                                "dB, LOW not above HIGH")
        if bool(self.noise) != bool(self.snr_db):
            raise ArgumentError("augment.snr_db", "and {augment.noise} go together: noise "
                                "recordings, and the SNR range to add them at")
        if not isinstance(self.cache_mb, int) or self.cache_mb < 1:
            raise ArgumentError("augment.cache_mb", f"must be an int >= 1, got "
                                f"{self.cache_mb!r}")
        if not isinstance(self.copies, int) or self.copies < 0:
            raise ArgumentError("augment.copies", f"must be an int >= 0, got {self.copies!r}")
        bad = [f for f in self.speeds if not (math.isfinite(f) and f > 0)]
        if bad:
            raise ArgumentError("augment.speeds", f"{bad[0]:g}: a speed factor must be above 0")
        if self.gain_db and (len(self.gain_db) != 2 or self.gain_db[0] > self.gain_db[1]
                             or not all(map(math.isfinite, self.gain_db))):
            raise ArgumentError("augment.gain_db", f"{list(self.gain_db)}: a range LOW,HIGH in dB, "
                                "LOW not above HIGH")
        if self.copies and not (self.speeds or self.gain_db or self.noise):
            raise ArgumentError("augment.copies", f"{self.copies} augmented copies of what? give "
                                "{augment.speeds}, {augment.gain_db} or {augment.noise}")
        if (self.speeds or self.gain_db or self.noise) and not self.copies:
            raise ArgumentError("augment.copies", "must be at least 1 for {augment.speeds}, "
                                "{augment.gain_db} or {augment.noise} to make anything")
        if self.copies and not self.splits:
            raise ArgumentError("augment.splits", "names no split to augment")

    def __bool__(self) -> bool:
        return self.copies > 0

    @property
    def features(self) -> tuple:
        """The aug.* features every example gets."""
        return AUGMENT_FEATURES + (NOISE_FEATURES if self.noise else ())

    def describe(self) -> dict:
        """What the manifest says of the augmentation's corpora."""
        if not self.noise:
            return {}
        return {"noise": {"recordings": len(self.noise),
                          "seconds": round(sum(n.seconds for n in self.noise), 3)}}

    def plan(self, key: str, copy: int, heard: Heard = NOTHING_HEARD,
             rate: int = 16000) -> Augmentation:
        """Copy `copy` (1..copies) of the sample `key`, whose audio the
        original's cut `heard` at `rate`: the same on every run."""
        draw = np.random.Generator(np.random.PCG64(
            stable_hash64(f"{key}#{copy}#{self.seed}", b"datagen-augment")))
        speed = self.speeds[(copy - 1) % len(self.speeds)] if self.speeds else 1.0
        gain = float(draw.uniform(*self.gain_db)) if self.gain_db else 0.0
        noise = {}
        if self.noise:
            noise = {"noise": self.noise[int(draw.integers(len(self.noise)))],
                     "snr_db": float(draw.uniform(*self.snr_db)),
                     "noise_start": float(draw.uniform())}
        augmentation = Augmentation(copy, speed, gain, **noise)
        return dataclasses.replace(augmentation,
                                   mix=mix_of(augmentation, heard, rate, self.cache_mb))


def _numbers(parameter: str, value) -> tuple:
    """`value`, a tuple or list of numbers, as floats; ArgumentTypeError otherwise."""
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return tuple(float(v) for v in value)
    hint = (f"; for one: ({value!r},)" if isinstance(value, (int, float))
            and not isinstance(value, bool) else "")
    raise ArgumentTypeError(parameter, f"must be a tuple of numbers, got {value!r}{hint}")


def augmentation_tallies(split: str, augmentation: Augmentation) -> dict:
    """A copy's {(what, detail): 1} tallies: its parameters, by split (the
    manifest's accounting of augmentation, transforms/writer/finalise.py)."""
    tallies = {("augment_copies", split): 1,
               ("augment_speed", (split, f"{augmentation.speed:g}")): 1}
    if augmentation.gain_db:
        tallies[("augment_gain_db", (split, f"{round(augmentation.gain_db):d}"))] = 1
    if augmentation.noise is not None:
        tallies[("augment_snr_db", (split, f"{round(augmentation.snr_db):d}"))] = 1
        tallies[("augment_noise", (split, augmentation.noise.key))] = 1
    if augmentation.mix.peak_normalized:
        tallies[("augment_peak_normalized", split)] = 1
    return tallies


def augment_blocks(blocks: Iterator[Audio], augmentation: Augmentation) -> Iterator[Audio]:
    """The blocks of a sample's audio, augmented as its mix says; in the dtype
    they came in, the first starting where they started, each on the
    augmented timeline."""
    mix = augmentation.mix
    resampler = origin = rate = dtype = None
    emitted = 0
    scale = np.float32(mix.speech_scale)
    noise_scale = np.float32(mix.noise_scale)
    # A None after the last block is the resampler's cue to flush.
    for block in itertools.chain(blocks, [None]):
        if block is not None and origin is None:
            origin, rate, dtype = block.start, block.sample_rate, block.samples.dtype
            if augmentation.speed != 1.0:
                resampler = soxr.ResampleStream(rate, rate / augmentation.speed, 1,
                                                dtype="float32", quality="HQ")
        if origin is None:
            return
        samples = np.empty(0, np.float32) if block is None else _floats(block.samples)
        if resampler is not None:
            samples = resampler.resample_chunk(samples, last=block is None)
        elif block is None:
            return
        out = samples * scale
        if mix.excerpt is not None and len(out):
            out += _looped(mix.excerpt, emitted, len(out)) * noise_scale
        np.clip(out, -1.0, 1.0, out=out)
        out = (np.rint(out * _INT16).astype(np.int16) if dtype == np.int16
               else out.astype(np.float32))
        if len(out):
            yield Audio(out, rate, origin + emitted / rate)
            emitted += len(out)


def _looped(excerpt: np.ndarray, start: int, length: int) -> np.ndarray:
    """`length` samples of `excerpt` from `start`, wrapping round its end (the
    copy may come out a few samples longer than planned); a view where it
    does not wrap."""
    start %= len(excerpt)
    if start + length <= len(excerpt):
        return excerpt[start:start + length]
    return np.take(excerpt, np.arange(start, start + length) % len(excerpt))
