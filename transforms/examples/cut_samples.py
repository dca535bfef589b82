"""Samples cut into example dicts, for a pipeline that adds its own steps between
cutting and writing (an embedding model run with Beam's RunInference, a filter).

    cut = samples | "Cut" >> CutSamples(CutOptions(mode="audio_windows", audio_fields=("flac",)))
    cut.examples     # dicts: the sample's fields, `audio`, `source_key`, `start_time`, ...
    cut.failures     # dead letters of samples whose media did not decode or cut
    cut.cut          # a CutCount per sample: its key and how many examples it gave

The cut is the sample driver's (transforms/recipe/driver.py `cut_element`,
the cut WriteDataset runs); each example is keyed `<sample key>#<n>`, so
WriteDataset orders and names it on its own. A long recording streams through: its windows leave as
they are cut.
"""

from __future__ import annotations

from typing import Any, Dict

import apache_beam as beam

from transforms.format.arguments import ArgumentTypeError
from transforms.format.dead_letters import FAILURES
from transforms.format.outputs import CUT, CutCount, ExampleResult
from transforms.media.cutting import CutOptions
from transforms.recipe.driver import cut_element
from transforms.recipe.units import Failed

__all__ = ["CutSamples"]


@beam.typehints.with_input_types(Any)  # what is no Sample is a dead letter
@beam.typehints.with_output_types(Dict[str, Any])
class _CutFn(beam.DoFn):
    def __init__(self, cut: CutOptions):
        self._cut = cut

    def process(self, element):
        for item in cut_element(element, self._cut):
            if isinstance(item, Failed):
                yield beam.pvalue.TaggedOutput(FAILURES, item.record)
            elif isinstance(item, CutCount):
                yield beam.pvalue.TaggedOutput(CUT, item)
            else:
                yield item


class CutSamples(beam.PTransform):
    """Samples -> the example dicts `cut` makes of them (audio windows, frames with
    their audio, clips), and under `failures` the dead letters of samples whose
    media did not decode or cut (after the examples cut before the break).

    >>> import apache_beam as beam, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> from transforms.testing.synthetic_media import flac_bytes, voice
    >>> samples = [{"__key__": "ok", "flac": flac_bytes(voice(220, 3.0), 16000)},
    ...            {"__key__": "bad", "flac": b"not audio"}]
    >>> windows = dg.CutOptions(mode="audio_windows", audio_fields=("flac",))
    >>> with dg.make_pipeline() as p:
    ...     cut = p | beam.Create(samples) | dg.CutSamples(windows)
    ...     _ = assert_that(cut.examples | beam.Map(lambda e: e["__key__"]),
    ...                     equal_to(["ok#0", "ok#1", "ok#2"]))
    ...     _ = assert_that(cut.failures | beam.Map(lambda d: d["key"]), equal_to(["bad"]),
    ...                     label="dead letters")
    """

    def __init__(self, cut: CutOptions):
        super().__init__()
        if not isinstance(cut, CutOptions):
            raise ArgumentTypeError("cut", f"must be a CutOptions, got {cut!r}")
        self._cut = cut

    def expand(self, samples):
        cut = samples | "CutSamples" >> beam.ParDo(_CutFn(self._cut)).with_outputs(
            FAILURES, CUT, main="examples")
        return ExampleResult(cut.examples, cut[FAILURES], cut[CUT])
