"""beam-datagen's public API: Beam transforms to compose in your own pipeline.

    import apache_beam as beam
    import transforms as dg

    windows = dg.CutOptions(mode="audio_windows", audio_fields=("flac",))
    with dg.make_pipeline() as p:
        read = p | dg.ReadTarSamples("data/*.tar")          # samples and failures
        cut = read.samples | dg.CutSamples(windows)         # examples and failures
        (cut.examples
         | beam.Filter(lambda window: window["start_time"] < 60)   # any step of yours
         | dg.WriteDataset("out/", features="label=cls:int64", cut_by=windows,
                           split_by="json.speaker", failures=[read, cut]))

The names below are the stable ones (docs/python_api.md has a table of
them); everything else is internal. Each is imported when first used, so
`import transforms` costs nothing, and training code that imports only
`transforms.format` (the reader) never loads Beam.

- reading samples: `ReadTarSamples`, `ReadListingSamples`, `ReadLhotseSamples`,
  `ReadParquetSamples`, `ReadBigtableSamples` (each gives a `SampleResult`: `.samples`,
  `.failures`), and for your own storage a `Source` (plan `WorkUnit`s, a
  `UnitReader` reads one into Samples or `Failed` dead letters;
  `group_by_size` groups small inputs into units);
- building examples: `CutSamples` (example dicts) and `BuildExamples`
  (encoded), each giving an `ExampleResult` (`.examples`, `.failures`);
  `ExampleRecipe`, `FeatureSpec`, `SplitPlan`, `SegmentOptions`, `Measure`,
  `TranscriptOptions`, `CutOptions` (with its `AudioOptions`, `WindowOptions`, `FrameOptions`,
  `SpeechOptions`, `AudioFeatures`, `AugmentOptions`),
  `decode_audio`, `Preprocessing` (tf.Transform);
- writing a dataset: `WriteDataset` over a Source, a result or any
  PCollection of dicts, with the failures of the steps before it;
  `DatasetConfig`;
- running and reading back: `make_pipeline` (the local runner without Beam's
  Prism download, or Dataflow), `load` (tf.data), `load_info` (the manifest:
  spec, splits, accounting, warnings), `verify_dataset` (a `Verification`);
- `ArgumentError`: what every constructor raises for a bad argument, naming
  its parameter, before any work.

The packages, bottom up (tests/test_layers.py holds each to importing only
those below it): `format/` (Beam-free: sample, spec, encoder, manifest,
reader), `media/` (Beam-free decoders and cutters), `recipe/` (Beam-free:
what one sample becomes, the unit contract, the sample driver), `runner/`,
`storage/`, `sources/`, `tft/`, `checks/` (stratified splits, leakage,
duplicates), `writer/` (one folder, reached through `write.py` and, for a
launcher resuming earlier work, `ledger.py`), `examples/` (CutSamples,
BuildExamples), `verify/`, `report/`, and `testing/` (synthetic media for
tests and the demo).
"""

# ruff: noqa: F401 - the TYPE_CHECKING imports are the re-exports, as `__all__` says

from __future__ import annotations

from typing import TYPE_CHECKING

from transforms.format.exports import exports_on_first_use

if TYPE_CHECKING:  # what IDEs and type checkers see of the names loaded on first use
    from transforms.examples.build_examples import BuildExamples
    from transforms.examples.cut_samples import CutSamples
    from transforms.format.arguments import ArgumentError
    from transforms.format.outputs import ExampleResult, SampleResult
    from transforms.format.reader import load, load_info
    from transforms.format.spec import FeatureSpec
    from transforms.media.audio import AudioOptions, decode_audio
    from transforms.media.augment import AugmentOptions
    from transforms.media.cutting import CutOptions
    from transforms.media.features import AudioFeatures
    from transforms.media.frames import FrameOptions
    from transforms.media.speech import SpeechOptions
    from transforms.media.windows import WindowOptions
    from transforms.recipe.examples import ExampleRecipe
    from transforms.recipe.measures import Measure
    from transforms.recipe.segments import SegmentOptions
    from transforms.recipe.splits import SplitPlan
    from transforms.recipe.transcripts import TranscriptOptions
    from transforms.recipe.units import Failed, Source, UnitReader, WorkUnit, group_by_size
    from transforms.runner.runtime import make_pipeline
    from transforms.sources.bigtable.source import ReadBigtableSamples
    from transforms.sources.listing import ReadLhotseSamples, ReadListingSamples
    from transforms.sources.parquet import ReadParquetSamples
    from transforms.sources.tar import ReadTarSamples
    from transforms.tft.preprocessing import Preprocessing
    from transforms.verify.dataset import Verification, verify_dataset
    from transforms.writer.write import DatasetConfig, WriteDataset

# Public name -> the module that defines it.
_EXPORTS = {
    "ReadTarSamples": "transforms.sources.tar",
    "ReadListingSamples": "transforms.sources.listing",
    "ReadLhotseSamples": "transforms.sources.listing",
    "ReadParquetSamples": "transforms.sources.parquet",
    "ReadBigtableSamples": "transforms.sources.bigtable.source",
    "Source": "transforms.recipe.units",
    "WorkUnit": "transforms.recipe.units",
    "Failed": "transforms.recipe.units",
    "UnitReader": "transforms.recipe.units",
    "group_by_size": "transforms.recipe.units",
    "SampleResult": "transforms.format.outputs",
    "ExampleResult": "transforms.format.outputs",
    "CutSamples": "transforms.examples.cut_samples",
    "BuildExamples": "transforms.examples.build_examples",
    "ExampleRecipe": "transforms.recipe.examples",
    "Measure": "transforms.recipe.measures",
    "FeatureSpec": "transforms.format.spec",
    "SplitPlan": "transforms.recipe.splits",
    "SegmentOptions": "transforms.recipe.segments",
    "TranscriptOptions": "transforms.recipe.transcripts",
    "Preprocessing": "transforms.tft.preprocessing",
    "decode_audio": "transforms.media.audio",
    "CutOptions": "transforms.media.cutting",
    "AudioOptions": "transforms.media.audio",
    "AudioFeatures": "transforms.media.features",
    "AugmentOptions": "transforms.media.augment",
    "WindowOptions": "transforms.media.windows",
    "FrameOptions": "transforms.media.frames",
    "SpeechOptions": "transforms.media.speech",
    "WriteDataset": "transforms.writer.write",
    "DatasetConfig": "transforms.writer.write",
    "make_pipeline": "transforms.runner.runtime",
    "load": "transforms.format.reader",
    "load_info": "transforms.format.reader",
    "verify_dataset": "transforms.verify.dataset",
    "Verification": "transforms.verify.dataset",
    "ArgumentError": "transforms.format.arguments",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = exports_on_first_use(__name__, _EXPORTS)
