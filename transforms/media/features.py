"""Audio features: filterbank, log-mel or MFCC frames of an example's audio.

Beam-free pure functions; the cut (transforms/media/cutting.py) computes them
on the audio each example holds (a window, an utterance, a segment, the audio
around a frame) as `float32[frames, dims]`.

- `fbank` and `mfcc` are Kaldi's (`compute-fbank-feats`, `compute-mfcc-feats`
  with `--dither=0`: deterministic), computed by kaldi-native-fbank on the
  16-bit integer scale Kaldi reads a WAV at (float audio times 32768): a
  Povey window, pre-emphasis 0.97, DC offset removed, frames within the
  audio (`snip_edges`), mel bins from 20 Hz to Nyquist, log power; MFCCs with
  `num_ceps` coefficients, the frame's log energy as the first, lifter 22.
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
from importlib import metadata

import kaldi_native_fbank as knf
import numpy as np

from transforms.format.arguments import ArgumentError, check_choice
from transforms.media.decoded import MediaError

__all__ = ["AudioFeatures", "FEATURE_KINDS", "compute_features"]

FEATURE_KINDS = ("fbank", "logmel", "mfcc")
# Kaldi reads 16-bit audio as its integer values; float audio is in [-1, 1].
_KALDI_SCALE = 32768.0
_LOW_HZ = 20.0
_LOG_OFFSET = 1e-6  # tf.signal's log-mel guide adds this before the log


@dataclasses.dataclass(frozen=True)
class AudioFeatures:
    """Which features to compute from each example's audio; `kind` "" for none.

    `num_mel_bins` mel bands (fbank and logmel features have that many
    values a frame; MFCCs are computed from them), `num_ceps` MFCCs a frame,
    frames `frame_ms` long every `shift_ms`. `keep_waveform` writes the
    audio too; by default the features replace it.

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

    def __post_init__(self):
        check_choice("kind", self.kind, ("", *FEATURE_KINDS))
        if not isinstance(self.num_mel_bins, int) or self.num_mel_bins < 1:
            raise ArgumentError("num_mel_bins", f"must be an int >= 1, got {self.num_mel_bins!r}")
        if self.kind == "mfcc" and not 1 <= self.num_ceps <= self.num_mel_bins:
            raise ArgumentError("num_ceps", f"{self.num_ceps}: MFCCs are between 1 and "
                                f"{{num_mel_bins}} ({self.num_mel_bins}) a frame")
        if not 0 < self.shift_ms <= self.frame_ms:
            raise ArgumentError("frame_ms", f"{self.frame_ms} and {{shift_ms}} {self.shift_ms}: "
                                "a shift > 0 and not longer than the frame")

    def __bool__(self) -> bool:
        return bool(self.kind)

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

    def describe(self, sample_rate: int) -> dict:
        """What the manifest and TFDS's metadata say of the feature."""
        computed_by = ("numpy, as tf.signal" if self.kind == "logmel" else
                       f"kaldi-native-fbank {metadata.version('kaldi-native-fbank')}")
        return {"kind": self.kind, "num_mel_bins": self.num_mel_bins,
                **({"num_ceps": self.num_ceps} if self.kind == "mfcc" else {}),
                "frame_length_ms": self.frame_ms, "frame_shift_ms": self.shift_ms,
                "sample_rate": sample_rate, "low_hz": _LOW_HZ, "high_hz": sample_rate / 2,
                "computed_by": computed_by}


def compute_features(audio: np.ndarray, sample_rate: int, options: AudioFeatures) -> np.ndarray:
    """`float32[frames, options.dims]` of mono `audio` (float in [-1, 1], or
    int16 as the decoder writes it); MediaError (stage `features`) when it is
    shorter than one frame."""
    frames = options.num_frames(len(audio), sample_rate)
    if not frames:
        raise MediaError(f"{len(audio)} samples at {sample_rate} Hz is shorter than one "
                         f"{options.frame_ms:g} ms feature frame", stage="features")
    floats = (audio.astype(np.float32) / 32767 if audio.dtype == np.int16
              else np.asarray(audio, np.float32))
    if options.kind == "logmel":
        return _logmel(floats, sample_rate, options)
    return _kaldi(floats * np.float32(_KALDI_SCALE), sample_rate, options, frames)


def _kaldi(audio: np.ndarray, sample_rate: int, options: AudioFeatures,
           frames: int) -> np.ndarray:
    opts = knf.MfccOptions() if options.kind == "mfcc" else knf.FbankOptions()
    opts.frame_opts.samp_freq = sample_rate
    opts.frame_opts.dither = 0.0
    opts.frame_opts.frame_length_ms = options.frame_ms
    opts.frame_opts.frame_shift_ms = options.shift_ms
    opts.mel_opts.num_bins = options.num_mel_bins
    opts.mel_opts.low_freq = _LOW_HZ
    if options.kind == "mfcc":
        opts.num_ceps = options.num_ceps
        computer = knf.OnlineMfcc(opts)
    else:
        computer = knf.OnlineFbank(opts)
    computer.accept_waveform(sample_rate, audio)
    computer.input_finished()
    out = np.empty((frames, options.dims), np.float32)
    for i in range(frames):
        out[i] = computer.get_frame(i)
    return out


@functools.lru_cache(maxsize=16)
def _tf_signal_parts(sample_rate: int, options: AudioFeatures) -> tuple:
    """(window, FFT length, mel weights) as tf.signal makes them, in float32."""
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
    return window, fft_length, weights


def _logmel(audio: np.ndarray, sample_rate: int, options: AudioFeatures) -> np.ndarray:
    length, shift = options.frame_samples(sample_rate)
    window, fft_length, weights = _tf_signal_parts(sample_rate, options)
    frames = np.lib.stride_tricks.sliding_window_view(audio, length)[::shift]
    magnitude = np.abs(np.fft.rfft(frames * window, fft_length)).astype(np.float32)
    return np.log(magnitude @ weights + np.float32(_LOG_OFFSET)).astype(np.float32)
