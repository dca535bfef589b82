"""The manifest pipeline end to end: CSV/JSONL rows naming real audio files, every
value read back with the project's tf.data reader, splits from a column or
stratified, dead letters that add up, and flag errors before any work."""

import collections
import json
import os
import posixpath

import numpy as np
import pytest
import soundfile as sf

from pipelines import inspect, manifest_to_tfrecord
from transforms.format import reader

RATE = 16000
SPLIT_NAMES = ["TRAIN", "validation", "Test", "train"]  # cycled over speakers


def _tone(path, hz, fmt):
    """0.5 s of a sine at `hz`, 16-bit, written with libsndfile."""
    t = np.arange(RATE // 2) / RATE
    sf.write(path, 0.5 * np.sin(2 * np.pi * hz * t), RATE, format=fmt, subtype="PCM_16")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """lists/clips.csv: 24 rows, 8 speakers (label = speaker % 3, split column by
    speaker), WAV and FLAC mixed in one column, paths relative (../media/...) or
    absolute; row 5's file is missing, row 9's absolute file is missing, row 13's
    label is 'n/a'. Returns the root and, per row, what the pipeline should make of it."""
    root = tmp_path_factory.mktemp("manifest")
    (root / "media").mkdir()
    (root / "lists").mkdir()
    rows, expected = ["audio,label,speaker,split"], {}
    for i in range(24):
        speaker, ext = i % 8, ("wav", "flac")[i % 2]
        name = f"spk{speaker}_{i:02d}.{ext}"
        path = f"../media/{name}" if i % 3 else str(root / "media" / name)
        if i not in (5, 9):
            _tone(root / "media" / name, 200 + 10 * i, ext.upper())
        label = "n/a" if i == 13 else str(speaker % 3)
        rows.append(f"{path},{label},spk{speaker},{SPLIT_NAMES[speaker % 4]}")
        expected[i] = {"key": path.rsplit(".", 1)[0], "file": root / "media" / name,
                       "label": label, "speaker": f"spk{speaker}",
                       "split": {"train": "train", "validation": "eval", "test": "test"}[
                           SPLIT_NAMES[speaker % 4].lower()]}
    (root / "lists" / "clips.csv").write_text("\n".join(rows) + "\n")
    return root, expected


def _run(manifest, output, *flags):
    # 50 KB shards: units of a few rows (their 8-16 KB audio files), several shards;
    # the rows' media lie in the listing folder's sibling media/.
    media = posixpath.join(posixpath.dirname(posixpath.dirname(str(manifest))), "media")
    roots = ["--media_root", media] if "://" in media or os.path.isdir(media) else []
    return manifest_to_tfrecord.run(["--input", str(manifest), "--output", str(output),
                                     "--media_columns", "audio", "--shard_size_mb", "0.05",
                                     *roots, *flags])


def _examples(output, info):
    return [(split, ex) for split in info["splits"]
            for ex in reader.load(str(output), split, batch_size=None)]


def test_rows_to_examples_with_the_split_column(corpus, tmp_path):
    root, expected = corpus
    info = _run(root / "lists" / "clips.csv", tmp_path / "ds",
                "--features", "audio:bytes,label:int64,speaker:bytes",
                "--split_column", "split", "--split_by", "speaker",
                "--max_failure_fraction", "0.2")
    good = [e for i, e in expected.items() if i not in (5, 9, 13)]
    by_audio = {e["file"].read_bytes(): e for e in good}
    seen = []
    for split, ex in _examples(tmp_path / "ds", info):
        row = by_audio[ex["audio"].numpy()]
        assert (split, int(ex["label"]), ex["speaker"].numpy().decode()) == (
            row["split"], int(row["label"]), row["speaker"])
        seen.append(row["key"])
    assert sorted(seen) == sorted(e["key"] for e in good)
    acc = info["accounting"]
    assert (acc["samples_read"], acc["samples_written"], acc["samples_failed"]) == (24, 21, 3)
    assert {s: v["num_examples"] for s, v in info["splits"].items()} == dict(
        collections.Counter(e["split"] for e in good))
    assert info["source"]["type"] == "manifest" and info["options"]["split_column"] == "split"

    letters = {r["key"]: r for r in map(json.loads, (
        tmp_path / "ds" / "failures" / "failures.jsonl").read_text().splitlines())}
    manifest = str(root / "lists" / "clips.csv")
    assert {k: (r["stage"], r["url"], r["member"]) for k, r in letters.items()} == {
        expected[5]["key"]: ("read_media", manifest, str(expected[5]["file"])),
        expected[9]["key"]: ("read_media", manifest, str(expected[9]["file"])),
        expected[13]["key"]: ("encode", manifest, "label"),  # the column named
    }
    missing = letters[expected[9]["key"]]
    assert "FileNotFoundError" in missing["message"] and missing["column"] == "audio"
    assert "'n/a'" in letters[expected[13]["key"]]["message"]


def test_one_column_of_wav_and_flac_decoded_into_audio_windows(corpus, tmp_path):
    root, expected = corpus
    info = _run(root / "lists" / "clips.csv", tmp_path / "cut", "--cut", "audio_windows",
                "--audio_fields", "audio", "--window_s", "0.25", "--features", "speaker:bytes",
                "--split_by", "speaker", "--max_failure_fraction", "0.2",
                "--allow_empty_splits")
    decoded = {}
    for _, ex in _examples(tmp_path / "cut", info):
        decoded.setdefault(ex["source_key"].numpy().decode(), []).append(
            (float(ex["start_time"]), ex["audio"].numpy()))
    keys = {e["key"]: e["file"] for i, e in expected.items() if i not in (5, 9)}
    assert sorted(decoded) == sorted(keys)  # row 13's bad label is not a feature here
    for key, windows in decoded.items():
        original, _ = sf.read(keys[key], dtype="float32")
        got = np.concatenate([w for _, w in sorted(windows, key=lambda w: w[0])])
        np.testing.assert_allclose(got, original, atol=1e-6)  # two 0.25 s windows, exact


def _stratified_manifest(root):
    """A JSONL manifest made here: 30 speakers, label = 'a' for 18 of them, 'b' for 8,
    'c' for 4; speaker s has 1 + s % 4 clips (tiny WAV files of two samples, s and
    the clip's number, written by libsndfile; keys from an id)."""
    (root / "m").mkdir()
    lines = []
    for s in range(30):
        label = "a" if s < 18 else "b" if s < 26 else "c"
        for j in range(1 + s % 4):
            sf.write(root / "m" / f"{s}_{j}.wav", np.array([s, j], np.int16), RATE)
            lines.append(json.dumps({"id": f"{s}-{j}", "file": f"m/{s}_{j}.wav",
                                     "label": label, "speaker": f"spk{s:02d}", "n": j}))
    (root / "list.jsonl").write_text("\n".join(lines) + "\n")
    return len(lines)


def test_stratified_splits_from_a_jsonl_manifest_are_deterministic(tmp_path):
    rows = _stratified_manifest(tmp_path)
    # 200-byte units of 48-byte files: ranges of the manifest of about four rows.
    flags = ["--media_columns", "file", "--key_column", "id",
             "--features", "file:bytes,label:bytes,speaker:bytes,n:int64",
             "--split_by", "speaker", "--stratify_by", "label",
             "--splits", "train=0.5,eval=0.25,test=0.25", "--shard_size_mb", "0.0002"]
    info = _run(tmp_path / "list.jsonl", tmp_path / "one", *flags)
    examples = _examples(tmp_path / "one", info)
    assert len(examples) == rows
    speaker_split, sizes = {}, collections.Counter()
    for split, ex in examples:
        speaker = ex["speaker"].numpy().decode()
        assert speaker_split.setdefault(speaker, split) == split
        sizes[(ex["label"].numpy().decode(), speaker)] += 1
    counts = collections.Counter((split, ex["label"].numpy().decode()) for split, ex in examples)
    assert {(s, label): n for s, v in info["splits"].items()
            for label, n in v["label_counts"].items()} == counts
    shown = inspect.describe_dataset(str(tmp_path / "one"), examples=0)
    assert "labels: " + ", ".join(f"{label} {counts[('train', label)]}" for label in "abc") in shown
    for label in "abc":
        groups = {g: n for (lab, g), n in sizes.items() if lab == label}
        total, largest = sum(groups.values()), max(groups.values())
        for split, ratio in (("train", 0.5), ("eval", 0.25), ("test", 0.25)):
            assert abs(counts[(split, label)] - ratio * total) <= largest, (label, split)
    # Another run with two worker processes assigns and writes the very same.
    _run(tmp_path / "list.jsonl", tmp_path / "two", *flags, "--direct_num_workers", "2")
    assert len(info["splits"]["train"]["shards"]) > 3
    for split in info["splits"]:
        names = sorted(os.listdir(tmp_path / "one" / split))
        assert names == sorted(os.listdir(tmp_path / "two" / split))
        for name in names:
            assert (tmp_path / "two" / split / name).read_bytes() == (
                tmp_path / "one" / split / name).read_bytes()


@pytest.mark.parametrize("flags, message", [
    (["--media_columns", "video"], "no column 'video'"),
    (["--media_columns", ""], "names no column"),
    (["--features", "audio:bytes,cls:int64"], r"no column for 'cls' \(--features\)"),
    (["--split_column", "fold"], r"'fold' \(--split_column\)"),
    (["--stratify_by", "genre"], r"'genre' \(--stratify_by\)"),
    (["--splits", "train=0.8,ev al=0.2"], "not name=ratio"),
    (["--splits", "train=abc,test=0.5"], "not name=ratio"),
    (["--splits", "train=0.8,test=0.1"], "sum to 0.9"),
    (["--split_column", "split", "--stratify_by", "label"], "exclude each other"),
    (["--key_column", "id"], "no column 'id'"),
])
def test_flag_errors_before_any_work(corpus, tmp_path, flags, message):
    root, _ = corpus
    args = ["--input", str(root / "lists" / "clips.csv"), "--output", str(tmp_path / "bad"),
            "--media_columns", "audio", "--media_root", str(root / "media"),
            "--features", "audio:bytes,label:int64"] + flags
    with pytest.raises(ValueError, match=message):
        manifest_to_tfrecord.run(args)
    assert not (tmp_path / "bad").exists()


def test_input_errors_before_any_work(tmp_path):
    (tmp_path / "list.txt").write_text("audio\nx.wav\n")
    with pytest.raises(ValueError, match="--input is required"):
        manifest_to_tfrecord.run(["--output", str(tmp_path / "o"), "--media_columns", "audio"])
    with pytest.raises(ValueError, match="matches no file"):
        manifest_to_tfrecord.run(["--input", str(tmp_path / "none.csv"), "--output",
                                  str(tmp_path / "o"), "--media_columns", "audio"])
    with pytest.raises(ValueError, match="cannot tell its format"):
        manifest_to_tfrecord.run(["--input", str(tmp_path / "list.txt"), "--output",
                                  str(tmp_path / "o"), "--media_columns", "audio"])
    assert not (tmp_path / "o").exists()


def test_manifest_and_media_on_gs(corpus, gcs_emulator, tmp_path):
    """The corpus uploaded under gs://BUCKET/corpus/ (its absolute local paths
    rewritten to gs:// URLs): the same dataset as from local disk, read back from
    the bucket; the missing files are dead letters naming their gs:// URLs."""
    root, expected = corpus
    for name in os.listdir(root / "media"):
        gcs_emulator.upload(root / "media" / name, f"corpus/media/{name}")
    text = (root / "lists" / "clips.csv").read_text().replace(
        str(root / "media"), gcs_emulator.url("corpus/media"))
    (tmp_path / "clips.csv").write_text(text)
    manifest = gcs_emulator.upload(tmp_path / "clips.csv", "corpus/lists/clips.csv")
    flags = ["--features", "audio:bytes,label:int64", "--split_by", "speaker",
             "--max_failure_fraction", "0.2", "--allow_empty_splits"]
    local = _run(root / "lists" / "clips.csv", tmp_path / "local", *flags)
    remote = _run(manifest, gcs_emulator.url("out/manifest"), *flags)
    # Keys of the absolute rows are their URLs now, so shards may cut elsewhere.
    assert ({s: v["num_examples"] for s, v in remote["splits"].items()}
            == {s: v["num_examples"] for s, v in local["splits"].items()})
    assert remote["accounting"] == local["accounting"]
    assert sorted(ex["audio"].numpy() for _, ex in _examples(gcs_emulator.url("out/manifest"),
                                                             remote)) == sorted(
        e["file"].read_bytes() for i, e in expected.items() if i not in (5, 9, 13))
    letters = [json.loads(line) for line in gcs_emulator.objects("out/manifest/")[
        "failures/failures.jsonl"].decode().splitlines()]
    assert sorted(r["member"] for r in letters if r["stage"] == "read_media") == sorted(
        gcs_emulator.url(f"corpus/media/{expected[i]['file'].name}") for i in (5, 9))
    assert {r["url"] for r in letters} == {manifest}
