"""Measures: what a job learns from every example it writes, as plug-ins.

A measure is a module with one class (a `Measure`): what it takes from each
example as it is built (`add`, given a `Seen`; `add_examples`, given a
`SeenExamples`, takes a recording's consecutive examples at once and by
default gives each to `add`), how partial results merge
(`merge`: a work unit's, then the job's, in any order and grouping), and the
manifest section it makes of the merged result (`section`, put where `place`
says). The converter keeps one accumulator per measure for each work unit
(transforms/recipe/driver.py); the unit's receipt carries them as JSON
(`to_json`), so --resume reuses them with the unit's shards; the final step
merges every unit's (`from_json`, `merge`) and the manifest gets the sections
(transforms/writer/finalise.py).

The recipe's own measures (ExampleRecipe.every_measure): example durations
(`durations`), examples per label (`label_counts`), the transcripts'
characters (`transcripts`), the statistics of the features the cut computes
(`statistics`) and the accounting of augmented copies (`augmentation`). A
measure of your own is given as `ExampleRecipe(measures=(YourMeasure(),))`
or `WriteDataset(measures=...)`: its section is the manifest's key of its
name (so a new measure behind a flag is its module, and the flag's line
that gives it to the recipe). Beam-free.
"""

from __future__ import annotations

import collections
from typing import Any, Iterable, Iterator, Mapping, NamedTuple

from transforms.format.arguments import ArgumentError, ArgumentTypeError
from transforms.format.manifest import ACCOUNTING, PER_SPLIT, TOP, Section

__all__ = ["ACCOUNTING", "PER_SPLIT", "TOP", "Measure", "Seen", "SeenExamples", "SplitCounts",
           "check_measures", "manifest_sections"]


class Seen(NamedTuple):
    """One example as the measures see it, once it is encoded: its split, its
    sample's label (the split plan's label, or None) and its feature values
    as they were encoded (`FeatureSpec` coerced: lists or numpy arrays)."""

    split: str
    label: str | None
    values: Mapping[str, Any]


class SeenExamples(NamedTuple):
    """Consecutive examples of one sample (a recording's windows), as they
    were encoded together: `count` of them, in `split` under `label`, their
    values as `columns` ({feature: a 2-D array with a row per example, or a
    list of a value per example})."""

    split: str
    label: str | None
    columns: Mapping[str, Any]
    count: int

    def each(self) -> Iterator[Seen]:
        """Each example as a Seen, in order."""
        for i in range(self.count):
            yield Seen(self.split, self.label,
                       {name: column[i] for name, column in self.columns.items()})


class Measure:
    """What a job learns from every example it writes (see the module
    docstring). A measure is configuration: it pickles to workers, and
    describes itself by its name in the recipe's record.

    Subclasses set `name` (the receipts' and the manifest's key, unique in
    the recipe) and may set `place` (TOP, the default: the manifest's own
    key; PER_SPLIT: the section is {split: entry}, each in its split's
    entry; ACCOUNTING); they implement `create`, `add`, `merge` and
    `section`, and `to_json`/`from_json` when their accumulator is not made
    of JSON's own types (lists come back as tuples).

    >>> import apache_beam as beam, json, numpy as np, transforms as dg
    >>> class LargestNorm(dg.Measure):      # each split's largest embedding norm
    ...     name = "largest_norm"
    ...     def create(self):
    ...         return {}
    ...     def add(self, largest, seen):
    ...         norm = float(np.linalg.norm(seen.values["emb"]))
    ...         largest[seen.split] = max(largest.get(seen.split, 0.0), norm)
    ...     def merge(self, accumulators):
    ...         merged = {}
    ...         for largest in accumulators:
    ...             for split, norm in largest.items():
    ...                 merged[split] = max(merged.get(split, 0.0), norm)
    ...         return merged
    ...     def section(self, largest, split_names):
    ...         return largest
    >>> rows = [{"emb": np.full(4, i, np.float32)} for i in range(10)]
    >>> with dg.make_pipeline() as p:
    ...     _ = p | beam.Create(rows) | dg.WriteDataset(
    ...         "norms", features="emb:float32[4]", splits="train=1", measures=[LargestNorm()])
    >>> json.load(open("norms/manifest.json"))["largest_norm"]
    {'train': 18.0}
    """

    name: str = ""
    place: str = TOP

    def create(self) -> Any:
        """A new, empty accumulator."""
        raise NotImplementedError

    def add(self, accumulator: Any, seen: Seen) -> None:
        """Adds one example to `accumulator` (in place): called for every
        example written, so it should be cheap."""
        raise NotImplementedError

    def add_examples(self, accumulator: Any, seen: SeenExamples) -> None:
        """Adds a sample's consecutive examples at once: what `add` of each
        would add. Override it where columns make it cheaper (a recording's
        windows summed in one call)."""
        for one in seen.each():
            self.add(accumulator, one)

    # Whether it takes what was heard of each sample's audio (`heard`).
    hears_audio: bool = False

    def heard(self, accumulator: Any, split: str, label: str | None, heard: Any) -> None:
        """Adds what was heard of one sample's audio as its cut decoded it
        (transforms/media/loudness.py's Heard: its peak, the power of its
        active part, its samples), once its examples are built in `split`
        under `label`: called for a measure that `hears_audio`, for each
        sample whose cut decodes audio."""

    def add_copy(self, accumulator: Any, split: str, augmentation: Any) -> None:
        """Adds one augmented copy of a sample, as it is planned, before its
        examples (transforms/media/augment.py's Augmentation): most measures
        take examples alone."""

    def add_removed(self, accumulator: Any, seen: Seen, reason: str) -> None:
        """Adds an example --keep removed (`reason` is the clause), with its
        values as they were before encoding: most measures take the written
        examples alone; a distribution that shows what a threshold costs
        takes these too."""

    def merge(self, accumulators: Iterable[Any]) -> Any:
        """One accumulator holding all of `accumulators`; the result must not
        depend on their order or grouping (units, then the job)."""
        raise NotImplementedError

    def section(self, accumulator: Any, split_names: list) -> Any | None:
        """The manifest's section for the job's merged accumulator (None: no
        section); `split_names` are the recipe's splits, in order."""
        raise NotImplementedError

    def to_json(self, accumulator: Any) -> Any:
        """The accumulator as JSON's types (a receipt holds it)."""
        return accumulator

    def from_json(self, data: Any) -> Any:
        """`to_json`'s inverse (lists come back as tuples)."""
        return data


def check_measures(measures: Iterable[Measure], taken: Iterable[str]) -> tuple:
    """`measures` as a tuple, each a Measure of a name of its own (not one of
    `taken`, the names already in the recipe and the manifest); ArgumentError
    naming the parameter otherwise."""
    if isinstance(measures, (Measure, str, bytes)) or not isinstance(measures, Iterable):
        raise ArgumentTypeError("measures", f"must be a list of Measures, got {measures!r}")
    measures, seen = tuple(measures), set(taken)
    for measure in measures:
        if not isinstance(measure, Measure):
            raise ArgumentTypeError("measures", "must be Measures (transforms.recipe.measures."
                                    f"Measure), got {type(measure).__name__}")
        if not measure.name or measure.name in seen:
            raise ArgumentError("measures", f"each needs a name of its own: "
                                f"{measure.name!r} is {'taken' if measure.name else 'empty'}")
        if measure.place not in (TOP, PER_SPLIT, ACCOUNTING):
            raise ArgumentError("measures", f"{measure.name}: place must be one of "
                                f"{TOP}, {PER_SPLIT}, {ACCOUNTING}")
        seen.add(measure.name)
    return measures


def manifest_sections(measures: Iterable[Measure], merged: Mapping[str, Any],
                      split_names: list) -> tuple:
    """The manifest's Sections of `measures`, from their job-wide accumulators
    (`merged`, by name: a measure no unit fed is empty)."""
    sections = []
    for measure in measures:
        accumulator = merged[measure.name] if measure.name in merged else measure.merge([])
        value = measure.section(accumulator, split_names)
        if value is not None:
            sections.append(Section(measure.place, measure.name, value))
    return tuple(sections)


class SplitCounts(Measure):
    """A measure that counts things per split: its accumulator is {split:
    Counter}; subclasses say what to count (`add`) and the section."""

    def create(self) -> dict:
        return {}

    def merge(self, accumulators: Iterable[dict]) -> dict:
        merged: dict = {}
        for accumulator in accumulators:
            for split, counts in accumulator.items():
                merged.setdefault(split, collections.Counter()).update(counts)
        return merged

    def to_json(self, accumulator: dict) -> dict:
        return {split: dict(counts) for split, counts in accumulator.items()}

    def from_json(self, data: Mapping) -> dict:
        return {split: collections.Counter(counts) for split, counts in data.items()}
