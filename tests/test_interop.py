"""The datasets the pipelines write, read by the tools ML engineers already use.

Three datasets from one audio-visual corpus (pipelines.sample_corpus --kind av:
8 speakers, 1.5 s H.264 clips with FLAC or AAC voices), written by
tar_to_tfrecord: int16 audio windows, single frames with their audio window,
and clips of two frames. Each is read by TFDS (`builder_from_directory`), by
Keras through our reader, by tfx-bsl against its own schema (TFDV's check,
tests/schema_statistics.py), and by NVIDIA DALI's TFRecord reader through its record indexes
(on the CPU).
"""

import os
import runpy
import shutil
import sys
import warnings

import google_crc32c
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.format.record_index import RecordIndexError
from transforms.testing.corpus import write_corpus

import dali_reader
import schema_statistics

CUTS = {
    "audio": ["--cut", "audio_windows", "--audio_fields", "flac", "--video_field", "mp4",
              "--window_s", "0.25", "--audio_dtype", "int16"],
    "frames": ["--cut", "frames", "--video_field", "mp4", "--audio_fields", "flac",
               "--fps", "4", "--frame_size", "32x48", "--av_window_s", "0.25"],
    "clips": ["--cut", "clips", "--video_field", "mp4", "--audio_fields", "flac", "--fps", "4",
              "--clip_frames", "2", "--frame_size", "32x48"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("av")
    write_corpus(str(root), shards=2, samples_per_shard=4, speakers=8, kind="av", seconds=1.5)
    return root


def _write(corpus, output, cut, *flags):
    return tar_to_tfrecord.run([
        "--input", f"{corpus}/*.tar", "--output", str(output), *CUTS[cut],
        "--features", "label=cls:int64,speaker=json.speaker:string,gain=json.gain:double",
        "--label_field", "cls", "--split_by", "json.speaker", "--splits", "train=0.5,test=0.5",
        "--shard_size_mb", "0.05", "--decode_threads", "1", *flags])


@pytest.fixture(scope="module")
def datasets(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    return {cut: (str(root / cut), _write(corpus, root / cut, cut)) for cut in CUTS}


def _by_position(examples) -> dict:
    """Examples keyed by where they were cut from (unique within a dataset)."""
    return {(bytes(ex["source_key"]), round(float(ex["start_time"]), 4)): ex for ex in examples}


# -- TFDS ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cut, media", [("audio", {"audio": "Audio"}),
                                        ("frames", {"audio": "Audio", "frame": "Image"}),
                                        ("clips", {"audio": "Audio", "frames": "Video"})])
def test_tfds_reads_the_same_examples_as_our_reader(datasets, cut, media):
    import tensorflow_datasets as tfds

    output, info = datasets[cut]
    builder = tfds.builder_from_directory(output)
    features = builder.info.features
    for name, kind in media.items():
        assert type(features[name]).__name__ == kind
    assert isinstance(features["label"], tfds.features.ClassLabel)
    assert features["label"].num_classes == 8
    assert isinstance(features["speaker"], tfds.features.Text)
    for split, entry in info["splits"].items():
        assert builder.info.splits[split].num_examples == entry["num_examples"] > 0
        assert len(entry["shards"]) > 1   # TFDS follows our file names across shards
        theirs = _by_position(tfds.as_numpy(builder.as_dataset(split=split)))
        ours = _by_position(tfds.as_numpy(reader.load(output, split, batch_size=None)))
        assert theirs.keys() == ours.keys() and len(ours) == entry["num_examples"]
        for key, ex in ours.items():
            for name, value in ex.items():
                assert np.asarray(theirs[key][name]).dtype == np.asarray(value).dtype, name
                np.testing.assert_array_equal(theirs[key][name], value, err_msg=name)
    assert ours[key]["audio"].dtype == (np.int16 if cut == "audio" else np.float32)


def test_a_gzip_dataset_gets_no_tfds_files_and_no_indexes(corpus, datasets, tmp_path):
    output = tmp_path / "gz"
    info = _write(corpus, output, "audio", "--compression", "gzip")
    assert not (output / "dataset_info.json").exists() and not (output / "features.json").exists()
    shards = [s for entry in info["splits"].values() for s in entry["shards"]]
    assert all("index" not in s and s["file"].endswith(".tfrecord.gz") for s in shards)
    assert all(f"{google_crc32c.value((output / s['file']).read_bytes()):08x}" == s["crc32c"]
               for s in shards)
    plain, _ = datasets["audio"]
    for split in info["splits"]:
        gz = _by_position(_numpy(reader.load(str(output), split, batch_size=None)))
        flat = _by_position(_numpy(reader.load(plain, split, batch_size=None)))
        assert gz.keys() == flat.keys()
        assert all(np.array_equal(gz[k]["audio"], flat[k]["audio"]) for k in gz)
    with pytest.raises(RecordIndexError, match="no record index .* compression 'none'"):
        reader.load(str(output), "train", global_shuffle=True, seed=1)


def _numpy(ds):
    return ({k: v.numpy() for k, v in ex.items()} for ex in ds)


# -- Keras --------------------------------------------------------------------------------------

def _trains(model, ds, **fit):
    before = [w.numpy().copy() for w in model.trainable_weights]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(ds, verbose=0, shuffle=False, **fit)
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    assert np.isfinite(history.history["loss"]).all()
    assert any(not np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_weights))
    return history


def test_a_two_input_functional_model_trains_on_frames_and_audio(datasets):
    output, info = datasets["frames"]
    ds = reader.load(output, "train", batch_size=4, features=["audio", "frame"],
                     label_key="label", shuffle=True, seed=1)
    steps = reader.steps_per_epoch(output, "train", 4)
    assert ds.cardinality().numpy() == steps == -(-info["splits"]["train"]["num_examples"] // 4)
    audio = tf.keras.Input((info["features"][0]["shape"][0],), name="audio")
    frame = tf.keras.Input(info["features"][1]["shape"], name="frame", dtype="uint8")
    pooled = tf.keras.layers.GlobalAveragePooling2D()(
        tf.keras.layers.Rescaling(1 / 255)(frame))
    both = tf.keras.layers.Concatenate()([tf.keras.layers.Dense(8)(audio), pooled])
    model = tf.keras.Model({"audio": audio, "frame": frame},
                           tf.keras.layers.Dense(8)(both))
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    _trains(model, ds, epochs=2)
    # Repeated, with the step count from the manifest.
    _trains(model, reader.load(output, "train", batch_size=4, features=["audio", "frame"],
                               label_key="label", repeat=True), epochs=2, steps_per_epoch=steps)


def test_a_sequential_model_trains_on_audio_windows(datasets):
    output, info = datasets["audio"]
    ds = reader.load(output, "train", batch_size=8, features="audio", label_key="label",
                     drop_remainder=True)
    audio, label = ds.element_spec
    assert audio.shape.as_list()[1:] == info["features"][0]["shape"] and label.dtype == tf.int64
    assert ds.cardinality().numpy() == info["splits"]["train"]["num_examples"] // 8
    model = tf.keras.Sequential([tf.keras.Input(audio.shape[1:], dtype="int16"),
                                 tf.keras.layers.Rescaling(1 / 32768),
                                 tf.keras.layers.Dense(8)])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    _trains(model, ds, epochs=1)


def test_features_are_checked_and_only_the_asked_ones_come_back(datasets):
    output, _ = datasets["frames"]
    batch = next(iter(reader.load(output, "train", batch_size=2, features=["frame", "label"])))
    assert list(batch) == ["frame", "label"]
    with pytest.raises(ValueError, match="features 'fram' is not a feature"):
        reader.load(output, "train", features=["fram"])
    with pytest.raises(ValueError, match="label_key 'label' is also among the features"):
        reader.load(output, "train", features=["label"], label_key="label")


# -- sharding, global shuffle, resume --------------------------------------------------------------

def _keys(ds) -> list:
    """Where each example was cut from, in the order read."""
    return [(bytes(ex["source_key"]), round(float(ex["start_time"]), 4)) for ex in _numpy(ds)]


def _load_keys(output, take=-1, **options):
    return _keys(reader.load(output, "train", batch_size=None,
                             features=["source_key", "start_time"], **options).take(take))


@pytest.mark.parametrize("workers", [2, 5, 7])
@pytest.mark.parametrize("global_shuffle", [False, True])
def test_workers_get_disjoint_equal_parts_covering_the_split(datasets, workers, global_shuffle):
    output, info = datasets["audio"]
    everything = _load_keys(output)
    total = len(everything)
    assert total == info["splits"]["train"]["num_examples"] and total % workers  # uneven
    per_worker = -(-total // workers)
    for epoch in (0, 1):
        parts = [_load_keys(output, per_worker, shard=(i, workers), global_shuffle=global_shuffle,
                            seed=7, repeat=True, start=epoch * per_worker)
                 for i in range(workers)]
        read = [k for part in parts for k in part]
        # Same length for every worker (no one waits at the end of an epoch) ...
        assert [len(p) for p in parts] == [per_worker] * workers
        assert reader.steps_per_epoch(output, "train", 1, shard=(0, workers)) == per_worker
        # ... every example read, and only the wrap-around ones twice.
        assert set(read) == set(everything)
        assert len(read) - len(set(read)) == per_worker * workers - total
        if epoch == 0:
            first = read
    assert (first != read) == global_shuffle   # a new permutation every epoch


def test_global_shuffle_is_a_seeded_permutation_and_resumes_exactly(datasets):
    output, _ = datasets["frames"]
    plain = _load_keys(output)
    shuffled = _load_keys(output, global_shuffle=True, seed=3)
    assert sorted(shuffled) == sorted(plain) and shuffled != plain
    assert _load_keys(output, global_shuffle=True, seed=3) == shuffled
    assert _load_keys(output, global_shuffle=True, seed=4) != shuffled
    n = len(plain)
    two_epochs = _keys(reader.load(output, "train", batch_size=None, repeat=True,
                                   global_shuffle=True, seed=3,
                                   features=["source_key", "start_time"]).take(2 * n))
    assert two_epochs[:n] == shuffled and sorted(two_epochs[n:]) == sorted(plain)
    for start in (1, n - 1, n + 5):   # mid-epoch, last example, into the next epoch
        resumed = reader.load(output, "train", batch_size=None, repeat=True, start=start,
                              global_shuffle=True, seed=3, features=["source_key", "start_time"])
        assert _keys(resumed.take(2 * n - start)) == two_epochs[start:]
    assert _load_keys(output, start=5) == plain[5:]
    batches = reader.load(output, "train", batch_size=4, start=8, features="source_key")
    assert batches.cardinality().numpy() == -(-(n - 8) // 4)


def test_a_corrupt_record_is_caught_when_read_through_the_index(datasets, tmp_path):
    output, info = datasets["audio"]
    copy = tmp_path / "copy"
    shutil.copytree(output, copy)
    shard = info["splits"]["train"]["shards"][0]
    data = bytearray((copy / shard["file"]).read_bytes())
    data[40] ^= 1   # inside the first record
    (copy / shard["file"]).write_bytes(bytes(data))
    with pytest.raises(tf.errors.InvalidArgumentError, match="fails its CRC32C"):
        list(reader.load(str(copy), "train", batch_size=None, global_shuffle=True, seed=1))
    with pytest.raises(tf.errors.DataLossError):   # TensorFlow's reader checks it too
        list(reader.load(str(copy), "train", batch_size=None))


# -- DALI (tests/dali_reader.py) ------------------------------------------------------------------

def _dali_index(shard_path: str, tmp_dir) -> bytes:
    """The index DALI's own tool, `tfrecord2idx` (installed with DALI), makes of a
    shard: its script run in this process, as `python tfrecord2idx SHARD OUT` runs
    it (a process a shard imported TensorFlow again, two minutes a dataset)."""
    out = os.path.join(tmp_dir, os.path.basename(shard_path) + ".idx")
    tool = os.path.join(os.path.dirname(sys.executable), "tfrecord2idx")
    argv = sys.argv
    sys.argv = [tool, shard_path, out]
    try:
        runpy.run_path(tool, run_name="__main__")
    finally:
        sys.argv = argv
    return open(out, "rb").read()


def _check_indexes(output, info, tmp_dir):
    for entry in info["splits"].values():
        for shard in entry["shards"]:
            data = open(os.path.join(output, shard["file"]), "rb").read()
            index = open(os.path.join(output, shard["index"]["file"]), "rb").read()
            assert shard["index"]["file"] == shard["file"] + ".idx"
            assert index == _dali_index(os.path.join(output, shard["file"]), tmp_dir)
            assert len(index.splitlines()) == shard["num_examples"]
            assert f"{google_crc32c.value(index):08x}" == shard["index"]["crc32c"]
            assert f"{google_crc32c.value(data):08x}" == shard["crc32c"]


def test_dali_reads_the_frames_keys_and_labels_our_reader_reads(datasets):
    output, info = datasets["frames"]
    height, width, channels = info["features"][1]["shape"]
    for split in info["splits"]:
        dali = dali_reader.read_split(output, info, split, {
            "source_key": ("string", (), ""), "start_time": ("float32", [], -1.0),
            "label": ("int64", [], -1), "frame": ("string", (), "")})
        theirs = {(bytes(k), round(float(t), 4)): (int(label), frame) for k, t, label, frame
                  in zip(dali["source_key"], dali["start_time"], dali["label"], dali["frame"])}
        ours = _by_position(_numpy(reader.load(output, split, batch_size=None)))
        assert theirs.keys() == ours.keys() and len(ours) == info["splits"][split]["num_examples"]
        for key, (label, frame) in theirs.items():
            assert label == ours[key]["label"]
            assert frame.shape == ours[key]["frame"].shape == (height, width, channels)
            # Two JPEG decoders (DALI's and TensorFlow's) round some pixels apart (seen:
            # a mean of 1.3 and at most 6 levels).
            difference = np.abs(frame.astype(int) - ours[key]["frame"].astype(int))
            assert difference.mean() < 2 and difference.max() <= 12
        assert len({frame.tobytes() for _, frame in theirs.values()}) > len(theirs) // 2


def test_dali_reads_audio_windows_bit_for_bit(datasets):
    output, info = datasets["frames"]    # float32 windows with each frame
    samples = info["features"][0]["shape"][0]
    split = next(iter(info["splits"]))
    dali = dali_reader.read_split(output, info, split, {"source_key": ("string", (), ""),
                                            "start_time": ("float32", [], -1.0),
                                            "audio": ("float32", [samples], 0.0)})
    ours = _by_position(_numpy(reader.load(output, split, batch_size=None)))
    for key, start, audio in zip(dali["source_key"], dali["start_time"], dali["audio"]):
        np.testing.assert_array_equal(audio, ours[(bytes(key), round(float(start), 4))]["audio"])


@pytest.mark.slow  # DALI's tfrecord2idx over every shard
@pytest.mark.parametrize("cut", sorted(CUTS))
def test_every_shard_has_the_index_dali_would_make(datasets, cut, tmp_path):
    _check_indexes(*datasets[cut], tmp_path)


@pytest.mark.slow  # DALI's tfrecord2idx over every shard
def test_indexes_match_their_shards_after_a_rerun(corpus, tmp_path):
    output = tmp_path / "rerun"
    _write(corpus, output, "audio", "--shard_size_mb", "0.02")
    info = _write(corpus, output, "audio")   # other shard sizes, same folder
    _check_indexes(str(output), info, tmp_path)
    on_disk = {os.path.relpath(os.path.join(d, f), output) for d, _, files in os.walk(output)
               for f in files if f.startswith("data-")}
    assert on_disk == reader.load_info(str(output)).stored_files()


# -- the schema, for TFDV and tfx-bsl -------------------------------------------------------

@pytest.mark.parametrize("cut", sorted(CUTS))
def test_each_dataset_validates_against_its_own_schema(datasets, cut):
    output, info = datasets[cut]
    schema = text_format.Parse(open(os.path.join(output, "schema.pbtxt")).read(),
                               schema_pb2.Schema())
    domains = {f.name: f.WhichOneof("domain_info") for f in schema.feature}
    media = "frame" if cut == "frames" else "frames" if cut == "clips" else None
    assert domains["audio"] == "audio_domain" and domains["label"] == "int_domain"
    assert media is None or domains[media] == "image_domain"
    label = next(f for f in schema.feature if f.name == "label")
    assert (label.int_domain.min, label.int_domain.max, label.int_domain.is_categorical) == (
        0, 7, True)
    for split, entry in info["splits"].items():
        records = [r.numpy() for s in entry["shards"]
                   for r in tf.data.TFRecordDataset(os.path.join(output, s["file"]))]
        stats = schema_statistics.statistics(schema_statistics.decode(records, schema), schema)
        assert stats.num_examples == entry["num_examples"]
        assert schema_statistics.anomalies(stats, schema) == [], split


def test_the_check_finds_what_breaks_a_schema(datasets):
    """The validator is not vacuous: a label outside its domain, a truncated
    packed array and a non-image are each reported."""
    output, info = datasets["audio"]
    schema = text_format.Parse(open(os.path.join(output, "schema.pbtxt")).read(),
                               schema_pb2.Schema())
    shard = info["splits"]["train"]["shards"][0]
    records = [tf.train.Example.FromString(r.numpy()) for r in
               tf.data.TFRecordDataset(os.path.join(output, shard["file"]))]
    records[0].features.feature["label"].int64_list.value[0] = 8
    audio = records[1].features.feature["audio"].bytes_list.value
    audio[0] = audio[0][:-2]
    image = schema.feature.add(name="speaker_image", type=schema_pb2.BYTES)
    image.image_domain.SetInParent()
    for r in records:
        r.features.feature["speaker_image"].bytes_list.value.append(b"not an image")
    stats = schema_statistics.statistics(
        schema_statistics.decode([r.SerializeToString() for r in records], schema), schema)
    found = " | ".join(schema_statistics.anomalies(stats, schema))
    assert "label: values 0.0..8.0 outside its int_domain 0..7" in found
    assert "audio: packed int16" in found and "no image" in found


def test_a_dataset_from_before_manifest_json_still_loads(datasets, tmp_path):
    output, _ = datasets["audio"]
    old = tmp_path / "old"
    shutil.copytree(output, old)
    (old / "features.json").unlink()
    (old / "manifest.json").rename(old / "dataset_info.json")
    assert reader.load_info(str(old)).num_examples("train") == reader.load_info(
        output).num_examples("train")
    (old / "dataset_info.json").write_text('{"name": "a TFDS dataset"}')
    with pytest.raises(FileNotFoundError, match="manifest.json not found"):
        reader.load_info(str(old))


def test_the_manifest_records_the_audio_sample_rate(datasets):
    _, info = datasets["audio"]
    assert info["features"][0] == {"name": "audio", "source": "audio", "dtype": "int16",
                                   "shape": [4000], "encoding": "raw", "sample_rate": 16000}
