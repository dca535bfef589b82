"""Near duplicates at scale: recall, false pairs, time and memory of the real Beam step.

    python -m benchmarks.near_scale_bench [--sizes 10000,100000] [--threshold 0.4]

A synthetic corpus of `near` signatures, made by the job's own MinHash
(transforms/media/near_duplicates.py `minhash`) from landmark sets, so the
signatures are what real audio would give for those sets:

- a realistic mix: each recording 1,500 landmarks, 15% of them drawn from a
  Zipf-popular pool of 20,000 (sounds many recordings share); 5% carry a
  jingle (the same 300 landmarks), 10% one of 20 music beds (400 each), 3%
  are noise-like (2,000 landmarks uniform over the 196 x 196 x 64 values a
  whitened spectrum's peaks give noise);
- planted pairs: 100 pairs at each Jaccard similarity 0.3, 0.4, 0.5, 0.6
  and 0.8;
- clusters: a clip and its copies (each keeping 90% of the clip's landmarks:
  similarity about 0.8 to it) of 10, 100, 1,000 and 10,000 copies, those of
  at most a tenth of the corpus.

Each digest also carries a band-level profile (transforms/media/
same_recording.py; `band_profile`, 3 s of random levels): the same for the
copies of one recording (a pair, a cluster), its own for every other, so a
pair proposed is confirmed as the step confirms it.

Each size runs the real step, `NearGroups` (transforms/checks/near_groups.py:
bands, star edges, proposed pairs confirmed, connected components) on the local
runner in a process of its own, whose peak RSS and wall time are its own.
The local runner holds every PCollection in memory (3.2 GiB at 10^5), so
sizes from --simulate_from on run the step's own functions without Beam
instead: the common landmarks tallied (`LandmarkTally`), each bucket's
smallest member found in one pass over the bands, and every other member's
edge to it made in a second (what `star_edges` does), `near_match` on
each edge, `compare` on those proposed, `union_find` on those confirmed.
Reported: recall of the planted pairs by similarity (a pair is found when
both are in one group), of each cluster (its copies in the clip's group),
false pairs (two members of a group from unrelated recordings) and the
share of noise-like recordings grouped with anything, how many landmarks
are common (set aside), time, peak memory, and the growth law of time
between sizes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter

import apache_beam as beam
import numpy as np

from benchmarks.process_tree import measure
from transforms.checks.components import union_find
from transforms.checks.near_groups import NearGroups
from transforms.media.near_duplicates import (
    NEAR,
    LandmarkTally,
    band_rows,
    minhash,
    near_bands,
    near_match,
    profile_of,
)
from transforms.media.same_recording import compare
from transforms.runner.runtime import local_runner
from transforms.testing.synthetic_media import band_profile

_SPACE = 196 * 196 * 64
_LANDMARKS, _POPULAR_SHARE, _POPULAR = 1500, 0.15, 20_000
_JINGLE, _BEDS, _BED = 300, 20, 400
_PLANTED = (0.3, 0.4, 0.5, 0.6, 0.8)
_PAIRS = 100
_CLUSTERS = (10, 100, 1000, 10_000)
_KEEP = 0.9


class _Corpus:
    """Landmark sets -> (member, digest) records, each member's family: samples
    of one family are copies of each other; every other is unrelated."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        weights = 1 / np.arange(1, _POPULAR + 1)
        self._popular_p = weights / weights.sum()
        self._popular = self.rng.integers(0, _SPACE, _POPULAR, dtype=np.uint64)
        self._jingle = self._uniform(_JINGLE)
        self._beds = [self._uniform(_BED) for _ in range(_BEDS)]
        self.records: list = []
        self.family: dict = {}
        self.kind: dict = {}
        self._profiles: dict = {}   # family -> its recording's profile

    def _uniform(self, count: int) -> np.ndarray:
        return self.rng.integers(0, _SPACE, count, dtype=np.uint64)

    def recording(self) -> np.ndarray:
        popular = self.rng.choice(self._popular, int(_LANDMARKS * _POPULAR_SHARE),
                                  p=self._popular_p)
        parts = [self._uniform(_LANDMARKS - len(popular)), popular]
        roll = self.rng.random()
        if roll < 0.05:
            parts.append(self._jingle)
        elif roll < 0.15:
            parts.append(self._beds[self.rng.integers(_BEDS)])
        return np.unique(np.concatenate(parts))

    def add(self, key: str, landmarks: np.ndarray, family: str, kind: str) -> None:
        member = (key, "train", "")
        if family not in self._profiles:
            self._profiles[family] = band_profile(self.rng)
        self.records.append((member, f"{minhash(landmarks).astype('<u4').tobytes().hex()}."
                                     f"{self._profiles[family]}"))
        self.family[key], self.kind[key] = family, kind

    def copy(self, landmarks: np.ndarray, similarity: float) -> np.ndarray:
        """A set of Jaccard `similarity` to `landmarks`: k kept of n, n - k new,
        k / (2n - k) = similarity."""
        kept = int(round(2 * len(landmarks) * similarity / (1 + similarity)))
        chosen = self.rng.choice(landmarks, kept, replace=False)
        return np.concatenate([chosen, self._uniform(len(landmarks) - kept)])


def build(size: int, seed: int = 0) -> _Corpus:
    corpus = _Corpus(seed)
    for s in _PLANTED:
        for i in range(_PAIRS):
            base = corpus.recording()
            corpus.add(f"pair{s}_{i}a", base, f"pair{s}_{i}", f"pair {s}")
            corpus.add(f"pair{s}_{i}b", corpus.copy(base, s), f"pair{s}_{i}", f"pair {s}")
    for copies in (c for c in _CLUSTERS if c <= size // 10):
        clip = corpus.recording()
        corpus.add(f"clip{copies}", clip, f"clip{copies}", f"cluster {copies}")
        for i in range(copies):
            kept = corpus.rng.choice(clip, int(len(clip) * _KEEP), replace=False)
            copy = np.concatenate([kept, corpus._uniform(len(clip) - len(kept))])
            corpus.add(f"clip{copies}_{i}", copy, f"clip{copies}", f"cluster {copies}")
    for i in range(size - len(corpus.records)):
        if corpus.rng.random() < 0.03:
            corpus.add(f"noise{i}", corpus._uniform(2000), f"noise{i}", "noise-like")
        else:
            corpus.add(f"rec{i}", corpus.recording(), f"rec{i}", "recording")
    return corpus


def _groups(records: list, threshold: float) -> list:
    """The keys of each NearGroup the Beam step finds among `records`."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "groups.jsonl")
        with beam.Pipeline(runner=local_runner()) as pipeline:
            _ = (pipeline
                 | beam.Create(records)
                 | NearGroups(threshold)
                 | beam.Filter(lambda group: group.kind == NEAR)
                 | beam.Map(lambda group: json.dumps([m[0] for m in group.members]))
                 | beam.io.WriteToText(path, shard_name_template=""))
        with open(path) as f:
            return [json.loads(line) for line in f]


def _common(records: list):
    tally = LandmarkTally()
    for _, digest in records:
        tally.add(digest)
    return tally.common()


def _simulated_groups(records: list, threshold: float) -> list:
    """The keys of each group the step's functions find, without Beam."""
    rows, common = band_rows(threshold), _common(records)
    smallest: dict = {}   # band key -> its bucket's smallest member
    for member, digest in records:
        for key in near_bands(digest, rows, common):
            if key not in smallest or member < smallest[key]:
                smallest[key] = member
    candidates = {(smallest[key], member) for member, digest in records
                  for key in near_bands(digest, rows, common) if smallest[key][0] != member[0]}
    del smallest
    digest_of = dict(records)
    edges = [(a, b) for a, b in candidates
             if near_match(digest_of[a], digest_of[b], threshold, common) is not None
             and compare(profile_of(digest_of[a]), profile_of(digest_of[b])).same]
    members: dict = {}
    for member, label in union_find(edges).items():
        members.setdefault(label, []).append(member[0])
    return list(members.values())


def one_size(size: int, threshold: float, simulated: bool) -> dict:
    """The figures of one size, in this process."""
    started = time.perf_counter()
    corpus = build(size)
    built = time.perf_counter()
    groups = (_simulated_groups if simulated else _groups)(corpus.records, threshold)
    seconds = time.perf_counter() - built
    group_of = {key: i for i, members in enumerate(groups) for key in members}
    families = Counter(corpus.family.values())
    recall: dict = {}
    for key, family in corpus.family.items():
        kind = corpus.kind[key]
        if kind.startswith("pair") and key.endswith("a"):
            other = key[:-1] + "b"
            hit = key in group_of and group_of.get(other) == group_of[key]
            recall.setdefault(kind, []).append(hit)
        elif kind.startswith("cluster") and key != family:
            recall.setdefault(kind, []).append(
                family in group_of and group_of.get(key) == group_of[family])
    false_pairs, grouped_noise = 0, 0
    for members in groups:
        by_family = Counter(corpus.family[key] for key in members)
        false_pairs += math.comb(len(members), 2) - sum(math.comb(n, 2)
                                                        for n in by_family.values())
        grouped_noise += sum(corpus.kind[key] == "noise-like" for key in members)
    noise = sum(kind == "noise-like" for kind in corpus.kind.values())
    return {"size": size, "step": "functions" if simulated else "beam",
            "seconds": round(seconds, 1), "build_s": round(built - started, 1),
            "recall": {kind: round(sum(hits) / len(hits), 4) for kind, hits in recall.items()},
            "false_pairs": false_pairs, "groups": len(groups),
            "noise_grouped": f"{grouped_noise}/{noise}",
            "common_landmarks": len(_common(corpus.records)),
            "families": len(families)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--threshold", type=float, default=0.4)
    parser.add_argument("--simulate_from", type=int, default=1_000_000)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_size(args.one, args.threshold, args.one >= args.simulate_from)))
        return
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        run = measure([sys.executable, "-m", "benchmarks.near_scale_bench", "--one", str(size),
                       "--threshold", str(args.threshold),
                       "--simulate_from", str(args.simulate_from)])
        lines = [line for line in run.output.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(run.output[-2000:])
        result = json.loads(lines[-1])
        result["peak_rss_mib"] = round(run.peak_rss / 2**20)
        results.append(result)
        print(json.dumps(result), flush=True)
    for before, after in zip(results, results[1:]):
        if before["step"] != after["step"]:
            continue
        law = math.log(after["seconds"] / before["seconds"]) / math.log(
            after["size"] / before["size"])
        print(f"{before['size']:,} -> {after['size']:,}: time grows as N^{law:.2f}")


if __name__ == "__main__":
    main()
