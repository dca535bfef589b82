"""A key once per dataset (issue #56): every sample of a key the input gives
more than once is a `duplicate_key` dead letter naming all its places,
wherever the work units' boundaries fall, on every way in; verify refuses a
dataset whose ledger holds a key twice.

Corpora: tones made by sox, JSONL listings compressed by GNU gzip, tars
packed by GNU tar, Lhotse's own manifests (tests/fixtures/lhotse), Parquet
written by pyarrow.
"""

import json
import pathlib
import shutil
import subprocess
import sys

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import transforms as dg
from pipelines import manifest_to_tfrecord, parquet_to_tfrecord, tar_to_tfrecord
from transforms.format.dead_letters import DatasetFailed

ROWS, FIRST, SECOND = 1200, 100, 1195   # the key given twice: lines 1,095 apart


def _manifest(output) -> dict:
    return json.loads((pathlib.Path(output) / "manifest.json").read_text())


def _letters(output) -> list:
    path = pathlib.Path(output) / "failures" / "failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _counts(output) -> tuple:
    accounting = _manifest(output)["accounting"]
    return (accounting["samples_read"], accounting["samples_written"],
            accounting["samples_failed"])


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    """Four 0.1 s tones by sox, which every listing's rows name in turn."""
    root = tmp_path_factory.mktemp("keys")
    for i in range(4):
        subprocess.run(["sox", "-n", "-r", "8000", "-b", "16", str(root / f"tone{i}.wav"),
                        "synth", "0.1", "sine", str(300 + 100 * i)], check=True)
    return root


def _listing(path, keys) -> None:
    path.write_text("".join(json.dumps({"id": key, "audio": f"tone{i % 4}.wav", "n": i}) + "\n"
                            for i, key in enumerate(keys)))


def _listing_job(inputs: str, output, *flags) -> dict:
    return manifest_to_tfrecord.run([
        "--input", inputs, "--output", str(output), "--media_columns", "audio",
        "--key_column", "id", "--features", "n:int64", "--splits", "train=1",
        "--max_failure_fraction", "0.01", *flags])


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_key_given_twice_far_apart_in_one_listing_fails_both_rows(tones, tmp_path, compressed):
    """1,200 rows in units of about 20 (--shard_size_mb), the key of line 100
    given again on line 1,195: both rows are dead letters naming both lines,
    whatever the units, plain or gzipped by GNU gzip."""
    keys = [f"utt{i:04d}" for i in range(ROWS)]
    keys[SECOND - 1] = keys[FIRST - 1]
    listing = tones / f"rows-{compressed}.jsonl"
    _listing(listing, keys)
    if compressed:
        subprocess.run(["gzip", "-f", str(listing)], check=True)
        listing = listing.with_suffix(".jsonl.gz")
    output = tmp_path / "ds"
    _listing_job(str(listing), output, "--shard_size_mb", "0.04")
    if not compressed:
        assert len((output / "units.jsonl").read_text().splitlines()) > 10
    assert _counts(output) == (ROWS, ROWS - 2, 2)
    letters = _letters(output)
    assert [(letter["stage"], letter["key"]) for letter in letters] == [
        ("duplicate_key", keys[FIRST - 1])] * 2
    assert f"({listing} line {FIRST}, {listing} line {SECOND})" in letters[0]["message"]
    assert dg.verify_dataset(output).ok


def test_a_key_in_two_listings_and_two_lhotse_manifests(tones, tmp_path):
    """The same key in two listing files; the same supervision ids in two
    copies of Lhotse's own LibriSpeech manifests: every row of each key is a
    dead letter, the others are written."""
    _listing(tones / "a.jsonl", ["x0", "shared", "x2"])
    _listing(tones / "b.jsonl", ["y0", "y1", "shared"])
    output = tmp_path / "two"
    _listing_job(f"{tones}/a.jsonl,{tones}/b.jsonl", output, "--max_failure_fraction", "0.5")
    assert _counts(output) == (6, 4, 2)
    assert [letter["key"] for letter in _letters(output)] == ["shared", "shared"]
    assert (f"({tones}/a.jsonl line 2, {tones}/b.jsonl line 3)"
            in _letters(output)[0]["message"])

    fixtures = pathlib.Path(__file__).parent / "fixtures" / "lhotse"
    sys.path.insert(0, str(fixtures))
    from audio import UTTERANCES, make_audio
    corpus = tmp_path / "lhotse"
    corpus.mkdir()
    for copy in ("", "_again"):
        for kind in ("recordings", "supervisions"):
            shutil.copy(fixtures / f"librispeech_{kind}_dev-clean.jsonl.gz",
                        corpus / f"librispeech_{kind}_dev-clean{copy}.jsonl.gz")
    make_audio(str(corpus))
    output = tmp_path / "lhotse_ds"
    manifest_to_tfrecord.run([
        "--input", f"{corpus}/librispeech_recordings_*.jsonl.gz", "--output", str(output),
        "--segment_columns", "start,end", "--cut", "utterances", "--audio_fields", "audio",
        "--splits", "train=1", "--features", "text:string", "--allow_empty_splits",
        "--max_failure_fraction", "1"])
    count = len(UTTERANCES)
    assert _counts(output) == (2 * count, 0, 2 * count)
    assert {letter["stage"] for letter in _letters(output)} == {"duplicate_key"}
    assert "_again.jsonl.gz line 1" in _letters(output)[0]["message"]


def test_a_key_in_two_tars_fails_read_as_a_source_and_refuses_as_a_pcollection(tones,
                                                                              tmp_path):
    """GNU tar packs tone0.wav into two shards: one key, two places. The job
    (a Source) makes both dead letters; the same tars piped in as a
    PCollection, which cannot be read twice, fail the job before it publishes."""
    for shard, members in (("a", ["tone0.wav", "tone1.wav"]), ("b", ["tone2.wav", "tone0.wav"])):
        subprocess.run(["tar", "-cf", str(tmp_path / f"{shard}.tar"), *members], cwd=tones,
                       check=True)
    output = tmp_path / "ds"
    tar_to_tfrecord.run(["--input", f"{tmp_path}/*.tar", "--output", str(output),
                         "--features", "wav:bytes", "--splits", "train=1",
                         "--max_failure_fraction", "0.5"])
    assert _counts(output) == (4, 2, 2)
    letters = _letters(output)
    assert [letter["key"] for letter in letters] == ["tone0", "tone0"]
    assert (f"({tmp_path}/a.tar member tone0.wav, {tmp_path}/b.tar member tone0.wav)"
            in letters[0]["message"])
    with pytest.raises(DatasetFailed, match=r"1 key\(s\) given more than once, e\.g\. 'tone0'"):
        with dg.make_pipeline() as p:
            _ = (p | dg.ReadTarSamples(f"{tmp_path}/*.tar")
                 | dg.WriteDataset(tmp_path / "piped", features="wav:bytes", splits="train=1"))
    assert not (tmp_path / "piped" / "manifest.json").exists()


class _TwoUnits(dg.UnitReader):
    """Unit 0 gives keys a and b, unit 1 gives c and a."""

    def read(self, unit, tracker=None):
        for key in unit.inputs:
            yield {"__key__": key, "n": ord(key)}


def test_a_key_in_two_units_of_a_users_source_and_two_parquet_files(tones, tmp_path):
    source = dg.Source(lambda: [dg.WorkUnit(0, ("a", "b"), 1), dg.WorkUnit(1, ("c", "a"), 1)],
                       _TwoUnits())
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(tmp_path / "mine", source, features="n:int64", splits="train=1",
                                max_failure_fraction=0.5)
    assert _counts(tmp_path / "mine") == (4, 2, 2)
    assert "(unit 0 sample 1, unit 1 sample 2)" in _letters(
        tmp_path / "mine")[0]["message"]

    shutil.copy(tones / "tone0.wav", tmp_path / "tone.wav")
    for name, ids in (("p", ["k1", "k2"]), ("q", ["k3", "k1"])):
        pq.write_table(pa.table({"id": ids, "audio": ["tone.wav"] * 2, "n": [1, 2]}),
                       tmp_path / f"{name}.parquet")
    output = tmp_path / "parquet"
    parquet_to_tfrecord.run(["--input", f"{tmp_path}/*.parquet", "--output", str(output),
                             "--media_columns", "audio", "--key_column", "id",
                             "--features", "n:int64", "--splits", "train=1",
                             "--max_failure_fraction", "0.5"])
    assert _counts(output) == (4, 2, 2)
    assert [letter["key"] for letter in _letters(output)] == ["k1", "k1"]
    assert (f"({tmp_path}/p.parquet row 0, {tmp_path}/q.parquet row 1)"
            in _letters(output)[0]["message"])


def test_verify_refuses_a_ledger_holding_a_key_twice(tones, tmp_path):
    """Verify runs the writer's dataset checks on the ledger: a key two units
    gave, a group in two splits; and in a dataset written before keys were
    checked dataset-wide, two units' fingerprints (the ledger's only keys
    then) naming one key."""
    _listing(tones / "c.jsonl", [f"k{i}" for i in range(8)])
    output = tmp_path / "ds"
    _listing_job(str(tones / "c.jsonl"), output, "--shard_size_mb", "0.01")
    ledger = output / "units.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(lines) > 1 and dg.verify_dataset(output).ok
    observed = [dict(line["observed"]) for line in lines]

    def publish(name: str, records: list) -> list:
        """The ledger with unit 1's observer `name` keeping `records`: its problems."""
        changed = {**lines[1], "observed": list({**observed[1], name: records}.items())}
        ledger.write_text("".join(json.dumps(line) + "\n"
                                  for line in [lines[0], changed, *lines[2:]]))
        return dg.verify_dataset(output).problems

    assert publish("keys", [*observed[1]["keys"], observed[0]["keys"][0]]) == [
        "units.jsonl: 1 key(s) given more than once, e.g. 'k0' 2 times: each sample needs its "
        "own __key__ (examples are named, ordered and split by it); give your elements "
        "distinct keys, or drop the copies"]
    group = observed[0]["groups"][0][0]
    # A group in two splits, and so other counts of groups than the manifest's.
    assert publish("groups", [*observed[1]["groups"], [group, "test"]]) == [
        "manifest.json: its group_counts {'train': 8}, the ledger's samples give "
        "{'test': 1, 'train': 8}",
        f"units.jsonl: split leakage: 1 group key(s) in more than one split: {group!r} in test, "
        "train (groups by split_by; with split_column the split field must agree for every "
        "sample of a group)"]
    # An earlier version's ledger: a field a fact, and no keys.
    older = [{"unit": line["unit"], "groups": observed[i]["groups"],
              "fingerprints": [["bytes:audio", "0" * 32, "train", "k0", "c.jsonl"]]}
             for i, line in enumerate(lines[:2])]
    ledger.write_text("".join(json.dumps(line) + "\n" for line in older))
    assert [p.split(":")[0] for p in dg.verify_dataset(output).problems] == ["units.jsonl"]


def test_a_key_given_twice_across_bundles_of_a_pcollection_fails(tmp_path):
    rows = [{"__key__": f"k{i % 50}", "n": i} for i in range(60)]
    with pytest.raises(DatasetFailed, match=r"10 key\(s\) given more than once"):
        with dg.make_pipeline() as p:
            _ = (p | beam.Create(rows) | beam.Reshuffle()
                 | dg.WriteDataset(tmp_path / "out", features="n:int64", splits="train=1"))


def test_a_segment_row_given_twice_fails_and_the_recordings_other_segments_are_written(
        tones, tmp_path):
    """A NeMo manifest's rows are segments of their file: rows of one file are
    one key each by their times, and a row given twice (one file, offset and
    duration) is two dead letters, while the file's other segment is written."""
    rows = [{"audio_filepath": "tone0.wav", "offset": 0.0, "duration": 0.05},
            {"audio_filepath": "tone0.wav", "offset": 0.05, "duration": 0.05},
            {"audio_filepath": "tone0.wav", "offset": 0.0, "duration": 0.05}]
    (tones / "nemo.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "ds"
    manifest_to_tfrecord.run([
        "--input", str(tones / "nemo.jsonl"), "--output", str(output), "--media_columns",
        "audio_filepath", "--audio_fields", "audio_filepath", "--segment_columns",
        "offset,duration", "--cut", "segments", "--splits", "train=1",
        "--max_failure_fraction", "0.7"])
    assert _counts(output) == (3, 1, 2)
    letters = _letters(output)
    assert [(letter["stage"], letter["key"]) for letter in letters] == [
        ("duplicate_key", "tone0@0-50")] * 2
    assert f"({tones}/nemo.jsonl line 1, {tones}/nemo.jsonl line 3)" in letters[0]["message"]
