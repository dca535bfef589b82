"""One sample in, encoded tf.Examples out: the per-sample half of every pipeline.

`build_examples` is the pure function: where → select → rename → sample_fn →
filter empty → split → features → example_fn → filter empty → encode. A sample
ends in exactly one outcome: examples in one split, filtered (with a reason), or
a dead letter naming the stage that failed. All of a sample's examples succeed
or none is written, so the accounting stays exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import apache_beam as beam

from transforms import sample_ops
from transforms.counters import counter
from transforms.dead_letters import FAILURES, dead_letter
from transforms.example_encoder import ExampleEncoder
from transforms.sample import KEY, URL, FieldReader
from transforms.spec import FeatureSpec
from transforms.splits import SplitPlan, stable_hash64

__all__ = ["ExampleRecipe", "BuildExamples", "build_examples", "WRITTEN", "FILTERED"]

# Extra outputs of BuildExamples: one element per sample, for the accounting.
WRITTEN = "written"    # (split, number of examples) of a sample that produced examples
FILTERED = "filtered"  # the reason a sample was deliberately dropped


@dataclasses.dataclass(frozen=True)
class ExampleRecipe:
    """Everything that turns one sample into examples; pickles as plain configuration."""

    spec: FeatureSpec
    split_plan: SplitPlan
    selection: sample_ops.Selection | None = None
    where: tuple = ()
    renames: tuple = ()
    filter_empty: bool = False
    sample_fn: str | None = None
    example_fn: str | None = None

    def load_functions(self) -> tuple:
        """The user's sample and example functions (None where not given)."""
        return (self.sample_fn and sample_ops.load_function(self.sample_fn, "--sample_fn"),
                self.example_fn and sample_ops.load_function(self.example_fn, "--example_fn"))


class StageError(Exception):
    """A failure inside build_examples, tagged with the stage it happened in."""

    def __init__(self, stage: str, cause: BaseException):
        super().__init__(str(cause))
        self.stage = stage
        self.cause = cause


@dataclasses.dataclass(frozen=True)
class Built:
    """A sample's examples: its split and each example's (order key, serialized bytes)."""

    split: str
    examples: list


@dataclasses.dataclass(frozen=True)
class Filtered:
    reason: str


def _stage(name: str, fn: Callable, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - every failure becomes a dead letter
        raise StageError(name, e) from e


def _feature_values(sample: Mapping[str, Any], spec: FeatureSpec) -> dict:
    reader = FieldReader(sample)
    values = {KEY: sample.get(KEY)}
    for feature in spec:
        try:
            values[feature.name] = reader.get(feature.source)
        except KeyError as e:
            raise ValueError(f"feature {feature.name!r} is required: {e.args[0]}") from None
    return values


def _encode(values: Mapping[str, Any], spec: FeatureSpec, encoder: ExampleEncoder) -> bytes:
    return encoder.encode({f.name: f.coerce(values[f.name]) for f in spec})


def build_examples(sample: Mapping[str, Any], recipe: ExampleRecipe,
                   encoder: ExampleEncoder, sample_fn=None, example_fn=None) -> Built | Filtered:
    """Runs the recipe on one sample; raises StageError naming the failing stage."""
    if recipe.where and not sample_ops.matches_where(sample, recipe.where):
        return Filtered("where")
    if recipe.selection is not None:
        sample = sample_ops.select_fields(sample, recipe.selection)
    if recipe.renames:
        sample = _stage("rename", sample_ops.rename_fields, sample, recipe.renames)
    if sample_fn is not None:
        sample = _stage("sample_fn", sample_fn, dict(sample))
        if sample is None:
            return Filtered("sample_fn")
    if recipe.filter_empty and sample_ops.is_empty(sample):
        return Filtered("empty_sample")
    split = _stage("split", lambda: recipe.split_plan.split_of(recipe.split_plan.group_key(sample)))
    values = _stage("features", _feature_values, sample, recipe.spec)
    if example_fn is not None:
        values = _stage("example_fn", example_fn, values)
        if values is None:
            return Filtered("example_fn")
    if recipe.filter_empty and sample_ops.is_empty({f.name: values.get(f.name) for f in recipe.spec}):
        return Filtered("empty_example")
    serialized = _stage("encode", _encode, values, recipe.spec, encoder)
    order = stable_hash64(f"{sample[KEY]}#0", b"datagen-order")
    return Built(split, [(order, serialized)])


class _BuildExamplesFn(beam.DoFn):
    """Wraps build_examples; the encoder and user functions are made in setup()."""

    def __init__(self, recipe: ExampleRecipe):
        self._recipe = recipe

    def setup(self):
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in self._recipe.spec])
        self._sample_fn, self._example_fn = self._recipe.load_functions()
        self._written = counter("samples_written")
        self._examples = counter("examples_written")
        self._filtered = counter("samples_filtered")
        self._failed = counter("samples_failed")

    def process(self, sample):
        try:
            outcome = build_examples(sample, self._recipe, self._encoder,
                                     self._sample_fn, self._example_fn)
        except StageError as e:
            self._failed.inc()
            yield beam.pvalue.TaggedOutput(FAILURES, dead_letter(
                e.stage, e.cause, url=sample.get(URL, ""), key=sample.get(KEY)))
            return
        if isinstance(outcome, Filtered):
            self._filtered.inc()
            yield beam.pvalue.TaggedOutput(FILTERED, outcome.reason)
            return
        self._written.inc()
        self._examples.inc(len(outcome.examples))
        yield beam.pvalue.TaggedOutput(WRITTEN, (outcome.split, len(outcome.examples)))
        for order, serialized in outcome.examples:
            yield outcome.split, order, serialized


class BuildExamples(beam.PTransform):
    """Samples -> (split, order key, serialized tf.Example) tuples.

    Returns a DoOutputsTuple: `.examples` (the main output) plus `written`,
    `filtered` and `failures` (dead letters) for the accounting.
    """

    def __init__(self, recipe: ExampleRecipe):
        super().__init__()
        self._recipe = recipe

    def expand(self, samples):
        return samples | "BuildExamples" >> beam.ParDo(_BuildExamplesFn(self._recipe)).with_outputs(
            FAILURES, WRITTEN, FILTERED, main="examples")
