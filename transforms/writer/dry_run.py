"""`--dry_run_samples N`: the recipe run on the launcher over the first samples, nothing written.

`measure_sample` reads the source's work units in order, as a worker would,
and runs the job's own `convert_sample` on the first N samples: every
example is built and encoded, then only its size and split are kept. Past
the N-th sample it goes on reading, without decoding, to the end of the
input file it is in, so the files it read are whole: their stored bytes
against the input's total scale every figure up (transforms/writer/projection.py).
"""

from __future__ import annotations

import collections
import time
from typing import NamedTuple

from transforms.format.dead_letters import SAMPLE, SEGMENT
from transforms.format.encoder import ExampleEncoder
from transforms.format.sample import URL
from transforms.recipe.examples import ExampleRecipe, StageError, convert_sample, recipe_samples
from transforms.sources.units import Failed, Source
from transforms.writer.convert import outcome_tallies

__all__ = ["SampleMeasure", "measure_sample"]


class SampleMeasure(NamedTuple):
    """What running the recipe on the first samples of a source found."""

    samples_built: int         # the first samples: run through the recipe (or dead letters)
    samples_read: int          # samples of the files read whole (built or only counted)
    files_read: tuple          # the input files read whole
    complete: bool             # every input was read
    tallies: dict              # {(what, detail): n} of the built samples (convert.py)
    example_sizes: dict        # split -> [bytes of each example built]
    files_failed: int
    seconds: float             # spent building examples
    unit_sizes: tuple          # planned bytes of every work unit of the source


def measure_sample(source: Source, recipe: ExampleRecipe, samples: int) -> SampleMeasure:
    """Runs the recipe on the first `samples` samples of `source` (module docstring).

    A sample the reader could not read counts as one of them, a dead letter.
    """
    reader = source.reader
    reader.setup(counting=False)
    encoder = ExampleEncoder([(f.name, f.kind) for f in recipe.spec])
    sample_fn, example_fn = recipe.load_functions()
    tallies: collections.Counter = collections.Counter()
    sizes: dict = collections.defaultdict(list)
    built = read = files_failed = 0
    files: list = []
    seconds = 0.0

    units = sorted(source.plan(), key=lambda u: u.index)

    def measure(complete: bool) -> SampleMeasure:
        return SampleMeasure(built, read, tuple(files), complete, dict(tallies), dict(sizes),
                             files_failed, seconds, tuple(u.size for u in units))

    try:
        for unit in units:
            for event in reader.read(unit):
                failed = event.record if isinstance(event, Failed) else None
                url = failed["url"] if failed else event.get(URL, "")
                if not files or url != files[-1]:
                    if built >= samples:
                        return measure(False)  # the files read so far are whole
                    files.append(url)
                if failed and failed["unit"] != SAMPLE:
                    files_failed += 1
                    continue
                read += 1
                if built >= samples:
                    continue  # counted, not built: the file is read to its end
                built += 1
                if failed:
                    tallies[("failed", SAMPLE)] += 1
                    continue
                start = time.perf_counter()
                tallies.update(_built(event, recipe, encoder, sample_fn, example_fn, sizes))
                seconds += time.perf_counter() - start
    finally:
        reader.teardown()
    return measure(True)


def _built(sample, recipe: ExampleRecipe, encoder, sample_fn, example_fn, sizes: dict) -> dict:
    """One sample's (or recording's segments') tallies, their examples' sizes kept."""
    if not recipe.segments.enabled:
        return outcome_tallies(_keep_sizes(convert_sample(sample, recipe, encoder, sample_fn,
                                                          example_fn), sizes))
    tallies = collections.Counter()
    try:
        segments = list(recipe_samples(sample, recipe))
    except StageError:
        return {("failed", SAMPLE): 1}
    tallies[("segmented", "") if segments else ("filtered", "no_segments")] += 1
    for segment in segments:
        tallies[("segments_read", "")] += 1
        tallies.update(outcome_tallies(_keep_sizes(convert_sample(
            segment, recipe, encoder, sample_fn, example_fn), sizes), SEGMENT))
    return tallies


def _keep_sizes(examples, sizes: dict):
    """Runs a convert_sample generator, keeping each example's size by split;
    returns its outcome."""
    while True:
        try:
            example = next(examples)
        except StopIteration as done:
            return done.value
        sizes[example.split].append(len(example.serialized))
