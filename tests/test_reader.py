"""The tf.data reader over a dataset written by WriteDataset, and `inspect`."""

import subprocess
import sys

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf

from pipelines import inspect as inspect_cli
from transforms import reader
from transforms.dataset import DatasetConfig, WriteDataset
from transforms.examples import ExampleRecipe
from transforms.spec import parse_features
from transforms.splits import SplitPlan

N = 40


def _sample(i):
    # Made here: ids has i % 4 values (0 to 3), emb is a 2x3 float grid, name is text.
    return {"__key__": f"k{i:03d}", "__url__": "mem://test", "ids": list(range(i % 4)),
            "emb": np.arange(6, dtype=np.float64).reshape(2, 3) + i, "name": f"n{i}".encode(),
            "cls": str(i).encode()}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from transforms.runtime import local_runner

    output = str(tmp_path_factory.mktemp("reader") / "ds")
    recipe = ExampleRecipe(spec=parse_features("ids:int64[*],emb:float[2,3],name:bytes,cls:int64"),
                           split_plan=SplitPlan.from_flags("train=0.5,test=0.5", "__key__"))
    with beam.Pipeline(runner=local_runner()) as p:
        samples = p | "Samples" >> beam.Create([_sample(i) for i in range(N)])
        failures = p | "NoFailures" >> beam.Create([])
        _ = {"samples": samples, "failures": failures} | WriteDataset(
            DatasetConfig(output=output, recipe=recipe, num_shards=3))
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


def test_batches_are_dense_or_ragged_with_drop_remainder(dataset):
    info = reader.load_info(dataset)
    n_train = info.num_examples("train")
    batches = list(reader.load(dataset, "train", batch_size=4, drop_remainder=True))
    assert len(batches) == n_train // 4
    assert batches[0]["emb"].shape == (4, 2, 3)
    assert isinstance(batches[0]["ids"], tf.RaggedTensor)
    assert batches[0]["ids"].shape[0] == 4


def test_unshuffled_order_is_the_written_order_and_shuffle_is_seeded(dataset):
    def names(**kw):
        return [b.numpy() for ex in reader.load(dataset, "train", batch_size=None, **kw)
                for b in [ex["name"]]]

    assert names() == names()
    a, b = names(shuffle=True, seed=3), names(shuffle=True, seed=3)
    assert sorted(a) == sorted(names()) and a == b


def test_repeat(dataset):
    n = reader.load_info(dataset).num_examples("test")
    assert len(list(reader.load(dataset, "test", batch_size=None, repeat=True).take(3 * n))) == 3 * n


def test_missing_dataset_and_split_are_clear_errors(dataset, tmp_path):
    with pytest.raises(FileNotFoundError, match="not a finished beam-datagen dataset"):
        reader.load(str(tmp_path))
    with pytest.raises(ValueError, match="no split 'eval'; the dataset has train, test"):
        reader.load(dataset, "eval")


def test_reader_and_manifest_import_without_beam():
    code = ("import sys; import transforms.reader, transforms.manifest, transforms.spec, "
            "transforms.example_encoder; "
            "print(any(m.startswith('apache_beam') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_inspect_shows_counts_and_decoded_examples(dataset):
    text = inspect_cli.describe_dataset(dataset, examples=1)
    info = reader.load_info(dataset)
    for split in ("train", "test"):
        assert f"{split:<8} {info.num_examples(split):>9} examples" in text
    assert "emb                  float  [2, 3]" in text
    assert "first examples of train:" in text and "name                 b'n" in text
