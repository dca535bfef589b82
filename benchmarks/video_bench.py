"""Video frame sampling (transforms.media.video): threaded vs unthreaded throughput,
and peak memory.

    python -m benchmarks.video_bench [--seconds 60] [--workdir benchmarks/out/video]

In this one process:

1. Generates, with the ffmpeg CLI (lavfi `testsrc2`, moving content), a
   1280x720 30 fps H.264 mp4 of --seconds (libx264 veryfast, crf 23: a
   moderate bitrate with B-frames and CABAC, as in typical uploads), then a
   10-minute video by looping it with stream copy (no re-encoding, so it costs
   seconds). Both are kept in --workdir and reused by later runs.
2. Times `iter_frames` on the short video at fps=1 and at full rate (every
   frame), with FFmpeg's automatic decoder threads (threads=0) and unthreaded
   (threads=1), output 224x224 JPEG (centre crop). Either way every source
   frame is decoded (keyframes are 250 frames apart, so 1 fps sampling never
   seeks), so "source frames/s" is the decoding rate and "sampled frames/s"
   what reaches the output.
3. Samples the 10-minute video at 1 fps to 224x224 JPEG in a fresh Python
   process and reports its peak RSS (getrusage ru_maxrss) next to the same
   process's peak right after its imports. Target: under 1 GiB. The input
   bytes are held in memory, as a pipeline would hold a tar member, and count.
   Linux folds the parent's peak into a spawned child's ru_maxrss, so the
   child runs before this process decodes anything, and the kernel's own
   per-process peak (VmHWM in /proc/self/status) is printed beside it.

Wall times are the best of --repeat runs, threaded and unthreaded
alternating: on a shared machine the noise is one-sided.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time

import av

from transforms.media.frames import FrameOptions
from transforms.media.video import iter_frames, probe_video

RSS_TARGET_MIB = 1024
LOOPS = 10                     # the long video is the short one 10 times
OUTPUT = dict(size=(224, 224), resize="crop", image_format="jpeg")


def _ffmpeg(*args: str) -> None:
    subprocess.run([shutil.which("ffmpeg"), "-v", "error", "-y", *args], check=True)


def make_videos(workdir: str, seconds: int) -> tuple[str, str]:
    """(short, long) video paths, generated unless already there."""
    os.makedirs(workdir, exist_ok=True)
    short = os.path.join(workdir, f"testsrc2_720p30_{seconds}s.mp4")
    long = os.path.join(workdir, f"testsrc2_720p30_{seconds * LOOPS}s.mp4")
    if not os.path.exists(short):
        print(f"generating {short} ...", flush=True)
        _ffmpeg("-f", "lavfi", "-i", f"testsrc2=size=1280x720:rate=30:duration={seconds}",
                "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p",
                short + ".tmp.mp4")
        os.replace(short + ".tmp.mp4", short)
    if not os.path.exists(long):
        print(f"generating {long} (stream copy) ...", flush=True)
        _ffmpeg("-stream_loop", str(LOOPS - 1), "-i", short, "-c", "copy", long + ".tmp.mp4")
        os.replace(long + ".tmp.mp4", long)
    return short, long


def _describe(path: str, data: bytes) -> str:
    info = probe_video(data)
    return (f"{info['duration']:g} s {info['width']}x{info['height']} {info['fps']:g} fps "
            f"{info['codec']}, {len(data) / 2**20:.1f} MiB ({os.path.basename(path)})")


def throughput(data: bytes, repeat: int) -> list:
    """Rows of (sampling, threads, wall s, source frames/s, sampled frames/s, speedup).

    Threaded and unthreaded runs alternate, so load from other processes
    falls on both alike; each cell keeps its best wall time."""
    info = probe_video(data)
    source_frames = round(info["duration"] * info["fps"])
    rows = []
    for label, fps in (("fps=1", 1.0), ("every frame", None)):
        walls, sampled = {0: [], 1: []}, 0
        for _ in range(repeat):
            for threads in walls:
                start = time.perf_counter()
                sampled = sum(1 for _ in iter_frames(data, FrameOptions(
                    fps=fps, threads=threads, **OUTPUT)))
                walls[threads].append(time.perf_counter() - start)
        best = {threads: min(w) for threads, w in walls.items()}
        for threads, wall in best.items():
            rows.append([label, "auto (0)" if threads == 0 else "1", wall, source_frames / wall,
                         sampled / wall, best[1] / best[0] if threads == 0 else None])
    return rows


def _peaks_kib() -> tuple[int, int | None]:
    """(ru_maxrss, VmHWM) in KiB; VmHWM None where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        hwm = None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, hwm


def _rss_child(path: str) -> None:
    """Runs in the fresh process: prints its peak RSS after imports and after sampling."""
    baseline = _peaks_kib()
    with open(path, "rb") as f:
        data = f.read()
    start = time.perf_counter()
    frames = sum(1 for _ in iter_frames(data, FrameOptions(fps=1.0, **OUTPUT)))
    wall = time.perf_counter() - start
    print(json.dumps({"baseline_kib": baseline, "peak_kib": _peaks_kib(),
                      "frames": frames, "wall": wall}))


def peak_rss(path: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.video_bench", "--rss-child", path],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60, help="length of the short video")
    parser.add_argument("--workdir", default=os.path.join("benchmarks", "out", "video"))
    parser.add_argument("--repeat", type=int, default=3, help="throughput runs per cell (best)")
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:
        _rss_child(args.rss_child)
        return
    if shutil.which("ffmpeg") is None:
        sys.exit("the ffmpeg CLI is needed to generate the test videos (apt-get install ffmpeg)")

    print(f"python {platform.python_version()}, PyAV {av.__version__} "
          f"(FFmpeg {av.ffmpeg_version_info}), {os.cpu_count()} CPUs")
    short, long = make_videos(args.workdir, args.seconds)
    rss = peak_rss(long)            # first, while this process is small (see above)

    with open(short, "rb") as f:
        data = f.read()
    print(f"\nthroughput: {_describe(short, data)} -> 224x224 JPEG (crop), best of {args.repeat}")
    print(f"{'sampling':<12} {'threads':<9} {'wall s':>7} {'source frames/s':>16} "
          f"{'sampled frames/s':>17} {'threaded speedup':>17}")
    for label, threads, wall, source_rate, sampled_rate, speedup in throughput(data, args.repeat):
        print(f"{label:<12} {threads:<9} {wall:>7.2f} {source_rate:>16.1f} {sampled_rate:>17.1f} "
              f"{f'{speedup:.2f}x' if speedup else '':>17}")
    del data

    with open(long, "rb") as f:
        description = _describe(long, f.read())
    print(f"\npeak RSS, fresh process: {description}, fps=1 -> 224x224 JPEG, threads auto")
    print(f"{'':<16} {'ru_maxrss':>10} {'VmHWM':>10}")
    for label, (maxrss, hwm) in (("after imports", rss["baseline_kib"]),
                                 ("after sampling", rss["peak_kib"])):
        print(f"{label:<16} {maxrss / 1024:>6.1f} MiB "
              f"{f'{hwm / 1024:.1f} MiB' if hwm is not None else 'n/a':>10}")
    peak_mib = rss["peak_kib"][0] / 1024
    print(f"{rss['frames']} frames in {rss['wall']:.1f} s; target < {RSS_TARGET_MIB} MiB: "
          f"{'met' if peak_mib < RSS_TARGET_MIB else 'MISSED'}")


if __name__ == "__main__":
    main()
