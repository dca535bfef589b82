"""What the duplicate check costs, and how well it finds near copies.

    python -m benchmarks.duplicates_bench [--speech_mb 512] [--repeats 3] [--sentences 30]
        [--noises 12] [--calls 100] [--labelled 12]

First of all, the labelled set (issue #56): --labelled sentences spoken by
espeak-ng and a copy of each of every COPY_KINDS kind (MP3, AAC, Opus; gains
from -20 to +6 dB by ffmpeg and sox; cut 0.3 s later; padded; 2% faster and
slower), against likenesses that are no copy: the same sentence in another
voice, words at two espeak-ng speeds, plucked melodies, calls sharing a
greeting before sentences and before one-word answers, different sentences.
Of each pair: whether the landmarks propose it (a shared band key,
similarity at or above the threshold), whether the frame-by-frame check
confirms it (transforms/media/same_recording.py), and so whether `drop`
deletes one of the two (both). Drop's precision must be 1.0.

First, near-duplicate recall and false positives: espeak-ng speaks
--sentences Harvard sentences in four voices, ffmpeg and sox make a near copy
of each of every NEAR_COPIES kind (transforms/testing/spoken.py); every take
and copy gets its `near` signature, and a pair counts as found as the job
finds it (a shared band key, then similarity at or above --near_duplicates'
threshold), from the audio as the job's cut decodes it (16 kHz). Recall is
over the planted pairs, false positives over all pairs of different sentences,
and over all pairs of noise-like recordings sox makes (--noises of each
colour of noise, of mains hum and of a held chord; transforms/testing/noises.py).
Last, the common landmarks (#48's stop list): --calls calls that share one
greeting before different answers (transforms/testing/spoken.py
`greeting_calls`) and a near copy of each kind of the first ten; false
positives among the calls and recall of the copies, on all landmarks and with
those common to the calls and copies set aside (`LandmarkTally`), as the job
sets them aside.

Then the cost: 16 kHz FLAC speech in tar shards
(benchmarks/audio_pipeline_bench.py) cut into 1 s float32 windows by
pipelines.tar_to_tfrecord with one worker, the runs interleaved and repeated
(medians, benchmarks/process_tree.py `interleaved`), each after a sync with
the corpus in the page cache; peak RSS is the whole process tree's. `warn`
takes two fingerprints a sample (its FLAC's bytes and its windows' samples,
xxh3), carries them in the receipts and groups them in the final step; `near`
adds --near_duplicates (the landmarks of the audio the cut decodes, resampled
to 8 kHz as it passes). Targets: warn's rate within 5% of off's (issue #28),
near's at least 0.75x off's (issue #37).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import statistics
import sys
import tempfile

from benchmarks.audio_pipeline_bench import speech_corpus, write_shards
from benchmarks.process_tree import interleaved
from transforms.media.audio import AudioOptions
from transforms.media.near_duplicates import (
    NOTHING_COMMON,
    LandmarkTally,
    band_rows,
    near_bands,
    near_fingerprints,
    near_match,
    near_similarity,
    profile_of,
)
from transforms.media.same_recording import compare
from transforms.testing.noises import NOISE_LIKE, melody, noise_like
from transforms.testing.spoken import (
    COPY_KINDS,
    NEAR_COPIES,
    copy_name,
    greeting_calls,
    near_copy,
    sentences,
    speak,
    spoken_word,
)

FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "1",
         "--features", "label=cls:int64", "--split_by", "__key__:^([^_]+)",
         "--allow_empty_splits", "--direct_num_workers", "1"]
NEAR_THRESHOLD = 0.4
# The audio as FLAGS' cut decodes it: where the job takes the landmarks from.
AUDIO = AudioOptions(sample_rate=16000)
RUNS = {"off": ["--duplicates", "off"], "warn": ["--duplicates", "warn"],
        "near": ["--duplicates", "warn", "--near_duplicates", str(NEAR_THRESHOLD)]}


def _signature(path: str) -> str | None:
    """Its `near` digest; None for audio too steady to tell (a hum, a chord)."""
    with open(path, "rb") as f:
        found = near_fingerprints({"audio": f.read()}, ["audio"], None, AUDIO)
    return found[0][1] if found else None


def _found(digest: str, other: str, common=NOTHING_COMMON) -> bool:
    rows = band_rows(NEAR_THRESHOLD)
    return (bool(set(near_bands(digest, rows, common)) & set(near_bands(other, rows, common)))
            and near_match(digest, other, NEAR_THRESHOLD, common) is not None)


def noise_accuracy(workdir: str, count: int) -> None:
    """Prints how many noise-like recordings get a signature, and the false
    positives among all pairs of them."""
    digests = []
    for kind, i in itertools.product(NOISE_LIKE, range(count)):
        path = os.path.join(workdir, f"{kind}{i}.flac")
        noise_like(path, kind)
        digests.append((kind, _signature(path)))
    for kind in NOISE_LIKE:
        signed = sum(digest is not None for k, digest in digests if k == kind)
        print(f"  {kind:>19s}: {signed}/{count} with a signature")
    pairs = list(itertools.combinations([d for _, d in digests if d is not None], 2))
    similarity = [near_similarity(a, b) for a, b in pairs]
    print(f"  noise-like recordings: {sum(_found(a, b) for a, b in pairs)} false positives "
          f"of {len(pairs)} pairs, similarity max {max(similarity, default=0):.2f}")


def _judged(pairs: list) -> tuple:
    """(proposed, confirmed, dropped) counts over (digest, digest) pairs (the
    landmarks of all of each, none set aside: pairs, not a corpus)."""
    proposed = confirmed = dropped = 0
    for first, second in pairs:
        if first is None or second is None:   # too little to tell: never a pair
            continue
        found = _found(first, second)
        same = compare(profile_of(first), profile_of(second)).same
        proposed += found
        confirmed += same
        dropped += found and same
    return proposed, confirmed, dropped


def _likenesses(folder: str, takes: list, count: int) -> dict:
    """{what they are: [(digest, digest), ...]}: pairs alike, none a copy."""
    voices = []
    for i, text in enumerate(sentences(count)):
        path = os.path.join(folder, f"voice{i}.flac")
        speak(text, path, voice=i + 1)
        voices.append(_signature(path))
    words = {}
    for word, speed in itertools.product(("yes", "okay", "hello there", "thank you"), (140, 175)):
        path = os.path.join(folder, f"{word.replace(' ', '_')}{speed}.flac")
        spoken_word(word, speed, path)
        words.setdefault(word, []).append(_signature(path))
    scale, draw = (220, 247, 262, 294, 330, 349, 392, 440), random.Random(56)
    melodies = []
    for i in range(10):   # eight notes each, drawn from one scale: no two one tune
        path = os.path.join(folder, f"melody{i}.flac")
        melody(path, [draw.choice(scale) for _ in range(8)])
        melodies.append(_signature(path))
    calls = {}
    for name, answers in (("sentences", ()), ("short answers", ("yes", "no", "okay", "maybe",
                                                                 "yes please", "not now",
                                                                 "thank you", "no thanks"))):
        calls_folder = os.path.join(folder, name.replace(" ", "_"))
        os.makedirs(calls_folder)
        calls[name] = [_signature(path) for path in
                       greeting_calls(calls_folder, len(answers) or 20, answers)]
    return {"one sentence, another voice": list(zip(takes, voices)),
            "a word at two speeds": [tuple(found) for found in words.values()],
            "plucked melodies": list(itertools.combinations(melodies, 2)),
            "calls: greeting + sentence": list(itertools.combinations(calls["sentences"], 2)),
            "calls: greeting + short answer": list(itertools.combinations(
                calls["short answers"], 2)),
            "different sentences": list(itertools.combinations(takes, 2))}


def _takes_and_copies(folder: str, count: int, kinds) -> tuple[list, dict]:
    """The `near` digests of `count` sentences spoken by espeak-ng in `folder`,
    and {kind: the digests of a copy of each} of every kind of `kinds`."""
    takes, copies = [], {kind: [] for kind in kinds}
    for i, text in enumerate(sentences(count)):
        take = os.path.join(folder, f"take{i}.flac")
        speak(text, take, voice=i)
        takes.append(_signature(take))
        for kind in kinds:
            copy = os.path.join(folder, copy_name(f"take{i}", kind))
            near_copy(take, copy, kind)
            copies[kind].append(_signature(copy))
    return takes, copies


def copy_accuracy(workdir: str, count: int) -> None:
    """Prints the labelled set's table (module docstring): per copy kind and
    per kind of likeness, the pairs proposed, confirmed and dropped."""
    folder = os.path.join(workdir, "labelled")
    os.makedirs(folder)
    takes, copies = _takes_and_copies(folder, count, COPY_KINDS)
    print(f"labelled set, {count} espeak-ng sentences, proposed at similarity >= "
          f"{NEAR_THRESHOLD}: proposed / confirmed / dropped (both)")
    print("| copy kind | pairs | proposed | confirmed | dropped (recall) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    found = total = 0
    for kind, signatures in copies.items():
        proposed, confirmed, dropped = _judged(list(zip(takes, signatures)))
        found, total = found + dropped, total + count
        print(f"| {COPY_KINDS[kind].description} | {count} | {proposed} | {confirmed} | "
              f"{dropped} ({dropped / count:.2f}) |")
    print("| likeness, no copy | pairs | proposed | confirmed | dropped |")
    wrong = 0
    for name, pairs in _likenesses(folder, takes, count).items():
        proposed, confirmed, dropped = _judged(pairs)
        wrong += dropped
        print(f"| {name} | {len(pairs)} | {proposed} | {confirmed} | {dropped} |")
    print(f"drop's precision {found / max(1, found + wrong):.3f} ({found} copies dropped, "
          f"{wrong} likenesses); recall of the copies {found}/{total}")


def near_accuracy(workdir: str, count: int) -> None:
    """Prints recall per copy kind and the false positives among different takes."""
    takes, copies = _takes_and_copies(workdir, count, NEAR_COPIES)
    print(f"near duplicates at similarity >= {NEAR_THRESHOLD}, {count} espeak-ng sentences:")
    for kind, signatures in copies.items():
        similarity = [near_similarity(a, b) for a, b in zip(takes, signatures)]
        found = sum(_found(a, b) for a, b in zip(takes, signatures))
        print(f"  {NEAR_COPIES[kind].description:>19s}: "
              f"recall {found}/{count}, similarity min {min(similarity):.2f} "
              f"median {statistics.median(similarity):.2f}")
    pairs = list(itertools.combinations(takes, 2))
    similarity = [near_similarity(a, b) for a, b in pairs]
    print(f"  different sentences: {sum(_found(a, b) for a, b in pairs)} false positives "
          f"of {len(pairs)} pairs, similarity max {max(similarity):.2f}")


def greeting_accuracy(workdir: str, count: int) -> None:
    """Prints the false positives among calls sharing a greeting and the recall
    of their copies, with and without the common landmarks."""
    folder = os.path.join(workdir, "calls")
    os.makedirs(folder)
    calls = [_signature(path) for path in greeting_calls(folder, count)]
    copies = {kind: [] for kind in NEAR_COPIES}
    for i, kind in itertools.product(range(10), NEAR_COPIES):
        copy = os.path.join(folder, f"copy{i}.{kind}")
        near_copy(os.path.join(folder, f"call{i}.flac"), copy, kind)
        copies[kind].append(_signature(copy))
    tally = LandmarkTally()
    for digest in calls + [d for signatures in copies.values() for d in signatures]:
        tally.add(digest)
    pairs, found_common = list(itertools.combinations(calls, 2)), tally.common()
    print(f"{count} calls sharing a greeting, {tally.signatures} signatures:")
    for name, common in (("all landmarks", NOTHING_COMMON),
                         (f"{len(found_common)} common set aside", found_common)):
        similarity = [near_similarity(a, b, common) for a, b in pairs]
        recall = ", ".join(f"{kind} {sum(_found(a, b, common) for a, b in zip(calls, found))}"
                           f"/{len(found)}" for kind, found in copies.items())
        print(f"  {name:>24s}: {sum(_found(a, b, common) for a, b in pairs)} false positives "
              f"of {len(pairs)} pairs (similarity{' on the rest' if len(common) else ''} "
              f"median {statistics.median(similarity):.2f}, max {max(similarity):.2f}); "
              f"copies found: {recall}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speech_mb", type=float, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=30)
    parser.add_argument("--noises", type=int, default=12)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--labelled", type=int, default=12)
    args = parser.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="datagen-duplicates-bench-")
    try:
        copy_accuracy(workdir, args.labelled)
        near_accuracy(workdir, args.sentences)
        noise_accuracy(workdir, args.noises)
        greeting_accuracy(workdir, args.calls)
        corpus = os.path.join(workdir, "speech")
        megabytes = write_shards(speech_corpus(args.speech_mb), corpus, shards=8)
        runs = interleaved(
            {name: [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input",
                    f"{corpus}/*.tar", "--output", os.path.join(workdir, "out"), *FLAGS, *flags]
             for name, flags in RUNS.items()},
            corpus, os.path.join(workdir, "out"), args.repeats)
        median = {name: statistics.median(r.seconds for r in measured)
                  for name, measured in runs.items()}
        print(f"{megabytes:.0f} MB of speech FLAC, 1 worker, median of {args.repeats}")
        for name, flags in RUNS.items():
            peak = statistics.median(r.peak_rss for r in runs[name]) / 2**20
            print(f"{' '.join(flags):42s} {median[name]:6.1f} s "
                  f"{megabytes / median[name]:6.1f} MB/s, peak RSS {peak:5.0f} MiB")
        ratio = median["off"] / median["warn"]
        print(f"warn / off: {ratio:.3f}x the rate "
              f"({'met' if ratio >= 0.95 else 'MISSED'}: >= 0.95x)")
        print(f"near / off: {median['off'] / median['near']:.3f}x the rate (no target)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
