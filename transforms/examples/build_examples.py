"""Samples to encoded examples, written nowhere: the recipe as a Beam step.

    built = samples | "BuildExamples" >> BuildExamples(recipe)
    built.examples      # Examples: (split, order key, serialized tf.train.Example)
    built.failures      # dead letters of the elements that gave none

Each element goes through the sample driver the writer's converter runs
(transforms/recipe/driver.py), so an example built here is byte for byte the
one WriteDataset would write.
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam

from transforms.format.arguments import ArgumentTypeError
from transforms.format.dead_letters import FAILURES
from transforms.format.outputs import ExampleResult
from transforms.recipe.driver import SampleDriver, as_event
from transforms.recipe.examples import Example, ExampleRecipe
from transforms.runner.counters import Counters

__all__ = ["BuildExamples"]


@beam.typehints.with_input_types(Any)  # what is neither a sample nor an example is a dead letter
@beam.typehints.with_output_types(Example)
class _BuildFn(beam.DoFn):
    def __init__(self, recipe: ExampleRecipe):
        self._driver = SampleDriver(recipe, count=self._count)
        self._counters: Counters | None = None

    def setup(self):
        self._driver.setup()
        self._counters = Counters()

    def _count(self, name: str, n: int = 1) -> None:
        self._counters.inc(name, n)

    def process(self, element):
        work = self._driver.start()
        for item in self._driver.take(as_event(element), work):
            if isinstance(item, Example):
                yield item
        for letter in work.failures:
            yield beam.pvalue.TaggedOutput(FAILURES, letter)


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
        built = samples | "Build" >> beam.ParDo(_BuildFn(self._recipe)).with_outputs(
            FAILURES, main="examples")
        return ExampleResult(built.examples, built[FAILURES])
