"""Bigtable -> TFRecord on the real emulator: the same dataset as from the tar shards.

The AV demo corpus is loaded into the emulator with pipelines.tar_to_bigtable,
then read back by pipelines.bigtable_to_tfrecord; with the same flags every
split holds byte-identical examples from both, because both run the one
WriteDataset composite on the same samples. The shards themselves may be cut
differently: the table's work units are its key ranges, the tar corpus's its
files.
"""

import os

import pytest
import tensorflow as tf
from google.cloud import bigtable

from pipelines import bigtable_to_tfrecord, tar_to_bigtable, tar_to_tfrecord
from transforms.testing.corpus import write_corpus

pytestmark = pytest.mark.slow  # jobs against the Bigtable emulator

DATASET_FLAGS = ["--cut", "frames", "--video_field", "mp4", "--audio_fields", "flac",
                 "--fps", "2", "--frame_size", "30x40", "--av_window_s", "0.5",
                 "--features", "label=cls:int64,speaker=json.speaker:bytes",
                 "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
                 "--max_failure_fraction", "0.2"]
TABLE = ["--project", "p", "--instance", "i"]


@pytest.fixture(scope="module")
def loaded(bigtable_emulator, tmp_path_factory):
    """The corpus as tar shards and as table 'raw' (family raw, one cell per member)."""
    corpus = tmp_path_factory.mktemp("corpus")
    write_corpus(str(corpus), shards=2, samples_per_shard=3, speakers=6, bad_samples=1,
                 kind="av", seconds=1.0)
    tar_to_bigtable.run(["--input", f"{corpus}/*.tar", *TABLE, "--table", "raw",
                         "--create_table", "--max_failure_fraction", "0"])
    return corpus


def _examples(root, info):
    """split -> the sorted serialized examples of its shards, read with TensorFlow."""
    return {split: sorted(r.numpy() for shard in entry["shards"] for r in tf.data.TFRecordDataset(
                os.path.join(root, shard["file"])))
            for split, entry in info["splits"].items()}


def test_same_dataset_as_from_the_tar_shards(loaded, tmp_path):
    from_tar = tar_to_tfrecord.run(["--input", f"{loaded}/*.tar", "--output",
                                    str(tmp_path / "tar"), *DATASET_FLAGS])
    from_table = bigtable_to_tfrecord.run([*TABLE, "--table", "raw", "--columns", "raw:*",
                                           "--output", str(tmp_path / "bt"), *DATASET_FLAGS])
    assert from_table["accounting"]["samples_read"] == 6
    assert from_table["accounting"]["samples_failed"] == 1  # the truncated video
    assert from_table["accounting"] == from_tar["accounting"]
    examples = _examples(tmp_path / "bt", from_table)
    assert examples["train"] and examples == _examples(tmp_path / "tar", from_tar)
    assert from_table["source"]["table"] == "bigtable://p/i/raw"


def test_examples_also_and_only_to_an_examples_table(loaded, tmp_path):
    info = bigtable_to_tfrecord.run([*TABLE, "--table", "raw", "--columns", "raw:*",
                                     "--output", str(tmp_path / "both"), *DATASET_FLAGS,
                                     "--examples_table", "ex", "--create_examples_table"])
    examples = sum(s["num_examples"] for s in info["splits"].values())
    table = bigtable.Client(project="p", admin=True).instance("i").table("ex")
    rows = list(table.read_rows())
    assert len(rows) == examples > 0
    assert {r.cells["ex"][b"split"][0].value for r in rows} == {b"train", b"test"}

    # The sink is fed by the workers that build the examples: two of them here.
    only = bigtable_to_tfrecord.run([*TABLE, "--table", "raw", "--columns", "raw:*",
                                     "--output", str(tmp_path / "only"), *DATASET_FLAGS,
                                     "--examples_table", "ex2", "--create_examples_table",
                                     "--examples_only", "--direct_num_workers", "2"])
    assert {n: s["num_examples"] for n, s in only["splits"].items()} == {
        n: s["num_examples"] for n, s in info["splits"].items()}
    assert all(s["shards"] == [] for s in only["splits"].values())
    assert not (tmp_path / "only" / "train").exists()
    assert len(list(bigtable.Client(project="p", admin=True).instance("i").table("ex2")
                    .read_rows())) == examples


@pytest.mark.parametrize("flags, message", [
    (["--table", "nosuchtable", "--columns", "raw:*"], "nosuchtable"),
    (["--table", "raw", "--columns", "audio:wav=wav"], "no column family audio \\(it has "),
    (["--table", "raw"], "--columns required"),
    (["--table", "raw", "--columns", "raw:*", "--examples_only"], "--examples_only needs"),
])
def test_clear_errors_before_any_work(loaded, tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        bigtable_to_tfrecord.run([*TABLE, *flags, "--output", str(tmp_path / "x"), *DATASET_FLAGS])
    assert not (tmp_path / "x").exists()
