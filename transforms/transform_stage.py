"""The optional tf.Transform stage: analyze the train split, transform every split.

Raw examples `(split, order key, serialized)` are decoded in batches into Arrow
RecordBatches with TFXIO's tf.Example schema (`tfxio.TFExampleBeamRecord`'s
Arrow schema and tensor representations, decoded by tfx_bsl's C++ decoder),
never into instance dicts. Each batch carries the split and order key as two
extra columns that tf.Transform passes through untouched (Context
`passthrough_keys`). `tft_beam.AnalyzeDataset` sees only the train rows;
`tft_beam.TransformDataset` transforms every row and returns RecordBatches,
encoded back to tf.Examples one out per one in, so the dataset's accounting
(examples in shards = examples built) holds unchanged. The encoder is the
project's own (transforms.example_encoder), not tfx_bsl's, whose bytes follow
protobuf's per-process map order: ours keep reruns byte-identical.

The transform_fn, transformed_metadata and the raw metadata are staged under
the job's temporary directory and moved next to the data by `publish`, in the
job's final step, so a failed job leaves no transform behind.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import apache_beam as beam
import pyarrow as pa
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils
from tfx_bsl.coders import example_coder
from tfx_bsl.public import tfxio

from transforms import manifest
from transforms.counters import counter
from transforms.example_encoder import ExampleEncoder
from transforms.preprocessing import (ANALYZED_SPLIT, RAW_METADATA_DIR, TRANSFORM_DIRS,
                                      Preprocessing)
from transforms.spec import Feature, FeatureSpec

__all__ = ["AnalyzeAndTransform", "Transformed", "transformed_spec", "to_record_batch",
           "from_record_batch", "publish", "STAGED_DIR"]

# Hidden from the preprocessing_fn, carried through the transform unchanged.
SPLIT_COLUMN = "__datagen_split__"
ORDER_COLUMN = "__datagen_order__"
_SPLIT_TYPE = pa.large_list(pa.large_binary())
_ORDER_TYPE = pa.large_list(pa.uint64())

# A RecordBatch holds up to 64 MiB of examples, each counted as at least 64 KiB:
# up to 1,000 small examples (TensorFlow's per-call cost is then small), fewer
# media ones (memory stays bounded).
_BATCH_BYTES = 64 << 20
_MIN_EXAMPLE_BYTES = 64 << 10

_KINDS = {tf.string: "bytes", tf.int64: "int64", tf.float32: "float"}
# Under the job's temporary directory: tf.Transform's own temp files, and its
# output until `publish` moves it next to the data.
_TFT_TEMP_DIR = "tft"
STAGED_DIR = "transform"


# -- pure functions ------------------------------------------------------------------


def to_record_batch(examples: list, decoder, arrow_schema: pa.Schema) -> pa.RecordBatch:
    """[(split, order, serialized)] -> one RecordBatch: the decoded features, then
    the split and order columns (a one-value list per row, as passthrough needs)."""
    decoded = decoder.DecodeBatch([serialized for _, _, serialized in examples])
    split = pa.array([[s.encode("utf-8")] for s, _, _ in examples], _SPLIT_TYPE)
    order = pa.array([[o] for _, o, _ in examples], _ORDER_TYPE)
    return pa.RecordBatch.from_arrays(decoded.columns + [split, order], schema=arrow_schema)


def _row_values(column: pa.Array) -> list:
    """A list column -> each row's values: numpy slices of numbers, lists of bytes."""
    # `offsets` index `values`, the unsliced child (flatten() would drop a slice's start).
    offsets = column.offsets.to_numpy()
    values = column.values
    flat = (values.to_pylist() if pa.types.is_large_binary(values.type)
            or pa.types.is_binary(values.type) else values.to_numpy(zero_copy_only=False))
    return [flat[start:end] for start, end in zip(offsets[:-1], offsets[1:])]


def from_record_batch(batch: pa.RecordBatch, encoder: ExampleEncoder) -> list:
    """A transformed RecordBatch -> [(split, order, serialized tf.Example)], in row order."""
    names = [name for name, _ in encoder.features]
    rows = zip(*(_row_values(batch.column(name)) for name in names))
    serialized = [encoder.encode(dict(zip(names, row))) for row in rows]
    splits = batch.column(SPLIT_COLUMN).flatten().to_pylist()
    orders = batch.column(ORDER_COLUMN).flatten().to_pylist()
    return [(s.decode("utf-8"), o, e) for s, o, e in zip(splits, orders, serialized)]


def _only_split(batch: pa.RecordBatch, split: str) -> pa.RecordBatch:
    """The rows of one split."""
    values = batch.column(SPLIT_COLUMN).flatten()
    return batch.filter(pa.compute.equal(values, split.encode("utf-8")))


def transformed_spec(schema: schema_pb2.Schema, raw_spec: FeatureSpec,
                     passed_through: frozenset = frozenset()) -> FeatureSpec:
    """The spec of the transformed examples, from tf.Transform's output schema.

    Order: the raw features' order, then new features by name. Features in
    `passed_through` (output unchanged) keep their raw declared dtype (bool,
    int32, jpeg, ...), so they read back as before; every other output is its
    tf.Example kind. ValueError for outputs a tf.Example cannot hold here.
    """
    raw = {f.name: f for f in raw_spec}
    features = {}
    for name, spec in schema_utils.schema_as_feature_spec(schema).feature_spec.items():
        if isinstance(spec, tf.io.FixedLenFeature):
            shape = tuple(spec.shape)
        elif isinstance(spec, tf.io.VarLenFeature):
            shape = (None,)
        else:
            raise ValueError(f"preprocessing_fn output {name!r} is a {type(spec).__name__}; "
                             "write dense or 1-D variable-length (sparse) outputs")
        features[name] = (raw[name] if name in passed_through
                          else Feature(name=name, dtype=_KINDS[spec.dtype], shape=shape))
    order = [n for n in raw_spec.names if n in features] + sorted(set(features) - set(raw))
    return FeatureSpec(tuple(features[n] for n in order))


def publish(staged_dir: str, output_dir: str, raw_spec: FeatureSpec) -> None:
    """Moves the staged transform_fn/ and transformed_metadata/ next to the data and
    writes the raw metadata/ beside them (tft.TFTransformOutput's raw_feature_spec).

    Through tf.io.gfile, as tf.Transform itself writes them (local, gs://).
    Runs again when the runner retries the final step: a directory already
    moved by the earlier attempt (gone from `staged_dir`, there in
    `output_dir`) is left where it is.
    """
    metadata_io.write_metadata(
        dataset_metadata.DatasetMetadata(manifest.schema_proto(raw_spec)),
        os.path.join(staged_dir, RAW_METADATA_DIR))
    for name in TRANSFORM_DIRS:
        source, target = os.path.join(staged_dir, name), os.path.join(output_dir, name)
        if not tf.io.gfile.exists(source) and tf.io.gfile.exists(target):
            continue  # moved by an earlier attempt of this step
        if tf.io.gfile.exists(target):
            tf.io.gfile.rmtree(target)  # an earlier run's
        tf.io.gfile.rename(source, target)


# -- Beam ---------------------------------------------------------------------------


class _ToRecordBatchFn(beam.DoFn):
    """A batch of raw examples -> one RecordBatch; the decoder is made in setup()."""

    def __init__(self, schema: bytes, arrow_schema: pa.Schema):
        self._schema = schema
        self._arrow_schema = arrow_schema

    def setup(self):
        self._decoder = example_coder.ExamplesToRecordBatchDecoder(self._schema)

    def process(self, examples):
        yield to_record_batch(examples, self._decoder, self._arrow_schema)


class _EncodeFn(beam.DoFn):
    """(transformed RecordBatch, passthrough) -> (split, order, serialized) per row."""

    def __init__(self, spec: FeatureSpec):
        self._spec = spec

    def setup(self):
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in self._spec])
        self._transformed = counter("examples_transformed")

    def process(self, element):
        batch, _ = element  # the unary passthrough dict is empty: batch sizes match
        rows = from_record_batch(batch, self._encoder)
        self._transformed.inc(len(rows))
        yield from rows


class Transformed(NamedTuple):
    """AnalyzeAndTransform's result."""

    examples: beam.PCollection   # (split, order key, serialized transformed tf.Example)
    spec: FeatureSpec            # of the transformed examples, known before the job runs
    staged: beam.PCollection     # one element once transform_fn/ and metadata are staged


class AnalyzeAndTransform(beam.PTransform):
    """(split, order key, serialized raw tf.Example) -> `Transformed`.

    Analyzes the train split with the preprocessing_fn inside a
    `tft_beam.Context(temp_dir=<temp_dir>/tft)`, transforms every example and
    stages tf.Transform's output under `<temp_dir>/transform` (`publish` moves it).
    """

    def __init__(self, preprocessing: Preprocessing, raw_spec: FeatureSpec, temp_dir: str):
        super().__init__()
        self._preprocessing = preprocessing
        self._raw_spec = raw_spec
        self._temp_dir = temp_dir

    def expand(self, examples):
        schema = manifest.schema_proto(self._raw_spec)
        source = tfxio.TFExampleBeamRecord(physical_format="tfrecord", schema=schema)
        arrow_schema = (source.ArrowSchema()
                        .append(pa.field(SPLIT_COLUMN, _SPLIT_TYPE))
                        .append(pa.field(ORDER_COLUMN, _ORDER_TYPE)))
        adapter = tfxio.TensorAdapterConfig(arrow_schema, source.TensorRepresentations())
        with tft_beam.Context(temp_dir=os.path.join(self._temp_dir, _TFT_TEMP_DIR),
                              passthrough_keys={SPLIT_COLUMN, ORDER_COLUMN}):
            batches = (
                examples
                # min = max: fixed-size batches, not Beam's adaptive sizing that
                # starts at one example (and a TensorFlow call per example).
                | "Batch" >> beam.BatchElements(
                    min_batch_size=_BATCH_BYTES, max_batch_size=_BATCH_BYTES,
                    element_size_fn=lambda e: max(len(e[2]), _MIN_EXAMPLE_BYTES))
                | "ToRecordBatches" >> beam.ParDo(
                    _ToRecordBatchFn(schema.SerializeToString(), arrow_schema)))
            train = (batches
                     | "TrainRows" >> beam.Map(_only_split, ANALYZED_SPLIT)
                     | "NonEmpty" >> beam.Filter(lambda b: b.num_rows > 0))
            transform_fn = ((train, adapter)
                            | "Analyze" >> tft_beam.AnalyzeDataset(
                                self._preprocessing.preprocessing_fn()))
            transformed, metadata = (
                ((batches, adapter), transform_fn)
                | "Transform" >> tft_beam.TransformDataset(output_record_batches=True))
            staged = transform_fn | "StageTransformFn" >> tft_beam.WriteTransformFn(
                os.path.join(self._temp_dir, STAGED_DIR))
        # The schema traced from the preprocessing_fn fixes every output's type
        # and shape before the job runs; analysis adds only value domains.
        out_schema = metadata.dataset_metadata.schema
        spec = transformed_spec(out_schema, self._raw_spec,
                                self._preprocessing.passed_through(self._raw_spec))
        encoded = transformed | "Encode" >> beam.ParDo(_EncodeFn(spec))
        return Transformed(encoded, spec, staged)
