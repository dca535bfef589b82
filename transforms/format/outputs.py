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

__all__ = ["ExampleResult", "SampleResult"]


class SampleResult(NamedTuple):
    """A reader's output: its Samples, and the dead letters of what did not
    become one (transforms/format/dead_letters.py)."""

    samples: Any    # PCollection of Sample dicts
    failures: Any   # PCollection of dead letters


class ExampleResult(NamedTuple):
    """Examples made of samples (CutSamples' dicts, BuildExamples' encoded
    Examples), and the dead letters of the samples that failed."""

    examples: Any   # PCollection of example dicts or Examples
    failures: Any   # PCollection of dead letters
