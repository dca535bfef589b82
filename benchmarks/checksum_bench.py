"""What verifying compressed tars costs: each is read twice, once through its checks.

    python -m benchmarks.checksum_bench [--speech_mb 256] [--payload_mb 512] [--repeat 3]

Two corpora of 4 shards, each written both as .tar and as .tar.gz (gzip level
6, what `tar czf` writes):

  payload  512 KiB random payloads: incompressible, as FLAC, MP4 and JPEG are;
  speech   16 kHz mono FLACs of 95 s (benchmarks/audio_pipeline_bench).

In this one process, best of --repeat, on one core:

  tarfile      tarfile's own "r|gz" over the .tar.gz, every member read: how
               the reader streamed before issue #12 (zlib, unverified);
  read once    transforms.sources.tar_stream.iter_tar(verify=False) over the .tar.gz:
               one pass through ISA-L's gzip, unverified;
  read+verify  iter_tar as the job runs it: to the end through gzip's CRC-32,
               then again to stream the samples;
  .tar         iter_tar over the uncompressed shards: nothing to check.

Then the whole conversion of the speech corpus (benchmarks/plain_loop: decode,
cut into 1 s windows, encode, write) from .tar.gz and from .tar, which puts
the second read next to the work it precedes.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import os
import shutil
import tarfile
import tempfile
import time

import numpy as np

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.plain_loop import convert
from transforms.sources.input_files import open_input
from transforms.sources.tar_stream import iter_tar

SPEECH_FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
                "--features", "label=cls:int64", "--split_by", "__key__:^([^_]+)"]


def _gzip_copies(root: str) -> str:
    """root/*.tar gzipped into root-gz/*.tar.gz; returns that folder."""
    packed = root + "-gz"
    os.makedirs(packed)
    for path in sorted(glob.glob(f"{root}/*.tar")):
        with open(path, "rb") as f, gzip.open(
                os.path.join(packed, os.path.basename(path) + ".gz"), "wb", compresslevel=6) as g:
            shutil.copyfileobj(f, g, 1 << 20)
    return packed


def _samples(path: str, verify: bool) -> int:
    with open_input(path) as f:
        return sum(isinstance(item, dict) for item in iter_tar(f, path, verify=verify))


def _tarfile_members(path: str, verify: bool) -> int:  # noqa: ARG001 - read() as _samples
    with tarfile.open(path, "r|gz") as tar:
        return sum(len(tar.extractfile(m).read()) > 0 for m in tar)


def _read_seconds(pattern: str, read, verify: bool, repeat: int) -> float:
    """Best seconds to `read` every matching shard."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        assert sum(read(path, verify) for path in sorted(glob.glob(pattern))), pattern
        best = min(best, time.perf_counter() - start)
    return best


def _convert_seconds(pattern: str, output: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        shutil.rmtree(output, ignore_errors=True)
        start = time.perf_counter()
        convert(["--input", pattern, "--output", output, *SPEECH_FLAGS])
        best = min(best, time.perf_counter() - start)
    return best


def _payload_corpus(root: str, megabytes: int) -> None:
    rng = np.random.default_rng(0)
    files = [rng.bytes(512 << 10) for _ in range(megabytes * 2)]
    write_shards(files, root)


def _report(name: str, root: str, repeat: int) -> None:
    mb = sum(os.path.getsize(p) for p in glob.glob(f"{root}/*.tar")) / 1e6
    packed = _gzip_copies(root)
    before = _read_seconds(f"{packed}/*.tar.gz", _tarfile_members, False, repeat)
    once = _read_seconds(f"{packed}/*.tar.gz", _samples, False, repeat)
    verified = _read_seconds(f"{packed}/*.tar.gz", _samples, True, repeat)
    plain = _read_seconds(f"{root}/*.tar", _samples, True, repeat)
    print(f"{name}: {mb:.0f} MB of tar")
    print(f"  tarfile      {mb / before:7.0f} MB/s  (.tar.gz, zlib, unverified)")
    print(f"  read once    {mb / once:7.0f} MB/s  (.tar.gz, ISA-L, unverified)")
    print(f"  read+verify  {mb / verified:7.0f} MB/s  {verified / once:.2f}x the time of read "
          f"once, {verified / before:.2f}x tarfile's")
    print(f"  .tar         {mb / plain:7.0f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech_mb", type=int, default=256)
    parser.add_argument("--payload_mb", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="checksum-bench-")
    try:
        _payload_corpus(f"{work}/payload", args.payload_mb)
        _report("payload", f"{work}/payload", args.repeat)
        write_shards(speech_corpus(args.speech_mb), f"{work}/speech")
        _report("speech", f"{work}/speech", args.repeat)
        packed = _convert_seconds(f"{work}/speech-gz/*.tar.gz", f"{work}/out", args.repeat)
        plain = _convert_seconds(f"{work}/speech/*.tar", f"{work}/out", args.repeat)
        print(f"speech conversion on one core: .tar.gz (verified) {packed:.1f} s, "
              f".tar {plain:.1f} s: {packed / plain:.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
