"""Read a beam-datagen dataset back with tf.data, knowing the layout from its manifest.

Beam-free: a training job imports this with TensorFlow only.

    from transforms import reader
    ds = reader.load("gs://bucket/datasets/v1", split="train", batch_size=32, shuffle=True)
    for batch in ds:  # dict of feature name -> tensor [batch, *shape]
        ...

Fixed-shape features come back as dense tensors of their declared shape;
variable-length ones as `tf.RaggedTensor`s.
"""

from __future__ import annotations

import tensorflow as tf

from transforms.manifest import MANIFEST, DatasetInfo
from transforms.spec import FeatureSpec

__all__ = ["load", "load_info", "parsing_spec"]

_TF_DTYPES = {"bytes": tf.string, "int64": tf.int64, "float": tf.float32}
_COMPRESSION = {"gzip": "GZIP", "none": ""}


def load_info(output_dir: str) -> DatasetInfo:
    """The dataset's manifest, read through tf.io.gfile (local, gs://, ...)."""
    path = f"{output_dir.rstrip('/')}/{MANIFEST}"
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path} not found: not a finished beam-datagen dataset")
    with tf.io.gfile.GFile(path, "rb") as f:
        return DatasetInfo.from_json(f.read())


def parsing_spec(spec: FeatureSpec) -> dict:
    """The `tf.io.parse_example` features for a spec."""
    features = {}
    for f in spec:
        dtype = _TF_DTYPES[f.kind]
        if f.is_variable:
            features[f.name] = tf.io.RaggedFeature(dtype=dtype, row_splits_dtype=tf.int64)
        else:
            features[f.name] = tf.io.FixedLenFeature(list(f.shape), dtype)
    return features


def load(output_dir: str, split: str = "train", batch_size: int | None = 32, *,
         shuffle: bool = False, shuffle_buffer: int = 10_000, repeat: bool = False,
         seed: int | None = None, drop_remainder: bool = False,
         num_parallel_reads: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
    """A tf.data pipeline over one split: interleaved reads, batched parsing, prefetch.

    Without `shuffle` the examples come in the order they were written. With
    it, shard order and examples are shuffled; with a `seed` too, the same
    order on every run, else reads also interleave nondeterministically for
    speed. `batch_size=None` yields single parsed examples.
    """
    info = load_info(output_dir)
    deterministic = not shuffle or seed is not None
    root = output_dir.rstrip("/")
    files = [f"{root}/{name}" for name in info.files(split)]
    features = parsing_spec(info.spec)
    compression = _COMPRESSION[info.compression]

    file_ds = tf.data.Dataset.from_tensor_slices(tf.constant(files, dtype=tf.string))
    if shuffle and files:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = file_ds.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=max(1, min(len(files), 16)), num_parallel_calls=num_parallel_reads,
        deterministic=deterministic)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    if batch_size is None:
        ds = ds.map(lambda x: tf.io.parse_single_example(x, features),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    else:
        ds = ds.batch(batch_size, drop_remainder=drop_remainder)
        ds = ds.map(lambda x: tf.io.parse_example(x, features),
                    num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    return ds.prefetch(tf.data.AUTOTUNE)
