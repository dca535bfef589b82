"""`--dry_run_samples N`: the recipe run on the launcher over the first samples, nothing written.

`measure_sample` reads the source's work units in order, as a worker would,
and drives the first N samples through the recipe as the converter does
(transforms/recipe/driver.py): every example is built and encoded, then only
its size and split are kept (and with --quality, the measures'
distributions, to show what --keep's thresholds cost). Past
the N-th sample it goes on reading, without decoding, to the end of the
input file it is in, so the files it read are whole: their stored bytes
against the input's total scale every figure up (pipelines/projection.py).
"""

from __future__ import annotations

import collections
import time
from typing import NamedTuple

from transforms.format.dead_letters import SAMPLE
from transforms.format.sample import URL
from transforms.recipe.driver import SampleDriver
from transforms.recipe.examples import Example, ExampleRecipe
from transforms.recipe.measures.quality import QualityDistributions
from transforms.recipe.units import Failed, Source, streaming

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
    quality: dict | None = None   # the quality section of the examples built (--quality)


def measure_sample(source: Source, recipe: ExampleRecipe, samples: int) -> SampleMeasure:
    """Runs the recipe on the first `samples` samples of `source` (module docstring).

    A sample the reader could not read counts as one of them, a dead letter.
    """
    reader = streaming(source.reader)
    reader.setup(counting=False)
    driver = SampleDriver(recipe, measure=bool(recipe.cut.quality))
    driver.setup()
    sizes: dict = collections.defaultdict(list)
    built = read = files_failed = 0
    files: list = []
    seconds = 0.0
    units = sorted(source.plan(), key=lambda u: u.index)
    work = driver.start()

    def measure(complete: bool) -> SampleMeasure:
        quality = next((m.section(a, list(recipe.split_plan.names)) for m, a in work.measured
                        if isinstance(m, QualityDistributions)), None)
        return SampleMeasure(built, read, tuple(files), complete, dict(work.tallies),
                             dict(sizes), files_failed, seconds, tuple(u.size for u in units),
                             quality)

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
                start = time.perf_counter()
                for item in driver.take(event, work):
                    if isinstance(item, Example):
                        sizes[item.split].append(len(item.serialized))
                seconds += time.perf_counter() - start
    finally:
        reader.teardown()
    return measure(True)
