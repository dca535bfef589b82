"""The duplicate check: the same content under two keys, found on every run.

Corpora with planted duplicates, made by other tools: sox makes the takes
(FLAC, and a WAV of one of them) and splices one turn into two recordings,
`cp` copies a file under another key, GNU tar packs them into two archives.
Every planted group is found, by the fingerprint kind it should be, and
nothing else; `fail` publishes nothing; `off` takes no fingerprint. For near
duplicates espeak-ng speaks the takes and ffmpeg and sox make the copies
(transforms/testing/spoken.py); ffmpeg remuxes a clip from MP4 into MKV.
"""

import itertools
import json
import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

import transforms as dg
from pipelines import (
    bigtable_to_tfrecord,
    inspect,
    manifest_to_tfrecord,
    tar_to_bigtable,
    tar_to_tfrecord,
)
from transforms.checks import near_groups
from transforms.checks.duplicates import DuplicateGroup, DuplicateGroups, Shared, copies_to_drop
from transforms.format import reader
from transforms.media import near_duplicates
from transforms.media.audio import AudioOptions
from transforms.media.cutting import CutOptions, cut_sample
from transforms.media.windows import WindowOptions
from transforms.testing.noises import NOISE_LIKE, noise_like
from transforms.testing.spoken import (
    NEAR_COPIES,
    greeting_calls,
    near_copy,
    sentences,
    speak,
)
from transforms.testing.synthetic_media import band_profile
from transforms.verify.dataset import verify_dataset
from transforms.writer import ledger

FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac,wav", "--features",
         "label=cls:int64", "--splits", "train=0.5,test=0.5", "--allow_empty_splits"]


def _run(*command, cwd=None):
    subprocess.run(command, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """a.tar: k01-k08, distinct takes; b.tar: copy01 (k01.flac copied), wav02 (k02 as
    a WAV), k09-k12 distinct. Planted: {k01, copy01} by bytes and content,
    {k02, wav02} by content only. Each sample has a label (.cls) and a split
    (.split: copy01 test, the rest train), both written by echo."""
    root = tmp_path_factory.mktemp("dups")
    files = root / "files"
    files.mkdir()
    for i in range(1, 13):
        _run("sox", "-n", "-r", "16000", "-c", "1", "-b", "16", str(files / f"k{i:02d}.flac"),
             "synth", f"1.{i}", "sine", str(200 + 37 * i), "pinknoise", "vol", "0.3",
             cwd=files)
    _run("cp", "k01.flac", "copy01.flac", cwd=files)
    _run("sox", "k02.flac", "wav02.wav", cwd=files)
    for name in [f"k{i:02d}" for i in range(1, 13)] + ["copy01", "wav02"]:
        _run("sh", "-c", f"echo 1 > {name}.cls; echo "
             f"{'test' if name == 'copy01' else 'train'} > {name}.split", cwd=files)
    first = [f"k{i:02d}.{ext}" for i in range(1, 9) for ext in ("flac", "cls", "split")]
    second = ["copy01.flac", "copy01.cls", "copy01.split",
              "wav02.wav", "wav02.cls", "wav02.split"] + [
        f"k{i:02d}.{ext}" for i in range(9, 13) for ext in ("flac", "cls", "split")]
    _run("tar", "-cf", str(root / "a.tar"), *first, cwd=files)
    _run("tar", "-cf", str(root / "b.tar"), *second, cwd=files)
    return root


def _job(corpus, output, *flags, pattern="*.tar"):
    return tar_to_tfrecord.run(["--input", f"{corpus}/{pattern}", "--output", str(output),
                                *FLAGS, *flags])


def _groups(output):
    with open(output / "duplicates.jsonl") as f:
        return sorted((sorted(m["key"] for m in g["members"]), g["kinds"])
                      for g in map(json.loads, f))


def test_every_planted_copy_is_found_and_nothing_else(corpus, tmp_path):
    info = _job(corpus, tmp_path / "out")
    assert _groups(tmp_path / "out") == [(["copy01", "k01"], ["bytes:flac", "content"]),
                                         (["k02", "wav02"], ["content"])]
    found = info["duplicates"]
    assert found["groups"] == 2 and found["kinds"] == ["bytes", "content"]
    assert found["features"] == ["audio"]
    assert found["file"] == "duplicates.jsonl"
    # Each group is across splits or within one, as the keys' splits fell.
    splits = {ex["source_key"].numpy().decode(): split
              for split in ("train", "test")
              for ex in reader.load(str(tmp_path / "out"), split, batch_size=None)}
    across = sum(splits[a] != splits[b] for a, b in (("k01", "copy01"), ("k02", "wav02")))
    assert sum(found["across_splits"].values()) == across
    assert sum(found["within_split"].values()) == 2 - across
    warned = [w for w in info["warnings"] if "more than one split" in w]
    assert len(warned) == (1 if across else 0)


def test_media_written_whole_are_fingerprinted_with_no_cut_on_every_way_in(corpus, tmp_path):
    """k01.flac copied as copy01.flac into b.tar, written whole as `flac:bytes`
    with no cut and no --audio_fields: found by the job and by the Python API
    (it was not: no fingerprint was taken). wav02, with no .flac, is a dead
    letter. A spec of text only says it fingerprinted no feature."""
    flags = ["--features", "flac:bytes,label=cls:int64", "--splits", "train=0.5,test=0.5",
             "--allow_empty_splits", "--max_failure_fraction", "0.1"]
    cli = tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", str(tmp_path / "cli"),
                               *flags])
    with dg.make_pipeline() as p:
        _ = (p | dg.ReadTarSamples(f"{corpus}/*.tar")
               | dg.WriteDataset(str(tmp_path / "api"), features="flac:bytes,label=cls:int64",
                                 splits="train=0.5,test=0.5", allow_empty_splits=True,
                                 max_failure_fraction=0.1))
    api = dg.load_info(tmp_path / "api").document
    for info, output in ((cli, tmp_path / "cli"), (api, tmp_path / "api")):
        assert _groups(output) == [(["copy01", "k01"], ["feature:flac"])]
        assert (info["duplicates"]["kinds"], info["duplicates"]["features"]) == (
            ["feature"], ["flac"])
    text = tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output",
                                str(tmp_path / "text"), "--features",
                                "label=cls:int64,split:string", "--splits", "train=1"])
    assert (text["duplicates"]["kinds"], text["duplicates"]["features"]) == ([], [])


def test_a_clean_corpus_has_none(corpus, tmp_path):
    info = _job(corpus, tmp_path / "out", pattern="a.tar")
    assert info["duplicates"]["groups"] == 0 and info["duplicates"]["file"] is None
    assert not (tmp_path / "out" / "duplicates.jsonl").exists()


def test_off_takes_no_fingerprints(corpus, tmp_path):
    info = _job(corpus, tmp_path / "out", "--duplicates", "off")
    assert "duplicates" not in info
    assert not (tmp_path / "out" / "duplicates.jsonl").exists()


def test_fail_publishes_nothing_until_resumed_with_warn(corpus, tmp_path):
    """Each sample's split from its .split member: copy01 in test, the rest in
    train, so k01's copy is across splits and k02's WAV within train."""
    output = tmp_path / "out"
    argv = ["--input", f"{corpus}/*.tar", "--output", str(output), *FLAGS,
            "--split_column", "split", "--duplicates", "fail"]
    result = subprocess.run([sys.executable, "-m", "pipelines.tar_to_tfrecord", *argv],
                            capture_output=True, text=True)
    assert result.returncode == 3
    assert result.stderr.startswith("failed: 1 recording appears in more than one split "
                                    "(train/test 1): first: copy01 (test) = k01 (train)")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (output / "manifest.json").exists()
    argv[-1] = "warn"
    info = tar_to_tfrecord.run([*argv, "--resume"])
    assert info["duplicates"]["across_splits"] == {"train/test": 1}
    assert info["duplicates"]["within_split"] == {"train": 1}


def test_the_same_turn_in_two_recordings(tmp_path):
    """sox: two recordings sharing one turn (the same take spliced into both),
    segments from RTTM: that turn's two segments match by content; turns of
    one recording do not match each other through their recording's bytes."""
    files = tmp_path / "files"
    files.mkdir()
    for name, synth in (("shared", ["sine", "330"]), ("x", ["sine", "620"]),
                        ("y", ["pinknoise"])):
        _run("sox", "-n", "-r", "16000", "-c", "1", "-b", "16", str(files / f"{name}.wav"),
             "synth", "2", *synth, "vol", "0.4")
    _run("sox", "x.wav", "shared.wav", "r1.flac", cwd=files)
    _run("sox", "y.wav", "shared.wav", "r2.flac", cwd=files)
    for name in ("r1", "r2"):
        _run("sh", "-c", f"printf 'SPEAKER {name} 1 0.000 2.000 <NA> <NA> a <NA> <NA>\\n"
             f"SPEAKER {name} 1 2.000 2.000 <NA> <NA> b <NA> <NA>\\n' > {name}.rttm", cwd=files)
    _run("tar", "-cf", str(tmp_path / "meet.tar"), "r1.flac", "r1.rttm", "r2.flac", "r2.rttm",
         cwd=files)
    tar_to_tfrecord.run([
        "--input", f"{tmp_path}/meet.tar", "--output", str(tmp_path / "out"),
        "--cut", "segments", "--segments_field", "rttm", "--audio_fields", "flac",
        "--features", "none", "--allow_empty_splits"])
    assert _groups(tmp_path / "out") == [(["r1@2000-4000", "r2@2000-4000"], ["content"])]
    assert verify_dataset(str(tmp_path / "out"))[0] == []
    # Windows cut inside each turn: the same turn, and verify finds its
    # windows under their recordings' keys.
    tar_to_tfrecord.run([
        "--input", f"{tmp_path}/meet.tar", "--output", str(tmp_path / "windows"),
        "--cut", "audio_windows", "--segments_field", "rttm", "--audio_fields", "flac",
        "--features", "none", "--allow_empty_splits"])
    assert _groups(tmp_path / "windows") == [(["r1@2000-4000", "r2@2000-4000"], ["content"])]
    assert verify_dataset(str(tmp_path / "windows"))[0] == []


def test_inspect_shows_the_counts_and_two_workers_find_the_same(corpus, tmp_path):
    one = _job(corpus, tmp_path / "one", "--split_column", "split")
    two = _job(corpus, tmp_path / "two", "--split_column", "split", "--direct_num_workers", "2")
    assert one["duplicates"] == two["duplicates"]
    assert _groups(tmp_path / "one") == _groups(tmp_path / "two")
    text = inspect.describe_dataset(str(tmp_path / "one"), examples=0)
    assert ("duplicates: 2 groups of copies (across splits: train/test 1; "
            "within: train 1) in duplicates.jsonl") in text


def test_drop_keeps_the_first_split_and_then_the_first_read(corpus, tmp_path):
    """copy01 (test) goes and k01 (train, the first of --splits) stays; of k02 and
    wav02, both in train, the one read first (k02, in a.tar) stays."""
    info = _job(corpus, tmp_path / "out", "--split_column", "split", "--duplicates", "drop",
                "--direct_num_workers", "2")
    accounting = info["accounting"]
    assert accounting["samples_filtered_per_reason"] == {"duplicate": 2}
    assert accounting["samples_written"] == 12
    keys = {ex["source_key"].numpy().decode()
            for split in ("train", "test")
            for ex in reader.load(str(tmp_path / "out"), split, batch_size=None)}
    assert keys == {f"k{i:02d}" for i in range(1, 13)}
    assert _groups(tmp_path / "out") == [(["copy01", "k01"], ["bytes:flac", "content"]),
                                         (["k02", "wav02"], ["content"])]
    assert info["warnings"] == ["--duplicates drop: 2 groups of copies, one sample "
                                "of each kept, the rest filtered as 'duplicate' (across "
                                "splits: train/test 1; within: train 1); list in "
                                "duplicates.jsonl"]


def test_copies_to_drop_in_order():
    members = [("b", "test", "u1", (0, 1)), ("a", "train", "u2", (3, 0)),
               ("c", "train", "u1", (0, 5))]
    assert copies_to_drop(members, ["train", "test"]) == [("u1", "b"), ("u2", "a")]
    assert copies_to_drop(members, ["test", "train"]) == [("u1", "c"), ("u2", "a")]


def test_drop_and_resume_do_not_go_together(corpus, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{corpus}/*.tar",
         "--output", str(tmp_path / "out"), *FLAGS, "--duplicates", "drop", "--resume"],
        capture_output=True, text=True)
    assert result.returncode == 2
    assert "--resume reuses the shards of work units: not with --duplicates 'drop'" in (
        result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_listing_naming_one_file_twice(corpus, tmp_path):
    """A CSV written with printf whose rows name k05.flac under two keys, and
    k06.flac once: the two rows are one content, found by bytes and content."""
    files = corpus / "files"
    _run("sh", "-c", f"printf 'id,audio,label\\nfirst,{files}/k05.flac,1\\n"
         f"again,{files}/k05.flac,1\\nother,{files}/k06.flac,1\\n' > list.csv", cwd=tmp_path)
    info = manifest_to_tfrecord.run([
        "--input", f"{tmp_path}/list.csv", "--output", str(tmp_path / "out"),
        "--media_root", str(files),
        "--media_columns", "audio", "--key_column", "id", "--cut", "audio_windows",
        "--audio_fields", "audio", "--features", "label:int64", "--allow_empty_splits"])
    assert info["duplicates"]["groups"] == 1
    assert _groups(tmp_path / "out") == [(["again", "first"], ["bytes:audio", "content"])]


def test_verify_checks_the_list_against_the_manifest(corpus, tmp_path):
    output = tmp_path / "out"
    _job(corpus, output, "--split_column", "split")
    assert verify_dataset(str(output))[0] == []
    lines = (output / "duplicates.jsonl").read_text().splitlines()
    # The list is in parts by a hash of each group: find the group within train.
    within = next(i for i, line in enumerate(lines) if json.loads(line)["splits"] == ["train"])
    moved = json.loads(lines[within])
    moved["members"][0]["split"] = "test"   # a within-train group made one across splits
    lines[within] = json.dumps(moved)
    (output / "duplicates.jsonl").write_text("\n".join(lines) + "\n")
    problems = verify_dataset(str(output))[0]
    assert problems[0].startswith("duplicates.jsonl: its groups count {'train/test': 2} across")
    assert problems[1:] == [f"duplicates.jsonl: line {within + 1}: "
                            f"{moved['members'][0]['key']} has no examples in test"]
    (output / "duplicates.jsonl").write_text(lines[1 - within] + "\n")
    assert "duplicates.jsonl: 1 groups, the manifest says 2" in verify_dataset(str(output))[0]


def test_verify_checks_the_list_against_the_shards(corpus, tmp_path):
    """A listed key with no examples in its split is found in the shards'
    records; after drop, the list says which were dropped, and a sample it
    says was dropped but has examples is found."""
    output = tmp_path / "out"
    _job(corpus, output, "--split_column", "split")
    text = (output / "duplicates.jsonl").read_text()
    (output / "duplicates.jsonl").write_text(text.replace('"copy01"', '"k03"'))
    line = _line_of(text, '"copy01"')
    assert verify_dataset(str(output))[0] == [
        f"duplicates.jsonl: line {line}: k03 has no examples in test"]
    _job(corpus, tmp_path / "dropped", "--split_column", "split", "--duplicates", "drop")
    assert verify_dataset(str(tmp_path / "dropped"))[0] == []
    listed = tmp_path / "dropped" / "duplicates.jsonl"
    line = _line_of(listed.read_text(), '"wav02"')
    group = json.loads(listed.read_text().splitlines()[line - 1])
    assert {m["key"]: m["dropped"] for m in group["members"]} == {"k02": False, "wav02": True}
    listed.write_text(listed.read_text().replace('"wav02"', '"k03"'))
    assert verify_dataset(str(tmp_path / "dropped"))[0] == [
        f"duplicates.jsonl: line {line}: k03 has examples in train, though it was dropped"]


def _line_of(text: str, found: str) -> int:
    """The number of the list's line holding `found` (the list is in parts by a
    hash of each group, not sorted whole)."""
    return next(n for n, line in enumerate(text.splitlines(), 1) if found in line)


@pytest.mark.slow  # the Bigtable emulator
def test_copies_in_a_bigtable_table(corpus, bigtable_emulator, tmp_path):
    """The corpus loaded into the emulator, one row per sample: the same groups."""
    table = ["--project", "p", "--instance", "i", "--table", "dups"]
    tar_to_bigtable.run(["--input", f"{corpus}/*.tar", *table, "--create_table",
                         "--max_failure_fraction", "0"])
    info = bigtable_to_tfrecord.run([
        *table, "--columns", "raw:*", "--output", str(tmp_path / "out"), *FLAGS])
    assert info["duplicates"]["groups"] == 2
    assert _groups(tmp_path / "out") == [(["copy01", "k01"], ["bytes:flac", "content"]),
                                         (["k02", "wav02"], ["content"])]


SPEECH_FLAGS = ["--cut", "audio_windows", "--audio_fields", ",".join(["flac", *NEAR_COPIES]),
                "--features", "none", "--splits", "train=0.5,test=0.5", "--allow_empty_splits",
                "--near_duplicates", "0.4"]


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """takes.tar: eight Harvard sentences spoken by espeak-ng (t0-t7, FLAC);
    copies.tar: a near copy of each of t0-t3, one of each NEAR_COPIES kind
    (MP3, AAC, Opus, a FLAC cut 0.3 s later), under other keys."""
    root = tmp_path_factory.mktemp("speech")
    files = root / "files"
    files.mkdir()
    for i, text in enumerate(sentences(8)):
        speak(text, str(files / f"t{i}.flac"), voice=i)
    copies = [f"near{i}.{kind}" for i, kind in enumerate(NEAR_COPIES)]
    for i, name in enumerate(copies):
        near_copy(str(files / f"t{i}.flac"), str(files / name), name.split(".")[1])
    _run("tar", "-cf", str(root / "takes.tar"), *[f"t{i}.flac" for i in range(8)], cwd=files)
    _run("tar", "-cf", str(root / "copies.tar"), *copies, cwd=files)
    return root


def _near(output):
    with open(output / "duplicates.jsonl") as f:
        return sorted((sorted(m["key"] for m in g["members"]), g["kinds"], g["similarity"])
                      for g in map(json.loads, f))


def test_near_copies_are_found_and_nothing_else(speech, tmp_path):
    info = tar_to_tfrecord.run(["--input", f"{speech}/*.tar", "--output",
                                str(tmp_path / "out"), *SPEECH_FLAGS])
    found = _near(tmp_path / "out")
    assert [(keys, kinds) for keys, kinds, _ in found] == [
        ([f"near{i}", f"t{i}"], ["near"]) for i in range(4)]
    assert all(0.4 <= similarity <= 1 for _, _, similarity in found)
    assert info["duplicates"]["near"] == 4 and "near" in info["duplicates"]["kinds"]
    clean = tar_to_tfrecord.run(["--input", f"{speech}/takes.tar", "--output",
                                 str(tmp_path / "clean"), *SPEECH_FLAGS])
    assert clean["duplicates"]["groups"] == 0


def test_drop_on_a_near_match_only_when_asked(speech, tmp_path):
    info = tar_to_tfrecord.run(["--input", f"{speech}/*.tar", "--output",
                                str(tmp_path / "out"), *SPEECH_FLAGS, "--duplicates", "drop",
                                "--direct_num_workers", "2"])
    accounting = info["accounting"]
    assert accounting["samples_filtered_per_reason"] == {"duplicate": 4}
    assert accounting["samples_written"] == 8
    keys = {ex["source_key"].numpy().decode()
            for split in ("train", "test")
            for ex in reader.load(str(tmp_path / "out"), split, batch_size=None)}
    assert len(keys) == 8 and all(len(keys & {f"t{i}", f"near{i}"}) == 1 for i in range(4))


@pytest.fixture(scope="module")
def calls(tmp_path_factory):
    """calls.tar: 40 calls, one greeting (espeak-ng, 4 s) before a different
    answer each, joined by sox (transforms/testing/spoken.py); copies.tar:
    call0 as MP3 and call1 as Opus (ffmpeg), under other keys."""
    root = tmp_path_factory.mktemp("calls")
    files = root / "files"
    files.mkdir()
    greeting_calls(str(files), 40)
    near_copy(str(files / "call0.flac"), str(files / "copy0.mp3"), "mp3")
    near_copy(str(files / "call1.flac"), str(files / "copy1.opus"), "opus")
    _run("tar", "-cf", str(root / "calls.tar"), *[f"call{i}.flac" for i in range(40)], cwd=files)
    _run("tar", "-cf", str(root / "copies.tar"), "copy0.mp3", "copy1.opus", cwd=files)
    return root


def test_calls_sharing_a_greeting_are_not_near_duplicates(calls, tmp_path):
    """On all their landmarks, every two calls are 0.4 to 0.7 alike (the
    greeting is most of each): one group of 40 calls, and `drop` would keep
    one. The greeting's landmarks are in every signature, so they are set
    aside (#48's stop list), and a pair still proposed is no copy frame by
    frame (#56): listed as similar, never dropped. The copies are the only
    groups, and `drop` keeps every call."""
    info = tar_to_tfrecord.run(["--input", f"{calls}/*.tar", "--output", str(tmp_path / "out"),
                                *SPEECH_FLAGS, "--duplicates", "drop"])
    listed = _near(tmp_path / "out")
    assert [(keys, kinds) for keys, kinds, _ in listed if kinds != ["similar"]] == [
        (["call0", "copy0"], ["near"]), (["call1", "copy1"], ["near"])]
    assert info["duplicates"]["similar"] == len(listed) - 2
    assert info["accounting"]["samples_filtered_per_reason"] == {"duplicate": 2}
    keys = {ex["source_key"].numpy().decode()
            for split in ("train", "test")
            for ex in reader.load(str(tmp_path / "out"), split, batch_size=None)}
    assert keys == {f"call{i}" for i in range(40)}


def _signatures(rows) -> list:
    return [np.asarray(bins, "<u4").tobytes().hex() for bins in rows]


def test_landmarks_common_to_the_corpus_are_set_aside():
    """A landmark that is a bin's minimum in 20 signatures or more (and 2% of
    them) is common: a near pair is also alike on its other bins, and a band
    of common bins is no key. A sample that is 75% common or more is that
    sound itself, compared whole (a call here is 62.5%, as real ones measure)."""
    rng = np.random.default_rng(0)
    greeting = rng.integers(0, 2**31 - 1, 80, dtype=np.uint32)

    def call(own=48):
        return np.concatenate([greeting, rng.integers(0, 2**31 - 1, own, dtype=np.uint32)])

    calls = [call() for _ in range(24)]
    copy = calls[0].copy()
    copy[-4:] = rng.integers(0, 2**31 - 1, 4, dtype=np.uint32)     # 44 of 48 own bins kept
    jingle = rng.integers(0, 2**31 - 1, 128, dtype=np.uint32)
    jingles = [jingle.copy() for _ in range(24)]
    for i, bins in enumerate(jingles):
        bins[i] = i     # each with a bin of its own: 127 of 128 common
    digests = _signatures(calls + [copy] + jingles)
    tally, halves = near_duplicates.LandmarkTally(), [near_duplicates.LandmarkTally()
                                                      for _ in range(2)]
    for i, digest in enumerate(digests):
        tally.add(digest)
        halves[i % 2].add(digest)
    common = tally.common()
    assert np.array_equal(common, np.sort(np.concatenate([greeting, jingle])))
    assert np.array_equal(near_duplicates.LandmarkTally.merged(halves).common(), common)

    a, b, c = digests[0], digests[1], digests[24]
    assert near_duplicates.near_similarity(a, b) == 80 / 128
    assert near_duplicates.near_similarity(a, b, common) == 0.0
    assert near_duplicates.near_similarity(a, c, common) == 44 / 48
    assert near_duplicates.near_match(a, b, 0.4) == 80 / 128
    assert near_duplicates.near_match(a, b, 0.4, common) is None
    assert near_duplicates.near_match(a, c, 0.4, common) == 124 / 128
    bands = near_duplicates.near_bands(a, 3, common)   # band 26 holds bin 80, the first own
    assert [band.split(":")[0] for band in bands] == [str(i) for i in range(26, 42)]
    assert set(bands) & set(near_duplicates.near_bands(c, 3, common))
    assert not set(bands) & set(near_duplicates.near_bands(b, 3, common))
    # The jingle's copies: compared whole, keyed whole.
    j, k = digests[25], digests[26]
    assert near_duplicates.near_similarity(j, k, common) == 126 / 128
    assert near_duplicates.near_match(j, k, 0.4, common) == 126 / 128
    assert len(near_duplicates.near_bands(j, 3, common)) == 42
    # Shared by 19, and 2% of fewer than 1,000: nothing is common.
    small = near_duplicates.LandmarkTally()
    for digest in digests[:19]:
        small.add(digest)
    assert len(small.common()) == 0


def test_a_large_corpus_tallies_a_million_signatures():
    """Up to a million signatures are all tallied; of more, a million or so,
    chosen by the member's hash, the same on every run."""
    members = [(f"k{i:06d}", "train", "") for i in range(20_000)]
    assert all(near_groups.tallied(m, 1_000_000) for m in members)
    chosen = [m for m in members if near_groups.tallied(m, 10_000_000)]
    assert 1_800 <= len(chosen) <= 2_200
    assert chosen == [m for m in members if near_groups.tallied(m, 10_000_000)]


def test_a_resume_with_another_similarity_reuses_every_unit(speech, tmp_path, capsys):
    """The receipts keep the near fingerprints: a resume that changes only the
    similarity converts nothing and sorts the pairs again (here: all but the
    least alike)."""
    argv = ["--input", f"{speech}/*.tar", "--output", str(tmp_path / "out"), *SPEECH_FLAGS]
    tar_to_tfrecord.run(argv)
    pairs = sorted(_near(tmp_path / "out"), key=lambda pair: pair[2])
    capsys.readouterr()
    argv[argv.index("--near_duplicates") + 1] = str(pairs[0][2] + 0.001)
    info = tar_to_tfrecord.run([*argv, "--resume"])
    assert "resume: 1 work units reused, 0 converted" in capsys.readouterr().out
    assert info["duplicates"]["near"] == 3 and _near(tmp_path / "out") == sorted(pairs[1:])


def test_a_resume_across_a_change_of_landmarks_reuses_nothing(speech, tmp_path, monkeypatch):
    """Signatures of two landmark schemes cannot be compared: a run whose units
    were fingerprinted by another (before #48 whitened the peaks) is another
    recipe, refused before any work."""
    argv = ["--input", f"{speech}/*.tar", "--output", str(tmp_path / "out"), *SPEECH_FLAGS]
    with monkeypatch.context() as patched:
        patched.setattr(ledger, "NEAR_LANDMARKS", "an older scheme")
        tar_to_tfrecord.run(argv)
    with pytest.raises(ValueError, match="^--resume: .* was written by another recipe"):
        tar_to_tfrecord.run([*argv, "--resume"])


def test_a_take_that_does_not_decode_is_the_dead_letter_it_always_was(speech, tmp_path):
    """A truncated FLAC (head -c) beside the takes: one dead letter naming its
    key, member and stage, as without --near_duplicates."""
    _run("sh", "-c", f"head -c 3000 {speech}/files/t0.flac > cut.flac && echo 1 > cut.cls "
         "&& tar -cf cut.tar cut.flac cut.cls", cwd=tmp_path)
    info = tar_to_tfrecord.run(["--input", f"{speech}/takes.tar,{tmp_path}/cut.tar",
                                "--output", str(tmp_path / "out"), *SPEECH_FLAGS,
                                "--max_failure_fraction", "0.5"])
    assert info["accounting"]["samples_failed"] == 1
    (letter,) = map(json.loads, (tmp_path / "out" / "failures" / "failures.jsonl").open())
    assert (letter["key"], letter["member"], letter["stage"]) == ("cut", "flac", "decode_audio")


def test_near_duplicates_need_a_policy(speech, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input", f"{speech}/*.tar",
         "--output", str(tmp_path / "out"), *SPEECH_FLAGS, "--duplicates", "off"],
        capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --near_duplicates needs --duplicates warn, fail or drop: it says what to do "
        "with them"]


def test_landmarks_do_not_depend_on_how_the_audio_is_streamed():
    """Blocks of any size give the signature one block gives: frames and peak
    pairs cross block edges."""
    rng = np.random.default_rng(0)
    t = np.arange(8000 * 6) / 8000
    audio = (np.sin(2 * np.pi * (300 + 200 * np.sin(t)) * t)
             + 0.1 * rng.standard_normal(len(t))).astype(np.float32)
    whole, pieces = near_duplicates._Landmarks(), near_duplicates._Landmarks()
    whole.update(audio)
    for start in range(0, len(audio), 3001):
        pieces.update(audio[start:start + 3001])
    assert whole.enough and pieces.enough
    np.testing.assert_array_equal(whole.signature, pieces.signature)


def test_the_cut_feeds_the_landmarks_the_audio_it_decodes(tmp_path):
    """The near fingerprint is taken from the cut's own decode (one decode, not
    two), the same signature a separate decode of the member gives, even where
    --max_windows stops the examples early (the tap hears the rest)."""
    _run("sox", "-n", "-r", "44100", "-c", "2", str(tmp_path / "take.flac"), "synth", "4",
         "pluck", "220", "pluck", "330", "tremolo", "3")
    sample = {"__key__": "take", "flac": (tmp_path / "take.flac").read_bytes()}
    alone = near_duplicates.near_fingerprints(sample, ["flac"], None, AudioOptions())
    assert alone and alone[0][0] == "near"
    for windows in (WindowOptions(), WindowOptions(max_windows=1)):
        tap, stats = near_duplicates.NearTap(), {}
        cut = CutOptions(mode="audio_windows", audio_fields=("flac",), windows=windows)
        examples = list(cut_sample(sample, cut, stats, tap))
        assert tap.fingerprints() == alone
        assert stats["audio_ms_decoded"] == 4000
        assert len(examples) == (windows.max_windows or 4)


def test_noises_hums_and_chords_are_not_near_duplicates(tmp_path):
    """Independent sox recordings of each noise colour, of mains hum and of
    one held chord (#48): the hums and chords repeat a few dozen landmarks,
    too few for a signature; each noise has one, and no two noises of any
    colour are alike at 0.4 (the slope of a colour makes no peak)."""
    signatures = {}
    for kind, i in itertools.product(NOISE_LIKE, range(4)):
        path = tmp_path / f"{kind}{i}.flac"
        noise_like(str(path), kind)
        signatures[kind, i] = near_duplicates.near_fingerprints(
            {"flac": path.read_bytes()}, ["flac"], None, AudioOptions())
    assert not any(signatures[kind, i] for kind in ("hum", "chord") for i in range(4))
    noises = [signatures[kind, i][0][1] for kind in ("brown", "pink", "white")
              for i in range(4)]
    similarity = [near_duplicates.near_similarity(a, b)
                  for a, b in itertools.combinations(noises, 2)]
    assert len(similarity) == 66 and max(similarity) < 0.4


def test_a_band_with_an_empty_bin_is_no_key():
    """Two samples with few landmarks would share a band by its empty bins alone."""
    bins = np.random.default_rng(0).integers(0, 2**31 - 1, 128, dtype=np.uint32)
    bins[[0, 7]] = near_duplicates._EMPTY     # in the first band and the third
    bands = near_duplicates.near_bands(bins.astype("<u4").tobytes().hex(), 3)
    assert [band.split(":")[0] for band in bands] == [str(i) for i in range(42) if i not in (0, 2)]


def test_a_bucket_of_any_size_gives_a_star_of_edges():
    """Every member of a band's bucket of another key is a candidate with its
    smallest: n - 1 edges, never n^2, and no cap (#48: a clip copied 10,000
    times is found like one copied twice)."""
    members = [("b", "train"), ("a", "test"), ("a", "train"), ("c", "train")]
    assert list(near_groups.star_edges(members)) == [
        (("a", "test"), ("b", "train")), (("a", "test"), ("c", "train"))]
    crowd = [(f"k{i:05d}", "train") for i in range(10_000)]
    edges = list(near_groups.star_edges(crowd))
    assert len(edges) == 9_999 and {first for first, _ in edges} == {("k00000", "train")}


@pytest.mark.parametrize("threshold, rows", [(0.2, 2), (0.4, 3), (0.6, 4), (0.8, 8)])
def test_bands_follow_the_threshold(threshold, rows):
    """A pair at the threshold shares a band with probability 0.9 or more, with
    the most rows a band that allows (the fewest chance candidates below it)."""
    assert near_duplicates.band_rows(threshold) == rows
    bands = 128 // rows
    assert 1 - (1 - threshold ** rows) ** bands >= 0.9
    assert 1 - (1 - threshold ** (rows + 1)) ** (128 // (rows + 1)) < 0.9


def _digest(bins, profile: str) -> str:
    """A `near` digest: a signature's bins, and a recording's profile
    (`band_profile`: copies share theirs)."""
    return f"{np.asarray(bins, '<u4').tobytes().hex()}.{profile}"


def test_a_clip_copied_a_thousand_times_is_one_group(pipeline):
    """1,000 copies of a clip (each with 5% of its signature's bins changed:
    similarity about 0.9 to the clip), two copies of another, and 200
    unrelated samples: with no bucket cap, every copy is in its clip's group,
    and nothing else is grouped (#48: the cap had dropped every band of a
    clip copied more than 256 times). The clip is most of this corpus, so its
    landmarks are common: its copies keep them all by being that sound (90%
    of their bins or more), not by the share of the corpus they are."""
    rng = np.random.default_rng(0)

    def signature():
        return rng.integers(0, 2**31 - 1, 128, dtype=np.uint32)

    def copy_of(bins):
        changed = bins.copy()
        at = rng.choice(128, 6, replace=False)
        changed[at] = signature()[at]
        return changed

    jingle, other = signature(), signature()
    sounds = {"jingle": band_profile(rng), "other": band_profile(rng)}
    digests = ([((f"jingle{i:04d}", "train", ""), _digest(copy_of(jingle), sounds["jingle"]))
                for i in range(1000)]
               + [(("jingle", "test", ""), _digest(jingle, sounds["jingle"]))]
               + [((f"other{i}", "train", ""), _digest(copy_of(other), sounds["other"]))
                  for i in range(2)]
               + [((f"unrelated{i:03d}", "train", ""), _digest(signature(), band_profile(rng)))
                  for i in range(200)])
    groups = (pipeline | beam.Create(digests) | near_groups.NearGroups(0.4)
              | beam.Map(lambda group: (len(group.members), group.members[0][0],
                                        group.similarity >= 0.4)))
    assert_that(groups, equal_to([(1001, "jingle", True), (2, "other0", True)]))
    counted = pipeline.run().metrics().query(
        MetricsFilter().with_namespace("datagen").with_name("near_common_landmarks"))
    assert [c.committed for c in counted["counters"]] == [128]   # the clip's bins


def test_no_signatures_is_no_groups_and_nothing_common(pipeline):
    """A corpus of silence and hum has no `near` digest at all: the tally of
    nothing finds no common landmark and the step no group, without failing."""
    groups = pipeline | beam.Create([]) | near_groups.NearGroups(0.4)
    assert_that(groups, equal_to([]))
    counted = pipeline.run().metrics().query(
        MetricsFilter().with_namespace("datagen").with_name("near_common_landmarks"))
    assert sum(c.committed for c in counted["counters"]) == 0


def test_groups_merge_kinds_and_leave_out_near_groups_within_identical_ones(pipeline):
    """Identical content found by two kinds is one group; a near group of
    samples all identical to each other says nothing new and goes, one with
    a sample beyond them stays (#48: joined by key, not compared group by
    group on one worker)."""
    a, b, c, d = (("a", "train", "u"), ("b", "test", "u"), ("c", "train", "u"),
                  ("d", "test", "u"))
    found = [Shared("bytes", [a, b]), Shared("samples", [b, a]),
             Shared("near", [a, b], 0.9), Shared("near", [b, c, a], 0.7),
             Shared("near", [c, d], 0.5)]
    groups = pipeline | beam.Create(found) | DuplicateGroups()
    assert_that(groups, equal_to([
        DuplicateGroup(("bytes", "samples"), (a, b)),
        DuplicateGroup(("near",), (a, b, c), 0.7), DuplicateGroup(("near",), (c, d), 0.5)]))
    pipeline.run()


def test_one_clip_in_mp4_and_mkv(tmp_path):
    """ffmpeg encodes a clip (H.264 with B-frames, AAC) and remuxes it into MKV
    (`-c copy`): the MKV's frames start 64 ms later on its timeline, so the
    sampled frames differ, but its coded streams are the MP4's."""
    ffmpeg = ["ffmpeg", "-loglevel", "error"]
    _run(*ffmpeg, "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25", "-f", "lavfi", "-i",
         "sine=frequency=440:sample_rate=16000", "-t", "2", "-c:v", "libx264", "-pix_fmt",
         "yuv420p", "-c:a", "aac", "clip.mp4", cwd=tmp_path)
    _run(*ffmpeg, "-i", "clip.mp4", "-c", "copy", "clip.mkv", cwd=tmp_path)
    _run("sh", "-c", f"printf 'id,video\\na,{tmp_path}/clip.mp4\\nb,{tmp_path}/clip.mkv\\n' "
         "> list.csv", cwd=tmp_path)
    info = manifest_to_tfrecord.run([
        "--input", f"{tmp_path}/list.csv", "--output", str(tmp_path / "out"),
        "--media_columns", "video", "--key_column", "id", "--cut", "frames",
        "--video_field", "video", "--audio_fields", "video", "--fps", "2",
        "--frame_size", "64x64", "--features", "none", "--allow_empty_splits"])
    assert info["duplicates"]["kinds"] == ["bytes", "streams", "content"]
    assert _groups(tmp_path / "out") == [(["a", "b"], ["streams:video"])]


def test_verify_groups_the_ledgers_copies_as_the_writer_did(corpus, tmp_path):
    """Verify groups the ledger's content fingerprints again: other groups
    than the manifest counts are found; after drop, two written samples of
    one content are refused."""
    def ledger_with(output, change) -> list:
        ledger = output / "units.jsonl"
        lines = [json.loads(line) for line in ledger.read_text().splitlines()]
        for line in lines:
            line["observed"] = [[name, change(records) if name == "fingerprints" else records]
                                for name, records in line["observed"]]
        ledger.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return verify_dataset(str(output))[0]

    output = tmp_path / "warned"
    _job(corpus, output, "--split_column", "split")
    problems = ledger_with(output, lambda found: [f for f in found if f[3] != "copy01"])
    assert len(problems) == 1 and problems[0].startswith(
        "manifest.json: its duplicates {'kinds': ['bytes', 'content'], 'features': ['audio'], "
        "'groups': 2,")
    assert "the ledger's samples give {'kinds': ['bytes', 'content'], 'features': ['audio'], "\
           "'groups': 1," in problems[0]
    dropped = tmp_path / "dropped"
    _job(corpus, dropped, "--split_column", "split", "--duplicates", "drop")
    assert verify_dataset(str(dropped))[0] == []
    assert ledger_with(dropped, lambda found: found + [
        [*f[:3], "k01again", f[4]] for f in found if f[3] == "k01"]) == [
        "units.jsonl: 1 group(s) of copies have two or more samples written, though "
        "duplicates drop keeps one of each"]
