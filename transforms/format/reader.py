"""Read a beam-datagen dataset back with tf.data, knowing the layout from its manifest.

Beam-free: a training job imports this with TensorFlow only.

    from transforms.format import reader
    ds = reader.load("gs://bucket/datasets/v1", split="train", batch_size=32, shuffle=True)
    for batch in ds:  # dict of feature name -> tensor [batch, *shape]
        ...

On a machine pointed at a storage emulator (STORAGE_EMULATOR_HOST), gs://
files are fetched from the emulator first: transforms/format/tf_paths.py says why.

Fixed-shape features come back as dense tensors of their declared shape;
variable-length ones as `tf.RaggedTensor`s. Each comes back as its declared
dtype: `bool`, `int32` and `double` are cast from the int64/float lists they
are stored in; media features are decoded from the manifest alone: packed
`int16`/`uint8` arrays with `tf.io.decode_raw`, `jpeg` images with
`tf.io.decode_jpeg`, each reshaped to its declared shape.

For Keras `fit`, `load(..., label_key="label")` yields `(features, label)`
and `as_tuple=True` yields the features as a tuple in declared order.

Shards are written where examples are built, in the order of their source
(a tar file's samples, a listing's rows), so one shard may hold one speaker or
one class. With `shuffle=True` the reader mixes them: it shuffles the shard
order every epoch, reads up to 64 shards at once taking one example from each
in turn, and shuffles a buffer of about 64 MiB of examples (sized from the
manifest's mean example size).

A dataset built with tf.Transform preprocessing holds the transformed
examples: `load` reads them like any other (the manifest's spec is theirs).
`transform_output` opens the saved transform, to apply the same transform to
raw features when serving (`transform_features_layer()`).
"""

from __future__ import annotations

import tensorflow as tf

from transforms.format.manifest import MANIFEST, DatasetInfo
from transforms.format.spec import FeatureSpec
from transforms.format.tf_paths import tf_readable

__all__ = ["load", "load_info", "parsing_spec", "decode_features", "transform_output"]

_TF_DTYPES = {"bytes": tf.string, "int64": tf.int64, "float": tf.float32}
_PACKED_DTYPES = {"int16": tf.int16, "uint8": tf.uint8}
# Declared dtypes stored in a wider tf.Example list, cast back after parsing.
_CAST_DTYPES = {"bool": tf.bool, "int32": tf.int32, "double": tf.float64}
_COMPRESSION = {"gzip": "GZIP", "none": ""}
# Shards read at once, one example from each in turn: with shuffling, how many
# sources (speakers, classes) the first batches can draw from.
_INTERLEAVE = 64
# The default shuffle buffer holds about this many bytes of serialized
# examples, and from 1,000 to 100,000 of them.
_SHUFFLE_BUFFER_BYTES = 64 << 20
_SHUFFLE_BUFFER_EXAMPLES = (1_000, 100_000)


def load_info(output_dir: str) -> DatasetInfo:
    """The dataset's manifest, read through tf.io.gfile (local, gs://, ...)."""
    path = f"{output_dir.rstrip('/')}/{MANIFEST}"
    try:
        with tf.io.gfile.GFile(tf_readable(path), "rb") as f:
            return DatasetInfo.from_json(f.read())
    except (FileNotFoundError, tf.errors.NotFoundError):
        raise FileNotFoundError(
            f"{path} not found: not a finished beam-datagen dataset") from None


def transform_output(output_dir: str):
    """`tft.TFTransformOutput` of a dataset built with preprocessing.

    `transform_features_layer()` applies the transform to raw features in a
    Keras model; `raw_feature_spec()` parses raw tf.Examples for it. ValueError
    for a dataset built without preprocessing.
    """
    if load_info(output_dir).transform is None:
        raise ValueError(f"{output_dir} was built without preprocessing: it has no transform_fn")
    import tensorflow_transform as tft  # only datasets built with preprocessing need it

    return tft.TFTransformOutput(output_dir)


def parsing_spec(spec: FeatureSpec) -> dict:
    """The `tf.io.parse_example` features for a spec."""
    features = {}
    for f in spec:
        dtype = _TF_DTYPES[f.kind]
        if f.is_variable:
            features[f.name] = tf.io.RaggedFeature(dtype=dtype, row_splits_dtype=tf.int64)
        else:
            features[f.name] = tf.io.FixedLenFeature(list(f.stored_shape), dtype)
    return features


def _decode_jpegs(encoded: tf.Tensor, shape: tuple) -> tf.Tensor:
    """[batch, (k)] JPEG strings -> uint8 [batch, (k), h, w, c]."""
    flat = tf.reshape(encoded, [-1])
    images = tf.map_fn(lambda x: tf.io.decode_jpeg(x, channels=shape[-1]), flat,
                       fn_output_signature=tf.TensorSpec(shape[-3:], tf.uint8))
    return tf.reshape(images, [-1, *shape])


def decode_features(spec: FeatureSpec, parsed: dict) -> dict:
    """Batched parsed features -> media features decoded to their declared shapes."""
    out = dict(parsed)
    for f in spec:
        if f.dtype in _PACKED_DTYPES:
            out[f.name] = tf.reshape(tf.io.decode_raw(parsed[f.name], _PACKED_DTYPES[f.dtype]),
                                     [-1, *f.shape])
        elif f.dtype == "jpeg":
            out[f.name] = _decode_jpegs(parsed[f.name], f.shape)
        elif f.dtype in _CAST_DTYPES:
            out[f.name] = tf.cast(parsed[f.name], _CAST_DTYPES[f.dtype])
    return out


def _random_crop(batch: dict, crops: dict, seed: int | None) -> dict:
    """Crops each example's feature to `length` at its own random offset along axis 1."""
    out = dict(batch)
    for i, (name, length) in enumerate(sorted(crops.items())):
        values = batch[name]
        full = tf.shape(values)[1]
        offsets = tf.random.uniform([tf.shape(values)[0]], 0, full - length + 1, dtype=tf.int32,
                                    seed=None if seed is None else seed + i)
        out[name] = tf.gather(values, offsets[:, None] + tf.range(length), batch_dims=1)
    return out


def _check_crops(spec: FeatureSpec, crops: dict) -> None:
    by_name = {f.name: f for f in spec}
    for name, length in crops.items():
        f = by_name.get(name)
        if f is None or f.is_variable or not f.shape or f.dtype in ("bytes", "string", "jpeg"):
            raise ValueError(f"random_crop: {name!r} is not a fixed-shape numeric feature")
        if not 0 < length <= f.shape[0]:
            raise ValueError(f"random_crop: {name!r} length {length} is not in 1..{f.shape[0]}")


def _arrange(batch: dict, names: list, as_tuple: bool = False, label_key: str | None = None):
    """A dict of features as `load` yields it: the dict, a tuple in `names` order,
    or `(features, label)` with the label taken out of the features."""
    if label_key is not None:
        rest = [n for n in names if n != label_key]
        return _arrange(batch, rest, as_tuple), batch[label_key]
    return tuple(batch[n] for n in names) if as_tuple else {n: batch[n] for n in names}


def _shuffle_buffer(split: dict) -> int:
    """Examples in about _SHUFFLE_BUFFER_BYTES of the split's serialized examples."""
    mean = (split["num_bytes"] or 0) / max(1, split["num_examples"])
    low, high = _SHUFFLE_BUFFER_EXAMPLES
    return int(min(high, max(low, _SHUFFLE_BUFFER_BYTES // max(1, mean))))


def load(output_dir: str, split: str = "train", batch_size: int | None = 32, *,
         shuffle: bool = False, shuffle_buffer: int | None = None, repeat: bool = False,
         seed: int | None = None, drop_remainder: bool = False,
         random_crop: dict | None = None, as_tuple: bool = False,
         label_key: str | None = None,
         num_parallel_reads: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
    """A tf.data pipeline over one split: interleaved reads, batched parsing, prefetch.

    Without `shuffle` the examples come in a fixed order: up to 64 shards
    read at once, one example from each in turn. With it, the shard order is
    shuffled every epoch and the examples pass a shuffle buffer of
    `shuffle_buffer` examples (default: about 64 MiB of them); with a `seed`
    too, the same order on every run, else reads also interleave
    nondeterministically for speed. `batch_size=None` yields single parsed
    examples.

    `random_crop={"audio": 8000}` cuts each example's `audio` to 8000 values
    at a random offset (seeded by `seed`), the read-time augmentation for
    fixed-length windows.

    Each element is a dict of feature name -> tensor; with `as_tuple` a tuple
    in the manifest's feature order; with `label_key` a pair `(features,
    label)` whose features (dict, or tuple with `as_tuple`) leave the label
    out, what Keras `fit` takes.
    """
    info = load_info(output_dir)
    crops = dict(random_crop or {})
    _check_crops(info.spec, crops)
    if label_key is not None and label_key not in info.spec.names:
        raise ValueError(f"label_key {label_key!r} is not a feature; the dataset has "
                         f"{', '.join(info.spec.names)}")
    deterministic = not shuffle or seed is not None
    root = output_dir.rstrip("/")
    files = [tf_readable(f"{root}/{name}") for name in info.files(split)]
    features = parsing_spec(info.spec)
    compression = _COMPRESSION[info.compression]

    file_ds = tf.data.Dataset.from_tensor_slices(tf.constant(files, dtype=tf.string))
    if shuffle and files:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = file_ds.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=max(1, min(len(files), _INTERLEAVE)), block_length=1,
        num_parallel_calls=num_parallel_reads, deterministic=deterministic)
    if shuffle:
        buffer = shuffle_buffer or _shuffle_buffer(info.split(split))
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    def parse(serialized):
        batch = decode_features(info.spec, tf.io.parse_example(serialized, features))
        batch = _random_crop(batch, crops, seed) if crops else batch
        return _arrange(batch, info.spec.names, as_tuple, label_key)

    # Parsing and decoding work on batches (one op call per batch, not per
    # example); single examples are batches of one, unbatched after.
    ds = ds.batch(batch_size or 1, drop_remainder=drop_remainder and batch_size is not None)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if batch_size is None:
        ds = ds.unbatch()
    return ds.prefetch(tf.data.AUTOTUNE)
