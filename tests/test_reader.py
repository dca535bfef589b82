"""The tf.data reader over a dataset written by WriteDataset, and `pipelines.inspect`."""

import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf

from pipelines import inspect
from transforms.format import reader
from transforms.format.spec import parse_features
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.splits import SplitPlan
from transforms.writer.write import DatasetConfig, WriteDataset

from memory_source import memory_source

N = 40


SPEC = ("ids:int64[*],emb:float[2,3],name:bytes,cls:int64,"
        "flag:bool,small:int32,ids32=ids:int32[*],trio:int32[3],x:double,text:string,"
        "pcm:int16[*],half:float16[*,2]")


def _sample(i):
    # Made here: ids has i % 4 values (0 to 3), emb is a 2x3 float grid, name is text;
    # the typed fields: flag every third example, int32 extremes, a double, UTF-8 text.
    return {"__key__": f"k{i:03d}", "__url__": "mem://test", "ids": list(range(i % 4)),
            "emb": np.arange(6, dtype=np.float64).reshape(2, 3) + i, "name": f"n{i}".encode(),
            "cls": str(i).encode(), "flag": i % 3 == 0, "small": -1000 * i,
            "trio": [i, -(2 ** 31), 2 ** 31 - 1], "x": i + 0.1, "text": f"тест {i}",
            # Packed arrays of a variable length, none at all in some examples.
            "pcm": np.arange(i % 5, dtype=np.int16) * -7000, "half": _half(i)}


def _half(i):
    """i % 3 rows of two values, float16 rounds 0.1 of them."""
    return np.arange(i % 3 * 2, dtype=np.float32).reshape(-1, 2) * 1000 + 0.1 * i


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from transforms.runner.runtime import local_runner

    output = str(tmp_path_factory.mktemp("reader") / "ds")
    recipe = ExampleRecipe(spec=parse_features(SPEC),
                           split_plan=SplitPlan.from_flags("train=0.5,test=0.5", "__key__"))
    with beam.Pipeline(runner=local_runner()) as p:
        # 3 units of 14 samples or fewer: shards of both splits from each.
        _ = p | WriteDataset(DatasetConfig(output=output, recipe=recipe),
                             memory_source([_sample(i) for i in range(N)], per_unit=14))
    return output


def _all(output, **kwargs):
    info = reader.load_info(output)
    return [ex for split in info.splits for ex in reader.load(output, split, **kwargs)]


def test_values_shapes_and_dtypes(dataset):
    examples = _all(dataset, batch_size=None)
    assert len(examples) == N
    for ex in examples:
        i = int(ex["cls"])
        assert ex["name"].numpy() == f"n{i}".encode()
        assert ex["emb"].dtype == tf.float32 and ex["emb"].shape == (2, 3)
        np.testing.assert_array_equal(ex["emb"].numpy(), np.arange(6).reshape(2, 3) + i)
        assert ex["ids"].numpy().tolist() == list(range(i % 4))
        assert ex["pcm"].numpy().tolist() == list(range(0, -7000 * (i % 5), -7000))
        np.testing.assert_array_equal(ex["half"].numpy().reshape(-1, 2),
                                      _half(i).astype(np.float16))


def test_typed_fields_come_back_as_their_declared_dtypes(dataset):
    examples = _all(dataset, batch_size=None)
    assert {name: t.dtype for name, t in examples[0].items()
            if name in ("flag", "small", "ids32", "trio", "x", "text", "pcm", "half")} == {
        "flag": tf.bool, "small": tf.int32, "ids32": tf.int32, "trio": tf.int32,
        "x": tf.float64, "text": tf.string, "pcm": tf.int16, "half": tf.float32}
    for ex in examples:
        i = int(ex["cls"])
        assert bool(ex["flag"]) is (i % 3 == 0)
        assert int(ex["small"]) == -1000 * i
        assert ex["ids32"].numpy().tolist() == list(range(i % 4))
        assert ex["trio"].numpy().tolist() == [i, -(2 ** 31), 2 ** 31 - 1]
        # A double travels as float32 (tf.Example has no wider float).
        assert ex["x"].numpy() == np.float64(np.float32(i + 0.1))
        assert ex["text"].numpy().decode("utf-8") == f"тест {i}"


def test_tuples_in_declared_order_and_features_label_pairs_for_keras(dataset):
    names = reader.load_info(dataset).spec.names
    as_dict = next(iter(reader.load(dataset, "train", batch_size=4)))
    as_tuple = next(iter(reader.load(dataset, "train", batch_size=4, as_tuple=True)))
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(names)
    for name, value in zip(names, as_tuple):
        assert value.dtype == as_dict[name].dtype
        assert tf.reduce_all(tf.equal(_flat(value), _flat(as_dict[name])))

    features, label = next(iter(reader.load(dataset, "train", batch_size=4, label_key="cls")))
    assert sorted(features) == sorted(n for n in names if n != "cls")
    assert label.numpy().tolist() == as_dict["cls"].numpy().tolist()
    features, label = next(iter(reader.load(dataset, "train", batch_size=None, as_tuple=True,
                                            label_key="small")))
    assert len(features) == len(names) - 1 and label.dtype == tf.int32
    with pytest.raises(ValueError, match="label_key 'nope' is not a feature"):
        reader.load(dataset, "train", label_key="nope")


def _flat(t):
    return t.flat_values if isinstance(t, tf.RaggedTensor) else tf.reshape(t, [-1])


def test_batches_are_dense_or_ragged_with_drop_remainder(dataset):
    info = reader.load_info(dataset)
    n_train = info.num_examples("train")
    batches = list(reader.load(dataset, "train", batch_size=4, drop_remainder=True))
    assert len(batches) == n_train // 4
    assert batches[0]["emb"].shape == (4, 2, 3)
    assert isinstance(batches[0]["ids"], tf.RaggedTensor)
    assert batches[0]["ids"].shape[0] == 4
    assert batches[0]["half"].shape.as_list() == [4, None, 2]
    assert batches[0]["pcm"].shape.as_list() == [4, None]


def test_unshuffled_order_is_the_written_order_and_shuffle_is_seeded(dataset):
    def names(**kw):
        return [b.numpy() for ex in reader.load(dataset, "train", batch_size=None, **kw)
                for b in [ex["name"]]]

    assert names() == names()
    a, b = names(shuffle=True, seed=3), names(shuffle=True, seed=3)
    assert sorted(a) == sorted(names()) and a == b


def test_repeat(dataset):
    n = reader.load_info(dataset).num_examples("test")
    repeated = reader.load(dataset, "test", batch_size=None, repeat=True).take(3 * n)
    assert len(list(repeated)) == 3 * n


def test_missing_dataset_and_split_are_clear_errors(dataset, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished beam-datagen dataset"):
        reader.load(str(tmp_path))
    with pytest.raises(ValueError, match="no split 'eval'; the dataset has train, test"):
        reader.load(dataset, "eval")


def test_the_beam_free_layers_import_with_beam_blocked():
    """Every module of transforms/format/, recipe/, media/ and testing/, and the
    built-in preprocessing, import with Beam and tf.Transform blocked (only
    reader.transform_output loads tf.Transform, when asked)."""
    code = ("import importlib, pkgutil, sys; "
            "sys.modules.update(apache_beam=None, tensorflow_transform=None); "
            "import transforms.format, transforms.media, transforms.recipe, transforms.testing; "
            "packages = (transforms.format, transforms.media, transforms.recipe, "
            "transforms.testing); "
            "names = [m.name for p in packages "
            "for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.')]; "
            "[importlib.import_module(n) for n in names + ['transforms.tft.preprocessing']]; "
            "print(len(names))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    # #38 and #39 added eight: features, statistics, ..., loudness, recorded, reverb;
    # #44 two: sniff and encoded; #45 the lazy-export helper (format/exports), the
    # unit contract (recipe/units), the sample driver (recipe/driver) and plain values
    # (format/plain); then the accounting (recipe/accounting) and the measures
    # (recipe/measures/, where statistics moved: durations, labels, transcripts,
    # augmentation), subpackages walked too; #47 the shard formats (format/shard_format)
    # and ArrayRecord's reading (format/array_records); #48 sox's noise-like recordings
    # (testing/noises); #56 the key places (format/keys) and the frame-by-frame
    # check of near copies (media/same_recording; near_duplicates moved to media/),
    # then the keyed observers (recipe/observers), a sample's watchers
    # (recipe/sample_watch) and the loudness measure (recipe/measures/loudness);
    # #57 a transform applied at read time (format/read_transform) and the
    # allocator's setting for a recording's arrays (media/allocator); #58 the speech
    # cut (media/speech, media/vad), the quality measures (media/quality, their
    # distributions in recipe/measures/quality) and --keep (recipe/keep).
    assert out.stdout.strip() == "69"


def test_inspect_shows_counts_and_decoded_examples(dataset):
    text = inspect.describe_dataset(dataset, examples=1)
    info = reader.load_info(dataset)
    for split in ("train", "test"):
        assert f"{split:<8} {info.num_examples(split):>9} examples" in text
    assert "emb                  float  [2, 3]" in text
    assert "first examples of train:" in text and "name                 b'n" in text


@pytest.fixture(scope="module")
def label_sorted(tmp_path_factory):
    """32 labels, each in a tar file of its own (16 samples), written by tar_to_tfrecord:
    every work unit writes one shard, so every shard holds one label, as a corpus
    sorted by class or speaker gives."""
    import io
    import os
    import tarfile

    from pipelines import tar_to_tfrecord

    root = tmp_path_factory.mktemp("sorted")
    for label in range(32):
        with tarfile.open(root / f"label-{label:02d}.tar", "w") as tar:
            for i in range(16):
                for ext, data in (("bin", os.urandom(256)), ("cls", str(label).encode())):
                    member = tarfile.TarInfo(f"s{label:02d}_{i:03d}.{ext}")
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
    output = str(root / "out")
    info = tar_to_tfrecord.run(["--input", f"{root}/*.tar", "--output", output,
                                "--features", "payload=bin:bytes,label=cls:int64",
                                "--splits", "train=1", "--shard_size_mb", "0.02"])
    shards = info["splits"]["train"]["shards"]
    assert len(shards) == 32
    return output


def _labels_in_first_batches(output, batches=2, **kwargs):
    ds = reader.load(output, "train", batch_size=32, shuffle=True, **kwargs).take(batches)
    return [set(b["label"].numpy().tolist()) for b in ds]


def test_shuffled_reads_mix_labels_from_streaming_shards(label_sorted, monkeypatch):
    # A buffer far smaller than the data, as in training on a large corpus: the
    # mixing has to come from reading many shards at once.
    for seed in range(3):
        first = _labels_in_first_batches(label_sorted, seed=seed, shuffle_buffer=64)
        # 64 uniform draws from 32 labels cover about 28; one batch about 20.
        assert len(set().union(*first)) >= 24, first
        assert all(len(batch) >= 14 for batch in first), first
    # The measure tells poor mixing apart: reading 16 shards at once, the first
    # batches draw on 16 labels at most.
    monkeypatch.setattr(reader, "_INTERLEAVE", 16)
    assert len(set().union(*_labels_in_first_batches(label_sorted, seed=0,
                                                     shuffle_buffer=64))) <= 16


def test_default_shuffle_buffer_holds_about_64_mib_of_examples():
    assert reader._shuffle_buffer({"num_examples": 1000, "num_bytes": 64_000_000}) == 1_048
    assert reader._shuffle_buffer({"num_examples": 10, "num_bytes": 10 << 30}) == 1_000
    assert reader._shuffle_buffer({"num_examples": 10**7, "num_bytes": 10**9}) == 100_000
