"""Stratified splits: the job-wide view of groups per label that `Strata` needs.

    strata = units | "StratifySplits" >> StratifySplits(recipe, reader)   # one Strata
    converted = units | "Convert" >> ConvertUnits(reader, recipe, options, strata)

A split that keeps each label's proportions must see every group of the label
before placing any, so this is a light pass of its own over the work units
(transforms/recipe/units.py), before any example is built: it reads the samples again
but keeps only two strings of each. Each sample is prepared as the converter
will see it (where, select, rename, sample_fn, filter_empty; so --sample_fn
runs twice per sample and must be a pure function), counted under its (group
key, --stratify_by label); each group is
stratified under its most frequent label (`group_stratum`); per label, the
groups' (hash, size) are cut into splits by `stratum_cuts`. The result is
small - per label, one hash threshold per split boundary, plus the stratum of
each group that carries several labels - and reaches BuildExamples as a side
input. Sizes count samples, not examples: how many examples a sample is cut
into is known only once it is decoded.

Samples that fail or are dropped before the split are left out here; the
converter makes them dead letters or filters them, as without stratification.
Every step is a function of the data alone, so the assignment is the same on
every runner and worker count.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import apache_beam as beam

from transforms.recipe.driver import SampleDriver
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.splits import Strata, group_hash, group_stratum, stratum_cuts
from transforms.recipe.units import WorkUnit
from transforms.sources.units import NO_DECISIONS, Decisions, decided_of

__all__ = ["StratifySplits"]


@beam.typehints.with_input_types(WorkUnit)
@beam.typehints.with_output_types(Tuple[str, Optional[str]])
class _GroupLabelFn(beam.DoFn):
    """A work unit -> (group key, label) of each of its samples, as the
    converter's driver will split them (SampleDriver.groups); the reader's
    clients and the user's sample function are made in setup()."""

    def __init__(self, recipe: ExampleRecipe, reader):
        self._driver = SampleDriver(recipe)
        self._reader = reader

    def setup(self):
        self._reader.setup(counting=False)  # the converter's read is the job's
        self._driver.setup()
        self._decided = ()

    def process(self, unit, **decided):
        self._decided = decided_of(self._decided, **decided)
        for event in self._reader.read(unit):
            yield from self._driver.groups(event, self._decided[1])

    def teardown(self):
        self._reader.teardown()


class _Group(NamedTuple):
    stratum: str          # the label it is split under
    key: str
    size: int             # samples
    several_labels: bool


def _group(element):
    """(group key, [(label, samples), ...]) -> _Group."""
    key, label_counts = element
    counts = dict(label_counts)
    return _Group(group_stratum(counts), key, sum(counts.values()), len(counts) > 1)


class StratifySplits(beam.PTransform):
    """Work units -> a single-element PCollection holding the job's `Strata`.

    `reader` reads the units (transforms/recipe/units.py); `recipe.split_plan` names
    the group key (--split_by), the label (--stratify_by) and the ratios
    (--splits). See the module docstring.
    """

    def __init__(self, recipe: ExampleRecipe, reader, decisions: Decisions = NO_DECISIONS):
        super().__init__()
        self._recipe = recipe
        self._reader = reader
        self._decisions = decisions

    def expand(self, units):
        ratios = [r for _, r in self._recipe.split_plan.splits]
        groups = (
            units
            | "GroupAndLabel" >> beam.ParDo(_GroupLabelFn(self._recipe, self._reader),
                                            **self._decisions.sides())
            | "CountGroupLabels" >> beam.combiners.Count.PerElement()
            | "KeyByGroup" >> beam.MapTuple(lambda pair, n: (pair[0], (pair[1], n)))
            | "LabelsPerGroup" >> beam.GroupByKey()
            # (group, [(label, samples), ...])
            | "Stratum" >> beam.Map(_group))
        cuts = (
            groups
            | "KeyByStratum" >> beam.Map(lambda g: (g.stratum, (group_hash(g.key), g.size)))
            | "GroupsPerStratum" >> beam.GroupByKey()
            # (label, [(group hash, samples), ...])
            | "Cut" >> beam.MapTuple(lambda label, sizes: (label, stratum_cuts(sizes, ratios)))
            | "CutsDict" >> beam.combiners.ToDict())
        several = (
            groups
            | "SeveralLabels" >> beam.Filter(lambda g: g.several_labels)
            | "GroupStratum" >> beam.Map(lambda g: (g.key, g.stratum))
            | "SeveralDict" >> beam.combiners.ToDict())
        return cuts | "Strata" >> beam.Map(
            lambda c, labels: Strata(c, labels), labels=beam.pvalue.AsSingleton(several))
