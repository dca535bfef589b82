"""Peak memory of the job on one long recording, against a 1-minute one.

    python -m benchmarks.long_media_bench [--hours 4] [--video_hours 1]
                                          [--workdir benchmarks/out/long] [--tree DIR]

Makes, once (kept in --workdir):

  flac   a 4-hour 48 kHz stereo FLAC (soundfile, in blocks: quiet noise,
         about 1 byte a sample, like speech) and its first minute;
  speech a 4-hour 16 kHz mono FLAC of speech: a meeting of Harvard
         sentences spoken in turns by espeak-ng with pauses
         (transforms/testing/spoken.py), repeated by sox, and its first minute;
  video  a 1-hour 1280x720 30 fps H.264 + 48 kHz stereo AAC mp4 at about
         5.5 Mbit/s (ffmpeg: a 60 s testsrc2 clip with a keyframe every 2 s,
         looped with stream copy) and the 60 s clip itself;

each alone in an uncompressed tar with a label. Then runs the tar job on
each, one worker, and reports the peak RSS of the whole process tree
(benchmarks/process_tree.py), its peak PSS (which counts once the pages the
launcher shares with the worker zygote it forks: the RSS sum counts them
twice for the zygote's first moments, if a sample catches them), and the
wall time:

  flac   cut into 1 s windows at 16 kHz (--cut audio_windows);
  speech cut where Silero VAD finds speech (--cut speech), every quality
         measure on every piece (issue #58);
  video  a frame every 5 s at 224x224 with the 1 s window of the video's own
         audio around it (--cut frames --fps 0.2).

Target (issue #26): peak RSS <= 600 MiB for the long member, and not more
than the 1-minute control plus a little: memory independent of a
recording's length. --tree runs another checkout's job on the same inputs
(to compare with an earlier version).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np
import soundfile as sf

from benchmarks.process_tree import measure
from transforms.media.quality import QUALITY_MEASURES
from transforms.testing.spoken import meeting, sentences

TARGET_MIB = 600
FLAC_FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1"]
SPEECH_FLAGS = ["--cut", "speech", "--audio_fields", "flac", "--quality",
                ",".join(QUALITY_MEASURES)]
VIDEO_FLAGS = ["--cut", "frames", "--video_field", "mp4", "--fps", "0.2",
               "--frame_size", "224x224"]
_BLOCK_S = 60


def _flac(path: str, seconds: int) -> None:
    """Quiet 48 kHz stereo noise, written a minute at a time."""
    rng = np.random.default_rng(0)
    with sf.SoundFile(path + ".tmp", "w", 48000, 2, format="FLAC", subtype="PCM_16") as f:
        for start in range(0, seconds, _BLOCK_S):
            frames = min(_BLOCK_S, seconds - start) * 48000
            f.write(rng.integers(-100, 101, (frames, 2), dtype=np.int16))
    os.replace(path + ".tmp", path)


def _speech(workdir: str, path: str, seconds: int) -> None:
    """A meeting of about 30 s (made once), repeated by sox to `seconds`."""
    talk = os.path.join(workdir, "talk.flac")
    if not os.path.exists(talk):
        meeting(workdir, "talk", sentences(8), [1.0, 0.4, 2.0, 0.25, 1.5, 0.8, 3.0, 0.5, 1.0])
    repeats = int(np.ceil(seconds / sf.info(talk).duration))
    subprocess.run(["sox", "-R", talk, path + ".tmp.flac", "repeat", str(repeats - 1),
                    "trim", "0", str(seconds)], check=True)
    os.replace(path + ".tmp.flac", path)


def _ffmpeg(*args: str) -> None:
    subprocess.run([shutil.which("ffmpeg"), "-v", "error", "-y", *args], check=True)


def _video(clip: str, path: str, loops: int) -> None:
    if not os.path.exists(clip):
        _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30:duration=60",
                "-f", "lavfi", "-i", "anoisesrc=sample_rate=48000:amplitude=0.1:duration=60",
                "-ac", "2", "-c:v", "libx264", "-preset", "veryfast", "-g", "60",
                "-b:v", "5300k", "-minrate", "5300k", "-maxrate", "5300k", "-bufsize", "5300k",
                "-x264-params", "nal-hrd=cbr", "-pix_fmt", "yuv420p", "-c:a", "aac",
                "-b:a", "192k", clip + ".tmp.mp4")
        os.replace(clip + ".tmp.mp4", clip)
    _ffmpeg("-stream_loop", str(loops - 1), "-i", clip, "-c", "copy", path + ".tmp.mp4")
    os.replace(path + ".tmp.mp4", path)


def _tar(media: str, field: str) -> str:
    """`media` alone in an uncompressed tar as k.<field>, with k.cls."""
    path = media + ".tar"
    if not os.path.exists(path):
        with tarfile.open(path + ".tmp", "w") as tar:
            tar.add(media, f"k.{field}")
            info = tarfile.TarInfo("k.cls")
            info.size = 1
            tar.addfile(info, fileobj=io.BytesIO(b"1"))
        os.replace(path + ".tmp", path)
    return path


def inputs(workdir: str, hours: float, video_hours: float) -> list:
    """[(name, tar path, member bytes, job flags)], made unless already there."""
    os.makedirs(workdir, exist_ok=True)
    made = []
    for name, seconds in ((f"flac {hours:g} h", round(hours * 3600)), ("flac 1 min", 60)):
        path = os.path.join(workdir, f"noise_48k_stereo_{seconds}s.flac")
        if not os.path.exists(path):
            print(f"generating {path} ...", flush=True)
            _flac(path, seconds)
        made.append((name, _tar(path, "flac"), os.path.getsize(path), FLAC_FLAGS))
    for name, seconds in ((f"speech {hours:g} h", round(hours * 3600)), ("speech 1 min", 60)):
        path = os.path.join(workdir, f"speech_16k_{seconds}s.flac")
        if not os.path.exists(path):
            print(f"generating {path} ...", flush=True)
            _speech(workdir, path, seconds)
        made.append((name, _tar(path, "flac"), os.path.getsize(path), SPEECH_FLAGS))
    clip = os.path.join(workdir, "testsrc2_720p30_aac_60s.mp4")
    loops = round(video_hours * 60)
    long = os.path.join(workdir, f"testsrc2_720p30_aac_{loops * 60}s.mp4")
    if not os.path.exists(long):
        print(f"generating {long} ...", flush=True)
        _video(clip, long, loops)
    for name, path in ((f"video {video_hours:g} h", long), ("video 1 min", clip)):
        made.append((name, _tar(path, "mp4"), os.path.getsize(path), VIDEO_FLAGS))
    return made


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=4.0, help="length of the long FLAC")
    parser.add_argument("--video_hours", type=float, default=1.0)
    parser.add_argument("--workdir", default=os.path.join("benchmarks", "out", "long"))
    parser.add_argument("--tree", default=".", help="the checkout whose job runs")
    args = parser.parse_args(argv)
    runs = inputs(os.path.abspath(args.workdir), args.hours, args.video_hours)
    tree = os.path.abspath(args.tree)
    env = {**os.environ, "PYTHONPATH": tree}
    print(f"one long member per job, 1 worker, job of {tree}")
    print(f"{'input':14s} {'member':>9s} {'wall s':>7s} {'peak RSS':>9s} {'peak PSS':>9s}  "
          "target")
    outputs = tempfile.mkdtemp(prefix="datagen-long-media-")
    try:
        for name, path, size, flags in runs:
            output = os.path.join(outputs, name.replace(" ", "_"))
            subprocess.run(["sync"], check=True)
            run = measure([sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", path,
                           "--output", output, "--features", "label=cls:int64",
                           "--splits", "train=1", *flags], env=env, cwd=tree,
                          pss_interval_s=0.25)
            peak = run.peak_rss / 2**20
            verdict = "" if "min" in name else ("met" if peak <= TARGET_MIB else "MISSED")
            print(f"{name:14s} {size / 2**20:7.0f} MiB {run.seconds:7.1f} {peak:6.0f} MiB "
                  f"{run.peak_pss / 2**20:6.0f} MiB  {verdict}", flush=True)
            shutil.rmtree(output)
    finally:
        shutil.rmtree(outputs, ignore_errors=True)


if __name__ == "__main__":
    main()
