"""`--file_format array_record`: the same records as TFRecord, read by index.

The corpus is made without our code: sox synthesises each FLAC tone, printf
writes the labels and JSON, GNU tar packs them (one label is not a number: a
dead letter). The same job writes it as TFRecord and as ArrayRecord; the
ArrayRecord shards hold the TFRecord shards' records byte for byte, under
the same names, counts, sizes and dead letters. They are read back by our
reader, by TFDS's `as_data_source` and by a Grain `DataLoader`, by index;
verify checks them, and finds them damaged.
"""

import json
import shutil
import subprocess

import apache_beam as beam
import google_crc32c
import grain.python as grain
import numpy as np
import pytest
import tensorflow as tf
from array_record.python.array_record_data_source import ArrayRecordDataSource
from array_record.python.array_record_module import ArrayRecordReader

import transforms as dg
from pipelines import tar_to_tfrecord

FLAGS = ["--cut", "audio_windows", "--audio_fields", "flac", "--window_s", "0.25",
         "--features", "label=cls:int64,speaker=json.speaker:string",
         "--label_field", "cls", "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
         "--shard_size_mb", "0.02", "--max_failure_fraction", "0.2"]
SPEAKERS = 6


def _run(*command, cwd):
    subprocess.run(command, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tones")
    files = root / "files"
    files.mkdir()
    for shard in range(2):
        names = []
        for i in range(6):
            key = f"t{shard}{i}"
            _run("sox", "-n", "-r", "16000", "-c", "1", "-b", "16", f"{key}.flac", "synth", "1",
                 "sine", str(200 + 50 * (shard * 6 + i)), cwd=files)
            label = "x" if (shard, i) == (1, 5) else str(i % 3)
            _run("sh", "-c", f"printf '{label}' > {key}.cls", cwd=files)
            _run("sh", "-c", f"printf '{{\"speaker\": \"s{i % SPEAKERS}\"}}' > {key}.json",
                 cwd=files)
            names += [f"{key}.flac", f"{key}.cls", f"{key}.json"]
        _run("tar", "-cf", str(root / f"tones-{shard}.tar"), *names, cwd=files)
    return root


@pytest.fixture(scope="module")
def datasets(corpus, tmp_path_factory):
    """{file_format: (output dir, manifest)} of the same job."""
    out = tmp_path_factory.mktemp("out")
    return {fmt: (out / fmt, tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output",
                                                  str(out / fmt), "--file_format", fmt, *FLAGS]))
            for fmt in ("tfrecord", "array_record")}


def _files(info, split):
    return [s["file"] for s in info["splits"][split]["shards"]]


def test_array_record_shards_hold_the_tfrecord_shards_records(datasets):
    (tf_dir, tf_info), (ar_dir, ar_info) = datasets["tfrecord"], datasets["array_record"]
    assert (tf_info["file_format"], ar_info["file_format"]) == ("tfrecord", "array_record")
    assert ar_info["failures"]["count"] == tf_info["failures"]["count"] == 1
    assert ar_info["accounting"] == tf_info["accounting"]
    for split in ("train", "test"):
        assert [f.replace(".tfrecord", ".array_record") for f in _files(tf_info, split)] == \
            _files(ar_info, split)
        assert len(_files(ar_info, split)) > 1
        for tf_shard, ar_shard in zip(tf_info["splits"][split]["shards"],
                                      ar_info["splits"][split]["shards"]):
            theirs = [r.numpy() for r in tf.data.TFRecordDataset(str(tf_dir / tf_shard["file"]))]
            ours = ArrayRecordReader(str(ar_dir / ar_shard["file"])).read_all()
            assert ours == theirs and len(ours) == ar_shard["num_examples"]
            assert (ar_shard["num_examples"], ar_shard["num_bytes"]) == \
                (tf_shard["num_examples"], tf_shard["num_bytes"])
            data = (ar_dir / ar_shard["file"]).read_bytes()
            assert f"{google_crc32c.value(data):08x}" == ar_shard["crc32c"]
            assert "index" not in ar_shard
    assert not list(ar_dir.rglob("*.idx")) and not list(ar_dir.rglob("*.tfrecord"))
    info = json.loads((ar_dir / "dataset_info.json").read_text())
    assert info["fileFormat"] == "array_record"
    assert dg.verify_dataset(str(ar_dir), media_samples=1000).ok


def _by_position(examples) -> dict:
    return {(bytes(ex["source_key"]), round(float(ex["start_time"]), 4)): ex for ex in examples}


def test_our_reader_tfds_and_grain_read_it_by_index(datasets):
    import tensorflow_datasets as tfds

    (tf_dir, _), (ar_dir, ar_info) = datasets["tfrecord"], datasets["array_record"]
    builder = tfds.builder_from_directory(str(ar_dir))
    assert isinstance(builder.info.features["label"], tfds.features.ClassLabel)
    for split in ("test", "train"):
        plain = _by_position(tfds.as_numpy(dg.load(str(tf_dir), split, batch_size=None)))
        ours = _by_position(tfds.as_numpy(dg.load(str(ar_dir), split, batch_size=None)))
        source = builder.as_data_source(split=split)
        theirs = _by_position(source[i] for i in range(len(source)))
        assert ours.keys() == plain.keys() == theirs.keys()
        assert len(ours) == ar_info["splits"][split]["num_examples"]
        for key, example in ours.items():
            for name, value in example.items():
                np.testing.assert_array_equal(value, plain[key][name], err_msg=name)
                np.testing.assert_array_equal(theirs[key][name], value, err_msg=name)

    # Grain, over ArrayRecord's own data source: every train example once, in a seeded order.
    paths = [str(ar_dir / f) for f in _files(ar_info, "train")]
    loader = grain.DataLoader(
        data_source=ArrayRecordDataSource(paths),
        sampler=grain.IndexSampler(len(plain), grain.NoSharding(), shuffle=True, num_epochs=1,
                                   seed=5),
        operations=[_Position()], worker_count=0)
    read = list(loader)
    assert sorted(read) == sorted(plain) and read != list(plain)


class _Position(grain.MapTransform):
    """A serialized example -> where it was cut from."""

    def map(self, record):
        feature = tf.train.Example.FromString(record).features.feature
        return (feature["source_key"].bytes_list.value[0],
                round(feature["start_time"].float_list.value[0], 4))


def _keys(output, take=-1, **options):
    ds = dg.load(str(output), "train", batch_size=None, features=["source_key", "start_time"],
                 **options)
    return [(ex["source_key"].numpy(), round(float(ex["start_time"]), 4)) for ex in ds.take(take)]


def test_shuffled_sharded_and_resumed_reads_by_index(datasets):
    output, info = datasets["array_record"]
    in_order = _keys(output)
    total = info["splits"]["train"]["num_examples"]
    assert len(in_order) == total
    shuffled = _keys(output, shuffle=True, seed=3)
    assert sorted(shuffled) == sorted(in_order) and shuffled != in_order
    assert _keys(output, shuffle=True, seed=3) == shuffled          # seeded
    assert _keys(output, global_shuffle=True, seed=3) == shuffled   # one uniform shuffle
    assert _keys(output, shuffle=True, seed=3, start=7) == shuffled[7:]
    per_worker = -(-total // 3)
    parts = [_keys(output, shard=(i, 3)) for i in range(3)]
    assert [len(p) for p in parts] == [per_worker] * 3
    assert set(sum(parts, [])) == set(in_order)
    buckets = dg.load(str(output), "train", batch_size=4, bucket_by_duration=[0.2])
    assert sum(len(b["label"]) for b in buckets) == total


def test_verify_and_the_reader_find_a_damaged_shard(datasets, tmp_path):
    output, info = datasets["array_record"]
    shard = info["splits"]["train"]["shards"][0]
    flipped, cut = tmp_path / "flipped", tmp_path / "cut"
    for copy in (flipped, cut):
        shutil.copytree(output, copy)
    data = bytearray((output / shard["file"]).read_bytes())
    (cut / shard["file"]).write_bytes(bytes(data[:len(data) // 2]))
    record = ArrayRecordReader(str(output / shard["file"])).read()
    data[data.find(record[-100:])] ^= 1   # inside the record, stored as it is
    (flipped / shard["file"]).write_bytes(bytes(data))
    problems = dg.verify_dataset(str(flipped)).problems
    assert any("its CRC32C is" in p for p in problems)
    assert any(shard["file"] in p and "chunk data hash mismatch" in p for p in problems)
    with pytest.raises(tf.errors.OpError, match="chunk data hash mismatch"):
        list(dg.load(str(flipped), "train"))
    problems = dg.verify_dataset(str(cut)).problems
    assert any("not a readable ArrayRecord file" in p for p in problems)
    with pytest.raises(tf.errors.OpError, match="not a readable ArrayRecord file"):
        list(dg.load(str(cut), "train"))
    manifest = json.loads((output / "manifest.json").read_text())
    manifest["splits"]["train"]["shards"][0]["num_examples"] += 1
    manifest["splits"]["train"]["num_examples"] += 1
    (cut / "manifest.json").write_text(json.dumps(manifest))
    (cut / shard["file"]).write_bytes((output / shard["file"]).read_bytes())
    with pytest.raises(tf.errors.OpError, match="records, the manifest"):
        list(dg.load(str(cut), "train"))


def test_a_resumed_and_a_global_layout_array_record_dataset(corpus, datasets, tmp_path, capsys):
    """--resume into a published ArrayRecord dataset reuses every unit and
    leaves the same shards; the global layout writes ArrayRecord too; an empty
    split reads as empty."""
    output, info = datasets["array_record"]
    resumed = tmp_path / "resumed"
    shutil.copytree(output, resumed)
    argv = ["--input", f"{corpus}/*.tar", "--output", str(resumed),
            "--file_format", "array_record", *FLAGS]
    capsys.readouterr()
    again = tar_to_tfrecord.run([*argv, "--resume"])
    assert "0 converted" in capsys.readouterr().out
    assert again["splits"] == info["splits"] and dg.verify_dataset(str(resumed)).ok
    hashed = tar_to_tfrecord.run([*argv[:3], str(tmp_path / "global"), *argv[4:],
                                  "--shuffle", "global", "--num_shards", "2",
                                  "--splits", "train=0.99,test=0.01", "--allow_empty_splits"])
    assert [s["file"] for s in hashed["splits"]["train"]["shards"]] == [
        "train/data-00000-of-00002.array_record", "train/data-00001-of-00002.array_record"]
    assert dg.verify_dataset(str(tmp_path / "global")).ok
    assert len(list(dg.load(str(tmp_path / "global"), "train", batch_size=None))) == \
        hashed["splits"]["train"]["num_examples"]
    assert hashed["splits"]["test"]["num_examples"] == 0    # 6 speakers: none drawn for test
    assert list(dg.load(str(tmp_path / "global"), "test", batch_size=None, shuffle=True)) == []


def test_gzip_array_record_is_refused_before_any_work(corpus, tmp_path):
    with pytest.raises(ValueError, match="^--compression must be 'none' with --file_format "
                                         "'array_record'"):
        tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", str(tmp_path / "gz"),
                             "--file_format", "array_record", "--compression", "gzip", *FLAGS])
    assert not (tmp_path / "gz").exists()


def test_python_writes_array_record_with_its_dead_letters(tmp_path):
    rows = [{"emb": np.full(4, i, np.float32), "label": i % 3} for i in range(30)]
    rows.append({"emb": np.zeros(3, np.float32), "label": 1})   # the wrong shape
    with dg.make_pipeline() as p:
        _ = (p | beam.Create(rows)
               | dg.WriteDataset(str(tmp_path / "ds"), features="emb:float32[4],label:int64",
                                 splits="train=1", file_format="array_record",
                                 max_failure_fraction=0.1))
    info = dg.load_info(str(tmp_path / "ds"))
    assert info.shard_format.array_record and info.accounting["samples_failed"] == 1
    embeddings = sorted(int(e[0]) for e in dg.load(str(tmp_path / "ds"), batch_size=None,
                                                   features="emb"))
    assert embeddings == list(range(30))


@pytest.mark.slow  # a job against the storage emulator
def test_a_bucket_gets_the_same_shards(corpus, datasets, gcs_emulator):
    local_dir, local = datasets["array_record"]
    remote = gcs_emulator.url("out/array_record")
    info = tar_to_tfrecord.run(["--input", f"{corpus}/*.tar", "--output", remote,
                                "--file_format", "array_record", *FLAGS])
    assert info["splits"] == local["splits"]   # the same files, counts and CRC32Cs
    stored = gcs_emulator.objects("out/array_record/")
    for shard in local["splits"]["test"]["shards"]:
        assert stored[shard["file"]] == (local_dir / shard["file"]).read_bytes()
    report = dg.verify_dataset(remote)
    assert report.ok, report.problems
    with pytest.raises(ValueError, match="ArrayRecord shards are read from a local or mounted"):
        dg.load(remote, "train")
