"""Quality measures of an example's audio: how clean, loud, clipped and wide it is.

Beam-free and pure (`--quality`, transforms/media/cutting.py). Each measure
is one float of one example's audio (full scale 1), written as a feature of
its name and summarised per split in the manifest
(transforms/recipe/measures/quality.py):

- `snr_db`: WADA-SNR (Kim and Stern, "Robust signal-to-noise ratio estimation
  based on waveform amplitude distribution analysis", Interspeech 2008):
  speech's amplitudes are taken as Gamma-distributed (shape 0.4), noise's as
  Gaussian; log E|z| - E log|z| of the audio grows with the SNR, and the SNR
  is read off that curve (-20 to 60 dB). The curve is computed here, once a
  process, on a grid of both distributions' quantiles (30 ms, within 0.25 dB
  of a 16x finer grid from -5 to 50 dB);
- `clipping`: the fraction of samples at full scale (|x| >= 32767/32768);
- `loudness_lufs`: integrated loudness, ITU-R BS.1770-4: K-weighted (the
  standard's shelf and high-pass, designed for the audio's rate as
  pyloudnorm designs them), 400 ms blocks overlapping by 75%, gated at -70
  LUFS and 10 LU under the ungated level; audio shorter than a block is one
  block, and audio below the gate is -70;
- `dc_offset`: the mean sample;
- `bandwidth_hz`: the highest frequency holding energy: of the long-term
  spectrum (Hann-windowed 512-sample frames, half overlapping), the highest
  bin within 60 dB of the loudest one; audio resampled up from 8 kHz (a
  telephone's) gives about 4,000 at any rate it is stored at;
- `speech_ratio`: the share of the audio a voice activity detector calls
  speech (transforms/media/speech.py).
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
from scipy import signal, stats

from transforms.media.decoded import full_scale_floats

__all__ = ["QUALITY_MEASURES", "bandwidth_hz", "clipping", "dc_offset", "loudness_lufs",
           "quality", "snr_db"]

_SNR_RANGE_DB = (-20, 60)
_GAMMA_SHAPE = 0.4       # WADA's model of speech's amplitudes
_FLOOR = 1e-10           # WADA's: a digital zero's amplitude
_GATE_LUFS = -70.0
_BANDWIDTH_DB = 60.0


@functools.cache
def _wada_curve() -> tuple[np.ndarray, np.ndarray]:
    """(SNR in dB, log E|z| - E log|z|) of Gamma speech in Gaussian noise."""
    speech = stats.gamma.ppf((np.arange(300) + 0.5) / 300, _GAMMA_SHAPE)
    noise = stats.norm.ppf((np.arange(600) + 0.5) / 600)
    power = _GAMMA_SHAPE * (_GAMMA_SHAPE + 1)   # E[x^2] of Gamma(k, 1)
    snrs = np.arange(_SNR_RANGE_DB[0], _SNR_RANGE_DB[1] + 1, dtype=np.float64)
    curve = []
    for snr in snrs:
        z = np.abs(speech[:, None] + np.sqrt(power / 10 ** (snr / 10)) * noise[None, :])
        curve.append(np.log(z.mean()) - np.log(z).mean())
    return snrs, np.maximum.accumulate(np.array(curve))


def snr_db(audio: np.ndarray, rate: int) -> float:  # noqa: ARG001 - every measure's signature
    """WADA-SNR of `audio` (the module docstring)."""
    amplitudes = np.maximum(np.abs(audio, dtype=np.float64), _FLOOR)
    statistic = np.log(amplitudes.mean()) - np.log(amplitudes).mean()
    snrs, curve = _wada_curve()
    return float(np.interp(statistic, curve, snrs))


def clipping(audio: np.ndarray, rate: int) -> float:  # noqa: ARG001
    """The fraction of samples at full scale."""
    return float(np.count_nonzero(np.abs(audio) >= 32767 / 32768) / max(1, len(audio)))


def dc_offset(audio: np.ndarray, rate: int) -> float:  # noqa: ARG001
    return float(np.mean(audio, dtype=np.float64)) if len(audio) else 0.0


@functools.cache
def _k_weighting(rate: int) -> tuple:
    """The two biquads of BS.1770's K-weighting at `rate` ((b, a) each): a
    +4 dB shelf above 1.5 kHz and a high-pass at 38 Hz."""
    shelf_w, pass_w = 2 * np.pi * 1500.0 / rate, 2 * np.pi * 38.0 / rate
    a = 10 ** (4.0 / 40)
    alpha = np.sin(shelf_w) / (2 / np.sqrt(2))
    cos = np.cos(shelf_w)
    shelf = ([a * ((a + 1) + (a - 1) * cos + 2 * np.sqrt(a) * alpha),
              -2 * a * ((a - 1) + (a + 1) * cos),
              a * ((a + 1) + (a - 1) * cos - 2 * np.sqrt(a) * alpha)],
             [(a + 1) - (a - 1) * cos + 2 * np.sqrt(a) * alpha,
              2 * ((a - 1) - (a + 1) * cos),
              (a + 1) - (a - 1) * cos - 2 * np.sqrt(a) * alpha])
    alpha, cos = np.sin(pass_w) / (2 * 0.5), np.cos(pass_w)
    high_pass = ([(1 + cos) / 2, -(1 + cos), (1 + cos) / 2], [1 + alpha, -2 * cos, 1 - alpha])
    return shelf, high_pass


def loudness_lufs(audio: np.ndarray, rate: int) -> float:
    """Integrated loudness, BS.1770-4 (the module docstring), of mono audio."""
    weighted = np.asarray(audio, np.float64)
    for b, a in _k_weighting(rate):
        weighted = signal.lfilter(b, a, weighted)
    block, step = round(0.4 * rate), round(0.1 * rate)
    if len(weighted) <= block:
        powers = np.array([np.mean(weighted ** 2)]) if len(weighted) else np.zeros(1)
    else:
        squares = np.concatenate([[0.0], np.cumsum(weighted ** 2)])
        starts = np.arange(0, len(weighted) - block + 1, step)
        powers = (squares[starts + block] - squares[starts]) / block
    levels = -0.691 + 10 * np.log10(np.maximum(powers, 1e-30))
    gated = powers[levels > _GATE_LUFS]
    if not len(gated):
        return _GATE_LUFS
    relative = -0.691 + 10 * np.log10(gated.mean()) - 10
    kept = powers[(levels > _GATE_LUFS) & (levels > relative)]
    return float(max(_GATE_LUFS, -0.691 + 10 * np.log10(kept.mean())))


def bandwidth_hz(audio: np.ndarray, rate: int) -> float:
    """The highest frequency within 60 dB of the long-term spectrum's peak."""
    if len(audio) < 512:
        audio = np.pad(audio, (0, 512 - len(audio)))
    frequencies, power = signal.welch(audio, rate, window="hann", nperseg=512, noverlap=256,
                                      detrend=False)
    if not power.max() > 0:
        return 0.0
    loud = np.flatnonzero(power >= power.max() * 10 ** (-_BANDWIDTH_DB / 10))
    return float(frequencies[loud[-1]])


_MEASURES: dict[str, Callable[[np.ndarray, int], float]] = {
    "snr_db": snr_db, "clipping": clipping, "loudness_lufs": loudness_lufs,
    "dc_offset": dc_offset, "bandwidth_hz": bandwidth_hz}
# What --quality may name: these, and the detector's speech_ratio.
QUALITY_MEASURES = (*_MEASURES, "speech_ratio")


def quality(audio: np.ndarray, rate: int, names: tuple) -> dict:
    """{name: value} of the measures `names` (of QUALITY_MEASURES, but
    speech_ratio, which the detector gives) of one example's audio."""
    audio = full_scale_floats(audio)
    return {name: _MEASURES[name](audio, rate) for name in names}
