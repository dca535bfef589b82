"""Audio features: filterbank, log-mel or MFCC frames of an example's audio.

Beam-free pure functions; the cut (transforms/media/cutting.py) computes them
on the audio each example holds (a window, an utterance, a segment, the audio
around a frame) as `float32[frames, dims]`.

- `fbank` and `mfcc` are Kaldi's (`compute-fbank-feats`, `compute-mfcc-feats`
  with `--dither=0`: deterministic) on the 16-bit integer scale Kaldi reads
  a WAV at (float audio times 32768): DC offset removed, pre-emphasis 0.97,
  a Povey window, frames within the audio (`snip_edges`), the power
  spectrum through mel bins from 20 Hz to Nyquist, log; MFCCs with
  `num_ceps` coefficients of the DCT, lifter 22, the frame's log energy as
  the first. Computed here all frames at once, in float32: at 1.3 ms a
  second of audio, kaldi-native-fbank (a frame at a time, its mel banks
  built anew for every example) took more than the rest of a windows job.
  The FFT is scipy.fft's (`frame_spectra`): on 998 frames in float32 it
  takes 0.49 ms against numpy's 1.14 (benchmarks/kernels_bench.py). The
  tests hold it to kaldi-native-fbank's output and to a plain
  implementation of Kaldi's definitions.
- `logmel` is TensorFlow's `tf.signal` recipe, what a Keras model computing
  its features online does: `tf.signal.stft` (periodic Hann window, FFT the
  next power of two), its magnitude through
  `tf.signal.linear_to_mel_weight_matrix` (HTK mel, 20 Hz to Nyquist), then
  `log(x + 1e-6)`; computed with numpy here, so the converter needs no
  TensorFlow, and tested against tf.signal itself.

Every kind frames the audio the same way: `frame_ms` long every `shift_ms`,
as many whole frames as fit (1 + (samples - length) // shift). Audio shorter
than one frame has no features: `compute_features` raises MediaError.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import numpy as np
import threadpoolctl

from transforms.format.arguments import ArgumentError, ArgumentTypeError, check_choice
from transforms.media.decoded import MediaError, full_scale_floats

__all__ = ["AudioFeatures", "FEATURE_DTYPES", "FEATURE_KINDS", "WindowFeatures",
           "compute_features", "describe_in_words", "frame_spectra", "frames_of"]

FEATURE_KINDS = ("fbank", "logmel", "mfcc")
# How features are stored: as float32 values, or float16 packed into bytes.
FEATURE_DTYPES = ("float32", "float16")
# Kaldi reads 16-bit audio as its integer values; float audio is in [-1, 1].
_KALDI_SCALE = 32768.0
_LOW_HZ = 20.0
_PREEMPHASIS = np.float32(0.97)
_CEPSTRAL_LIFTER = 22
_FLOAT_EPSILON = np.finfo(np.float32).eps  # Kaldi's floor under a log
_LOG_OFFSET = 1e-6  # tf.signal's log-mel guide adds this before the log


@dataclasses.dataclass(frozen=True)
class AudioFeatures:
    """Which features to compute from each example's audio; `kind` "" for none.

    `num_mel_bins` mel bands (fbank and logmel features have that many
    values a frame; MFCCs are computed from them), `num_ceps` MFCCs a frame,
    frames `frame_ms` long every `shift_ms`. `keep_waveform` writes the
    audio too; by default the features replace it. `dtype` "float16" stores
    them at half the size: read back as float32, each value within 2^-11 of
    itself (0.05%; an 80-bin fbank's largest error is about 0.008, Lhotse's
    lilcom allows 0.016).

    >>> import transforms as dg
    >>> cut = dg.CutOptions(mode="audio_windows", audio_fields=("flac",),
    ...                     audio_features=dg.AudioFeatures("fbank", num_mel_bins=40))
    >>> [(f.name, f.shape) for f in cut.features][:1]   # 98 frames in each 1 s window
    [('fbank', (98, 40))]
    """

    kind: str = ""
    num_mel_bins: int = 80
    num_ceps: int = 13
    frame_ms: float = 25.0
    shift_ms: float = 10.0
    keep_waveform: bool = False
    dtype: str = "float32"

    def __post_init__(self):
        check_choice("kind", self.kind, ("", *FEATURE_KINDS))
        check_choice("dtype", self.dtype, FEATURE_DTYPES)
        if not isinstance(self.num_mel_bins, int) or self.num_mel_bins < 1:
            raise ArgumentError("num_mel_bins", f"must be an int >= 1, got {self.num_mel_bins!r}")
        if self.kind == "mfcc" and not 1 <= self.num_ceps <= self.num_mel_bins:
            raise ArgumentError("num_ceps", f"{self.num_ceps}: MFCCs are between 1 and "
                                f"{{num_mel_bins}} ({self.num_mel_bins}) a frame")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                   for v in (self.frame_ms, self.shift_ms)):
            raise ArgumentTypeError("frame_ms", f"and {{shift_ms}} must be numbers, got "
                                    f"{self.frame_ms!r} and {self.shift_ms!r}")
        if not 0 < self.shift_ms <= self.frame_ms:
            raise ArgumentError("frame_ms", f"{self.frame_ms} and {{shift_ms}} {self.shift_ms}: "
                                "a shift > 0 and not longer than the frame")

    def __bool__(self) -> bool:
        return bool(self.kind)

    @property
    def stored_dtype(self) -> str:
        """The spec's dtype of the features: float, or packed float16."""
        return "float" if self.dtype == "float32" else self.dtype

    @property
    def dims(self) -> int:
        """Values a frame."""
        return self.num_ceps if self.kind == "mfcc" else self.num_mel_bins

    def frame_samples(self, sample_rate: int) -> tuple[int, int]:
        """(frame length, shift) in samples at `sample_rate`."""
        return (round(sample_rate * self.frame_ms / 1000),
                round(sample_rate * self.shift_ms / 1000))

    def num_frames(self, num_samples: int, sample_rate: int) -> int:
        """Frames in `num_samples` of audio (0 when shorter than one)."""
        length, shift = self.frame_samples(sample_rate)
        return 0 if num_samples < length else 1 + (num_samples - length) // shift

    def check_rate(self, sample_rate: int) -> None:
        """ArgumentError when a mel bin would hold no FFT bin at `sample_rate`
        (too many bins for the rate and frame length: the bin's energy would be
        the log floor in every frame, which Kaldi refuses as "num-mel-bins too
        large"), naming the most bins that rate allows."""
        if not self or not _empty_mel_bins(sample_rate, self):
            return
        allowed = next(n for n in range(self.num_mel_bins - 1, 0, -1)
                       if not _empty_mel_bins(sample_rate, dataclasses.replace(
                           self, num_mel_bins=n, num_ceps=min(self.num_ceps, n))))
        raise ArgumentError("num_mel_bins", f"{self.num_mel_bins} is too many for {sample_rate} "
                            f"Hz audio in {self.frame_ms:g} ms frames: "
                            f"{_empty_mel_bins(sample_rate, self)} mel bins would hold no "
                            f"FFT bin (Kaldi refuses this); at most {allowed} at that rate")

    def describe(self, sample_rate: int) -> dict:
        """What the manifest and TFDS's metadata say of the feature."""
        matches = {"fbank": "Kaldi's compute-fbank-feats --dither=0",
                   "mfcc": "Kaldi's compute-mfcc-feats --dither=0",
                   "logmel": "tf.signal: stft, linear_to_mel_weight_matrix, log(x + 1e-6)"}
        return {"kind": self.kind, "num_mel_bins": self.num_mel_bins,
                **({"num_ceps": self.num_ceps} if self.kind == "mfcc" else {}),
                "frame_length_ms": self.frame_ms, "frame_shift_ms": self.shift_ms,
                "sample_rate": sample_rate, "low_hz": _LOW_HZ, "high_hz": sample_rate / 2,
                "matches": matches[self.kind], "dtype": self.dtype}


def describe_in_words(description: dict) -> str:
    """An `AudioFeatures.describe()` in a line, for TFDS's feature docs."""
    values = (f"{description['num_ceps']} MFCCs" if description["kind"] == "mfcc"
              else f"{description['num_mel_bins']} log mel energies")
    stored = ", stored as float16" if description.get("dtype") == "float16" else ""
    return (f"{values} a frame ({description['matches']}), "
            f"{description['frame_length_ms']:g} ms frames every "
            f"{description['frame_shift_ms']:g} ms of {description['sample_rate']} Hz audio"
            f"{stored}")


def compute_features(audio: np.ndarray, sample_rate: int, options: AudioFeatures) -> np.ndarray:
    """`float32[frames, options.dims]` of mono `audio` (float in [-1, 1], or
    int16 as the decoder writes it); MediaError (stage `features`) when it is
    shorter than one frame."""
    frames = options.num_frames(len(audio), sample_rate)
    if not frames:
        raise MediaError(f"{len(audio)} samples at {sample_rate} Hz is shorter than one "
                         f"{options.frame_ms:g} ms feature frame", stage="features")
    floats = full_scale_floats(audio)
    if options.kind == "logmel":
        return _logmel(floats, sample_rate, options)
    return _kaldi(floats * np.float32(_KALDI_SCALE), sample_rate, options, frames)


class WindowFeatures:
    """The features of one recording's windows, given in the order they start
    (an audio_windows cut): a window that starts a whole number of frame
    shifts after the one before takes the frames they share from it rather
    than computing them again, so overlapping windows (a hop shorter than
    the window) cost about their hop's frames each. Every kind computes a
    frame from its own samples alone, so the values are compute_features'
    (to float32's last bit: BLAS orders a product's sums by how many rows it
    is given). A window off that grid (a random crop) is computed whole.

        features = WindowFeatures(16000, AudioFeatures("fbank"))
        for window in windows:
            window_fbank = features(window.samples, window.start)
    """

    def __init__(self, sample_rate: int, options: AudioFeatures):
        self._rate, self._options = sample_rate, options
        self._shift = options.frame_samples(sample_rate)[1]
        self._origin: float | None = None   # the first window's start, seconds
        self._first = 0                     # the frame the kept features start at
        self._kept: np.ndarray | None = None

    def __call__(self, audio: np.ndarray, start_s: float) -> np.ndarray:
        if self._origin is None:
            self._origin = start_s
        offset = round((start_s - self._origin) * self._rate)
        if offset % self._shift:
            return compute_features(audio, self._rate, self._options)
        first = offset // self._shift
        frames = self._options.num_frames(len(audio), self._rate)
        shared = 0
        if self._kept is not None and first >= self._first:
            shared = max(0, min(self._first + len(self._kept) - first, frames))
        if not shared:
            features = compute_features(audio, self._rate, self._options)
        else:
            reused = self._kept[first - self._first:first - self._first + shared]
            features = reused if shared == frames else np.concatenate(
                [reused, compute_features(audio[shared * self._shift:], self._rate,
                                          self._options)])
        self._first, self._kept = first, features
        # A copy of its own: an example_fn changing it in place changes no other window.
        return features.copy()


@functools.lru_cache(maxsize=16)
def _kaldi_parts(sample_rate: int, options: AudioFeatures) -> tuple:
    """(Povey window, FFT length, paired mel banks in _Bands, lifted DCT or
    None) as Kaldi makes them, in float32. The banks weigh the FFT's bins
    below Nyquist, each row twice: once for a bin's real part squared, once
    for its imaginary part (`_kaldi_block`)."""
    length, _ = options.frame_samples(sample_rate)
    n = np.arange(length)
    window = ((0.5 - 0.5 * np.cos(2 * np.pi * n / (length - 1))) ** 0.85).astype(np.float32)
    fft_length = 1 << (length - 1).bit_length()

    def mel(hz):
        return 1127.0 * np.log1p(np.asarray(hz, np.float64) / 700.0)

    # Triangles equal in mel over the FFT bins below Nyquist (Kaldi's MelBanks).
    bins = options.num_mel_bins
    low, high = mel(_LOW_HZ), mel(sample_rate / 2)
    step = (high - low) / (bins + 1)
    left = low + step * np.arange(bins)
    centre, right = left + step, left + 2 * step
    fft_mel = mel(np.arange(fft_length // 2) * sample_rate / fft_length)[:, None]
    rising, falling = (fft_mel - left) / (centre - left), (right - fft_mel) / (right - centre)
    banks = np.where((fft_mel > left) & (fft_mel < right), np.minimum(rising, falling), 0.0)
    banks = np.concatenate([banks, np.zeros((1, bins))]).astype(np.float32)
    lifted = None
    if options.kind == "mfcc":
        k, m = np.arange(options.num_ceps)[:, None], np.arange(bins)[None, :]
        dct = np.sqrt(2 / bins) * np.cos(np.pi / bins * (m + 0.5) * k)
        dct[0] = np.sqrt(1 / bins)
        lifter = 1 + _CEPSTRAL_LIFTER / 2 * np.sin(np.pi * np.arange(options.num_ceps)
                                                   / _CEPSTRAL_LIFTER)
        lifted = (dct * lifter[:, None]).T.astype(np.float32)
    return window, fft_length, _bands(np.repeat(banks, 2, axis=0)), lifted


class _Band(NamedTuple):
    """Adjacent mel bins (`bins`) and the spectrum values they weigh (`rows`):
    a block of the mel weights, all of its nonzero ones."""

    bins: slice
    rows: slice
    weights: np.ndarray


# Mel bins a band of the mel product takes: each band multiplies only the
# spectrum values its triangles weigh (at 80 bins and 16 kHz, a fifth of the
# dense product's work), and 16 float32 results a row fill whole vector
# registers: for 98 frames 23 µs against 68 dense; bands of 13 or 14 bins
# took 30.
_BAND_BINS = 16


def _bands(weights: np.ndarray) -> tuple:
    """`weights` (spectrum values x mel bins: triangles along a diagonal) as
    _Bands of _BAND_BINS mel bins each."""
    bands = []
    for first in range(0, weights.shape[1], _BAND_BINS):
        bins = slice(first, min(first + _BAND_BINS, weights.shape[1]))
        weighed = np.flatnonzero(weights[:, bins].any(axis=1))
        rows = slice(weighed[0], weighed[-1] + 1) if len(weighed) else slice(0, 0)
        bands.append(_Band(bins, rows, np.ascontiguousarray(weights[rows, bins])))
    return tuple(bands)


def _mel_product(values: np.ndarray, bands: tuple) -> np.ndarray:
    """`values` (frames x spectrum values) times the mel weights, band by band."""
    out = np.empty((len(values), bands[-1].bins.stop), np.float32)
    for band in bands:
        np.matmul(values[:, band.rows], band.weights, out=out[:, band.bins])
    return out


# Frames the kernels take at a time (a 1 s window's 98 in one): a block's
# arrays (a quarter megabyte each at 16 kHz) stay in the core's cache and the
# allocator hands the same memory back for the next block, where a long
# recording's whole frame matrix would be fresh pages on every call (their
# faults cost more than the FFT). Measured best of 32 to 256 frames.
_BLOCK_FRAMES = 128


def frames_of(audio: np.ndarray, length: int, shift: int, count: int | None = None):
    """A read-only view of `audio` as `count` frames (as many as fit when
    None) of `length` samples every `shift`: numpy's sliding_window_view,
    without its 6 µs of checks a call (a 1 s window's features take 140)."""
    if count is None:
        count = 1 + (len(audio) - length) // shift if len(audio) >= length else 0
    step = audio.strides[0]
    return np.lib.stride_tricks.as_strided(audio, (count, length), (shift * step, step),
                                           writeable=False)


def _padded_frames(count: int, length: int, fft_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(a zeroed float32[count, fft_length], the view of its first `length`
    columns): frames written into the view are already padded for the FFT,
    which then copies nothing."""
    padded = np.zeros((count, fft_length), np.float32)
    return padded, padded[:, :length]


def frame_spectra(frames: np.ndarray, fft_length: int | None = None,
                  overwrite: bool = False) -> np.ndarray:
    """The real FFT of each row of `frames` (float32 in, complex64 out), on
    the calling thread: scipy.fft's, less than half numpy's time in float32
    (benchmarks/kernels_bench.py). `overwrite` lets it use `frames` as
    scratch space."""
    return _scipy_fft().rfft(frames, fft_length, axis=1, workers=1, overwrite_x=overwrite)


@functools.cache
def _scipy_fft():
    # Imported by the first spectrum: a job computing none skips its 0.1 s at start.
    import scipy.fft
    return scipy.fft


@functools.cache
def _blas() -> threadpoolctl.ThreadpoolController:
    """numpy's BLAS, whose threads the kernels keep to one."""
    return threadpoolctl.ThreadpoolController().select(user_api="blas")


def _in_blocks(frames: np.ndarray, dims: int, kernel) -> np.ndarray:
    """`kernel` over `frames` (a view of the audio, a frame a row) a block of
    rows at a time -> float32[len(frames), dims]. The mel product runs on the
    calling thread: BLAS would otherwise spin up a thread per core for it and
    burn them waiting (half as much CPU again on a windows job), taking the
    cores the other workers convert on."""
    out = np.empty((len(frames), dims), np.float32)
    with _blas().limit(limits=1):
        for start in range(0, len(frames), _BLOCK_FRAMES):
            out[start:start + _BLOCK_FRAMES] = kernel(frames[start:start + _BLOCK_FRAMES])
    return out


def _kaldi(audio: np.ndarray, sample_rate: int, options: AudioFeatures,
           frames: int) -> np.ndarray:
    """Kaldi's fbank (or MFCC) frames, vectorised over blocks of frames."""
    length, shift = options.frame_samples(sample_rate)
    parts = _kaldi_parts(sample_rate, options)
    framed = frames_of(audio, length, shift, frames)
    return _in_blocks(framed, options.dims, functools.partial(_kaldi_block, *parts))


def _kaldi_block(window: np.ndarray, fft_length: int, paired_banks: tuple,
                 lifted: np.ndarray | None, frames: np.ndarray) -> np.ndarray:
    """A block of frames' log mel energies (or MFCCs), float32 throughout."""
    padded, centred = _padded_frames(len(frames), frames.shape[1], fft_length)
    mean = np.add.reduce(frames, axis=1, keepdims=True) / np.float32(frames.shape[1])
    np.subtract(frames, mean, out=centred)   # worked on in place from here
    # An MFCC's first coefficient is the frame's log energy, before pre-emphasis.
    energy = None if lifted is None else np.einsum("ij,ij->i", centred, centred)
    previous = centred[:, :-1] * _PREEMPHASIS
    centred[:, 1:] -= previous
    centred[:, 0] *= 1 - _PREEMPHASIS
    centred *= window
    spectrum = frame_spectra(padded, overwrite=True)
    # The power spectrum and the mel banks in one product: each bin's real and
    # imaginary parts squared side by side, the banks' rows paired to match.
    squares = spectrum.view(np.float32)
    np.square(squares, out=squares)
    energies = np.log(np.maximum(_mel_product(squares, paired_banks), _FLOAT_EPSILON))
    if lifted is None:
        return energies
    mfcc = energies @ lifted
    mfcc[:, 0] = np.log(np.maximum(energy, _FLOAT_EPSILON))
    return mfcc


def _empty_mel_bins(sample_rate: int, options: AudioFeatures) -> int:
    """How many of the mel bins `options.kind` lays over the FFT bins at
    `sample_rate` weigh none of them."""
    parts = (_tf_signal_parts if options.kind == "logmel" else _kaldi_parts)(sample_rate, options)
    return sum(int(np.count_nonzero(~band.weights.any(axis=0))) for band in parts[2])


@functools.lru_cache(maxsize=16)
def _tf_signal_parts(sample_rate: int, options: AudioFeatures) -> tuple:
    """(window, FFT length, mel weights in _Bands) as tf.signal makes them, in float32."""
    length, _ = options.frame_samples(sample_rate)
    n = np.arange(length, dtype=np.float32)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * n / length)).astype(np.float32)  # periodic Hann
    fft_length = 1 << (length - 1).bit_length()
    bins = fft_length // 2 + 1

    def mel(hz):
        return 1127.0 * np.log1p(np.asarray(hz, np.float32) / 700.0)

    # linear_to_mel_weight_matrix: the DC bin weighs nothing; triangles in mel.
    spectrum_mel = mel(np.linspace(0.0, sample_rate / 2, bins, dtype=np.float32)[1:])[:, None]
    edges = np.linspace(mel(_LOW_HZ), mel(sample_rate / 2), options.num_mel_bins + 2,
                        dtype=np.float32)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    weights = np.maximum(0.0, np.minimum((spectrum_mel - lower) / (center - lower),
                                         (upper - spectrum_mel) / (upper - center)))
    weights = np.concatenate([np.zeros((1, options.num_mel_bins)), weights]).astype(np.float32)
    return window, fft_length, _bands(weights)


def _logmel(audio: np.ndarray, sample_rate: int, options: AudioFeatures) -> np.ndarray:
    length, shift = options.frame_samples(sample_rate)
    window, fft_length, bands = _tf_signal_parts(sample_rate, options)

    def kernel(frames: np.ndarray) -> np.ndarray:
        padded, windowed = _padded_frames(len(frames), length, fft_length)
        np.multiply(frames, window, out=windowed)
        magnitude = np.abs(frame_spectra(padded, overwrite=True))
        return np.log(_mel_product(magnitude, bands) + np.float32(_LOG_OFFSET))

    framed = frames_of(audio, length, shift)
    return _in_blocks(framed, options.num_mel_bins, kernel)
