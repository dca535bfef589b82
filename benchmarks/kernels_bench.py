"""Small kernels the pipeline hand-picked, each against the obvious alternatives.

    python -m benchmarks.kernels_bench [--repeat 7]

In this one process, best of --repeat (timeit):

  gzip    one TFRecord shard's worth of windows (30 s of 16 kHz float32 speech
          from transforms.testing.synthetic_media.voice, as the speech corpus
          holds) deflated as the writer does - ISA-L at its default level
          (transforms/writer/tfrecord.py) - and by zlib at its default level:
          MB/s of input and the compressed/input ratio of each;
  mono    10 s of 44.1 kHz stereo float32 mixed to mono by the reader's
          `_select(block, "mono")` (transforms/media/audio.py, column by
          column) and by numpy's `block.mean(axis=1)`, after checking both agree;
  fft     the real FFT of the audio features (transforms/media/features.py):
          10 s of 16 kHz audio as its 998 frames of 25 ms, 512 points each,
          by scipy.fft in float32 (the features' kernel) and numpy.fft in
          float32 and float64, after checking they agree; then the whole
          80-bin filterbank of the 10 s and of a 1 s window.
"""

from __future__ import annotations

import argparse
import timeit
import zlib

import numpy as np
from isal import isal_zlib

from transforms.media.audio import _select
from transforms.media.features import AudioFeatures, compute_features, frame_spectra
from transforms.testing.synthetic_media import voice

_GZIP_WBITS = 31  # a gzip stream, as TFRecord's GZIP files are


def _deflate(module, level: int, data: bytes) -> bytes:
    compressor = module.compressobj(level, module.DEFLATED, _GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()


def _best(fn, repeat: int, number: int = 1) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def gzip_case(repeat: int) -> None:
    pcm = voice(150.0, 30.0).astype(np.float32).tobytes()
    print(f"gzip: {len(pcm) / 1e6:.1f} MB of 16 kHz float32 speech")
    for name, module, level in (
            ("isal (the writer)", isal_zlib, isal_zlib.ISAL_DEFAULT_COMPRESSION),
            ("zlib default", zlib, zlib.Z_DEFAULT_COMPRESSION)):
        seconds = _best(lambda m=module, lv=level: _deflate(m, lv, pcm), repeat)
        ratio = len(_deflate(module, level, pcm)) / len(pcm)
        print(f"  {name:<18} {len(pcm) / seconds / 1e6:8.0f} MB/s  ratio {ratio:.3f}")


def mono_case(repeat: int) -> None:
    block = np.random.default_rng(0).standard_normal((441_000, 2)).astype(np.float32)
    np.testing.assert_allclose(_select(block, "mono"), block.mean(axis=1), rtol=1e-6, atol=1e-6)
    ours = _best(lambda: _select(block, "mono"), repeat, number=10)
    numpy_mean = _best(lambda: block.mean(axis=1), repeat, number=10)
    print("mono: 10 s of 44.1 kHz stereo float32")
    print(f"  column by column   {ours * 1e3:8.2f} ms")
    print(f"  mean(axis=1)       {numpy_mean * 1e3:8.2f} ms  ({numpy_mean / ours:.0f}x ours)")


def fft_case(repeat: int) -> None:
    audio = voice(150.0, 10.0).astype(np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(audio * 32768, 400)[::160].copy()
    ffts = {"scipy.fft float32 (ours)": lambda: frame_spectra(frames, 512),
            "numpy.fft float32": lambda: np.fft.rfft(frames, 512, axis=1),
            "numpy.fft float64": lambda: np.fft.rfft(frames.astype(np.float64), 512, axis=1)}
    reference = np.fft.rfft(frames.astype(np.float64), 512, axis=1)
    print(f"fft: {len(frames)} frames of 400 samples, 512 points")
    for name, fft in ffts.items():
        error = np.abs(fft() - reference).max() / np.abs(reference).max()
        seconds = _best(fft, repeat, number=20)
        print(f"  {name:<25} {seconds * 1e3:8.2f} ms  (error {error:.1e} of the largest)")
    fbank = AudioFeatures("fbank", num_mel_bins=80)
    for seconds_of_audio in (10, 1):
        part = audio[:16000 * seconds_of_audio]
        seconds = _best(lambda p=part: compute_features(p, 16000, fbank), repeat, number=20)
        print(f"  fbank of {seconds_of_audio:>2} s{'':<17} {seconds * 1e3:8.2f} ms")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    gzip_case(args.repeat)
    mono_case(args.repeat)
    fft_case(args.repeat)


if __name__ == "__main__":
    main()
