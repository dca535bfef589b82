"""The tar pipeline end to end: every value read back with TensorFlow, exact accounting,
byte-identical reruns, dead letters and the failure threshold."""

import functools
import json
import os
import subprocess
import tarfile

import numpy as np
import pytest
import tensorflow as tf
from apache_beam.metrics.metric import MetricsFilter

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.format.manifest import DatasetInfo
from transforms.format.spec import parse_features
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.splits import SplitPlan
from transforms.recipe.units import Source
from transforms.sources.tar import TarReader, plan_tar_units
from transforms.testing.corpus import write_corpus
from transforms.writer import ledger
from transforms.writer.ledger import parse_receipt
from transforms.writer.write import DatasetConfig, WriteDataset

FEATURES = "payload=bin:bytes,label=cls:int64,speaker=json.speaker:bytes,json.gain:float"
SPLITS = "train=0.6,eval=0.2,test=0.2"
# 20 KB: every tar file (about 50 KB) is a work unit of its own, and shards roll
# after about ten 2 KB examples, so every split has several.
SHARD_MB = 0.02
SHARD_BYTES = int(SHARD_MB * (1 << 20))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """3 shards x 20 samples, 16 speakers, 2 KB payloads; sample 0 has label 'unknown'."""
    root = tmp_path_factory.mktemp("corpus")
    write_corpus(str(root), shards=3, samples_per_shard=20, payload_bytes=2048, speakers=16,
                 bad_samples=1)
    return root


def _originals(corpus):
    """key -> members, read with tarfile directly (the ground truth)."""
    samples = {}
    for name in sorted(os.listdir(corpus)):
        with tarfile.open(corpus / name) as tar:
            for member in tar:
                key, ext = member.name.split(".", 1)
                samples.setdefault(key, {})[ext] = tar.extractfile(member).read()
    return samples


def _run(corpus, output, *extra):
    return tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), "--features", FEATURES,
        "--split_by", "__key__:^([^_]+)", "--splits", SPLITS, "--shard_size_mb", str(SHARD_MB),
        "--max_failure_fraction", "0.05", *extra])


@pytest.fixture(scope="module")
def dataset(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("out") / "dataset"
    return output, _run(corpus, output)


def test_every_value_reads_back_with_tensorflow(corpus, dataset):
    output, info = dataset
    originals = _originals(corpus)
    seen = {}
    for split in info["splits"]:
        for ex in reader.load(str(output), split, batch_size=None):
            payload = ex["payload"].numpy()
            key = next(k for k, m in originals.items() if m["bin"] == payload)
            seen[key] = split
            meta = json.loads(originals[key]["json"])
            assert ex["label"].numpy() == int(originals[key]["cls"])
            assert ex["speaker"].numpy().decode() == meta["speaker"]
            assert ex["json.gain"].numpy() == np.float32(meta["gain"])
    assert sorted(seen) == sorted(k for k in originals if originals[k]["cls"] != b"unknown")
    # Every example of one speaker is in one split.
    speaker_splits = {}
    for key, split in seen.items():
        speaker_splits.setdefault(key.split("_")[0], set()).add(split)
    assert all(len(s) == 1 for s in speaker_splits.values())


def test_manifest_layout_and_accounting(dataset):
    output, info = dataset
    assert info["accounting"]["samples_read"] == 60
    assert info["accounting"]["samples_written"] == 59
    assert info["accounting"]["samples_failed"] == 1
    assert sum(s["num_examples"] for s in info["splits"].values()) == 59
    for name, split in info["splits"].items():
        assert len(split["shards"]) >= 3  # a shard or more from each of the 3 units
        for shard in split["shards"]:
            path = output / shard["file"]
            records = [r.numpy() for r in
                       tf.data.TFRecordDataset(str(path))]
            assert len(records) == shard["num_examples"] > 0
            assert sum(map(len, records)) == shard["num_bytes"] <= SHARD_BYTES
        on_disk = sorted(os.listdir(output / name))
        assert on_disk == sorted(os.path.basename(f) for s in split["shards"]
                                 for f in (s["file"], s["index"]["file"]))
    assert sorted(os.listdir(output)) == [
        "dataset_info.json", "eval", "failures", "features.json", "manifest.json",
        "schema.pbtxt", "test", "train", "units.jsonl"]
    # The ledger: each unit's inputs, shards (by their final names) and tallies.
    ledger = [parse_receipt(line) for line in (output / "units.jsonl").read_text().splitlines()]
    assert [r.unit for r in ledger] == [0, 1, 2]
    assert sorted(s.temp for r in ledger for s in r.shards) == sorted(
        shard["file"] for split in info["splits"].values() for shard in split["shards"])
    assert sum(n for r in ledger for (what, _), n in r.tallies if what == "read") == 60
    assert [len(r.failures) for r in ledger].count(1) == 1
    schema = (output / "schema.pbtxt").read_text()
    assert 'name: "label"' in schema and "type: INT" in schema


def test_the_ledger_is_written_in_parts_and_joined_in_unit_order(corpus, dataset, tmp_path,
                                                                 monkeypatch):
    """With a unit a part, no worker holds more than one unit's receipt (each
    carries its groups) and the parts are joined in order: the same file."""
    output, _ = dataset
    monkeypatch.setattr(ledger, "LEDGER_PART_UNITS", 1)
    _run(corpus, tmp_path / "parts")
    assert (tmp_path / "parts" / "units.jsonl").read_bytes() == (
        output / "units.jsonl").read_bytes()


def test_dead_letter_names_the_sample_and_reason(dataset):
    output, info = dataset
    lines = (output / "failures" / "failures.jsonl").read_text().splitlines()
    assert len(lines) == info["failures"]["count"] == 1
    record = json.loads(lines[0])
    assert record["key"] == "spk00_00000" and record["stage"] == "encode"
    assert record["url"].endswith("corpus-00000.tar")
    assert "label" in record["message"] and "unknown" in record["message"]


def test_dead_letters_are_written_in_parts_in_the_inputs_order(tmp_path, monkeypatch):
    """Three GNU tar files (labels written with printf), two bad labels in each:
    the dead letters file lists them file by file, each file's in member order,
    whether written as one part or a part per unit."""
    files = tmp_path / "files"
    files.mkdir()
    for shard, labels in enumerate(["1x2y", "z34w", "v5u6"]):
        names = []
        for i, label in enumerate(labels):
            key = f"s{shard}_{'dcba'[i]}"                # member order is not key order
            subprocess.run(["sh", "-c", f"printf '{label}' > {key}.cls"], check=True, cwd=files)
            names.append(f"{key}.cls")
        subprocess.run(["tar", "-cf", str(tmp_path / f"{shard}.tar"), *names], check=True,
                       cwd=files)
    flags = ["--input", str(tmp_path / "*.tar"), "--features", "label=cls:int64",
             "--splits", "train=1", "--max_failure_fraction", "0.6", "--shard_size_mb", "0.001"]
    tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "one")])
    monkeypatch.setattr(ledger, "LEDGER_PART_UNITS", 1)
    info = tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "parts")])
    text = (tmp_path / "parts" / "failures" / "failures.jsonl").read_text()
    assert text == (tmp_path / "one" / "failures" / "failures.jsonl").read_text()
    keys = [json.loads(line)["key"] for line in text.splitlines()]
    assert keys == ["s0_c", "s0_a", "s1_d", "s1_a", "s2_d", "s2_b"]
    assert info["failures"]["count"] == 6


def _shard_bytes(output):
    return {p: (output / p).read_bytes()
            for split in ("train", "eval", "test") for p in
            (f"{split}/{f}" for f in sorted(os.listdir(output / split)))}


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["2", "4"])
def test_reruns_are_byte_identical_with_any_number_of_worker_processes(corpus, dataset, tmp_path,
                                                                       workers):
    output, _ = dataset
    _run(corpus, tmp_path / "again", "--direct_num_workers", workers)
    assert _shard_bytes(tmp_path / "again") == _shard_bytes(output)
    with open(output / "manifest.json") as f, open(tmp_path / "again" / "manifest.json") as g:
        assert json.load(f)["splits"] == json.load(g)["splits"]


def test_a_rerun_with_other_splits_leaves_no_shard_of_the_old_ones(corpus, tmp_path):
    output = tmp_path / "out"
    _run(corpus, output, "--splits", "train=0.5,validation=0.5")
    assert list((output / "validation").glob("data-*"))
    info = _run(corpus, output)
    listed = DatasetInfo(info).stored_files()
    on_disk = {str(p.relative_to(output)) for p in output.glob("*/data-*")}
    assert on_disk == listed and not list((output / "validation").glob("data-*"))


@pytest.mark.parametrize("flags, message", [
    (["--splits", "train=0.5,test=0.4"], "sum to 0.9"),
    (["--features", "cls:int9"], "unknown dtype"),
    (["--split_by", "__key__:^spk"], "capture group"),
    (["--sample_fn", "no_such_module:fn"], "--sample_fn"),
])
def test_bad_flags_fail_before_any_work(corpus, tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        _run(corpus, tmp_path / "bad", *flags)
    assert not (tmp_path / "bad").exists()


def test_missing_input_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="matches no file"):
        tar_to_tfrecord.run(["--input", str(tmp_path / "nothing-*.tar"),
                             "--output", str(tmp_path / "out")])


def test_features_auto_infers_the_spec(corpus, tmp_path):
    info = tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", str(tmp_path / "auto"),
                                "--max_failure_fraction", "0.05"])
    dtypes = {f["name"]: f["dtype"] for f in info["features"]}
    # Sample 0's label is 'unknown', so inference widens `cls` to bytes and
    # nothing fails.
    assert dtypes == {"bin": "bytes", "cls": "bytes", "json.duration_s": "float",
                      "json.gain": "float", "json.speaker": "bytes"}
    assert info["accounting"]["samples_written"] == 60


def keep_even_speakers(sample):
    """--sample_fn for the test below: drops odd speakers, adds a field."""
    if int(sample["cls"]) % 2:
        return None
    return {**sample, "twice": str(2 * int(sample["cls"])).encode()}


def double_gain(values):
    """--example_fn for the test below."""
    return {**values, "json.gain": 2 * values["json.gain"]}


def test_sample_operations_through_the_pipeline(corpus, tmp_path):
    output = tmp_path / "ops"
    info = _run(corpus, output, "--where", "json.speaker=spk02", "--allow_empty_splits",
                "--features", "label=cls:int64,twice:int64,json.gain:float",
                "--sample_fn", f"{__name__}:keep_even_speakers",
                "--example_fn", f"{__name__}:double_gain", "--select", "cls,json")
    acc = info["accounting"]
    assert acc["samples_written"] == 4  # keys 2, 18, 34, 50
    assert acc["samples_filtered_per_reason"] == {"where": 56}
    examples = [ex for split in info["splits"] for ex in reader.load(str(output), split, None)]
    assert sorted(int(ex["twice"]) for ex in examples) == [4] * 4
    originals = _originals(corpus)
    gains = sorted(2 * json.loads(m["json"])["gain"] for k, m in originals.items()
                   if k.startswith("spk02"))
    assert sorted(float(ex["json.gain"]) for ex in examples) == pytest.approx(gains)


def test_counters_match_the_manifest(corpus, tmp_path, pipeline):
    recipe = ExampleRecipe(spec=parse_features(FEATURES),
                           split_plan=SplitPlan.from_flags(SPLITS, "__key__:^([^_]+)"))
    config = DatasetConfig(output=str(tmp_path / "c"), recipe=recipe, max_failure_fraction=0.05)
    source = Source(functools.partial(plan_tar_units, f"{corpus}/*.tar", SHARD_BYTES),
                    TarReader())
    _ = pipeline | WriteDataset(config, source)
    result = pipeline.run()
    result.wait_until_finish()

    def counter(name):
        found = result.metrics().query(
            MetricsFilter().with_namespace("datagen").with_name(name))["counters"]
        return sum(c.committed for c in found)

    assert counter("samples_read") == 60
    assert counter("samples_written") == 59 == counter("examples_written")
    assert counter("samples_failed") == 1
    assert counter("samples_read") == (counter("samples_written") + counter("samples_failed")
                                       + counter("samples_filtered"))
    info = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert info["accounting"]["samples_read"] == counter("samples_read")
