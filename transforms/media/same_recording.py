"""Whether two recordings are one: a near copy told from a recording merely alike.

Beam-free. Landmark similarity (transforms/media/near_duplicates.py) proposes
pairs; before a pair is called one recording, and `--duplicates drop`
deletes either, this check compares the two themselves. Each recording keeps
a `Profile` as its landmarks are taken, from the same spectra: its level in
16 mel bands (100 Hz to 3.8 kHz) every 32 ms, in 4 dB steps below its
loudest band level (so a gain changes nothing), 60 dB deep; a long
recording's frames are averaged in pairs as often as it takes to keep
_MOST_FRAMES of them, so memory stays flat whatever its length.

`compare` aligns two profiles, the offset by cross-correlating their loudness
envelopes at time scales from 1 out to 0.97 and 1.03 (a copy sped up or
slowed by up to 2%) and at half-frame phases, and compares them frame by
frame, stopping at the first alignment that is one recording. A
frame matches where both sound (within 32 dB of their loudest), their
spectral shapes agree (a cosine of 0.8 between their band levels less their
mean) and so do their loudnesses (within 6 dB, the pair's median difference
aside). They are one recording (`Alignment.same`) when, at the best
alignment:

- 75% or more of the frames where either sounds match;
- no run of 5 frames (0.16 s) or more where they disagree: a copy's
  differences are scattered (a codec's noise, frames cut at a new start), a
  different word is a run of them;
- the shorter one's sound lies 95% within the overlap and the longer's 75%
  (a copy cut 0.3 s later), and they share 1 s of sound or more: a word or
  two proves nothing.

Measured on copies and non-copies made by ffmpeg, sox and espeak-ng
(benchmarks/duplicates_bench.py; docs/performance.md has the table).
"""

from __future__ import annotations

import base64
import functools
import zlib
from typing import NamedTuple

import numpy as np

__all__ = ["Alignment", "Profile", "compare", "encoded_levels"]

_RATE, _FRAME = 8000, 512          # the landmarks' audio and frames (64 ms)
_BANDS, _LOW_HZ, _HIGH_HZ = 16, 100.0, 3800.0
_STEP_DB, _DEPTH_DB = 4.0, 60.0    # levels 0..15
_SOUNDING_DB = 32.0                # a frame sounds within this of the loudest
_MOST_FRAMES = 4096                # 131 s at 32 ms; longer ones are pooled
# Time scales tried, from 1 out: a copy sped up or slowed by up to 2%.
_SCALES = (1.0, 0.99, 1.01, 0.98, 1.02, 0.97, 1.03)
# Frames matched at scale 1 below which no other scale is tried: a copy 2%
# faster matches 0.68 or more there (measured), another recording rarely half.
_WORTH_SCALING = 0.5
_PHASES = (0.0, 0.5)
_LAGS = 2                          # the best envelope lags tried at each scale and phase
_SHAPE_COSINE, _LOUDNESS_DB = 0.8, 6.0
_MATCHED, _RUN = 0.75, 5
_SHORTER_COVERED, _LONGER_COVERED, _COMMON_S = 0.95, 0.75, 1.0
_HOP_S = 2 * 128 / _RATE           # every other landmark frame: 32 ms


@functools.lru_cache(maxsize=1)
def _mel_bands() -> np.ndarray:
    """(bins of a _FRAME-point spectrum, _BANDS) triangular mel weights."""
    def mel(hz):
        return 2595 * np.log10(1 + hz / 700)
    edges = 700 * (10 ** (np.linspace(mel(_LOW_HZ), mel(_HIGH_HZ), _BANDS + 2) / 2595) - 1)
    hz = np.arange(_FRAME // 2 + 1) * _RATE / _FRAME
    low, centre, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    weights = np.clip(np.minimum((hz - low) / (centre - low), (high - hz) / (high - centre)), 0,
                      None)
    return weights.T.astype(np.float32)


def _pooled(frames: np.ndarray) -> np.ndarray:
    """Pairs of frames averaged (an odd last one kept)."""
    pairs = len(frames) // 2 * 2
    pooled = (frames[:pairs:2] + frames[1:pairs:2]) / 2
    return np.concatenate([pooled, frames[pairs:]]) if pairs < len(frames) else pooled


class Profile:
    """One recording's band levels: fed the power spectra of its frames (every
    other landmark frame) as they are taken, then `encoded` as text."""

    def __init__(self):
        self._kept = np.empty((0, _BANDS), np.float32)  # frames of 2^pooling frames each
        self._loose: list = []                          # frames not yet in a kept one
        self.pooling = 0

    def add(self, power: np.ndarray) -> None:
        """Frames' power spectra, (frames, _FRAME // 2 + 1)."""
        self._loose.append(10 * np.log10(power @ _mel_bands() + 1e-20))
        loose = np.concatenate(self._loose)
        width = 1 << self.pooling
        whole = len(loose) // width * width
        self._loose = [loose[whole:]]
        self._kept = np.concatenate([self._kept, loose[:whole].reshape(-1, width, _BANDS).mean(1)])
        while len(self._kept) > 2 * _MOST_FRAMES:
            self._kept = _pooled(self._kept)
            self.pooling += 1

    def levels(self) -> np.ndarray:
        """(frames, _BANDS) uint8 levels, 0 (60 dB or more below its loudest)
        to 15; the frames pooled to _MOST_FRAMES at most."""
        loose = np.concatenate(self._loose) if self._loose else self._kept[:0]
        frames = np.concatenate([self._kept, loose.mean(0, keepdims=True)]) if len(
            loose) else self._kept
        while len(frames) > _MOST_FRAMES:
            frames = _pooled(frames)
            self.pooling += 1
        if not len(frames):
            return np.zeros((0, _BANDS), np.uint8)
        floor = frames.max() - _DEPTH_DB
        return np.clip(np.round((frames - floor) / _STEP_DB), 0, _DEPTH_DB // _STEP_DB).astype(
            np.uint8)

    def encoded(self) -> str:
        """Its levels as text (what a `near` digest carries after its signature)."""
        levels = self.levels()
        return encoded_levels(levels, self.pooling)


def encoded_levels(levels: np.ndarray, pooling: int = 0) -> str:
    """(frames, _BANDS) uint8 levels (0..15), of frames 32 ms x 2^pooling, as
    the text `compare` takes: two levels a byte, deflated (at its fastest:
    what more effort saves is a few percent), in base64."""
    levels = np.asarray(levels, np.uint8)
    packed = (levels[:, ::2] << 4 | levels[:, 1::2]).astype(np.uint8)
    return base64.b64encode(bytes([pooling]) + zlib.compress(packed.tobytes(), 1)).decode(
        "ascii")


def _decoded(text: str) -> tuple[np.ndarray, int]:
    """(levels in dB below the loudest, as float32 (frames, bands); pooling)."""
    data = base64.b64decode(text)
    packed = np.frombuffer(zlib.decompress(data[1:]), np.uint8).reshape(-1, _BANDS // 2)
    levels = np.empty((len(packed), _BANDS), np.float32)
    levels[:, ::2], levels[:, 1::2] = packed >> 4, packed & 15
    return levels * _STEP_DB, data[0]


class Alignment(NamedTuple):
    """Two profiles at their best alignment: the share of sounding frames that
    match, the longest run that does not (seconds), the shares of the shorter
    and the longer one's sound within the overlap, the sound they share
    (seconds), the time scale and the offset (seconds, of the second)."""

    matched: float = 0.0
    longest_gap_s: float = 0.0
    shorter_covered: float = 0.0
    longer_covered: float = 0.0
    common_s: float = 0.0
    scale: float = 1.0
    offset_s: float = 0.0

    @property
    def same(self) -> bool:
        """Whether they are one recording (the module docstring's rules)."""
        return (self.matched >= _MATCHED and self.longest_gap_s < _RUN * _HOP_S - 1e-9
                and self.shorter_covered >= _SHORTER_COVERED
                and self.longer_covered >= _LONGER_COVERED and self.common_s >= _COMMON_S)

    def describe(self) -> str:
        """In words, for the list of pairs alike but not one."""
        return (f"{self.matched:.0%} of frames match, {self.longest_gap_s:.2f} s the longest "
                f"that do not, {self.common_s:.1f} s of sound in common")


def _stretched(levels: np.ndarray, scale: float, phase: float) -> np.ndarray:
    """The frames at times phase, phase + scale, ... (linear between frames)."""
    times = np.arange(phase, len(levels) - 1 + 1e-9, scale)
    below = times.astype(int)
    above = np.minimum(below + 1, len(levels) - 1)
    weight = (times - below)[:, None]
    return levels[below] * (1 - weight) + levels[above] * weight


def _longest_run(flags: np.ndarray) -> int:
    """The length of the longest run of True."""
    if not flags.any():
        return 0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
    return int((edges[1::2] - edges[::2]).max())


def _at(first: np.ndarray, second: np.ndarray, lag: int, scale: float, hop_s: float,
        sounding: tuple) -> Alignment:
    """The alignment of `second` (stretched) with its frame 0 at `first`'s
    frame `lag`."""
    start, stop = max(0, lag), min(len(first), len(second) + lag)
    if stop - start < 2:
        return Alignment()
    a, b = first[start:stop], second[start - lag:stop - lag]
    sounds_a, sounds_b = sounding[0][start:stop], sounding[1][start - lag:stop - lag]
    both, either = sounds_a & sounds_b, sounds_a | sounds_b
    if not both.any():
        return Alignment()
    shape_a, shape_b = a - a.mean(1, keepdims=True), b - b.mean(1, keepdims=True)
    cosine = (shape_a * shape_b).sum(1) / (
        np.linalg.norm(shape_a, axis=1) * np.linalg.norm(shape_b, axis=1) + 1e-9)
    loudness = a.mean(1) - b.mean(1)
    loudness -= np.median(loudness[both])
    good = both & (cosine > _SHAPE_COSINE) & (np.abs(loudness) < _LOUDNESS_DB)
    covered = (sounds_a.sum() / max(1, sounding[0].sum()),
               sounds_b.sum() / max(1, sounding[1].sum()))
    shorter = 0 if sounding[0].sum() <= sounding[1].sum() else 1
    return Alignment(good.sum() / either.sum(), _longest_run(either & ~good) * hop_s,
                     covered[shorter], covered[1 - shorter], both.sum() * hop_s, scale,
                     lag * hop_s)


def _correlation(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Their full cross-correlation (np.correlate(first, second, "full")), by
    FFT: index i is `second` shifted by i - (len(second) - 1)."""
    size = len(first) + len(second) - 1
    spectrum = np.fft.rfft(first, size) * np.conj(np.fft.rfft(second, size))
    shifted = np.fft.irfft(spectrum, size)
    return np.roll(shifted, len(second) - 1)


def _envelope(levels: np.ndarray) -> np.ndarray:
    """Each frame's loudness above the sounding floor (0 below it)."""
    loudness = levels.mean(1)
    return np.clip(loudness - (loudness.max() - _SOUNDING_DB), 0, None)


def compare(first: str, second: str) -> Alignment:
    """The best alignment of two recordings' encoded profiles (module
    docstring): the first found that is one recording, from time scale 1 out;
    the best at scale 1 when even that matches less than _WORTH_SCALING."""
    (a, pooled_a), (b, pooled_b) = _decoded(first), _decoded(second)
    for _ in range(abs(pooled_a - pooled_b)):   # the finer one pooled to the other's frames
        if pooled_a < pooled_b:
            a = _pooled(a)
        else:
            b = _pooled(b)
    hop_s = _HOP_S * 2 ** max(pooled_a, pooled_b)
    if not len(a) or not len(b):
        return Alignment()
    sounding_a = a.max(1) >= a.max() - _SOUNDING_DB
    envelope_a = _envelope(a)
    best = Alignment()
    for scale in _SCALES:
        for phase in _PHASES:
            stretched = _stretched(b, scale, phase)
            envelope_b = _envelope(stretched)
            score = _correlation(envelope_a - envelope_a.mean(),
                                 envelope_b - envelope_b.mean())
            sounding = (sounding_a, stretched.max(1) >= stretched.max() - _SOUNDING_DB)
            for index in np.argsort(score)[-_LAGS:]:
                found = _at(a, stretched, int(index) - (len(stretched) - 1), float(scale),
                            hop_s, sounding)
                if found.same:
                    return found
                if found.matched * found.longer_covered > best.matched * best.longer_covered:
                    best = found
        if scale == 1 and best.matched < _WORTH_SCALING:
            return best
    return best
