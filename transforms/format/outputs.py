"""What every public transform returns: its data, with its dead letters beside it.

    read = p | dg.ReadTarSamples("data/*.tar")      # a SampleResult
    read.samples, read.failures
    cut = read.samples | dg.CutSamples(windows)     # an ExampleResult
    cut.examples, cut.failures

Beam-free named records of PCollections. Dead letters travel with the data:
`WriteDataset` takes a result itself (`read | dg.WriteDataset(...)`), or a
PCollection with `failures=` the failures of the steps before it, and counts
them in the dataset's accounting and failure fraction as the jobs do.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["CUT", "CutCount", "ExampleResult", "SampleResult"]

# The field of an ExampleResult with CutSamples' CutCounts: a composite's
# outputs are named by its result's fields, so a step after finds them by it.
CUT = "cut"


class SampleResult(NamedTuple):
    """A reader's output: its Samples, and the dead letters of what did not
    become one (transforms/format/dead_letters.py).

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> from transforms.testing.corpus import write_corpus
    >>> _ = write_corpus("corpus", shards=1, samples_per_shard=3)
    >>> with dg.make_pipeline() as p:
    ...     read = p | dg.ReadTarSamples("corpus/*.tar")
    ...     _ = assert_that(read.samples | beam.combiners.Count.Globally(), equal_to([3]))
    ...     _ = assert_that(read.failures, equal_to([]), label="no dead letters")
    """

    samples: Any    # PCollection of Sample dicts
    failures: Any   # PCollection of dead letters


class CutCount(NamedTuple):
    """What CutSamples cut of one sample: its url and key (its examples'
    `source_key`), and how many examples it gave (before a failure, if it
    failed); when it gave none, why (`empty`, the filter's reason). The
    writer counts from them what a step between dropped."""

    url: str
    key: str
    examples: int
    failed: bool = False
    empty: str = "no_examples"


class ExampleResult(NamedTuple):
    """Examples made of samples (CutSamples' dicts, BuildExamples' encoded
    Examples), and the dead letters of the samples that failed; CutSamples'
    also says what it cut of each sample (`cut`, CutCounts), which
    WriteDataset finds by itself.

    >>> import apache_beam as beam, transforms as dg
    >>> recipe = dg.ExampleRecipe(spec=dg.FeatureSpec.parse("label:int64"))
    >>> with dg.make_pipeline() as p:
    ...     built = p | beam.Create([{"label": 1}, {"label": "one"}]) | dg.BuildExamples(recipe)
    ...     # its examples and its failures, for a step of yours or WriteDataset(failures=)
    ...     _ = built.failures | beam.Map(lambda letter: print(letter["stage"]))
    encode
    """

    examples: Any   # PCollection of example dicts or Examples
    failures: Any   # PCollection of dead letters
    cut: Any = None  # PCollection of CutCounts (CutSamples')
