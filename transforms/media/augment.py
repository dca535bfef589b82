"""Offline augmentation of a sample's decoded audio: speed, reverberation, gain and noise.

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
- Reverberation by a room impulse response (a `Recording` of an RIR
  corpus) drawn for the copy: the RIR, mixed to mono at the cut's rate, is
  scaled to unit energy (the sum of its squares 1), and the speech is
  convolved with it, aligned on its direct path: the copy's sample n is the
  full convolution's sample n + d, d the index of the RIR's largest
  magnitude, and the copy keeps the speech's length. The convolution is
  done block by block (overlap-add), so memory stays flat.
- Gain in dB, drawn uniformly from `gain_db`'s range. When the gained audio
  would clip (its peak above full scale) it is scaled to a peak of 0.99
  instead, and the example says so (`aug.peak_normalized`); the peak is the
  sample's, measured as its original examples were cut. A reverberated
  copy's speech is measured by a first pass over it (`plan`'s `hear`), as
  no bound on its peak short of the convolution is tight; so is a
  speed-perturbed copy's that may come within 10% of full scale, where
  the resampler's overshoot could clip it.
- Additive noise from a noise corpus (`Recording`s, listed when the job
  starts: transforms/sources/augment_corpus.py): a recording drawn for the
  copy, an excerpt of it from a drawn offset (looped when it is shorter than
  the speech), scaled so that the speech-to-noise ratio is an SNR drawn from
  `snr_db`. The speech's power is that of its active part: the mean power
  of its 20 ms frames whose power is within 40 dB of its loudest frame's
  (transforms/media/loudness.py), measured as the original's examples are
  cut (for a reverberated copy, of its reverberated speech), times the
  copy's gain squared; the noise's is the mean power of the excerpt. Where
  speech and noise together would clip, both are scaled down alike (the
  SNR kept). The noise is not reverberated. Speech with no active power (a
  silent sample) has no SNR to keep: its copies get no noise (no
  `aug.noise_key`, `aug.snr_db` 0), and the accounting counts them
  (`silent`).

Noise and RIR recordings (transforms/sources/augment_corpus.py) are decoded
where they are used, a recording at a time, and kept in a cache of at most
`cache_mb` per process. In a noise corpus of over 256 MiB decoded, a
recording over four times as long as the copy has only the copy's excerpt
decoded, and is not cached. Every example
records what was done to it: `aug.copy` (0 for the original), `aug.kind`
(none, or speed, reverb, gain and noise joined by +), `aug.speed`,
`aug.gain_db`, `aug.peak_normalized`, with noise `aug.noise_key` and
`aug.snr_db`, with RIRs `aug.rir_key`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import threading
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np
import soxr

from transforms.format.arguments import ArgumentError, ArgumentTypeError, check_names
from transforms.format.spec import Feature
from transforms.format.stable_hash import stable_hash64
from transforms.media.audio import AudioOptions, decode_audio, stream_audio
from transforms.media.decoded import INT16_FULL_SCALE, Audio, MediaError, full_scale_floats, staged
from transforms.media.loudness import NOTHING_HEARD, Heard
from transforms.media.recorded import RecordedAudio
from transforms.media.reverb import Reverb

__all__ = ["AUGMENT_FEATURES", "ORIGINAL", "AugmentOptions", "Augmentation", "Mix",
           "NOISE_FEATURES", "NoiseExcerpt", "RIR_FEATURES", "Recording", "augment_blocks",
           "augmentation_fields", "mix_of", "new_speaker",
           "perturbed_blocks"]

AUGMENT_FEATURES = (Feature("aug.copy", "int64"), Feature("aug.kind", "string"),
                    Feature("aug.speed", "float"), Feature("aug.gain_db", "float"),
                    Feature("aug.peak_normalized", "bool"))
NOISE_FEATURES = (Feature("aug.noise_key", "string"), Feature("aug.snr_db", "float"))
RIR_FEATURES = (Feature("aug.rir_key", "string"),)
_PEAK = 0.99
# Resampling can overshoot the peak it was given (a Gibbs overshoot stays
# below 9%): a speed-perturbed copy that may come within this of full scale
# is heard before it is made.
_RESAMPLED_HEADROOM = 0.9
# Samples a noise excerpt's power is summed over at a time, in float64.
_CHUNK = 1 << 20
# In a noise corpus too big to stay decoded, a recording longer than this many
# times its excerpt has only the excerpt decoded: decoded whole, it would
# cost more than the copy each time the cache had let it go (MUSAN's
# minutes-long music under 8 s utterances).
_WHOLE_NOISE = 4
# A noise corpus of at most this much decoded audio (float32 at the cut's
# rate) is decoded a recording at a time, whole, and kept: each recording
# costs one decode a worker. A constant, not --augment_cache_mb, so that a
# worker's memory never changes the dataset.
_SMALL_NOISE_CORPUS = 256 << 20


class Recording(NamedTuple):
    """One recording of a noise or RIR corpus: its key, its bytes where they
    are stored (read when used), its length, where it is (for messages), and
    the version of the file holding it when listed (a --resume after the
    corpus changed is refused)."""

    key: str
    audio: Any          # bytes or StoredBytes
    seconds: float
    where: str = ""     # "noise/a.tar:hum.flac"
    version: str = ""   # transforms/sources/file_match.py file_version


def _corpus_version(recordings: Sequence[Recording]) -> str:
    listed = json.dumps([(r.key, r.where, r.version) for r in recordings])
    return hashlib.sha256(listed.encode("utf-8")).hexdigest()[:16]


class NoiseExcerpt(NamedTuple):
    """`length` samples of a decoded noise `recording` from `offset`, looped
    when the recording is shorter: its sample p is the recording's
    (offset + p % length) % len(recording). Never copied whole, so a long
    recording's copy costs no memory of its length."""

    recording: np.ndarray
    offset: int
    length: int

    @classmethod
    def drawn(cls, recording: np.ndarray, start: float, length: int) -> "NoiseExcerpt":
        """The excerpt from `start`, 0 to 1 of the room the recording leaves."""
        return cls(recording, round(start * max(0, len(recording) - length)), length)

    def _periods(self) -> Iterator[tuple]:
        """(piece of the recording, times it recurs) that make up the excerpt."""
        size, tail = len(self.recording), self.recording[self.offset:self.offset + self.length]
        yield tail, 1
        rest = self.length - len(tail)
        if rest >= size:
            yield self.recording, rest // size
        if rest % size:
            yield self.recording[:rest % size], 1

    def power(self) -> float:
        """Its mean power (float64 sums, a chunk at a time)."""
        energy = 0.0
        for piece, times in self._periods():
            for i in range(0, len(piece), _CHUNK):
                chunk = piece[i:i + _CHUNK].astype(np.float64)
                energy += times * float(chunk @ chunk)
        return energy / self.length

    def peak(self) -> float:
        return max(float(np.max(np.abs(piece))) for piece, _ in self._periods())

    def at(self, start: int, count: int) -> np.ndarray:
        """Its samples start..start + count, wrapping round its end (a copy
        may come out a few samples longer than planned): a view of the
        recording where neither wraps, else its pieces joined."""
        pieces = []
        while count:
            start %= self.length
            place = (self.offset + start) % len(self.recording)
            piece = self.recording[place:place + min(count, self.length - start)]
            pieces.append(piece)
            start, count = start + len(piece), count - len(piece)
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces or [self.recording[:0]])


class Mix(NamedTuple):
    """How a copy's audio is made: speech (reverberated by `rir`, the RIR at
    the cut's rate scaled to unit energy; or as `recorded`, perturbed
    already) times `speech_scale`, plus `excerpt` (of the noise at the
    cut's rate, as long as the copy) times `noise_scale`."""

    speech_scale: float
    noise_scale: float = 0.0
    excerpt: NoiseExcerpt | None = None
    peak_normalized: bool = False
    rir: np.ndarray | None = None
    recorded: RecordedAudio | None = None


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """What is done to one copy of one sample."""

    copy: int
    speed: float = 1.0
    gain_db: float = 0.0
    noise: Recording | None = None
    snr_db: float = 0.0
    noise_start: float = 0.0     # where its noise excerpt starts, 0 to 1 of the room left
    mix: Mix | None = None       # how its audio is made (None: the original's)
    rir: Recording | None = None
    # Noise was drawn, but the speech is silent (no active power): no SNR can be
    # kept, so the copy has no noise.
    silent: bool = False

    @property
    def kind(self) -> str:
        kinds = [name for name, on in (("speed", self.speed != 1.0),
                                       ("reverb", self.rir is not None), ("gain", self.gain_db),
                                       ("noise", self.noise is not None)) if on]
        return "+".join(kinds) or "none"


ORIGINAL = Augmentation(0)


def mix_of(augmentation: Augmentation, heard: Heard, rate: int,
           options: AugmentOptions) -> Mix:
    """How a copy's audio is made at `rate`, from what was `heard` of its
    speech: the original's, or a reverberated copy's (module docstring)."""
    gain = 10 ** (augmentation.gain_db / 20)
    noise_scale, excerpt, noise_peak = 0.0, None, 0.0
    if augmentation.noise is not None:
        length = max(1, round(heard.samples * heard.speed / augmentation.speed))
        excerpt = _noise_excerpt(augmentation.noise, augmentation.noise_start, length, rate,
                                 options)
        noise_power = excerpt.power()
        if noise_power > 0:
            noise_scale = math.sqrt(heard.power * gain ** 2
                                    / (noise_power * 10 ** (augmentation.snr_db / 10)))
        noise_peak = excerpt.peak()
    peak = heard.peak * gain + noise_peak * noise_scale
    shrink = _PEAK / peak if peak > 1 else 1.0
    return Mix(gain * shrink, noise_scale * shrink, excerpt, peak > 1,
               _rir(augmentation, rate, options.cache_mb), heard.recorded)


def _noise_excerpt(recording: Recording, start: float, length: int, rate: int,
                   options: AugmentOptions) -> NoiseExcerpt:
    """A copy's `length` samples of noise from `recording`, at `start` (0 to 1
    of the room it leaves). The recordings of a small corpus
    (_SMALL_NOISE_CORPUS), one up to _WHOLE_NOISE times as long as the copy,
    and any under a copy too short to seek for (0.1 s) are decoded whole,
    through the cache (NoiseExcerpt.drawn); of the others only the excerpt
    is decoded, where it lies. The corpus and the lengths alone decide which,
    so a copy's noise is the same on every worker, whatever its cache holds."""
    size = round(recording.seconds * rate)
    if (options.noise_seconds * rate * 4 <= _SMALL_NOISE_CORPUS
            or size <= _WHOLE_NOISE * length or length < rate // 10):
        return NoiseExcerpt.drawn(_recording_samples(recording, rate, options.cache_mb), start,
                                  length)
    # The room left ends 2% short of the recording: an MP3's length is
    # estimated from its header (up to 0.75% off), and the excerpt must be in it.
    offset = round(start * (size - length - size // 50))
    name = recording.where or recording.key
    samples = staged("augment", name, _decoded_span, recording.audio, rate,
                     (offset / rate, (offset + length) / rate), name)
    return NoiseExcerpt(samples, 0, length)


def _decoded_span(audio: Any, rate: int, span: tuple, name: str) -> np.ndarray:
    """The part `span` (seconds) of a recording, decoded mono at `rate`."""
    return np.concatenate([block.samples for block in stream_audio(
        audio, AudioOptions(sample_rate=rate), name=name, span=span)])


def _rir(augmentation: Augmentation, rate: int, cache_mb: int) -> np.ndarray | None:
    """The copy's RIR at `rate`, scaled to unit energy (None without one)."""
    if augmentation.rir is None:
        return None
    rir = _recording_samples(augmentation.rir, rate, cache_mb).astype(np.float64)
    energy = float(np.sum(rir ** 2))
    if not energy > 0:
        raise MediaError(f"RIR {augmentation.rir.where}: silent, nothing to convolve with",
                         stage="augment", member=augmentation.rir.where)
    return (rir / math.sqrt(energy)).astype(np.float32)


# Decoded noise and RIR recordings by (recording, rate), least recently used
# first; a Dataflow worker's threads share it.
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()


def _recording_samples(recording: Recording, rate: int, cache_mb: int) -> np.ndarray:
    """A corpus recording decoded (mono float32 at `rate`), through the cache:
    at most `cache_mb` of them kept in this process (one, if it alone is
    more). MediaError, stage `augment`, naming the recording where it is."""
    key = (recording.audio, rate)   # a StoredMember, or bytes: both hash
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    samples = staged("augment", recording.where or recording.key, decode_audio,
                     recording.audio, AudioOptions(sample_rate=rate),
                     name=recording.where or recording.key).samples
    with _CACHE_LOCK:
        _CACHE[key] = samples
        while (sum(a.nbytes for a in _CACHE.values()) > cache_mb << 20
               and len(_CACHE) > 1):
            _CACHE.popitem(last=False)
    return samples


def augmentation_fields(augmentation: Augmentation, options: "AugmentOptions") -> dict:
    """The aug.* values of a copy's examples: the noise's when the job adds
    noise, the RIR's when it reverberates."""
    mix = augmentation.mix
    fields = {"aug.copy": augmentation.copy, "aug.kind": augmentation.kind,
              "aug.speed": augmentation.speed, "aug.gain_db": augmentation.gain_db,
              "aug.peak_normalized": bool(mix and mix.peak_normalized)}
    if options.noise:
        fields.update({"aug.noise_key": augmentation.noise.key if augmentation.noise else "",
                       "aug.snr_db": augmentation.snr_db if augmentation.noise else 0.0})
    if options.rirs:
        fields["aug.rir_key"] = augmentation.rir.key if augmentation.rir else ""
    return fields


@dataclasses.dataclass(frozen=True)
class AugmentOptions:
    """Augmented copies of the samples of `splits`: `copies` each, every copy
    speed-perturbed by one of `speeds` (factors > 0, none for no
    perturbation), reverberated with one of `rirs` (Recordings, none longer
    than `rir_max_s`), gained by a draw from `gain_db` ((low, high) dB, or
    ()), and with `noise` (Recordings) one of them added at an SNR drawn from
    `snr_db`; corpus recordings are decoded through a cache of at most
    `cache_mb` per process. Recordings come from
    `transforms.sources.augment_corpus.list_recordings`. With
    `speed_as_new_speaker` (a string feature), a speed-perturbed copy's value
    of it is prefixed `sp<factor>-`, Kaldi's naming, so it counts as a new
    speaker.

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
    noise: tuple = ()
    snr_db: tuple = ()
    cache_mb: int = 256
    rirs: tuple = ()
    rir_max_s: float = 2.0
    speed_as_new_speaker: str = ""

    def __post_init__(self):
        for name in ("speeds", "gain_db", "snr_db"):
            object.__setattr__(self, name, _numbers(f"augment.{name}", getattr(self, name)))
        object.__setattr__(self, "splits", check_names("augment.splits", self.splits))
        for name, value in (("snr_db", self.snr_db), ("gain_db", self.gain_db)):
            if value and (len(value) != 2 or value[0] > value[1]
                          or not all(map(math.isfinite, value))):
                raise ArgumentError(f"augment.{name}", f"{list(value)}: a range LOW,HIGH in "
                                    "dB, LOW not above HIGH")
        self._check_corpora()
        if not isinstance(self.cache_mb, int) or self.cache_mb < 1:
            raise ArgumentError("augment.cache_mb", f"must be an int >= 1, got "
                                f"{self.cache_mb!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ArgumentTypeError("augment.seed", f"must be an int, got {self.seed!r}")
        if not isinstance(self.copies, int) or self.copies < 0:
            raise ArgumentError("augment.copies", f"must be an int >= 0, got {self.copies!r}")
        bad = [f for f in self.speeds if not (math.isfinite(f) and f > 0)]
        if bad:
            raise ArgumentError("augment.speeds", f"{bad[0]:g}: a speed factor must be above 0")
        if not isinstance(self.speed_as_new_speaker, str):
            raise ArgumentTypeError("augment.speed_as_new_speaker", "must be a feature's name "
                                    f"(a str), got {self.speed_as_new_speaker!r}")
        if self.speed_as_new_speaker and not self.speeds:
            raise ArgumentError("augment.speed_as_new_speaker", "renames the speakers of "
                                "speed-perturbed copies: give {augment.speeds}")
        kinds = self.speeds or self.gain_db or self.noise or self.rirs
        if self.copies and not kinds:
            raise ArgumentError("augment.copies", f"{self.copies} augmented copies of what? give "
                                "{augment.speeds}, {augment.gain_db}, {augment.noise} or "
                                "{augment.rirs}")
        if kinds and not self.copies:
            raise ArgumentError("augment.copies", "must be at least 1 for {augment.speeds}, "
                                "{augment.gain_db}, {augment.noise} or {augment.rirs} to make "
                                "anything")
        if self.copies and not self.splits:
            raise ArgumentError("augment.splits", "names no split to augment")

    def _check_corpora(self) -> None:
        for name in ("noise", "rirs"):
            object.__setattr__(self, name, _recordings(f"augment.{name}", getattr(self, name)))
        if bool(self.noise) != bool(self.snr_db):
            raise ArgumentError("augment.snr_db", "and {augment.noise} go together: noise "
                                "recordings, and the SNR range to add them at")
        if (not isinstance(self.rir_max_s, (int, float)) or isinstance(self.rir_max_s, bool)
                or not self.rir_max_s > 0):
            raise ArgumentError("augment.rir_max_s", f"must be a number of seconds above 0, "
                                f"got {self.rir_max_s!r}")
        long = [r for r in self.rirs if r.seconds > self.rir_max_s]
        if long:
            raise ArgumentError("augment.rirs", f"{long[0].where or long[0].key} is "
                                f"{long[0].seconds:g} s, longer than {{augment.rir_max_s}} "
                                f"{self.rir_max_s:g} s ({len(long)} such RIRs); trim them or "
                                "raise the limit")

    def __bool__(self) -> bool:
        return self.copies > 0

    @functools.cached_property
    def noise_seconds(self) -> float:
        """How long the noise corpus is, in all."""
        return sum(r.seconds for r in self.noise)

    @property
    def features(self) -> tuple:
        """The aug.* features every example gets."""
        return (AUGMENT_FEATURES + (NOISE_FEATURES if self.noise else ())
                + (RIR_FEATURES if self.rirs else ()))

    def describe(self) -> dict:
        """What the manifest says of the augmentation's corpora (their
        `version`, a digest of their recordings' keys, places and file
        versions, changes with any of them), and of speakers renamed."""
        described = {name: {"recordings": len(recordings),
                            "seconds": round(sum(r.seconds for r in recordings), 3),
                            "version": _corpus_version(recordings)}
                     for name, recordings in (("noise", self.noise), ("rirs", self.rirs))
                     if recordings}
        if self.speed_as_new_speaker:
            described["speed_as_new_speaker"] = {
                "field": self.speed_as_new_speaker, "value": "sp<factor>-<value>",
                "factors": [f"{f:g}" for f in self.speeds if f != 1.0]}
        return described

    def plan(self, key: str, copy: int, heard: Heard = NOTHING_HEARD, rate: int = 16000,
             hear: Callable[[Augmentation], Heard] | None = None) -> Augmentation:
        """Copy `copy` (1..copies) of the sample `key`, whose audio the
        original's cut `heard` at `rate`: the same on every run. A
        reverberated copy's speech, or a speed-perturbed one's that may
        come near full scale, is heard by `hear` instead: given the copy
        with its speed and RIR only, it measures the audio they make, and
        may record it for the copy to replay (whose caller closes it)."""
        draw = np.random.Generator(np.random.PCG64(
            stable_hash64(f"{key}#{copy}#{self.seed}", b"datagen-augment")))
        speed = self.speeds[(copy - 1) % len(self.speeds)] if self.speeds else 1.0
        gain = float(draw.uniform(*self.gain_db)) if self.gain_db else 0.0
        drawn = {}
        if self.noise:
            drawn = {"noise": self.noise[int(draw.integers(len(self.noise)))],
                     "snr_db": float(draw.uniform(*self.snr_db)),
                     "noise_start": float(draw.uniform())}
        if self.rirs:
            drawn["rir"] = self.rirs[int(draw.integers(len(self.rirs)))]
        augmentation = Augmentation(copy, speed, gain, **drawn)
        if augmentation.rir is not None or (
                speed != 1.0 and heard.peak * 10 ** (gain / 20) > _RESAMPLED_HEADROOM):
            if hear is None:
                raise ValueError(f"copy {copy} of {key} must be heard before it is made: "
                                 "plan it with `hear`")
            dry = Augmentation(copy, speed, rir=augmentation.rir)
            heard = hear(dataclasses.replace(dry, mix=mix_of(dry, NOTHING_HEARD, rate, self)))
        if augmentation.noise is not None and not heard.power > 0:
            augmentation = dataclasses.replace(augmentation, noise=None, snr_db=0.0,
                                               noise_start=0.0, silent=True)
        try:
            return dataclasses.replace(augmentation,
                                       mix=mix_of(augmentation, heard, rate, self))
        except BaseException:
            if heard.recorded is not None:
                heard.recorded.close()
            raise



def new_speaker(value: str | bytes, speed: float) -> str | bytes:
    """A speaker as a copy perturbed by `speed` is a new one: Kaldi's
    `sp0.9-spk1` (AugmentOptions.speed_as_new_speaker)."""
    if isinstance(value, bytes):
        return f"sp{speed:g}-".encode() + value
    return f"sp{speed:g}-{value}"


def _recordings(parameter: str, value) -> tuple:
    """`value`, Recordings, as a tuple; ArgumentTypeError otherwise."""
    if isinstance(value, (tuple, list)) and all(isinstance(r, Recording) for r in value):
        return tuple(value)
    raise ArgumentTypeError(parameter, "must be Recordings "
                            "(transforms.sources.augment_corpus.list_recordings)")


def _numbers(parameter: str, value) -> tuple:
    """`value`, a tuple or list of numbers, as floats; ArgumentTypeError otherwise."""
    if isinstance(value, (tuple, list)) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return tuple(float(v) for v in value)
    hint = (f"; for one: ({value!r},)" if isinstance(value, (int, float))
            and not isinstance(value, bool) else "")
    raise ArgumentTypeError(parameter, f"must be a tuple of numbers, got {value!r}{hint}")


def augment_blocks(blocks: Iterator[Audio], augmentation: Augmentation) -> Iterator[Audio]:
    """The blocks of a sample's audio, augmented as its mix says; in the dtype
    they came in, the first starting where they started, each on the
    augmented timeline. A mix whose speech was `recorded` replays it and
    reads none of `blocks`."""
    mix, emitted = augmentation.mix, 0
    if mix.recorded is not None:
        speech, dtype = mix.recorded.blocks(), mix.recorded.dtype
    else:
        blocks = iter(blocks)
        first = next(blocks, None)
        if first is None:
            return
        speech = perturbed_blocks(itertools.chain([first], blocks), augmentation)
        dtype = first.samples.dtype
    scale, noise_scale = np.float32(mix.speech_scale), np.float32(mix.noise_scale)
    for block in speech:
        out = block.samples * scale
        if mix.excerpt is not None:
            out += mix.excerpt.at(emitted, len(out)) * noise_scale
        np.clip(out, -1.0, 1.0, out=out)
        out = np.rint(out * INT16_FULL_SCALE).astype(np.int16) if dtype == np.int16 else out
        yield Audio(out, block.sample_rate, block.start)
        emitted += len(out)


def perturbed_blocks(blocks: Iterator[Audio], augmentation: Augmentation) -> Iterator[Audio]:
    """The blocks speed-perturbed and reverberated as the copy says: float32,
    not yet scaled or clipped, on the copy's timeline from where the first
    block started."""
    steps = origin = rate = None
    emitted = 0
    # A None after the last block is the steps' cue to flush.
    for block in itertools.chain(blocks, [None]):
        if block is not None and origin is None:
            origin, rate = block.start, block.sample_rate
            steps = _steps(augmentation, rate)
        if origin is None:
            return
        samples = np.empty(0, np.float32) if block is None else full_scale_floats(block.samples)
        for step in steps:
            samples = step(samples, block is None)
        if len(samples):
            yield Audio(samples, rate, origin + emitted / rate)
            emitted += len(samples)


def _steps(augmentation: Augmentation, rate: int) -> list:
    """The copy's perturbations, each a (samples, last) -> samples stream."""
    steps = []
    if augmentation.speed != 1.0:
        resampler = soxr.ResampleStream(rate, rate / augmentation.speed, 1,
                                        dtype="float32", quality="HQ")
        steps.append(lambda samples, last: resampler.resample_chunk(samples, last=last))
    if augmentation.mix.rir is not None:
        steps.append(Reverb(augmentation.mix.rir))
    return steps
