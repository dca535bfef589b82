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
`int16`/`uint8`/`float16` arrays with `tf.io.decode_raw` (float16 then cast
to float32, what a model takes), `jpeg` images with `tf.io.decode_jpeg`,
each reshaped to its declared shape (a packed array with a variable first
dimension, `float16[*,80]`, to a ragged batch like a float list's).

For Keras `fit`: `features=[...]` picks the inputs (a lone name gives a lone
tensor), `label_key="label"` yields `(features, label)`, the dataset knows
its length, and `steps_per_epoch` counts batches from the manifest.
`shard=(index, count)`, `global_shuffle` and `start` (distributed training,
a uniform shuffle, exact resume) seek through the shards' record indexes
(transforms/format/record_index.py).

An ArrayRecord dataset (`--file_format array_record`) is always read by
record number (transforms/format/array_records.py), from a local or mounted
folder: in its shards' order, or with `shuffle` in a uniform random order of
the whole split each epoch (what `global_shuffle` gives a TFRecord dataset),
since every record is a seek away.

Shards are written where examples are built, in the order of their source
(a tar file's samples, a listing's rows), so one shard may hold one speaker or
one class. With `shuffle=True` the reader mixes them: it shuffles the shard
order every epoch, reads up to 64 shards at once taking one example from each
in turn, and shuffles a buffer of about 64 MiB of examples (sized from the
manifest's mean example size).

A dataset built with tf.Transform preprocessing gives the transformed
features (the manifest's `read_spec`): by default its shards hold the raw
examples and `load` applies the published transform as it reads
(transforms/format/read_transform.py); built with `--materialize_transform`
its shards hold them. `transform_output` opens the saved transform, to apply
the same transform to raw features in a model or when serving
(`transform_features_layer()`).
"""

from __future__ import annotations

import math
import os
import random

import tensorflow as tf

from transforms.format.arguments import check_number
from transforms.format.array_records import ArrayRecordTable
from transforms.format.manifest import LEGACY_MANIFEST, MANIFEST, DatasetInfo
from transforms.format.read_transform import TransformAtRead
from transforms.format.record_index import RecordTable
from transforms.format.spec import FeatureSpec
from transforms.format.tf_paths import tf_readable

__all__ = ["load", "load_info", "steps_per_epoch", "examples_per_epoch", "parsing_spec",
           "decode_features", "transform_output"]

_TF_DTYPES = {"bytes": tf.string, "int64": tf.int64, "float": tf.float32}
_PACKED_DTYPES = {"int16": tf.int16, "uint8": tf.uint8, "float16": tf.float16}
# Declared dtypes stored in a wider tf.Example list, cast back after parsing.
_CAST_DTYPES = {"bool": tf.bool, "int32": tf.int32, "double": tf.float64,
                "float16": tf.float32}
_COMPRESSION = {"gzip": "GZIP", "none": ""}
# Shards read at once, one example from each in turn: with shuffling, how many
# sources (speakers, classes) the first batches can draw from.
_INTERLEAVE = 64
# The default shuffle buffer holds about this many bytes of serialized
# examples, and from 1,000 to 100,000 of them.
_SHUFFLE_BUFFER_BYTES = 64 << 20
_SHUFFLE_BUFFER_EXAMPLES = (1_000, 100_000)
# Records read by number at a time where single records are wanted.
_READ_BATCH = 64


def _read_text(path: str) -> bytes | None:
    try:
        with tf.io.gfile.GFile(tf_readable(path), "rb") as f:
            return f.read()
    except (FileNotFoundError, tf.errors.NotFoundError):
        return None


def load_info(output_dir: str | os.PathLike) -> DatasetInfo:
    """The dataset's manifest, read through tf.io.gfile (local, gs://, ...): its
    spec and splits, and what the run counted and warned of (DatasetInfo).

    >>> import apache_beam as beam, transforms as dg
    >>> with dg.make_pipeline() as p:
    ...     _ = p | beam.Create([{"x": i} for i in range(10)]) | dg.WriteDataset(
    ...         "numbers", features="x:int64", splits="train=1")
    >>> info = dg.load_info("numbers")
    >>> info.num_examples("train"), info.accounting["samples_failed"], info.warnings
    (10, 0, [])

    A dataset written before the manifest was `manifest.json` has it in
    `dataset_info.json`, the name TFDS's own description now takes.
    """
    root = os.fspath(output_dir).rstrip("/")
    text = _read_text(f"{root}/{MANIFEST}")
    if text is None:
        legacy = _read_text(f"{root}/{LEGACY_MANIFEST}")
        if legacy is not None and b'"format_version"' in legacy:
            text = legacy
    if text is None:
        raise FileNotFoundError(
            f"{root}/{MANIFEST} not found: not a finished beam-datagen dataset")
    return DatasetInfo.from_json(text)


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
        if f.stored_variable:
            # Inner dimensions (a [*, 80] filterbank) are uniform rows of the flat list.
            inner = tuple(tf.io.RaggedFeature.UniformRowLength(d) for d in f.stored_shape[1:])
            features[f.name] = tf.io.RaggedFeature(dtype=dtype, row_splits_dtype=tf.int64,
                                                   partitions=inner)
        else:
            features[f.name] = tf.io.FixedLenFeature(list(f.stored_shape), dtype)
    return features


def _decode_jpegs(encoded: tf.Tensor | tf.RaggedTensor, shape: tuple) -> tf.Tensor:
    """[batch, (k)] JPEG strings -> uint8 [batch, (k), h, w, c]; a ragged
    [batch, None] (a variable number of images) -> ragged [batch, None, h, w, c]."""
    def decode(flat):
        return tf.map_fn(lambda x: tf.io.decode_jpeg(x, channels=shape[-1]), flat,
                         fn_output_signature=tf.TensorSpec(shape[-3:], tf.uint8))
    if isinstance(encoded, tf.RaggedTensor):
        return tf.ragged.map_flat_values(decode, encoded)
    return tf.reshape(decode(tf.reshape(encoded, [-1])), [-1, *shape])


def decode_features(spec: FeatureSpec, parsed: dict) -> dict:
    """Batched parsed features -> media features decoded to their declared shapes."""
    out = dict(parsed)
    for f in spec:
        if f.dtype in _PACKED_DTYPES:
            out[f.name] = _unpack(parsed[f.name], f)
        elif f.dtype == "jpeg":
            out[f.name] = _decode_jpegs(parsed[f.name], f.shape)
        if f.dtype in _CAST_DTYPES:
            out[f.name] = tf.cast(out[f.name], _CAST_DTYPES[f.dtype])
    return out


def _unpack(packed: tf.Tensor, f) -> tf.Tensor | tf.RaggedTensor:
    """[batch] packed arrays -> [batch, *shape]; with a variable first
    dimension, a ragged [batch, None, *rest] whose rows the byte counts give
    (the batch's bytes decoded in one call)."""
    dtype = _PACKED_DTYPES[f.dtype]
    if not f.is_variable:
        return tf.reshape(tf.io.decode_raw(packed, dtype), [-1, *f.shape])
    row_bytes = math.prod(f.shape[1:]) * dtype.size
    values = tf.reshape(tf.io.decode_raw(tf.strings.reduce_join(packed), dtype),
                        [-1, *f.shape[1:]])
    rows = tf.cast(tf.strings.length(packed) // row_bytes, tf.int64)
    return tf.RaggedTensor.from_row_lengths(values, rows)


_NORMALIZE = ("global", "utterance")
_VARIANCE_FLOOR = 1e-10


def _normalizer(info: DatasetInfo, names: list, normalize: str | None):
    """The batch -> batch function `load`'s `normalize` asks for."""
    if normalize is None:
        return lambda batch: batch
    if normalize not in _NORMALIZE:
        raise ValueError(f"normalize {normalize!r}: expected one of {', '.join(_NORMALIZE)}")
    measured = [name for name in names if name in info.statistics]
    if not measured:
        raise ValueError(f"normalize: none of {names} has statistics in the manifest (audio "
                         f"features and waveforms a cut made have; this dataset's: "
                         f"{sorted(info.statistics) or 'none'})")
    if normalize == "utterance":
        return lambda batch: {**batch, **{name: _utterance_cmvn(batch[name]) for name in measured}}
    shifts = {}
    for name in measured:
        train = info.statistics[name].get("train")
        if train is None:
            raise ValueError(f"normalize='global': {name} has no statistics of a train split")
        shifts[name] = (tf.constant(train["mean"], tf.float32), tf.constant(
            [max(v, _VARIANCE_FLOOR) ** -0.5 for v in train["variance"]], tf.float32))

    def apply(batch):
        out = dict(batch)
        for name, (mean, scale) in shifts.items():
            out[name] = _per_value(batch[name], lambda v, m=mean, s=scale: (v - m) * s)
        return out
    return apply


def _per_value(values, fn):
    """`fn` on a dense or ragged batch whose last axis is a row's values (a
    waveform's rows are single values)."""
    if isinstance(values, tf.RaggedTensor):
        return tf.ragged.map_flat_values(fn, values)
    return fn(values)


def _utterance_cmvn(values):
    """Each example's values less their mean over its frames (axis 1), over
    their deviation."""
    mean = tf.reduce_mean(values, axis=1, keepdims=True)
    variance = tf.reduce_mean(tf.square(values - mean), axis=1, keepdims=True)
    return (values - mean) * tf.math.rsqrt(tf.maximum(variance, _VARIANCE_FLOOR))


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


def _selection(spec: FeatureSpec, features, label_key: str | None) -> tuple:
    """(names to yield, whether as a lone tensor) for `load`'s `features`."""
    known = spec.names
    single = isinstance(features, str)
    names = ([features] if single else list(features) if features is not None
             else [n for n in known if n != label_key])
    asked = [("features", n) for n in names] + [("label_key", label_key)] * (label_key is not None)
    for role, name in asked:
        if name not in known:
            raise ValueError(f"{role} {name!r} is not a feature; the dataset has "
                             f"{', '.join(known)}")
    if label_key in names:
        raise ValueError(f"label_key {label_key!r} is also among the features")
    return names, single


def _arrange(batch: dict, names: list, single: bool, as_tuple: bool, label_key: str | None):
    """The features as `load` yields them: one tensor, a dict, or a tuple in
    `names` order; with `label_key`, paired with the label."""
    if single:
        inputs = batch[names[0]]
    else:
        inputs = tuple(batch[n] for n in names) if as_tuple else {n: batch[n] for n in names}
    return inputs if label_key is None else (inputs, batch[label_key])


def _shuffle_buffer(split: dict) -> int:
    """Examples in about _SHUFFLE_BUFFER_BYTES of the split's serialized examples."""
    mean = (split["num_bytes"] or 0) / max(1, split["num_examples"])
    low, high = _SHUFFLE_BUFFER_EXAMPLES
    return int(min(high, max(low, _SHUFFLE_BUFFER_BYTES // max(1, mean))))


def _check_shard(shard) -> tuple:
    if shard is None:
        return 0, 1
    index, count = shard
    if not (isinstance(index, int) and isinstance(count, int) and 0 <= index < count):
        raise ValueError(f"shard {shard!r}: expected (index, count) with 0 <= index < count")
    return index, count


def examples_per_epoch(num_examples: int, shard: tuple | None = None) -> int:
    """Examples one worker reads per epoch: all, or with `shard=(index, count)`
    the same number for every worker, ceil(num_examples / count)."""
    _, count = _check_shard(shard)
    return -(-num_examples // count)


def steps_per_epoch(output_dir: str, split: str = "train", batch_size: int = 32, *,
                    drop_remainder: bool = False, shard: tuple | None = None) -> int:
    """Batches in one epoch of `load(output_dir, split, batch_size, ...)` with
    the same `drop_remainder` and `shard`, from the manifest alone: what Keras
    `fit(steps_per_epoch=...)` wants for a repeated dataset."""
    return _batches(examples_per_epoch(load_info(output_dir).num_examples(split), shard),
                    batch_size, drop_remainder)


def _batches(examples: int, batch_size: int, drop_remainder: bool) -> int:
    return examples // batch_size if drop_remainder else -(-examples // batch_size)


def _record_ids(num_records: int, per_epoch: int, shard: tuple, start: int,
                repeat: bool, global_shuffle: bool, seed: int) -> tf.data.Dataset:
    """The split's record numbers in the order one worker reads them.

    Position k of the worker's stream is example j = k % per_epoch of epoch
    e = k // per_epoch; the worker `index` of `count` takes the epoch's
    positions index * per_epoch + j, wrapping around to the first examples
    when the workers outnumber what is left, and with `global_shuffle` each
    position goes through epoch e's permutation of all records
    (`index_shuffle`, seeded by (seed, e): every worker computes the same one).
    """
    index, _ = shard
    positions = (tf.data.Dataset.counter(start) if repeat and per_epoch
                 else tf.data.Dataset.range(start, per_epoch))

    def record(k):
        epoch, j = k // per_epoch, k % per_epoch
        position = (index * per_epoch + j) % num_records
        if not global_shuffle:
            return position
        return tf.random.experimental.index_shuffle(
            position, tf.stack([tf.constant(seed, tf.int64), epoch]), num_records - 1)

    return positions.map(record, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _stream_records(root: str, info: DatasetInfo, split: str, shuffle: bool, seed: int | None,
                    deterministic: bool, num_parallel_reads: int) -> tf.data.Dataset:
    """The split's serialized examples, its shards read at once, one example from
    each in turn; with `shuffle`, the shards in a new order every epoch."""
    files = [tf_readable(f"{root}/{name}") for name in info.files(split)]
    file_ds = tf.data.Dataset.from_tensor_slices(tf.constant(files, dtype=tf.string))
    if shuffle and files:
        file_ds = file_ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    compression = _COMPRESSION[info.shard_format.compression]
    return file_ds.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=max(1, min(len(files), _INTERLEAVE)), block_length=1,
        num_parallel_calls=num_parallel_reads, deterministic=deterministic)


def _open_binary(path: str):
    return tf.io.gfile.GFile(tf_readable(path), "rb")


def _duration_bucket(spec: FeatureSpec, boundaries: list):
    """A serialized example -> its bucket (int32): how many of `boundaries`
    (seconds) are at or below its duration_s, else its end_time - start_time.
    Compared as stored (float32), unrounded: 0.9995 s is below a boundary at 1 s."""
    names = (["duration_s"] if "duration_s" in spec.names
             else ["start_time", "end_time"] if {"start_time", "end_time"} <= set(spec.names)
             else None)
    if names is None:
        raise ValueError("bucket_by_duration: the examples have no duration_s, start_time or "
                         "end_time to bucket by")
    parsing = {name: tf.io.FixedLenFeature([], tf.float32) for name in names}
    edges = tf.constant(boundaries, tf.float32)

    def bucket(serialized):
        parsed = tf.io.parse_single_example(serialized, parsing)
        seconds = (parsed["duration_s"] if len(names) == 1
                   else parsed["end_time"] - parsed["start_time"])
        return tf.cast(tf.searchsorted(edges, [seconds], side="right")[0], tf.int32)
    return bucket


def _bucketed(ds: tf.data.Dataset, info: DatasetInfo, split: str, bucket_by_duration,
              batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
    """Serialized examples -> batches of them, each of one duration bucket."""
    if bucket_by_duration is True:
        boundaries = info.split(split).get("durations", {}).get("bucket_boundaries_s", [])
    else:
        boundaries = [float(b) for b in bucket_by_duration]
    if any(b <= a for a, b in zip(boundaries, boundaries[1:])) or any(
            not b > 0 for b in boundaries):
        raise ValueError(f"bucket_by_duration {boundaries!r}: increasing positive seconds")
    # tf.data buckets integer lengths: each example's length is its bucket's index.
    return ds.bucket_by_sequence_length(
        _duration_bucket(info.spec, boundaries), list(range(1, len(boundaries) + 1)),
        [batch_size] * (len(boundaries) + 1), drop_remainder=drop_remainder)


def _example_parser(root: str, info: DatasetInfo, wanted: list):
    """A batch of serialized examples -> the `wanted` features, decoded; those a
    transform applied at read time computes, computed."""
    at_read = TransformAtRead(root, info) if info.transform_at_read else None
    if at_read and not at_read.computes(wanted):
        at_read = None   # the features wanted are the shards' own
    spec = (at_read.stored(wanted) if at_read else
            FeatureSpec(tuple(f for f in info.spec if f.name in wanted)))
    parsing = parsing_spec(spec) if spec else None

    def parse(serialized):
        parsed = decode_features(spec, tf.io.parse_example(serialized, parsing)) if spec else {}
        if at_read:
            parsed.update(at_read.computed(serialized, wanted))
        return parsed
    return parse


def load(output_dir: str | os.PathLike, split: str = "train", batch_size: int | None = 32, *,
         features: str | list | None = None, label_key: str | None = None,
         as_tuple: bool = False, shuffle: bool = False, shuffle_buffer: int | None = None,
         global_shuffle: bool = False, seed: int | None = None, repeat: bool = False,
         drop_remainder: bool = False, shard: tuple | None = None, start: int = 0,
         random_crop: dict | None = None, bucket_by_duration: bool | list = False,
         normalize: str | None = None,
         num_parallel_reads: int = tf.data.AUTOTUNE) -> tf.data.Dataset:
    """A tf.data pipeline over one split: reads, batched parsing and decoding, prefetch.

    What comes out: a dict of feature name -> tensor [batch, *shape] of every
    feature, or of `features=["audio", "frame"]` only (a 2-input Keras
    model); `features="audio"` yields that one tensor (a Sequential model);
    `as_tuple` gives a tuple in the listed order. With `label_key` each
    element is `(features, label)`, the label left out of the features: what
    Keras `fit` takes. Only the features asked for are parsed.
    `batch_size=None` yields single examples.

    Order: without shuffling, the split's examples come in a fixed order (64
    shards read at once, one example from each in turn). `shuffle` mixes
    them as they stream: the shard order is shuffled every epoch and the
    examples pass a buffer of `shuffle_buffer` (default: about 64 MiB of
    them). `global_shuffle` reads each epoch in a uniformly random order of
    all the split's examples (a fresh permutation per epoch, seeded by
    `seed`), seeking to each through the shards' record indexes. With a
    `seed`, the same order on every run.

    Distributed training: `shard=(index, count)` gives worker `index` of
    `count` its own part of every epoch: the same number of examples for
    every worker (`steps_per_epoch` says how many batches), so no worker waits
    on another at the end of an epoch, and none lost: when the split does not
    divide evenly, the last worker's part wraps around to the first examples
    (at most count - 1 of them read twice an epoch). With `global_shuffle`
    the workers split each epoch's permutation, so pass them one `seed`.

    Resuming: `start=n` begins at the n-th example the same call without it
    would yield (counting across epochs with `repeat`): `steps_done *
    batch_size` resumes a run exactly where it stopped (with `shuffle`, give a
    `seed`). With `global_shuffle` or `shard` the reader seeks there; the
    streaming read gets there by reading past the first n examples.
    `global_shuffle` and `shard` read through the shards' record indexes,
    which uncompressed datasets have (the default). An ArrayRecord dataset
    is always read by record number: `shuffle` then reads each epoch in a
    uniform random order, as `global_shuffle` does.

    The dataset knows its length (`cardinality`), from the manifest, so Keras
    shows progress and does not warn at the end of an epoch; a shard holding
    more or fewer examples than the manifest says is an error, not a silent
    change. `random_crop={"audio": 8000}` cuts each example's `audio` to
    8000 values at a random offset (seeded by `seed`).

    Variable-length clips: `bucket_by_duration=True` batches examples of like
    duration together (tf.data's `bucket_by_sequence_length`), cut at the
    boundaries the manifest suggests for the split (about equal buckets), or
    at a list of boundaries in seconds. Every batch then comes from one
    bucket, and its count is no longer known ahead. It reads the streamed
    order (not `global_shuffle` or `shard`).

    Audio features and waveforms a cut made have statistics in the manifest
    (`info.statistics`): `normalize="global"` subtracts the train split's
    per-value mean from each and divides by its standard deviation (global
    CMVN, fitted on train whatever split is read); `"utterance"` uses each
    example's own mean and deviation over its frames (per-utterance CMVN).
    A variance under 1e-10 counts as 1e-10.

    >>> import apache_beam as beam, transforms as dg
    >>> with dg.make_pipeline() as p:   # a dataset to read: 32 examples, one split
    ...     _ = (p | beam.Create([{"emb": [float(i)] * 4, "label": i % 2} for i in range(32)])
    ...            | dg.WriteDataset("ds", features="emb:float32[4],label:int64",
    ...                              splits="train=1"))
    >>> batches = dg.load("ds", "train", batch_size=8, label_key="label", shuffle=True, seed=1)
    >>> features, labels = next(iter(batches))
    >>> features["emb"].shape, labels.shape, len(batches)
    (TensorShape([8, 4]), TensorShape([8]), 4)
    """
    check_number("batch_size", batch_size, integer=True, above=0, optional=True)
    check_number("start", start, integer=True, least=0)
    check_number("seed", seed, integer=True, optional=True)
    check_number("shuffle_buffer", shuffle_buffer, integer=True, above=0, optional=True)
    info = load_info(output_dir)
    names, single = _selection(info.read_spec, features, label_key)
    normalized = _normalizer(info, names, normalize)
    crops = dict(random_crop or {})
    _check_crops(info.read_spec, crops)
    if set(crops) - set(names):
        raise ValueError(f"random_crop: {sorted(set(crops) - set(names))} not among the "
                         "features read")
    index, count = _check_shard(shard)
    root = os.fspath(output_dir).rstrip("/")
    by_number = info.shard_format.array_record
    if by_number:
        if "://" in root:
            raise ValueError(f"{root}: ArrayRecord shards are read from a local or mounted "
                             "folder (gcsfuse for a bucket), as Grain and TFDS read them")
        # Every record is a seek away: a shuffle is a uniform one, with no buffer.
        global_shuffle, shuffle = global_shuffle or shuffle, False
    if bucket_by_duration is not False and (global_shuffle or count > 1 or not batch_size):
        raise ValueError("bucket_by_duration batches the streamed order: give a batch_size, "
                         "and not global_shuffle or shard")
    if global_shuffle and count > 1 and seed is None:
        raise ValueError("global_shuffle with shard: give every worker the same seed")
    num_examples = info.num_examples(split)
    indexed = global_shuffle or count > 1 or by_number
    per_epoch = examples_per_epoch(num_examples, (index, count)) if indexed else num_examples
    deterministic = not shuffle or seed is not None

    if indexed:
        shards = info.split(split)["shards"]
        table = (ArrayRecordTable(root, shards) if by_number
                 else RecordTable(root, shards, _open_binary))
        ds = _record_ids(num_examples, per_epoch, (index, count), start, repeat,
                         global_shuffle, seed if seed is not None else random.getrandbits(31))
    else:
        ds = _stream_records(root, info, split, shuffle, seed, deterministic, num_parallel_reads)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer or _shuffle_buffer(info.split(split)), seed=seed,
                        reshuffle_each_iteration=True)
    if not indexed:
        ds = (ds.repeat() if repeat else ds).skip(start)

    examples = _example_parser(root, info, names + ([label_key] if label_key is not None else []))

    def read(ids):
        records = tf.numpy_function(table.read, [ids], tf.string, stateful=False)
        return tf.ensure_shape(records, [None])

    reads_numbers = indexed
    if indexed and bucket_by_duration is not False:  # only an ArrayRecord dataset's order
        # A bucket is chosen by the example's duration, so its record is read first.
        ds = ds.batch(_READ_BATCH).map(read).unbatch()
        reads_numbers = False

    def parse(batch):
        serialized = read(batch) if reads_numbers else batch
        parsed = normalized(examples(serialized))
        parsed = _random_crop(parsed, crops, seed) if crops else parsed
        return _arrange(parsed, names, single, as_tuple, label_key)

    # Parsing and decoding work on batches (one op call per batch, not per
    # example); single examples are batches of one, unbatched after.
    if bucket_by_duration is not False:
        ds = _bucketed(ds, info, split, bucket_by_duration, batch_size, drop_remainder)
    else:
        ds = ds.batch(batch_size or 1, drop_remainder=drop_remainder and batch_size is not None)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=deterministic)
    if batch_size is None:
        ds = ds.unbatch()
    if not repeat and bucket_by_duration is False:
        ds = ds.apply(tf.data.experimental.assert_cardinality(_batches(
            max(0, per_epoch - start), batch_size or 1, drop_remainder and batch_size is not None)))
    return ds.prefetch(tf.data.AUTOTUNE)
