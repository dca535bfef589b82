"""Near duplicates: the same audio re-encoded lossy or cut at another start.

Beam-free. No exact digest (transforms/recipe/fingerprints.py) finds these,
so a sample also gets a `near` fingerprint when --near_duplicates asks: a
MinHash signature of its spectral-peak landmarks (pairs of strong
spectrogram peaks: their two frequencies and the time between them, as
audio-identification systems take them; Wang 2003). Re-encoding moves few
peaks and an offset moves none relative to each other, so two copies share
most landmarks; `near_similarity` estimates the Jaccard similarity of two
samples' landmark sets from their signatures, and `near_bands` gives the
locality-sensitive keys that bring likely pairs together
(transforms/checks/near_groups.py). Both set aside the landmarks common to
much of the corpus (`LandmarkTally`): a sound many recordings share is not
evidence that two of them are one.

A peak is judged in ratios alone (its level against the bins around it and
against the loudest bin heard so far), so a copy at another gain has the
same landmarks: a gain is no change. Landmarks only propose: the digest
also carries the recording's band-level profile (transforms/media/
same_recording.py), taken from the same spectra, by which a pair proposed
is confirmed as one recording, or not, before anything is dropped.

The landmarks are taken from the audio as the cut decodes it (a `NearTap` on
its blocks, resampled to 8 kHz as they pass), so the job decodes the audio
once; `near_fingerprints` decodes it the same way for a cut that decodes no
audio (whole samples), and gives the same digest.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

import numpy as np
import soxr

from transforms.format.sample import SPAN
from transforms.media.audio import AudioOptions, stream_audio
from transforms.media.decoded import Audio, MediaError, full_scale_floats, staged
from transforms.media.features import frame_spectra, frames_of
from transforms.media.same_recording import Profile

__all__ = ["NEAR", "NEAR_LANDMARKS", "NOTHING_COMMON", "LandmarkTally", "NearTap", "band_rows",
           "minhash", "near_bands", "near_fingerprints", "near_match", "near_similarity",
           "profile_of"]

NEAR = "near"
# The landmarks' scheme, which a signature is of: two schemes' signatures
# cannot be compared, so a run resumed across a change of it (#48 whitened
# the peaks, #56 made them gain-free and added the profile) reuses none of
# the other's units (transforms/writer/ledger.py).
NEAR_LANDMARKS = "gain-free whitened peaks, 196 bins; 16-band profile"

# The landmarks' audio: 8 kHz mono, 64 ms frames every 16 ms; peaks between
# 62 Hz and 3.1 kHz (where speech and most sound events hold their energy,
# and what lossy codecs keep). A peak is the largest bin within 3 of it and
# stands 0.7 (log magnitude) above the mean of the 17 bins around it: a
# whitened spectrum, so the slope of a noise's colour makes no peak (the
# strongest bins of brown noise are always its lowest: every brown noise
# would share them). A frame keeps its 3 that stand highest, each paired
# with the next 14 peaks within 40 frames (0.64 s): 196 x 196 x 40 values.
# Tuned on espeak-ng speech re-encoded by ffmpeg and cut by sox, against
# independent sox noises, hums and chords (benchmarks/duplicates_bench.py
# measures recall and false positives).
_NEAR_RATE = 8000
_FRAME, _HOP = 512, 128
_LOW_BIN, _HIGH_BIN = 4, 200
_PEAKS_PER_FRAME, _PEAK_RISE = 3, 0.7
_PEAK_REACH, _MEAN_BINS = 3, 17   # a peak is the largest within _PEAK_REACH bins
_FAN_OUT, _MAX_DT = 14, 40
# The signature: one-permutation MinHash (Li, Owen and Zhang 2012). Each
# landmark is hashed once into [0, 2^31 - 1), its low 7 bits choosing one of
# 128 bins, and a bin keeps its smallest hash: a bin of two samples holds the
# same minimum with probability their landmark sets' Jaccard similarity
# (estimated from 128 bins to about +-0.04). Its bins, cut into b bands of r
# rows (b = 128 // r), are the keys: two samples of similarity s share a band
# with probability 1 - (1 - s^r)^b, an S-curve whose rise `band_rows` places
# below the threshold t: the largest r (the fewest chance candidates) with
# which a pair at t itself shares one with probability 0.9 or more. At 0.4:
# 42 bands of 3 (0.94 at 0.4, 0.996 at 0.5; 0.04 at 0.1); at 0.6, 32 of 4
# (0.99 at 0.6; 0.003 at 0.2); at 0.8, 16 of 8.
_BINS = 128
_BAND_RECALL = 0.9
_PRIME = (1 << 31) - 1
_MULTIPLIER, _OFFSET = 1_103_515_245, 12_345
_EMPTY = np.uint32(_PRIME)
# A bin whose minimum is a common landmark, in a band key: above any hash.
_COMMON = np.uint32(_PRIME + 1)
# Fewer distinct landmarks than this estimate nothing: no signature. Silence
# and clicks have few landmarks; a steady tone or a hum repeats a few dozen
# (a three-tone chord 39, mains hum 14), and every recording of one would
# match every other.
_MIN_DISTINCT = 100
# Common landmarks: a document-frequency stop list, as audio identification
# keeps one. A landmark that is a bin's minimum in 2% or more of the corpus's
# signatures, and in 20 or more, is a sound many recordings share (a call
# centre's greeting, a podcast's jingle, a room's hum), not evidence that two
# of them are one recording: a near pair must also be alike on the rest
# (`near_match`), and a band of common bins is no key. Forty calls that open
# with one 4 s greeting before different answers are 0.54 alike (median) on
# all their landmarks, 0.04 on the rest. A clip copied many times looks the
# same from its landmarks, so the cut spares the clusters the check is for
# (10,000 copies in a million samples are 1%; 19 whatever the corpus), and a
# sample whose bins are _MOSTLY_COMMON or more common is that sound itself,
# compared whole: an Opus copy of a clip 25 times in 62 samples keeps 80% of
# its bins common, a call after a shared greeting 50-66% (measured, #56).
# Landmarks only propose: a pair of calls with short answers, mostly the
# greeting, is proposed and then found no copy frame by frame
# (transforms/media/same_recording.py); copies of a common clip that keep
# less than _MOSTLY_COMMON of it are not proposed.
_COMMON_SHARE, _COMMON_FLOOR, _MOSTLY_COMMON = 0.02, 20, 0.75
# A near pair is alike by the threshold on all its landmarks and by this much
# of it on the rest: a copy's new landmarks are never common, so a pair of
# copies is a little less alike on the rest than on all.
_OWN_SHARE = 0.75
# Votes a tally takes before it sums them.
_TALLY_BATCH = 1 << 16
# Frames whose spectra are taken at a time: their arrays stay in the core's
# cache (as the features', transforms/media/features.py).
_BLOCK_FRAMES = 128
# A time no peak has: the padding after the last peak pairs with none.
_NEVER = 1 << 40
# Spectra are compared in the log of their magnitude plus this much of the
# loudest bin heard so far: a floor that scales with the audio, as log1p's
# did at full scale (a loud frame's peaks stand near 64 times it), so a gain
# moves no peak and quiet codec noise makes none.
_FLOOR = 1 / 64


def _strongest(spectrum: np.ndarray, count: int) -> np.ndarray:
    """The bins of each frame's `count` largest values, a frame a row: an
    argmax a time, the bin found set aside (nine times argpartition's speed
    for the three a landmark frame keeps)."""
    rest = spectrum.copy()
    rows = np.arange(len(rest))
    found = np.empty((len(rest), count), np.intp)
    for k in range(count):
        found[:, k] = rest.argmax(axis=1)
        rest[rows, found[:, k]] = -np.inf
    return found


def _peaked(spectrum: np.ndarray) -> np.ndarray:
    """Whether each bin is the largest within _PEAK_REACH bins of it in its
    frame: the maximum of 7 bins by three maxima of halving overlap (van
    Herk's), a fifth of scipy's maximum_filter1d's time here."""
    edge = np.full((len(spectrum), _PEAK_REACH), -np.inf, spectrum.dtype)
    padded = np.concatenate([edge, spectrum, edge], axis=1)
    two = np.maximum(padded[:, :-1], padded[:, 1:])
    four = np.maximum(two[:, :-2], two[:, 2:])          # bins j .. j + 3
    return spectrum >= np.maximum(four[:, :-_PEAK_REACH], four[:, _PEAK_REACH:])


def minhash(landmarks: np.ndarray, signature: np.ndarray | None = None) -> np.ndarray:
    """The one-permutation MinHash of `landmarks` (uint64), merged into
    `signature` (128 uint32 bins) when given: what a `near` digest holds."""
    if signature is None:
        signature = np.full(_BINS, _EMPTY, np.uint32)
    hashed = (landmarks * _MULTIPLIER + _OFFSET) % _PRIME
    np.minimum.at(signature, (hashed % _BINS).astype(np.intp), hashed.astype(np.uint32))
    return signature


class _Landmarks:
    """Streams audio blocks into the MinHash of their landmarks: memory stays a
    frame and a few peaks however long the recording."""

    def __init__(self):
        self._pending = np.empty(0, np.float32)
        self._frame = 0                                  # index of the next frame
        self._recent = np.empty((0, 2), np.int64)        # (frame, bin) of the last peaks
        self._window = np.hanning(_FRAME).astype(np.float32)
        self._loudest = 0.0                              # the loudest bin's magnitude so far
        self.signature = np.full(_BINS, _EMPTY, np.uint32)
        self.profile = Profile()                         # fed every other frame's power
        self._distinct: set = set()   # up to _MIN_DISTINCT of them: enough to tell

    @property
    def enough(self) -> bool:
        """Whether it heard enough distinct landmarks for a signature."""
        return len(self._distinct) >= _MIN_DISTINCT

    def update(self, samples: np.ndarray) -> None:
        pending = np.concatenate([self._pending, samples])
        frames = frames_of(pending, _FRAME, _HOP)
        count = len(frames)
        if not count:
            self._pending = pending
            return
        self._pending = pending[count * _HOP:]
        peaks = [self._recent] + [self._peaks(frames[start:start + _BLOCK_FRAMES], start)
                                  for start in range(0, count, _BLOCK_FRAMES)]
        self._frame += count
        self._pair(np.concatenate(peaks))

    def _peaks(self, frames: np.ndarray, start: int) -> np.ndarray:
        """(frame, bin) of the peaks of a block of frames (from this update's
        `start`-th frame on), in frame then bin order; the profile fed the
        power of those of even index."""
        # The features' FFT; the log of the peaks' band only.
        spectrum = frame_spectra(frames * self._window, overwrite=True)
        first = self._frame + start
        self.profile.add(np.abs(spectrum[first % 2::2]) ** 2)
        magnitude = np.abs(spectrum[:, _LOW_BIN:_HIGH_BIN])
        loudest = np.maximum.accumulate(np.maximum(magnitude.max(axis=1), self._loudest))
        self._loudest = float(loudest[-1])
        spectrum = np.log(magnitude + _FLOOR * loudest[:, None] + 1e-12)
        # Imported here: scipy.ndimage takes ~0.4 s to import, and only a job
        # that finds near duplicates needs it.
        from scipy.ndimage import uniform_filter1d
        rise = spectrum - uniform_filter1d(spectrum, _MEAN_BINS, axis=1, mode="nearest")
        rise[~_peaked(spectrum)] = -np.inf
        strongest = _strongest(rise, _PEAKS_PER_FRAME)
        rows = np.arange(len(frames))[:, None]
        rises = rise[rows, strongest] > _PEAK_RISE
        frame_of, bin_of = rises.nonzero()[0], strongest[rises]
        order = np.lexsort((bin_of, frame_of))
        return np.stack([frame_of[order] + self._frame + start, bin_of[order]],
                        axis=1).astype(np.int64)

    def _pair(self, peaks: np.ndarray) -> None:
        # The last _FAN_OUT peaks pair again with those still to come: a pair
        # seen twice changes no minimum.
        self._recent = peaks[-_FAN_OUT:]
        # Every peak with each of the next _FAN_OUT, in one pass: a row of
        # `later` holds the _FAN_OUT peaks after a peak (past the last, a
        # frame too far to pair).
        count, times, bins = len(peaks), peaks[:, 0], peaks[:, 1]
        padded = np.concatenate([peaks, np.full((_FAN_OUT, 2), (_NEVER, 0))])
        later = np.lib.stride_tricks.as_strided(padded[1:], (count, _FAN_OUT, 2),
                                                (padded.strides[0],) + padded.strides)
        dt = later[:, :, 0] - times[:, None]
        keep = (dt >= 1) & (dt <= _MAX_DT)
        landmarks = ((bins[:, None] << 14) | (later[:, :, 1] << 6) | dt)[keep].astype(np.uint64)
        if not len(landmarks):
            return
        if not self.enough:
            self._distinct.update(np.unique(landmarks)[:_MIN_DISTINCT].tolist())
        minhash(landmarks, self.signature)


class NearTap:
    """Blocks of one recording's audio, as a cut decodes them (any rate, float32
    or int16), into its `near` fingerprint: resampled to the landmarks' 8 kHz
    as they pass, so memory stays a block."""

    def __init__(self):
        self._landmarks = _Landmarks()
        self._resampler = None
        self._rate = None

    def __call__(self, block: Audio) -> None:
        samples = full_scale_floats(block.samples)
        if self._rate is None:
            self._rate = block.sample_rate
            if self._rate != _NEAR_RATE:
                self._resampler = soxr.ResampleStream(self._rate, _NEAR_RATE, 1,
                                                      dtype="float32")
        if self._resampler is not None:
            samples = self._resampler.resample_chunk(samples.astype(np.float32, copy=False))
        self._landmarks.update(samples)

    def fingerprints(self) -> tuple:
        """((`near`, digest),) of what it heard: its signature's hex, a dot and
        its profile (transforms/media/same_recording.py); () for too little to
        tell (silence, a click, a steady tone)."""
        if self._resampler is not None:
            self._landmarks.update(self._resampler.resample_chunk(np.empty(0, np.float32),
                                                                  last=True))
            self._resampler = None
        if not self._landmarks.enough:
            return ()
        signature = self._landmarks.signature.astype("<u4").tobytes().hex()
        return ((NEAR, f"{signature}.{self._landmarks.profile.encoded()}"),)


def _member_fingerprints(value: Any, name: str, audio: AudioOptions, span) -> tuple:
    tap = NearTap()
    for block in stream_audio(value, audio, name=name, span=span):
        tap(block)
    return tap.fingerprints()


def near_fingerprints(sample: Mapping[str, Any], audio_fields: Iterable[str],
                      video_field: str | None, audio: AudioOptions) -> tuple:
    """((`near`, signature hex),) of the sample's audio decoded by `audio` (the
    cut's options): its first audio field present, else its video's audio
    track; () when it has no audio or too little of it to tell (silence, a
    steady tone).
    Raises MediaError for an audio field that does not decode (a video's
    audio track is taken if it has one: its frames are the cut's to report)."""
    span = sample.get(SPAN)
    bounds = (span.start, span.end) if span is not None else None
    field = next((f for f in audio_fields if f in sample), None)
    if field is not None:
        # Tagged as the cut tags it: a member that does not decode is the same
        # dead letter with or without --near_duplicates.
        return staged("decode_audio", field, _member_fingerprints, sample[field], field, audio,
                      bounds)
    if video_field and video_field in sample:
        try:
            return _member_fingerprints(sample[video_field], video_field, audio, bounds)
        except MediaError:
            return ()
    return ()


def _signature(digest: str) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(digest.partition(".")[0]), "<u4")


def profile_of(digest: str) -> str:
    """The encoded profile a `near` digest carries after its signature."""
    return digest.partition(".")[2]


NOTHING_COMMON = np.empty(0, np.uint32)


class LandmarkTally:
    """How many signatures hold each landmark (as its hash) as a bin's minimum,
    to find the common ones (`common`). Tallies merge, so workers each keep
    one; a tally's memory is bounded by the landmarks there are (3.2 million),
    not by the signatures."""

    def __init__(self):
        self.signatures = 0
        self._hashes = np.empty(0, np.uint32)     # sorted, each once
        self._counts = np.empty(0, np.uint32)
        self._pending: list = []

    def add(self, digest: str) -> None:
        signature = _signature(digest)
        self.signatures += 1
        self._pending.append(signature[signature != _EMPTY])
        if len(self._pending) * _BINS >= _TALLY_BATCH:
            self.compact()

    def compact(self) -> "LandmarkTally":
        """Sums the votes taken since it last did."""
        if self._pending:
            votes = np.concatenate(self._pending)
            self._pending = []
            self._sum(np.concatenate([self._hashes, votes]),
                      np.concatenate([self._counts, np.ones(len(votes), np.uint32)]))
        return self

    @classmethod
    def merged(cls, tallies: Iterable["LandmarkTally"]) -> "LandmarkTally":
        """One tally of all the votes `tallies` took."""
        whole = cls()
        tallies = [tally.compact() for tally in tallies]
        whole.signatures = sum(tally.signatures for tally in tallies)
        whole._sum(np.concatenate([whole._hashes] + [t._hashes for t in tallies]),
                   np.concatenate([whole._counts] + [t._counts for t in tallies]))
        return whole

    def _sum(self, hashes: np.ndarray, counts: np.ndarray) -> None:
        self._hashes, where = np.unique(hashes, return_inverse=True)
        self._counts = np.bincount(where, weights=counts, minlength=len(self._hashes)
                                   ).astype(np.uint32)

    def common(self) -> np.ndarray:
        """The common landmarks' hashes, sorted: those in _COMMON_SHARE of the
        signatures or more, and in _COMMON_FLOOR or more."""
        self.compact()
        cut = max(_COMMON_FLOOR, math.ceil(_COMMON_SHARE * self.signatures))
        return self._hashes[self._counts >= cut]


def _common_bins(signature: np.ndarray, common: np.ndarray) -> np.ndarray:
    """Whether each bin's minimum is a common landmark (`common` sorted)."""
    if not len(common):
        return np.zeros(len(signature), bool)
    at = np.searchsorted(common, signature).clip(max=len(common) - 1)
    return common[at] == signature


def _mostly_common(signature: np.ndarray, common_bins: np.ndarray) -> bool:
    """Whether the sample is itself a common sound: _MOSTLY_COMMON of its
    filled bins or more are common."""
    filled = np.count_nonzero(signature != _EMPTY)
    return bool(filled) and np.count_nonzero(common_bins) >= _MOSTLY_COMMON * filled


def _similarity(first: np.ndarray, second: np.ndarray, common: np.ndarray) -> float:
    votes = (first != _EMPTY) | (second != _EMPTY)
    if len(common):
        first_common, second_common = _common_bins(first, common), _common_bins(second, common)
        if not (_mostly_common(first, first_common) and _mostly_common(second, second_common)):
            # A bin's vote is its smaller minimum's.
            votes &= ~np.where(first <= second, first_common, second_common)
    return float(np.count_nonzero((first == second) & votes) / max(1, np.count_nonzero(votes)))


def near_similarity(digest: str, other: str, common: np.ndarray = NOTHING_COMMON) -> float:
    """The estimated Jaccard similarity of two samples' landmark sets, from 0
    (nothing shared) to 1, from their `near` digests: the share of the bins
    either fills that both fill with the same minimum. A bin whose smaller
    minimum is a `common` landmark (`LandmarkTally.common`) is not counted,
    unless both samples are mostly common: the similarity of what else they
    hold."""
    return _similarity(_signature(digest), _signature(other), common)


def near_match(digest: str, other: str, threshold: float,
               common: np.ndarray = NOTHING_COMMON) -> float | None:
    """The estimated similarity of two samples when they are near duplicates at
    `threshold`: alike by it on all their landmarks, and by _OWN_SHARE of it
    on those that are not `common`; None when they are not."""
    first, second = _signature(digest), _signature(other)
    similarity = _similarity(first, second, NOTHING_COMMON)
    if similarity < threshold:
        return None
    if len(common) and _similarity(first, second, common) < _OWN_SHARE * threshold:
        return None
    return similarity


def band_rows(threshold: float) -> int:
    """The rows of a band for pairs of `threshold` similarity: the most with which
    such a pair still shares a band with probability _BAND_RECALL."""
    def recall(rows: int) -> float:
        return 1 - (1 - threshold ** rows) ** (_BINS // rows)
    return max(rows for rows in range(1, _BINS + 1) if rows == 1 or recall(rows) >= _BAND_RECALL)


def near_bands(digest: str, rows: int, common: np.ndarray = NOTHING_COMMON) -> tuple:
    """The locality-sensitive keys of a `near` digest, in bands of `rows` bins
    (`band_rows`): two samples that share one are worth comparing. A band
    with an empty bin is no key: two samples with few landmarks would share
    it by their emptiness alone. Unless the sample is mostly common, a bin
    holding a `common` landmark is masked, and a band of nothing else is no
    key: two samples would share it by that sound alone."""
    signature = _signature(digest)
    bands = signature[:_BINS // rows * rows].copy()
    if len(common):
        common_bins = _common_bins(signature, common)
        if not _mostly_common(signature, common_bins):
            bands[common_bins[:len(bands)]] = _COMMON
    bands = bands.reshape(-1, rows)
    keep = ~(bands == _EMPTY).any(axis=1) & ~(bands == _COMMON).all(axis=1)
    return tuple(f"{i}:{bands[i].astype('<u4').tobytes().hex()}" for i in keep.nonzero()[0])
