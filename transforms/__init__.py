"""beam-datagen's public API: Beam transforms to compose in your own pipeline.

    import apache_beam as beam
    import transforms as dg

    with dg.make_pipeline() as p:
        samples = p | dg.ReadTarSamples("data/*.tar")           # or your own Beam steps
        kept = samples | beam.Filter(lambda s: "flac" in s)
        kept | dg.WriteDataset("out/", features="flac:bytes,label=cls:int64",
                               split_by="json.speaker")

The names below are the stable ones; everything else is internal. Each is
imported when first used, so `import transforms` costs nothing, and training
code that imports only `transforms.format` (the reader) never loads Beam.

- reading samples: `ReadTarSamples`, `ReadListingSamples`, `ReadBigtableSamples`,
  and for your own storage a `Source` (plan `WorkUnit`s, read one unit into
  Samples or `Failed` dead letters);
- building examples: `CutSamples` (example dicts, for steps of yours before
  writing), `BuildExamples` (encoded, by a recipe), `ExampleRecipe`,
  `FeatureSpec`, `SplitPlan`, `CutOptions` (with its `AudioOptions`,
  `WindowOptions`, `FrameOptions`);
- writing a dataset: `WriteDataset` over a Source or any PCollection of dicts,
  `DatasetConfig`;
- running and reading back: `make_pipeline` (the local runner without Beam's
  Prism download, or Dataflow), `load` (tf.data), `verify_dataset`.

The packages, bottom up (tests/test_layers.py holds each to importing only
those below it): `format/` (Beam-free: sample, spec, encoder, manifest,
reader), `media/` (Beam-free decoders and cutters), `recipe/` (Beam-free:
what one sample becomes), `runner/`, `storage/`, `sources/`, `tft/`,
`writer/` (one folder, reached through `write.py` and, for launchers,
`launch.py`), `examples/` (CutSamples, BuildExamples), `verify/`, `report/`,
and `testing/` (synthetic media for tests and the demo).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# Public name -> the module that defines it.
_EXPORTS = {
    "ReadTarSamples": "transforms.sources.tar",
    "ReadListingSamples": "transforms.sources.listing",
    "ReadBigtableSamples": "transforms.sources.bigtable.source",
    "Source": "transforms.sources.units",
    "WorkUnit": "transforms.sources.units",
    "Failed": "transforms.sources.units",
    "CutSamples": "transforms.examples.cut_samples",
    "BuildExamples": "transforms.examples.build_examples",
    "ExampleRecipe": "transforms.recipe.examples",
    "FeatureSpec": "transforms.format.spec",
    "SplitPlan": "transforms.recipe.splits",
    "CutOptions": "transforms.media.cutting",
    "AudioOptions": "transforms.media.audio",
    "WindowOptions": "transforms.media.windows",
    "FrameOptions": "transforms.media.frames",
    "WriteDataset": "transforms.writer.write",
    "DatasetConfig": "transforms.writer.write",
    "make_pipeline": "transforms.runner.runtime",
    "load": "transforms.format.reader",
    "verify_dataset": "transforms.verify.dataset",
}

__all__ = sorted(_EXPORTS)


def exports_on_first_use(package: str, exports: dict) -> tuple:
    """A package's `__getattr__` and `__dir__` for `exports` (name -> the module
    that defines it): a name's module is imported when the name is first used,
    then the name is a plain attribute of the package. This package's public
    names load so, and so do the subpackages' that would load heavy libraries."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list:
        return sorted(exports)

    return __getattr__, __dir__


__getattr__, __dir__ = exports_on_first_use(__name__, _EXPORTS)
