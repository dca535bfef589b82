"""tf.Transform preprocessing: the tar job with a transform against the same job without.

    python -m benchmarks.transform_bench [--samples 40000] [--speech_mb 150] [--repeats 3]
                                         [--workdir DIR]

Makes two corpora, then in this one process runs pipelines.tar_to_tfrecord on
the local runner (one worker), each run after a sync with the corpus in the
page cache, every corpus's runs interleaved and repeated (medians):

  payload  pipelines.sample_corpus: payload bytes, int64 label, speaker and
           gain in JSON, nothing to decode;
             plain     the examples as built;
             metadata  --normalize gain=zscore --vocabulary speaker;
             in_shards the same, --materialize_transform;
  speech   16 kHz mono FLACs (benchmarks/audio_pipeline_bench.py) cut into
           1 s float32 windows, with a label and a gain in JSON;
             plain     the windows as built;
             metadata  --normalize gain=zscore --vocabulary label: analyzers
                       that read no media;
             audio     --normalize audio=zscore: an analyzer of the audio;
             in_shards metadata's, --materialize_transform.

Every transform run fits the transform on the train examples' analyzed
features as they are built. By default it is published for readers to apply
and the shards hold the raw examples; `in_shards` then transforms every shard
(transforms/writer/transformed.py). Each run is a process
of its own, as a job from the command line is, which imports TensorFlow and
tf.Transform before its clock starts, so the figures are the stage's cost,
not an import. Each
run's example count is checked against plain's. Targets (issue #57): metadata
<= 1.2x plain on a media corpus, audio <= 1.5x.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from benchmarks.audio_pipeline_bench import speech_corpus
from benchmarks.process_tree import warm
from transforms.testing.corpus import write_corpus

SHARDS = 8
# One worker, as its figures always were: the cost of tf.Transform, not of the workers.
SPLITS = ["--splits", "train=0.8,eval=0.1,test=0.1", "--direct_num_workers", "1"]
CORPORA = {
    "payload": (["--features", "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,"
                 "gain=json.gain:float", "--split_by", "__key__:^([^_]+)"],
                {"metadata": ["--normalize", "gain=zscore", "--vocabulary", "speaker"],
                 "in_shards": ["--normalize", "gain=zscore", "--vocabulary", "speaker",
                               "--materialize_transform"]}),
    "speech": (["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
                "--features", "label=cls:int64,gain=json.gain:float"],
               {"metadata": ["--normalize", "gain=zscore", "--vocabulary", "label"],
                "audio": ["--normalize", "audio=zscore"],
                "in_shards": ["--normalize", "gain=zscore", "--vocabulary", "label",
                              "--materialize_transform"]}),
}
TARGETS = {"metadata": 1.2, "audio": 1.5}


def speech_shards(root: str, megabytes: float) -> None:
    """Tar shards of `key.flac`, `key.cls` and `key.json` (a gain)."""
    os.makedirs(root)
    files = speech_corpus(megabytes)
    for shard in range(SHARDS):
        with tarfile.open(os.path.join(root, f"shard-{shard}.tar"), "w") as tar:
            for i in range(shard, len(files), SHARDS):
                meta = json.dumps({"gain": round(0.5 + i % 13 / 10, 2)}).encode()
                for ext, data in (("flac", files[i]), ("cls", str(i % 7).encode()),
                                  ("json", meta)):
                    info = tarfile.TarInfo(f"spk{i % 20:02d}_{i:05d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))


def _run(corpus: str, output: str, flags: list) -> tuple:
    """(seconds, examples) of one job in a fresh process (`_child`)."""
    shutil.rmtree(output, ignore_errors=True)
    warm(corpus)
    result = subprocess.run([sys.executable, "-m", "benchmarks.transform_bench", "--child",
                             json.dumps(["--input", f"{corpus}/*.tar", "--output", output,
                                         *SPLITS, *flags])],
                            check=True, capture_output=True, text=True)
    shutil.rmtree(output)
    seconds, examples = json.loads(result.stdout.strip().splitlines()[-1])
    return seconds, examples


def _child(argv: list) -> None:
    import tensorflow_transform.beam  # noqa: F401 - imported before the clock starts

    from pipelines import tar_to_tfrecord

    start = time.perf_counter()
    info = tar_to_tfrecord.run(argv)
    seconds = time.perf_counter() - start
    print(json.dumps([seconds, sum(s["num_examples"] for s in info["splits"].values())]))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40_000, help="of the payload corpus")
    parser.add_argument("--speech_mb", type=float, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default="")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a job's argv, as JSON
    args = parser.parse_args(argv)
    if args.child:
        _child(json.loads(args.child))
        return
    workdir = args.workdir or tempfile.mkdtemp(prefix="datagen-transform-bench-")
    corpora = {"payload": os.path.join(workdir, "payload"),
               "speech": os.path.join(workdir, "speech")}
    if not os.path.exists(corpora["payload"]):
        write_corpus(corpora["payload"], shards=SHARDS, samples_per_shard=args.samples // SHARDS,
                     payload_bytes=2048, speakers=64)
    if not os.path.exists(corpora["speech"]):
        speech_shards(corpora["speech"], args.speech_mb)
    print(f"{os.cpu_count()} cores; medians of {args.repeats} interleaved runs")
    print(f"{'corpus':<9}{'run':<10}{'MB':>6}{'seconds':>9}{'examples':>10}{'vs plain':>10}"
          "  target")
    try:
        for corpus, (flags, transforms) in CORPORA.items():
            folder = corpora[corpus]
            megabytes = sum(os.path.getsize(os.path.join(folder, f))
                            for f in os.listdir(folder)) / 1e6
            runs = {"plain": [], **{name: [] for name in transforms}}
            counts = {}
            for _ in range(args.repeats):
                for name in runs:
                    extra = transforms.get(name, [])
                    seconds, counts[name] = _run(folder, os.path.join(workdir, "out"),
                                                 flags + extra)
                    runs[name].append(seconds)
            assert len(set(counts.values())) == 1, f"example counts differ: {counts}"
            base = statistics.median(runs["plain"])
            for name, times in runs.items():
                ratio = statistics.median(times) / base
                target = TARGETS.get(name) if corpus == "speech" else None
                verdict = "" if target is None else (
                    f"<= {target}x: {'met' if ratio <= target else 'MISSED'}")
                print(f"{corpus:<9}{name:<10}{megabytes:6.0f}{statistics.median(times):9.1f}"
                      f"{counts[name]:10d}{ratio:9.2f}x  {verdict}", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir)


if __name__ == "__main__":
    main()
