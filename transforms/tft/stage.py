"""The optional tf.Transform stage: fit on the train split, publish or apply the transform.

Where the converter writes the examples as it builds them (the default
layout), the transform is fitted on the analyzed features of the train
examples as the converter builds them (ConvertOptions.analyzed) and published
beside the raw shards for readers to apply (transforms/format/read_transform.py),
or, with --materialize_transform, applied to the written shards
(transforms/writer/transformed.py, TFX's shape); the pieces here are what it
builds on:

    plan = AnalysisPlan.of(preprocessing, raw_spec)  # what the analyzers read
    analysis = train_bytes | FitAnalysis(plan, preprocessing, raw_spec, temp_dir)
    transformer = ExampleTransformer(analysis.directory, raw_spec, analysis.spec)

`FitAnalysis` takes the train examples serialized with only the features the
analyzers read (`tft.get_analyze_input_columns`) and decodes them in batches
into Arrow RecordBatches with TFXIO's tf.Example schema (`record_batch`: a
float feature's column is its packed bytes joined, the rest tfx_bsl's C++
decoder's), never into instance dicts; the other features reach tf.Transform as
their type's zero, which no analyzer reads. `tft_beam.AnalyzeDataset` runs on
them and `WriteTransformFn` stages its output under the job's temporary
directory; `publish` moves it next to the data in the final step, so a failed
job leaves no transform behind. tf.Transform's analyzers combine per bundle,
so only their accumulators are shuffled; a preprocessing_fn whose analyzers
feed other analyzers (several phases) makes tf.Transform read its input once
per phase, which the local runner does by holding the train examples in
memory.

Where the examples leave the converter instead (the global layout, an
examples sink), `AnalyzeTrainSplit` fits the transform by a pass of its own
over the work units: it builds the train split's raw examples (other samples
stop at their split, before any decoding), and the converter
(transforms/writer/convert.py) applies the staged transform to every example
as it is built.

An `ExampleTransformer` applies the transform in batches, one out per one in:
the same `transform_features_layer` a Keras model serves with, so the shards
hold exactly what serving computes. The encoder is the project's own
(transforms.format.encoder), whose bytes do not depend on protobuf's
per-process map order: reruns are byte-identical.
"""

from __future__ import annotations

import os
from typing import List, NamedTuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils
from tfx_bsl.coders import example_coder
from tfx_bsl.public import tfxio
from tfx_bsl.tfxio.tensor_adapter import TensorAdapter, TensorAdapterConfig

from transforms.format import manifest
from transforms.format.encoder import ExampleEncoder
from transforms.format.spec import Feature, FeatureSpec
from transforms.recipe.driver import SampleDriver
from transforms.recipe.examples import Example, ExampleRecipe
from transforms.recipe.units import WorkUnit, streaming
from transforms.runner.counters import counter
from transforms.sources.units import NO_DECISIONS, Decisions, decided_of
from transforms.tft.preprocessing import (
    ANALYZED_SPLIT,
    RAW_METADATA_DIR,
    TRANSFORM_DIRS,
    Preprocessing,
)

__all__ = ["Analysis", "AnalysisPlan", "AnalyzeTrainSplit", "ExampleTransformer", "FitAnalysis",
           "STAGED_DIR", "publish", "transformed_spec"]

# A batch holds up to 64 MiB of examples, each counted as at least 64 KiB: up
# to 1,000 small examples (TensorFlow's per-call cost is then small), fewer
# media ones (memory stays bounded).
_BATCH_BYTES = 64 << 20
_MIN_EXAMPLE_BYTES = 64 << 10

_KINDS = {tf.string: "bytes", tf.int64: "int64", tf.float32: "float"}
# Under the job's temporary directory: tf.Transform's own temp files, and its
# output until `publish` moves it next to the data.
_TFT_TEMP_DIR = "tft"
STAGED_DIR = "transform"


# -- pure functions ------------------------------------------------------------------


def _batch_cost(serialized: bytes) -> int:
    return max(len(serialized), _MIN_EXAMPLE_BYTES)


def _rows(tensor) -> list:
    """A transformed feature of a batch -> each example's values, flat: numbers
    as numpy arrays, strings as lists of bytes (what the encoder takes)."""
    if isinstance(tensor, tf.SparseTensor):
        ragged = tf.RaggedTensor.from_sparse(tensor)
        values, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
        rows = [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    else:
        array = tensor.numpy()
        rows = list(array.reshape(len(array), -1))
    return [list(r) if r.dtype == object else r for r in rows]


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


def analyzed_features(preprocessing_fn, adapter: TensorAdapterConfig) -> frozenset:
    """The raw features the preprocessing_fn's analyzers read (traced once, in a
    graph of its own: traced eagerly, its lookup tables would outlive it and
    clash with a later job's of another key type in the same process)."""
    specs = TensorAdapter(adapter).OriginalTypeSpecs()
    return frozenset(tft.get_analyze_input_columns(preprocessing_fn, specs,
                                                   force_tf_compat_v1=True))


# What a dense feature the analyzers do not read holds, by its kind.
_ZEROS = {"float": ("float_value", 0.0), "int64": ("int_value", 0), "bytes": ("bytes_value", b"")}


def _zero_filled(adapter: TensorAdapterConfig, raw_spec: FeatureSpec,
                 analyzed: frozenset) -> TensorAdapterConfig:
    """The adapter with every dense feature outside `analyzed` defaulting to its
    kind's zero: the analysis examples leave them out, and the traced types
    stay the same (a variable-length feature left out is just empty)."""
    representations = {}
    for feature in raw_spec:
        representation = type(adapter.tensor_representations[feature.name])()
        representation.CopyFrom(adapter.tensor_representations[feature.name])
        if feature.name not in analyzed and representation.WhichOneof("kind") == "dense_tensor":
            field, zero = _ZEROS[feature.kind]
            setattr(representation.dense_tensor.default_value, field, zero)
        representations[feature.name] = representation
    return TensorAdapterConfig(adapter.arrow_schema, representations)


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


class ExampleTransformer:
    """Applies a staged transform to raw examples, in batches, in order.

        transformer = ExampleTransformer(staged_dir, raw_spec, transformed_spec)
        for example in examples:
            write(transformer.add(example))   # [] until a batch is full
        write(transformer.flush())

    Each Example keeps its split and order key; its bytes become the
    transformed example's. Loads TensorFlow and the SavedModel when made.

    The features in `passed_through` (the transform outputs them unchanged
    and computes nothing from them: the built-ins') are neither parsed nor
    encoded again: they are left out of what is parsed, whose defaults give
    the transform their kind's zero, and the raw example's bytes of them are
    kept, which are the bytes encoding them again would give.
    """

    def __init__(self, staged_dir: str, raw_spec: FeatureSpec, spec: FeatureSpec,
                 passed_through: frozenset = frozenset()):
        self._layer = tft.TFTransformOutput(staged_dir).transform_features_layer()
        parsing = schema_utils.schema_as_feature_spec(
            manifest.schema_proto(raw_spec)).feature_spec
        self._parsing = {name: _zero_default(f) if name in passed_through else f
                         for name, f in parsing.items()}
        self._kept = frozenset(name.encode() for name in passed_through)
        computed = [f for f in spec if f.name not in passed_through]
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in computed])
        self._names = [f.name for f in computed]
        self._batch: list = []
        self._cost = 0
        self._transformed = counter("examples_transformed")

    def add(self, example: Example) -> list:
        self._batch.append(example)
        self._cost += _batch_cost(example.serialized)
        return self.flush() if self._cost >= _BATCH_BYTES else []

    def flush(self) -> list:
        """The transformed examples of the batch so far (and an empty batch)."""
        batch, self._batch, self._cost = self._batch, [], 0
        if not batch:
            return []
        # The passed-through features' bytes are set aside, not handed to TensorFlow.
        if self._kept:
            parts = [self._split(e.serialized) for e in batch]
            inputs, kept = [ExampleEncoder.joined(p) for p, _ in parts], [k for _, k in parts]
        else:
            inputs, kept = [e.serialized for e in batch], [None] * len(batch)
        parsed = tf.io.parse_example(inputs, self._parsing)
        outputs = self._layer(parsed)
        columns = [_rows(outputs[name]) for name in self._names]
        self._transformed.inc(len(batch))
        return [Example(e.split, e.order, self._encoded(values, entries))
                for e, entries, values in zip(batch, kept, zip(*columns))]

    def _split(self, serialized: bytes) -> tuple[dict, dict]:
        """A raw example's map entries: (those to parse, those kept as they are)."""
        entries = ExampleEncoder.entries(serialized)
        kept = {key: entries.pop(key) for key in self._kept if key in entries}
        return entries, kept

    def _encoded(self, values: tuple, kept: dict | None) -> bytes:
        """The transformed example: its computed `values`, and the `kept` entries."""
        computed = self._encoder.encode(dict(zip(self._names, values)))
        if kept is None:
            return computed
        return ExampleEncoder.joined({**ExampleEncoder.entries(computed), **kept})


def _zero_default(feature: tf.io.FixedLenFeature | tf.io.VarLenFeature):
    """A parsing spec's feature that reads as zeros where an example leaves it
    out (a variable-length one reads as empty anyway)."""
    if isinstance(feature, tf.io.VarLenFeature):
        return feature
    return feature._replace(default_value=tf.zeros(feature.shape, feature.dtype))


# -- Beam ---------------------------------------------------------------------------


@beam.typehints.with_input_types(WorkUnit)
@beam.typehints.with_output_types(bytes)
class _TrainExamplesFn(beam.DoFn):
    """A work unit -> the serialized raw examples of its train samples, holding
    the `analyzed` features only, built by the converter's own driver; the
    other samples stop at their split. Dead letters are the converter's to
    report."""

    def __init__(self, reader, recipe: ExampleRecipe, analyzed: frozenset):
        self._reader = streaming(reader)
        self._driver = SampleDriver(
            recipe, spec=FeatureSpec(tuple(f for f in recipe.spec if f.name in analyzed)),
            splits=frozenset({ANALYZED_SPLIT}))

    def setup(self):
        self._reader.setup(counting=False)  # the converter's read is the job's
        self._driver.setup()
        self._decided = ()

    def process(self, unit, **decided):
        self._decided = decided_of(self._decided, **decided)
        work = self._driver.start()
        for event in self._reader.read(unit):
            for item in self._driver.take(event, work, self._decided[1]):
                if isinstance(item, Example):
                    yield item.serialized

    def teardown(self):
        self._reader.teardown()


def record_batch(serialized: list, decoder, floats: frozenset) -> pa.RecordBatch:
    """A batch of serialized raw examples (the project's encoder's, each holding
    the `floats` features, names as bytes) -> the RecordBatch tfx_bsl's
    `decoder` gives them.

    A float feature's packed values are already the little-endian float32 an
    Arrow column holds: its column is their bytes joined (one copy, no parse),
    which on a window of audio is several times faster than parsing it. The
    decoder decodes the rest.
    """
    entries = [ExampleEncoder.entries(s) for s in serialized]
    batch = decoder.DecodeBatch([ExampleEncoder.joined(
        {name: entry for name, entry in e.items() if name not in floats}) for e in entries]
        if floats else serialized)
    columns = list(batch.columns)
    for name in floats:
        payloads = [ExampleEncoder.float_payload(e[name]) for e in entries]
        offsets = np.zeros(len(payloads) + 1, np.int64)
        np.cumsum([len(p) // 4 for p in payloads], out=offsets[1:])
        values = np.frombuffer(b"".join(payloads), "<f4")
        index = batch.schema.get_field_index(name.decode())
        columns[index] = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


@beam.typehints.with_input_types(List[bytes])
@beam.typehints.with_output_types(pa.RecordBatch)
class _ToRecordBatchFn(beam.DoFn):
    """A batch of serialized raw examples -> one RecordBatch (`record_batch`); the
    decoder is made in setup()."""

    def __init__(self, schema: bytes, floats: frozenset):
        self._schema = schema
        self._floats = floats

    def setup(self):
        self._decoder = example_coder.ExamplesToRecordBatchDecoder(self._schema)

    def process(self, serialized: list):
        yield record_batch(serialized, self._decoder, self._floats)


class Analysis(NamedTuple):
    """AnalyzeTrainSplit's result."""

    staged: beam.PCollection   # one element once transform_fn/ and metadata are staged
    directory: str             # where they are staged
    spec: FeatureSpec          # of the transformed examples, known before the job runs
    passed_through: frozenset  # raw features it outputs unchanged (ExampleTransformer)


class AnalyzeTrainSplit(beam.PTransform):
    """Work units -> `Analysis`: tf.Transform's analysis of the train split's examples.

    Runs the preprocessing_fn's analyzers inside a
    `tft_beam.Context(temp_dir=<temp_dir>/tft)` over the train examples built
    by its own pass over the units (`reader`, `recipe`; `decisions`, what the
    job decided before it: the stratified splits, the keys given more than
    once), and stages tf.Transform's output under `<temp_dir>/transform`
    (`publish` moves it).
    """

    def __init__(self, preprocessing: Preprocessing, reader, recipe: ExampleRecipe,
                 temp_dir: str, decisions: Decisions = NO_DECISIONS):
        super().__init__()
        self._preprocessing = preprocessing
        self._reader = reader
        self._recipe = recipe
        self._temp_dir = temp_dir
        self._decisions = decisions

    def expand(self, units):
        plan = AnalysisPlan.of(self._preprocessing, self._recipe.spec)
        return (units
                | "TrainExamples" >> beam.ParDo(
                    _TrainExamplesFn(self._reader, self._recipe, plan.analyzed),
                    **self._decisions.sides())
                | "Fit" >> FitAnalysis(plan, self._preprocessing, self._recipe.spec,
                                       self._temp_dir))


class AnalysisPlan(NamedTuple):
    """What the analysis is fitted from: the raw examples' schema, the tensor
    adapter of their RecordBatches, and the features the analyzers read."""

    schema: schema_pb2.Schema
    adapter: TensorAdapterConfig
    analyzed: frozenset

    @classmethod
    def of(cls, preprocessing: Preprocessing, raw_spec: FeatureSpec) -> "AnalysisPlan":
        schema = manifest.schema_proto(raw_spec)
        source = tfxio.TFExampleBeamRecord(physical_format="tfrecord", schema=schema)
        adapter = tfxio.TensorAdapterConfig(source.ArrowSchema(), source.TensorRepresentations())
        analyzed = analyzed_features(preprocessing.preprocessing_fn(), adapter)
        return cls(schema, _zero_filled(adapter, raw_spec, analyzed), analyzed)


class FitAnalysis(beam.PTransform):
    """The train examples, serialized holding only the analyzed features ->
    `Analysis`: tf.Transform's analysis of them, staged under
    `<temp_dir>/transform`."""

    def __init__(self, plan: AnalysisPlan, preprocessing: Preprocessing, raw_spec: FeatureSpec,
                 temp_dir: str):
        super().__init__()
        self._plan = plan
        self._preprocessing = preprocessing
        self._raw_spec = raw_spec
        self._temp_dir = temp_dir

    def expand(self, train):
        plan, preprocessing = self._plan, self._preprocessing
        staged_dir = os.path.join(self._temp_dir, STAGED_DIR)
        with tft_beam.Context(temp_dir=os.path.join(self._temp_dir, _TFT_TEMP_DIR)):
            batches = (
                train
                # min = max: fixed-size batches, not Beam's adaptive sizing that
                # starts at one example (and a TensorFlow call per example).
                | "Batch" >> beam.BatchElements(min_batch_size=_BATCH_BYTES,
                                                max_batch_size=_BATCH_BYTES,
                                                element_size_fn=_batch_cost)
                | "ToRecordBatches" >> beam.ParDo(_ToRecordBatchFn(
                    plan.schema.SerializeToString(),
                    frozenset(f.name.encode() for f in self._raw_spec
                              if f.name in plan.analyzed and f.kind == "float"))))
            transform_fn = ((batches, plan.adapter)
                            | "Analyze" >> tft_beam.AnalyzeDataset(
                                preprocessing.preprocessing_fn()))
            staged = transform_fn | "StageTransformFn" >> tft_beam.WriteTransformFn(staged_dir)
        # The schema traced from the preprocessing_fn fixes every output's type
        # and shape before the job runs; analysis adds only value domains.
        passed_through = preprocessing.passed_through(self._raw_spec)
        spec = transformed_spec(transform_fn[1].dataset_metadata.schema, self._raw_spec,
                                passed_through)
        return Analysis(staged, staged_dir, spec, passed_through)
