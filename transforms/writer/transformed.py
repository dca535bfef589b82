"""tf.Transform materialized over the shards the converter wrote (TFX's shape,
--materialize_transform): fit on the train split's examples as they were
built, then transform each unit's shards. By default the transform is
published instead and readers apply it (transforms/format/read_transform.py).

    plan = AnalysisPlan.of(preprocessing, raw_spec)   # options.analyzed = plan.analyzed
    analysis = converted[ANALYZED] | "Preprocess" >> FitAnalysis(plan, preprocessing,
                                                                 raw_spec, temp_dir)
    receipts = receipts | "Transform" >> TransformShards(analysis, raw_spec, temp_dir,
                                                         shard_format, shard_size_bytes)

The converter writes the untransformed examples (plain TFRecord, in the job's
temporary folder) where it builds them, as without a transform, so the media
are decoded once; of each train example it also outputs the features the
analyzers read (ConvertOptions.analyzed, a few bytes for metadata), which the
fit takes: no shard is read back for it (a run with a transform reuses no
earlier work: WriteDataset's `run`). `TransformShards`
applies the staged transform to every unit's shards and rolls the results
into shards as the converter rolls them, per split and by size: the shards a
transform applied while converting writes (transforms/tft/stage.py, which the
global layout and an examples sink still use; tests/test_preprocessing.py
compares the two). The untransformed shards stay in the temporary folder,
which the final step removes: a retried bundle reads them again.
"""

from __future__ import annotations

import apache_beam as beam

from transforms.format.shard_format import ShardFormat
from transforms.format.spec import FeatureSpec
from transforms.recipe.examples import Example
from transforms.tft.stage import Analysis, ExampleTransformer
from transforms.writer.ledger import UnitReceipt
from transforms.writer.rolling_shards import RollingShards
from transforms.writer.tfrecord import read_tfrecords

__all__ = ["TransformShards"]


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
                 shard_format: ShardFormat, shard_size_bytes: int):
        self._analysis_dir = analysis.directory
        self._spec = analysis.spec
        self._passed_through = analysis.passed_through
        self._raw_spec = raw_spec
        self._temp_dir = temp_dir
        self._format = shard_format
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
        shards = RollingShards(self._temp_dir, receipt.shards[0].order[:-1], self._format,
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
                 shard_format: ShardFormat, shard_size_bytes: int):
        super().__init__()
        self._analysis = analysis
        self._fn = _TransformUnitFn(analysis, raw_spec, temp_dir, shard_format, shard_size_bytes)

    def expand(self, receipts):
        return receipts | "TransformUnits" >> beam.ParDo(
            self._fn, staged=beam.pvalue.AsList(self._analysis.staged))
