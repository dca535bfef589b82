"""Audio decode + 1 s windows + tf.Example: a naive loop vs transforms.media.audio, side by side.

    python -m benchmarks.audio_bench [--files 200] [--seconds 10] [--repeat 2]

(a) Throughput, in this one process, over a corpus of --files FLAC files of
    --seconds each (44.1 kHz stereo, tone + noise, generated in memory):

      naive   soundfile.read the whole file -> mean of the channels -> the same
              soxr resample to 16 kHz -> slice 1 s windows in a Python loop ->
              tf.train.Example(float_list=...).SerializeToString();
      decode  decode_audio -> audio_windows -> ExampleEncoder (one float feature);
      stream  stream_audio -> audio_windows -> ExampleEncoder.

    Both sides cut the same windows (checked); windows/s is best of --repeat.

(b) Peak memory of stream_audio -> audio_windows -> ExampleEncoder over a 1-hour
    and a 10-minute 16 kHz mono FLAC (noise + tone, written to a temp dir),
    windows consumed as they come, each in a fresh subprocess reporting its
    peak RSS: after imports (baseline), after reading the encoded bytes, and
    at the end. For contrast, decode_audio (whole file) on the 1-hour file.

    The peak is the process's VmHWM (/proc/self/status); its
    getrusage(RUSAGE_SELF).ru_maxrss is printed beside it but can read higher:
    Linux carries the spawning process's peak into a child's ru_maxrss across
    exec (a child started after this process loaded TensorFlow read 726 MiB
    before doing anything), while VmHWM belongs to the child's own memory map.
    So the subprocesses are also started before TensorFlow and the corpus.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import soundfile as sf
import soxr

from transforms.format.encoder import ExampleEncoder
from transforms.media.audio import AudioOptions, decode_audio, stream_audio
from transforms.media.windows import WindowOptions, audio_windows

SOURCE_RATE = 44100
RATE = 16000
TARGET_SPEEDUP = 1.5
TARGET_RSS_MIB = 1024


def make_corpus(files: int, seconds: float) -> list:
    """FLAC bytes: a different tone per file under a little noise, stereo 44.1 kHz."""
    rng = np.random.default_rng(0)
    t = np.arange(round(seconds * SOURCE_RATE)) / SOURCE_RATE
    corpus = []
    for i in range(files):
        tone = 0.3 * np.sin(2 * np.pi * (200 + 10 * i) * t)
        signal = tone[:, None] + rng.normal(0, 0.02, (len(t), 2))
        out = io.BytesIO()
        sf.write(out, signal.astype(np.float32), SOURCE_RATE, format="FLAC")
        corpus.append(out.getvalue())
    return corpus


def naive(corpus: list) -> list:
    import tensorflow as tf
    out = []
    for data in corpus:
        x, rate = sf.read(io.BytesIO(data), dtype="float32")
        y = soxr.resample(x.mean(axis=1), rate, RATE)
        for i in range(0, len(y) - RATE + 1, RATE):
            window = y[i:i + RATE]
            example = tf.train.Example(features=tf.train.Features(feature={
                "audio": tf.train.Feature(float_list=tf.train.FloatList(value=window))}))
            out.append(example.SerializeToString())
    return out


def ours(corpus: list, streaming: bool) -> list:
    encoder = ExampleEncoder([("audio", "float")])
    options, windows = AudioOptions(sample_rate=RATE), WindowOptions(window_s=1.0)
    out = []
    for i, data in enumerate(corpus):
        blocks = (stream_audio(data, options, name="x.flac") if streaming
                  else [decode_audio(data, options, name="x.flac")])
        for window in audio_windows(blocks, windows, key=str(i)):
            out.append(encoder.encode({"audio": window.samples}))
    return out


def timed(fn, repeat: int) -> tuple:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def check_same_windows(a: list, b: list) -> float:
    """Both loops made the same examples (up to float rounding of the mix-down)."""
    import tensorflow as tf
    assert len(a) == len(b), (len(a), len(b))
    worst = 0.0
    for x, y in zip(a[::97], b[::97]):
        vx, vy = (np.array(tf.train.Example.FromString(s).features.feature["audio"]
                           .float_list.value) for s in (x, y))
        worst = max(worst, float(np.abs(vx - vy).max()))
    assert worst < 1e-5, worst
    return worst


def write_long_flac(path: str, seconds: int) -> None:
    """16 kHz mono FLAC written a minute at a time (never the whole signal in memory)."""
    rng = np.random.default_rng(1)
    with sf.SoundFile(path, "w", RATE, 1, format="FLAC") as f:
        for minute in range(0, seconds, 60):
            t = (np.arange(RATE * min(60, seconds - minute)) + minute * RATE) / RATE
            f.write((0.3 * np.sin(2 * np.pi * 440 * t) + rng.normal(0, 0.05, len(t)))
                    .astype(np.float32))


def _peak_rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024      # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: KiB


def rss_child(path: str, mode: str) -> None:
    """Runs in the subprocess: cut one file, print the RSS readings as JSON."""
    baseline = _peak_rss_mib()
    with open(path, "rb") as f:
        data = f.read()
    after_read = _peak_rss_mib()
    encoder = ExampleEncoder([("audio", "float")])
    options = AudioOptions(sample_rate=RATE)
    start = time.perf_counter()
    blocks = (stream_audio(data, options, name="x.flac") if mode == "stream"
              else [decode_audio(data, options, name="x.flac")])
    windows = 0
    for window in audio_windows(blocks, WindowOptions(window_s=1.0), key="long"):
        encoder.encode({"audio": window.samples})
        windows += 1
    print(json.dumps({"baseline": baseline, "after_read": after_read, "peak": _peak_rss_mib(),
                      "ru_maxrss": _maxrss_mib(), "windows": windows,
                      "seconds": time.perf_counter() - start,
                      "file_mib": len(data) / 2 ** 20}))


def measure_rss(path: str, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.audio_bench", "--rss-child", path,
                          mode], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rss-child", nargs=2, metavar=("PATH", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        rss_child(*args.rss_child)
        return

    # Memory first, while this process is small (see the module docstring).
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for label, seconds in (("1 hour", 3600), ("10 min", 600)):
            path = os.path.join(tmp, f"{seconds}.flac")
            write_long_flac(path, seconds)
            runs.append((label, path, "stream"))
        runs.append(("1 hour", runs[0][1], "whole"))
        memory = [(label, mode, measure_rss(path, mode)) for label, path, mode in runs]

    import tensorflow as tf  # imported before timing, so neither side pays for it
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, soundfile {sf.__version__} "
          f"(libsndfile {sf.__libsndfile_version__}), soxr {soxr.__version__}, "
          f"tensorflow {tf.__version__}")

    print(f"\n(a) {args.files} FLAC files x {args.seconds:g} s, 44.1 kHz stereo -> 16 kHz mono, "
          f"1 s windows, one float feature; best of {args.repeat}")
    corpus = make_corpus(args.files, args.seconds)
    naive_s, naive_out = timed(lambda: naive(corpus), args.repeat)
    decode_s, decode_out = timed(lambda: ours(corpus, streaming=False), args.repeat)
    stream_s, stream_out = timed(lambda: ours(corpus, streaming=True), args.repeat)
    check_same_windows(naive_out, decode_out)
    check_same_windows(naive_out, stream_out)
    windows = len(naive_out)
    print(f"{'loop':34s} {'seconds':>8s} {'windows/s':>10s} {'vs naive':>9s}")
    for label, seconds in (("naive (sf.read, protobuf)", naive_s),
                           ("ours: decode_audio + encoder", decode_s),
                           ("ours: stream_audio + encoder", stream_s)):
        ratio = naive_s / seconds
        verdict = "" if label.startswith("naive") else (
            f"  target {TARGET_SPEEDUP}x {'met' if ratio >= TARGET_SPEEDUP else 'MISSED'}")
        print(f"{label:34s} {seconds:8.2f} {windows / seconds:10.0f} {ratio:8.2f}x{verdict}")
    print(f"({windows} windows each; same windows as the naive loop, max abs diff < 1e-5)")

    print("\n(b) peak RSS cutting one long 16 kHz mono FLAC into 1 s windows, fresh subprocess "
          "each (MiB)")
    print(f"{'file':7s} {'mode':6s} {'FLAC':>6s} {'baseline':>9s} {'+bytes':>7s} {'peak':>7s} "
          f"{'ru_maxrss':>9s} {'peak-base-FLAC':>15s} {'windows':>8s} {'seconds':>8s}")
    for label, mode, r in memory:
        extra = r["peak"] - r["baseline"] - r["file_mib"]
        verdict = "" if mode == "whole" else (
            f"  target < {TARGET_RSS_MIB} MiB {'met' if r['peak'] < TARGET_RSS_MIB else 'MISSED'}")
        print(f"{label:7s} {mode:6s} {r['file_mib']:6.1f} {r['baseline']:9.1f} "
              f"{r['after_read'] - r['baseline']:7.1f} {r['peak']:7.1f} {r['ru_maxrss']:9.1f} "
              f"{extra:15.1f} {r['windows']:8d} {r['seconds']:8.1f}{verdict}")
    print("(stream: stream_audio -> audio_windows -> encoder; whole: decode_audio first, "
          "for contrast; peak = VmHWM)")

if __name__ == "__main__":
    main()
