"""Samples to encoded examples, written nowhere: the recipe as a Beam step.

    built = samples | "BuildExamples" >> BuildExamples(recipe)
    built.examples      # Examples: (split, order key, serialized tf.train.Example)
    built.failures      # dead letters of the elements that gave none

It is the writer's own converter (transforms/writer/convert.py) with its
shards turned off, so an example built here is byte for byte the one
WriteDataset would write.
"""

from __future__ import annotations

import apache_beam as beam

from transforms.format.arguments import ArgumentTypeError
from transforms.format.outputs import ExampleResult
from transforms.recipe.examples import ExampleRecipe
from transforms.writer.convert import RECEIPTS, ConvertElements, ConvertOptions

__all__ = ["BuildExamples"]


class BuildExamples(beam.PTransform):
    """Samples (or feature dicts, or serialized tf.train.Examples) -> their encoded
    examples by `recipe`, for a pipeline that writes them itself; under
    `failures` the dead letters of the elements that gave none.

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> recipe = dg.ExampleRecipe(spec=dg.FeatureSpec.parse("label:int64"))
    >>> with dg.make_pipeline() as p:
    ...     built = (p | beam.Create([{"__key__": "a", "label": "3"}, {"__key__": "b"}])
    ...                | dg.BuildExamples(recipe))
    ...     _ = assert_that(built.examples | beam.Map(lambda e: e.split), equal_to(["train"]))
    ...     _ = assert_that(built.failures | beam.Map(lambda d: d["key"]), equal_to(["b"]),
    ...                     label="dead letters")
    """

    def __init__(self, recipe: ExampleRecipe):
        super().__init__()
        if not isinstance(recipe, ExampleRecipe):
            raise ArgumentTypeError("recipe", f"must be an ExampleRecipe, got {recipe!r}")
        self._recipe = recipe

    def expand(self, samples):
        converted = samples | "Convert" >> ConvertElements(
            self._recipe, ConvertOptions(temp_dir="", write_shards=False, emit_examples=True))
        failures = converted[RECEIPTS] | "DeadLetters" >> beam.FlatMap(lambda r: r.failures)
        return ExampleResult(converted.examples, failures)
