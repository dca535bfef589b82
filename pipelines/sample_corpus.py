"""Writes the built-in sample corpus (transforms/testing/corpus.py): tar shards of
samples for the demo, tests and benchmarks.

    python -m pipelines.sample_corpus --output demo/corpus --shards 4 --samples_per_shard 64
    python -m pipelines.sample_corpus --kind av --output demo/av --shards 2 --samples_per_shard 16

Every sample `spkNN_IIIII` has a class label (`.cls`: the speaker index) and a
JSON member (`.json`: speaker, duration, gain). `--kind payload` (default) adds
a binary payload (`.bin`: int16 PCM of a tone whose pitch depends on the
speaker, plus noise). `--kind av` adds a short H.264 video (`.mp4`: frames in
the speaker's colour with a moving square) and speech-like audio at the
speaker's pitch: every other sample as a separate `.flac`, the rest as the
video's own AAC track. With `--bad_samples K`, K samples are broken (an
unparseable label; for av, a truncated video), to show dead letters.
`--kind listing` writes no tar: FLAC files under `media/` and `clips.csv`
naming them (columns audio, label, speaker, split), for manifest_to_tfrecord.
`--kind meetings` writes `--shards` recordings of `--seconds` (default 60)
in which speakers take turns: `meetings.tar` (KEY.flac, KEY.rttm who speaks
when, KEY.json) and the same FLAC files under `media/` with
`segments.jsonl`, a NeMo-style listing of one row per turn.
The corpus is a pure function of the flags: same flags, same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys

from transforms.testing.corpus import write_corpus, write_listing, write_meetings

__all__ = ["run"]


def run(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="Directory for the tar shards.")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--samples_per_shard", type=int, default=64)
    parser.add_argument("--payload_bytes", type=int, default=16_384)
    parser.add_argument("--speakers", type=int, default=8)
    parser.add_argument("--bad_samples", type=int, default=0)
    parser.add_argument("--kind", default="payload",
                        choices=["payload", "av", "listing", "meetings"])
    parser.add_argument("--seconds", type=float, default=None,
                        help="Clip length for --kind av and listing (2 s), recording length "
                             "for meetings (60 s).")
    args = parser.parse_args(argv)
    if args.kind == "meetings":
        path = write_meetings(args.output, args.shards, args.speakers, args.seconds or 60.0)
        print(f"wrote {args.shards} recordings to {args.output}/meetings.tar and {path}")
        return [path]
    args.seconds = args.seconds or 2.0
    if args.kind == "listing":
        path = write_listing(args.output, args.shards * args.samples_per_shard, args.speakers,
                             args.seconds)
        print(f"wrote {args.shards * args.samples_per_shard} FLAC files and {path}")
        return [path]
    paths = write_corpus(args.output, args.shards, args.samples_per_shard,
                         args.payload_bytes, args.speakers, args.bad_samples, args.kind,
                         args.seconds)
    total = sum(os.path.getsize(p) for p in paths)
    print(f"wrote {len(paths)} shards, {args.shards * args.samples_per_shard} samples, "
          f"{total / 1e6:.1f} MB to {args.output}")
    return paths


if __name__ == "__main__":
    run(sys.argv[1:])
