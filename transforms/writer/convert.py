"""Work units to shards, written where the examples are built.

    converted = units | "Convert" >> ConvertUnits(reader, recipe, options)
    converted[RECEIPTS]  # a UnitReceipt per unit (transforms/writer/ledger.py)
    converted.examples   # the Examples themselves, only with options.emit_examples
    converted[ANALYZED]  # each train example's features tf.Transform's analyzers read

One DoFn reads a unit (transforms/recipe/units.py), drives its samples through
the recipe (transforms/recipe/driver.py, the loop every pass shares), applies a
staged tf.Transform when there is one, and streams the examples into rolling
per-split shards (transforms/writer/rolling_shards.py) in the order they are
built. No example leaves the worker: only the unit's receipt goes on to the
final step, a few numbers per shard and per unit, so nothing the size of the
data is shuffled or held, memory stays flat and every worker writes. The
examples are output as well only when something downstream needs them (the
hash-ordered global layout, or an examples table).

A unit's receipt holds its tallies (the driver's), what the observers of the
dataset's checks learned of its samples (transforms/recipe/observers.py: the
distinct (group key, split) pairs, the keys its samples gave) and of the
duplicate check (its written samples' content fingerprints), its measures'
accumulators (transforms/recipe/measures/: durations, labels, statistics,
...), its shards and its dead letters. With shards written here, the receipt is also written
into the run's folder once they are closed, so a rerun with --resume can skip
the unit.

A PCollection's elements may be examples a cut already made (CutSamples'
dicts, `ConvertOptions.elements_are_examples`): each is then tallied as a
cut example and its SourceOutcome, under SOURCES, says what became of the
sample it was cut from (`source_key`), so the final step counts samples, not
windows.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Iterator

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from transforms.checks.dataset_checks import observing
from transforms.format.dead_letters import EXAMPLE, SAMPLE
from transforms.format.encoder import ExampleEncoder
from transforms.format.shard_format import ShardFormat
from transforms.format.spec import FeatureSpec
from transforms.recipe.accounting import Kind, Tally
from transforms.recipe.driver import (
    Converted,
    SampleDriver,
    SourceOutcome,
    UnitWork,
    as_event,
    source_outcome,
)
from transforms.recipe.examples import Example, ExampleRecipe
from transforms.recipe.observers import KEYS
from transforms.recipe.units import SHARD_SIZE_BYTES, Failed, WorkUnit, streaming
from transforms.runner.counters import Counters
from transforms.sources.units import NO_DECISIONS, Decisions, SplittableUnits, decided_of
from transforms.tft.preprocessing import ANALYZED_SPLIT
from transforms.writer.ledger import UnitReceipt, write_receipt
from transforms.writer.rolling_shards import RollingShards

__all__ = ["ANALYZED", "ConvertElements", "ConvertOptions", "ConvertUnits", "RECEIPTS",
           "SOURCES", "SampleOutcomes"]

RECEIPTS = "receipts"
# What each converted sample tells the dataset's checks; a key range's rows
# have unique keys and no bound on their number, so their keys are not kept.
_OBSERVERS = tuple(check.observer for check in observing())
_OBSERVERS_OF_RANGES = tuple(observer for observer in _OBSERVERS if observer is not KEYS)
# Each train example's features that tf.Transform's analyzers read, serialized.
ANALYZED = "analyzed"
SOURCES = "sources"


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """Where the built examples go; pickled to workers, so configuration only."""

    temp_dir: str
    shard_format: ShardFormat = ShardFormat()
    shard_size_bytes: int = SHARD_SIZE_BYTES
    write_shards: bool = True       # roll shards where the examples are built
    emit_examples: bool = False     # also output them (global layout, an examples sink)
    # A tf.Transform staged here (transforms/tft/stage.py) is applied to
    # every example first; `transformed_spec` is its output's spec.
    transform_dir: str | None = None
    transformed_spec: FeatureSpec | None = None
    passed_through: frozenset = frozenset()   # raw features the transform outputs unchanged
    # A tf.Transform fitted after converting (on the shards) reads these features
    # of each train example: they are output under ANALYZED as it is built, so
    # no shard is read back for the fit.
    analyzed: frozenset = frozenset()
    # A PCollection's elements are examples a cut made, not samples (module docstring).
    elements_are_examples: bool = False


def _receipt(work: UnitWork, unit: int, span: tuple | None, inputs: tuple, versions: tuple,
             shards: RollingShards | None) -> UnitReceipt:
    """The finished unit's receipt; closes its shards."""
    return UnitReceipt(
        unit, span, inputs, tuple(sorted(work.tallies.items())),
        tuple(shards.close()) if shards else (), tuple(work.failures), versions,
        work.observations(), work.measures())


@beam.typehints.with_input_types(WorkUnit)
@beam.typehints.with_output_types(Example)
class _ConvertFn(beam.DoFn):
    """A unit -> its shards written and its receipt (and its examples with
    `emit_examples`). The reader's clients and the driver (its encoder, the
    user's functions) are made in setup(); a tf.Transform is loaded on first
    use, once the side input says it is staged."""

    def __init__(self, reader, recipe: ExampleRecipe, options: ConvertOptions):
        self._reader = reader
        self._options = options
        self._driver = SampleDriver(recipe, elements_are_examples=options.elements_are_examples,
                                    count=self._count, measure=True)
        self._counters: Counters | None = None
        self._spec = recipe.spec
        self._analyzed = frozenset(name.encode() for name in options.analyzed)

    def setup(self):
        if self._reader is not None:
            self._reader.setup()
        self._driver.setup()
        self._counters = Counters()
        self._transformer = None
        self._decided = ()

    def teardown(self):
        if self._reader is not None:
            self._reader.teardown()

    def _count(self, name: str, n: int = 1) -> None:
        self._counters.inc(name, n)

    # `transform_staged` is a side input for its arrival alone: the transform is staged.
    def process(self, unit: WorkUnit, transform_staged=None, **decided):  # noqa: ARG002
        self._decided = decided_of(self._decided, **decided)
        yield from self._convert(unit, (unit.index,), None)

    def _convert(self, unit: WorkUnit, order: tuple, tracker) -> Iterator:
        work = self._driver.start(_OBSERVERS_OF_RANGES if self._reader.splittable
                                  else _OBSERVERS)
        shards = self._shards(order)
        decided = self._decided[1]
        for event in self._reader.read(unit, tracker):
            # A Source of the user's is held to what a PCollection's elements are.
            yield from self._route(self._driver.take(
                event if isinstance(event, Failed) else as_event(event), work, decided), shards)
        yield from self._flush(shards)
        restriction = tracker.current_restriction() if tracker else None
        receipt = _receipt(work, unit.index, (restriction.start, restriction.end)
                           if restriction else None, unit.inputs, unit.versions, shards)
        if shards:
            write_receipt(self._options.temp_dir, receipt)
        yield beam.pvalue.TaggedOutput(RECEIPTS, receipt)

    def _shards(self, order: tuple) -> RollingShards | None:
        """A unit's (or bundle's) rolling shards, ordered by `order`, when it
        writes shards; a staged transform loaded on the first."""
        options = self._options
        if options.transform_dir and self._transformer is None:
            # Imported here: it loads TensorFlow, which only preprocessing needs.
            from transforms.tft.stage import ExampleTransformer
            self._transformer = ExampleTransformer(options.transform_dir, self._spec,
                                                   options.transformed_spec,
                                                   options.passed_through)
        return (RollingShards(options.temp_dir, order, options.shard_format,
                              options.shard_size_bytes) if options.write_shards else None)

    def _route(self, items, shards) -> Iterator:
        """The driver's examples (through the transform, if any) into the
        shards; a cut example's SourceOutcome output."""
        for item in items:
            if isinstance(item, Converted):
                if item.unit == EXAMPLE:
                    yield beam.pvalue.TaggedOutput(SOURCES,
                                                   source_outcome(item.sample, item.outcome))
                continue
            if self._analyzed and item.split == ANALYZED_SPLIT:
                yield beam.pvalue.TaggedOutput(ANALYZED, ExampleEncoder.kept(item.serialized,
                                                                             self._analyzed))
            ready = self._transformer.add(item) if self._transformer else (item,)
            yield from self._write(ready, shards)

    def _flush(self, shards) -> Iterator:
        """What the transform still holds, written at the end of the unit."""
        if self._transformer is not None:
            yield from self._write(self._transformer.flush(), shards)

    def _write(self, examples, shards) -> Iterator:
        for example in examples:
            if shards is not None:
                shards.write(example.split, example.serialized)
            if self._options.emit_examples:
                yield example


class _ConvertSplittableFn(SplittableUnits, _ConvertFn):
    """The same over a splittable reader: a restriction split off a unit writes
    shards of its own, ordered after the unit's earlier keys."""

    def process(self, unit: WorkUnit, tracker=beam.DoFn.RestrictionParam(),
                transform_staged=None, **decided):  # noqa: ARG002 - as _ConvertFn.process
        self._decided = decided_of(self._decided, **decided)
        start = tracker.current_restriction().start
        yield from self._convert(unit, (unit.index, start), tracker)


@beam.typehints.with_input_types(Any)
@beam.typehints.with_output_types(Example)
class _ConvertElementsFn(_ConvertFn):
    """A PCollection's elements (Samples, feature dicts or serialized
    tf.train.Examples) -> shards rolled per bundle, and the bundle's receipt
    when it ends. A bundle is named by a random number, which orders its shards
    at commit: a PCollection has no order of its own to keep."""

    def __init__(self, recipe: ExampleRecipe, options: ConvertOptions):
        super().__init__(None, recipe, options)

    def start_bundle(self):
        self._work = self._bundle = self._bundle_shards = None

    def process(self, element):
        if self._work is None:
            self._bundle = random.getrandbits(62)
            self._work = self._driver.start(_OBSERVERS)
            self._bundle_shards = self._shards((self._bundle,))
        yield from self._route(self._driver.take(as_event(element), self._work),
                               self._bundle_shards)

    def finish_bundle(self):
        if self._work is None:
            return
        for example in self._flush(self._bundle_shards):
            yield GlobalWindows.windowed_value(example)
        receipt = _receipt(self._work, self._bundle, None, (), (), self._bundle_shards)
        yield beam.pvalue.TaggedOutput(RECEIPTS, GlobalWindows.windowed_value(receipt))


class ConvertElements(beam.PTransform):
    """A PCollection of Samples, feature dicts or serialized tf.train.Examples ->
    shards written where their examples are built, one rolling set per bundle;
    outputs as ConvertUnits."""

    def __init__(self, recipe: ExampleRecipe, options: ConvertOptions):
        super().__init__()
        self._recipe = recipe
        self._options = options

    def expand(self, elements):
        return elements | "ConvertBundles" >> beam.ParDo(
            _ConvertElementsFn(self._recipe, self._options)).with_outputs(
                RECEIPTS, SOURCES, main="examples")


# What a sample is, by the worst its cut examples say: a failed one fails it.
_STATE_RANK = {"failed": 0, "written": 1, "filtered": 2}
# Why a sample the cut gave examples is filtered when none of them reached the
# writer, and the examples a step between the cut and the writer dropped.
DROPPED = "dropped_by_your_step"


class _SampleState(beam.CombineFn):
    """One sample's SourceOutcomes (of its cut examples that reached the writer)
    and CutCounts (what CutSamples cut of it, a dead letter's) -> its tallies:
    read, and written, filtered or failed; and the examples cut but not
    arrived, filtered as DROPPED. Accumulator: (worst outcome, examples
    arrived, examples cut or None, failed, why the cut gave none)."""

    def create_accumulator(self):
        return None, 0, None, False, "no_examples"

    def add_input(self, accumulator, element):
        return self.merge_accumulators([accumulator, (
            (element, 1, None, False, "no_examples") if isinstance(element, SourceOutcome)
            else (None, 0, element.examples, element.failed, element.empty))])

    def merge_accumulators(self, accumulators):
        worst, arrived, cut, failed, empty = None, 0, None, False, "no_examples"
        for outcome, n, examples, broke, why in accumulators:
            if outcome is not None and (worst is None or (
                    _STATE_RANK[outcome.state], outcome.detail)
                    < (_STATE_RANK[worst.state], worst.detail)):
                worst = outcome
            arrived += n
            cut = examples if cut is None else max(cut, examples if examples is not None else 0)
            failed = failed or broke
            if why != "no_examples":   # a sample has one CutCount: its reason, if it gave one
                empty = why
        return worst, arrived, cut, failed, empty

    def extract_output(self, accumulator):
        worst, arrived, cut, failed, empty = accumulator
        if failed or (worst is not None and worst.state == "failed"):
            what = Tally(Kind.FAILED, SAMPLE)
        elif worst is not None:
            what = Tally(Kind.WRITTEN if worst.state == "written" else Kind.FILTERED,
                         worst.detail)
        else:
            what = Tally(Kind.FILTERED, DROPPED if cut else empty)
        tallies = [(Tally(Kind.READ), 1), (what, 1)]
        dropped = max(0, (cut or 0) - arrived)
        if dropped:
            tallies += [(Tally(Kind.CUT_EXAMPLES_READ), dropped),
                        (Tally(Kind.CUT_EXAMPLES_FILTERED, DROPPED), dropped)]
        return tallies


class SampleOutcomes(beam.PTransform):
    """SourceOutcomes of cut examples, and CutCounts of their samples (what
    CutSamples cut, a failed sample's dead letter) -> the tallies of their
    samples, each counted once: read, and written, filtered or failed, and
    the cut examples a step between dropped. Only small records, keyed by
    sample, are shuffled."""

    def expand(self, outcomes):
        return (outcomes
                | "BySample" >> beam.Map(lambda o: ((o.url, o.key), o))
                | "SampleState" >> beam.CombinePerKey(_SampleState())
                # ((url, key), its tallies)
                | "SampleTallies" >> beam.FlatMap(lambda kv: kv[1]))


class ConvertUnits(beam.PTransform):
    """Work units -> shards written where their examples are built (see the module
    docstring for the outputs).

    `decisions` are what the job decided before converting (the stratified
    splits, the copies --duplicates drop drops, the keys given more than
    once: transforms/sources/units.py); `transform_staged` the PCollection
    that holds an element once a tf.Transform is staged in
    `options.transform_dir`.
    """

    def __init__(self, reader, recipe: ExampleRecipe, options: ConvertOptions,
                 decisions: Decisions = NO_DECISIONS,
                 transform_staged: beam.PCollection | None = None):
        super().__init__()
        self._reader = reader
        self._recipe = recipe
        self._options = options
        self._decisions = decisions
        self._staged = transform_staged

    def expand(self, units):
        side = self._decisions.sides()
        if self._staged is not None:
            side["transform_staged"] = beam.pvalue.AsList(self._staged)
        reader = streaming(self._reader)
        fn = (_ConvertSplittableFn if reader.splittable else _ConvertFn)(
            reader, self._recipe, self._options)
        return units | "ConvertUnits" >> beam.ParDo(fn, **side).with_outputs(
            RECEIPTS, ANALYZED, main="examples")
