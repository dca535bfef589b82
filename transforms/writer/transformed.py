"""tf.Transform over the shards the converter wrote (TFX's shape): fit on the
train split's shards read back, then transform each unit's shards.

    analysis = receipts | "Preprocess" >> AnalyzeWrittenTrain(preprocessing, raw_spec,
                                                               temp_dir)
    receipts = receipts | "Transform" >> TransformShards(analysis, raw_spec, temp_dir,
                                                         compression, shard_size_bytes)

The converter writes the untransformed examples (uncompressed, in the job's
temporary folder) where it builds them, as without a transform, so the media
are decoded once. The analysis reads the train shards back and keeps of each
example the features the analyzers read; `TransformShards` applies the staged
transform to every unit's shards and rolls the results into shards as the
converter rolls them, per split and by size: the shards a transform applied
while converting writes (transforms/tft/stage.py, which the global layout and
an examples sink still use; tests/test_preprocessing.py compares the two).
The untransformed shards stay in the temporary folder, which the final step
removes: a retried bundle reads them again.
"""

from __future__ import annotations

import apache_beam as beam

from transforms.format.encoder import ExampleEncoder
from transforms.format.spec import FeatureSpec
from transforms.recipe.examples import Example
from transforms.tft.preprocessing import ANALYZED_SPLIT, Preprocessing
from transforms.tft.stage import Analysis, AnalysisPlan, ExampleTransformer, fit_analysis
from transforms.writer.ledger import UnitReceipt
from transforms.writer.rolling_shards import RollingShards
from transforms.writer.tfrecord import read_tfrecords

__all__ = ["AnalyzeWrittenTrain", "TransformShards"]


class AnalyzeWrittenTrain(beam.PTransform):
    """Receipts of units written untransformed -> `Analysis`: tf.Transform's
    analysis of the train split's examples, read back from the shards the
    receipts list (TFX's shape: nothing is decoded a second time).

    Each train shard is read on one worker, and of each example only the
    features the analyzers read are passed on: the bytes the analysis pass
    of `AnalyzeTrainSplit` would have encoded for the same example
    (`ExampleEncoder.joined`). `TransformShards` then applies the staged
    transform to the shards.
    """

    def __init__(self, preprocessing: Preprocessing, raw_spec: FeatureSpec, temp_dir: str):
        super().__init__()
        self._preprocessing = preprocessing
        self._raw_spec = raw_spec
        self._temp_dir = temp_dir

    def expand(self, receipts):
        plan = AnalysisPlan.of(self._preprocessing, self._raw_spec)
        train = (receipts
                 | "TrainShards" >> beam.FlatMap(
                     lambda r: [s.temp for s in r.shards if s.split == ANALYZED_SPLIT])
                 | "SpreadShards" >> beam.Reshuffle()
                 | "AnalyzedFeatures" >> beam.ParDo(_AnalyzedFeaturesFn(plan.analyzed)))
        return fit_analysis(train, plan, self._preprocessing, self._raw_spec, self._temp_dir)


@beam.typehints.with_input_types(str)
@beam.typehints.with_output_types(bytes)
class _AnalyzedFeaturesFn(beam.DoFn):
    """A written shard's path -> each of its examples, holding only `analyzed`."""

    def __init__(self, analyzed: frozenset):
        self._names = frozenset(name.encode() for name in analyzed)

    def process(self, path: str):
        for serialized in read_tfrecords(path):
            entries = ExampleEncoder.entries(serialized)
            yield ExampleEncoder.joined({name: entries[name] for name in self._names
                                         if name in entries})


@beam.typehints.with_input_types(UnitReceipt)
@beam.typehints.with_output_types(UnitReceipt)
class _TransformUnitFn(beam.DoFn):
    """A unit's receipt, its shards untransformed -> its receipt with the
    transformed shards: each split's examples read back in order, transformed
    and rolled into shards as the converter would have rolled them (per
    split, by size), so the shards are the ones a transform applied while
    converting gives. The untransformed shards stay in the temporary folder
    (a retried bundle reads them again) until the final step removes it."""

    def __init__(self, analysis: Analysis, raw_spec: FeatureSpec, temp_dir: str,
                 compression: str, shard_size_bytes: int):
        self._analysis_dir = analysis.directory
        self._spec = analysis.spec
        self._passed_through = analysis.passed_through
        self._raw_spec = raw_spec
        self._temp_dir = temp_dir
        self._compression = compression
        self._shard_size_bytes = shard_size_bytes

    def setup(self):
        self._transformer = None

    # `staged` is a side input for its arrival alone: the transform is staged.
    def process(self, receipt: UnitReceipt, staged=None):  # noqa: ARG002
        if not receipt.shards:
            yield receipt
            return
        if self._transformer is None:
            self._transformer = ExampleTransformer(self._analysis_dir, self._raw_spec,
                                                   self._spec, self._passed_through)
        shards = RollingShards(self._temp_dir, receipt.shards[0].order[:-1], self._compression,
                               self._shard_size_bytes)
        for raw in sorted(receipt.shards, key=lambda shard: (shard.split, shard.order)):
            for serialized in read_tfrecords(raw.temp):
                for example in self._transformer.add(Example(raw.split, 0, serialized)):
                    shards.write(example.split, example.serialized)
        for example in self._transformer.flush():
            shards.write(example.split, example.serialized)
        yield receipt._replace(shards=tuple(shards.close()))


class TransformShards(beam.PTransform):
    """Receipts of units written untransformed -> their receipts with the shards
    transformed by `analysis`'s staged transform (`_TransformUnitFn`)."""

    def __init__(self, analysis: Analysis, raw_spec: FeatureSpec, temp_dir: str,
                 compression: str, shard_size_bytes: int):
        super().__init__()
        self._analysis = analysis
        self._fn = _TransformUnitFn(analysis, raw_spec, temp_dir, compression, shard_size_bytes)

    def expand(self, receipts):
        return receipts | "TransformUnits" >> beam.ParDo(
            self._fn, staged=beam.pvalue.AsList(self._analysis.staged))
