"""Work units to shards, written where the examples are built.

    converted = units | "Convert" >> ConvertUnits(reader, recipe, options)
    converted[RECEIPTS]  # a UnitReceipt per unit (transforms/writer/ledger.py)
    converted.examples   # the Examples themselves, only with options.emit_examples

One DoFn reads a unit (transforms/sources/units.py), runs the recipe on each sample
(transforms/recipe/examples.py), applies a staged tf.Transform when there is one, and
streams the examples into rolling per-split shards (transforms/writer/rolling_shards.py)
in the order they are built. No example leaves the worker: only the unit's
receipt goes on to the final step, a few numbers per shard and per unit, so
nothing the size of the data is shuffled or held, memory stays flat and every
worker writes. The examples
are output as well only when something downstream needs them (the hash-ordered
global layout, or an examples table).

A unit's receipt holds its tallies, {(what, detail): n} with `what` one of read,
written, examples, label, duration, duration_ms, characters (of transcripts),
augmented_examples and augment_* (augmented copies), filtered, failed, and for a
recording cut into segments (transforms/recipe/segments.py) segmented and
segments_read, segments_written, segments_filtered, segments_overlapping (a
failed segment is ("failed", "segment"))
(transforms/writer/finalise.py adds them up
and checks samples read = written + filtered + failed, and the same of
segments), the distinct
(group key, split) pairs the leakage check needs, its written samples'
content fingerprints (transforms/writer/duplicates.py), the sums of its
examples' feature statistics per split (transforms/recipe/statistics.py),
its shards and its dead letters. With shards written here, the receipt is
also written into the run's folder once they are closed, so a rerun with
--resume can skip the unit.

A PCollection's elements may be examples a cut already made (CutSamples'
dicts, `ConvertOptions.elements_are_examples`): each is then tallied as a
cut example (cut_examples_read, _written, _filtered, _failed) and its
SourceOutcome, under SOURCES, says what became of the sample it was cut from
(`source_key`), so the final step counts samples, not windows.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from typing import Any, Iterator, Mapping, NamedTuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from transforms.format.dead_letters import DUPLICATE_KEY, EXAMPLE, SAMPLE, SEGMENT, dead_letter
from transforms.format.durations import duration_bin
from transforms.format.encoder import ExampleEncoder
from transforms.format.sample import (
    CONTENT_KEY_PREFIX,
    KEY,
    SOURCE_KEY,
    SPAN,
    URL,
    as_sample,
    content_key,
)
from transforms.format.spec import FeatureSpec
from transforms.format.text import preview
from transforms.recipe.examples import (
    Example,
    ExampleRecipe,
    SampleOutcome,
    StageError,
    convert_sample,
    convert_serialized,
    recipe_samples,
)
from transforms.recipe.segments import overlapping
from transforms.recipe.statistics import add_moments
from transforms.runner.counters import counter
from transforms.sources.units import TARGET_BYTES, Failed, SplittableUnits, WorkUnit, streaming
from transforms.writer.ledger import UnitReceipt, write_receipt
from transforms.writer.rolling_shards import RollingShards

__all__ = ["ConvertElements", "ConvertOptions", "ConvertUnits", "KEYS", "RECEIPTS", "SOURCES",
           "SampleOutcomes", "SourceOutcome", "outcome_tallies"]

RECEIPTS = "receipts"
SOURCES = "sources"
# A PCollection's elements' (url, key), each once: a key given twice is refused.
KEYS = "keys"


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """Where the built examples go; pickled to workers, so configuration only."""

    temp_dir: str
    compression: str = "none"
    target_shard_bytes: int = TARGET_BYTES
    write_shards: bool = True       # roll shards where the examples are built
    emit_examples: bool = False     # also output them (global layout, an examples sink)
    # A tf.Transform staged here (transforms/tft/stage.py) is applied to
    # every example first; `transformed_spec` is its output's spec.
    transform_dir: str | None = None
    transformed_spec: FeatureSpec | None = None
    passed_through: frozenset = frozenset()   # raw features the transform outputs unchanged
    # A PCollection's elements are examples a cut made, not samples (module docstring).
    elements_are_examples: bool = False


class SourceOutcome(NamedTuple):
    """What became of the sample (url, key) a cut example came from, as far as
    that example says: `state` written (in `detail`, the split), filtered
    (`detail` the reason) or failed."""

    url: str
    key: str
    state: str
    detail: str = ""


@dataclasses.dataclass
class _Work:
    """One unit's conversion so far: its shards, tallies, groups and dead letters."""

    shards: RollingShards | None
    tallies: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    groups: set = dataclasses.field(default_factory=set)
    failures: list = dataclasses.field(default_factory=list)
    fingerprints: list = dataclasses.field(default_factory=list)
    keys_seen: set | None = None    # (url, key) converted, when a repeat is a dead letter
    moments: dict = dataclasses.field(default_factory=dict)   # (split, feature) -> Moments

    def receipt(self, unit: int, span: tuple | None, inputs: tuple,
                versions: tuple) -> UnitReceipt:
        """The finished unit's receipt; closes its shards."""
        return UnitReceipt(
            unit, span, inputs, tuple(sorted(self.tallies.items(), key=repr)),
            tuple(sorted(self.groups, key=repr)),
            tuple(self.shards.close()) if self.shards else (), tuple(self.failures), versions,
            tuple(self.fingerprints), tuple(sorted(self.moments.items())))


# The tallies of what is converted as a sample but is not one: a recording's
# segment, or an example a cut already made.
_TALLY_PREFIX = {SEGMENT: "segments_", EXAMPLE: "cut_examples_"}


def outcome_tallies(outcome: SampleOutcome, unit: str = SAMPLE) -> dict:
    """A sample's (or with `unit` SEGMENT, a segment's; EXAMPLE, a cut
    example's) {(what, detail): n} tallies (its read is counted by the
    caller), its examples' durations among them."""
    tallies = collections.Counter()
    if outcome.examples:
        tallies[("examples", outcome.split)] = outcome.examples
        if outcome.label is not None:
            tallies[("label", (outcome.split, outcome.label))] = outcome.examples
    for seconds in outcome.durations:  # transforms/format/durations.py
        tallies[("duration", (outcome.split, duration_bin(seconds)))] += 1
        tallies[("duration_ms", outcome.split)] += round(seconds * 1000)
    for character, n in outcome.characters:  # transforms/recipe/transcripts.py
        tallies[("characters", (outcome.split, character))] = n
    tallies.update(dict(outcome.augmented))  # transforms/media/augment.py
    prefix = _TALLY_PREFIX.get(unit, "")
    if outcome.failure is not None:
        # A cut example's failure fails its sample too: counted once, as the sample's.
        tallies[("cut_examples_failed", "") if unit == EXAMPLE else ("failed", unit)] = 1
    elif outcome.filtered is not None:
        tallies[(prefix + "filtered", outcome.filtered)] = 1
    else:
        tallies[(prefix + "written", outcome.split)] = 1
    return tallies


@beam.typehints.with_input_types(WorkUnit)
@beam.typehints.with_output_types(Example)
class _ConvertFn(beam.DoFn):
    """A unit -> its shards written and its receipt (and its examples with
    `emit_examples`). The reader's clients, the encoder and the user's
    functions are made in setup(); a tf.Transform is loaded on first use, once
    the side input says it is staged."""

    def __init__(self, reader, recipe: ExampleRecipe, options: ConvertOptions):
        self._reader = reader
        self._recipe = recipe
        self._options = options

    def setup(self):
        if self._reader is not None:
            self._reader.setup()
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in self._recipe.spec])
        self._sample_fn, self._example_fn = self._recipe.load_functions()
        self._counters: dict = {}
        self._transformer = None
        self._dropped_from, self._dropped = None, frozenset()

    def teardown(self):
        if self._reader is not None:
            self._reader.teardown()

    def _count(self, name: str, n: int = 1) -> None:
        if name not in self._counters:
            self._counters[name] = counter(name)
        self._counters[name].inc(n)

    # `transform_staged` is a side input for its arrival alone: the transform is staged.
    def process(self, unit: WorkUnit, strata=None, transform_staged=None,  # noqa: ARG002
                dropped=None):
        self._drop(dropped)
        yield from self._convert(unit, (unit.index,), None, strata)

    def _drop(self, dropped) -> None:
        """Keeps the (url, key) pairs to drop as a set, made once per side input."""
        if dropped is not self._dropped_from:
            self._dropped_from, self._dropped = dropped, frozenset(map(tuple, dropped or ()))

    def _convert(self, unit: WorkUnit, order: tuple, tracker, strata) -> Iterator:
        # A key given again in the unit is a dead letter; a key range's rows have
        # unique keys and no bound on their number, so it keeps no set.
        work = self._start(order, keys_seen=None if self._reader.splittable else set())
        for event in self._reader.read(unit, tracker):
            # A Source of the user's is held to what a PCollection's elements are.
            yield from self._take(event if isinstance(event, Failed) else _as_sample(event),
                                  work, strata)
        yield from self._flush(work)
        restriction = tracker.current_restriction() if tracker else None
        receipt = work.receipt(unit.index, (restriction.start, restriction.end)
                               if restriction else None, unit.inputs, unit.versions)
        if work.shards:
            write_receipt(self._options.temp_dir, receipt)
        yield beam.pvalue.TaggedOutput(RECEIPTS, receipt)

    def _start(self, order: tuple, keys_seen: set | None = None) -> "_Work":
        """A unit's (or bundle's) conversion, its shards ordered by `order`;
        `keys_seen` (a set) to make a key given again a dead letter."""
        options = self._options
        if options.transform_dir and self._transformer is None:
            # Imported here: it loads TensorFlow, which only preprocessing needs.
            from transforms.tft.stage import ExampleTransformer
            self._transformer = ExampleTransformer(options.transform_dir, self._recipe.spec,
                                                   options.transformed_spec,
                                                   options.passed_through)
        return _Work(RollingShards(options.temp_dir, order, options.compression,
                                   options.target_shard_bytes) if options.write_shards else None,
                     keys_seen=keys_seen)

    def _take(self, event, work: "_Work", strata) -> Iterator:
        """One sample, serialized example or a reader's dead letter into `work`:
        its examples written."""
        if isinstance(event, Failed):
            record = event.record
            work.tallies[("failed", record["unit"])] += 1
            if record["unit"] == SAMPLE:  # a file that yielded no sample was not a read
                work.tallies[("read", "")] += 1
            work.failures.append(record)
            return
        unit = EXAMPLE if self._options.elements_are_examples else SAMPLE
        work.tallies[("cut_examples_read" if unit == EXAMPLE else "read", "")] += 1
        if isinstance(event, bytes):
            key = content_key(event)
            examples = convert_serialized(event, key, self._recipe, strata)
            yield from self._convert_one({KEY: key}, examples, work, {}, unit)
        elif not self._recipe.segments.enabled:
            yield from self._convert_sample(event, work, strata, unit)
        else:
            yield from self._convert_segments(event, work, strata)

    def _convert_segments(self, recording: dict, work: "_Work", strata) -> Iterator:
        """A recording's segments, each converted as a sample; the recording
        counts as segmented, filtered (no segments) or failed (unreadable ones).
        A listing row giving its segment in columns (a NeMo manifest's offset
        and duration) is that segment: it fails with it (failed_by_segment)."""
        try:
            segments = list(recipe_samples(recording, self._recipe))
        except StageError as e:
            work.tallies[("failed", SAMPLE)] += 1
            work.failures += self._count_outcome(recording, SampleOutcome(failure=e), {}, SAMPLE)
            return
        if not segments:
            work.tallies[("filtered", "no_segments")] += 1
            self._count("samples_filtered")
            return
        work.tallies[("segments_overlapping", "")] += overlapping(segments)
        failed_before = work.tallies[("failed", SEGMENT)]
        for segment in segments:
            work.tallies[("segments_read", "")] += 1
            yield from self._convert_sample(segment, work, strata, SEGMENT)
        if self._recipe.segments.columns and work.tallies[("failed", SEGMENT)] > failed_before:
            work.tallies[("failed_by_segment", "")] += 1
            self._count("samples_failed")
        else:
            work.tallies[("segmented", "")] += 1
            self._count("samples_written")

    def _convert_sample(self, sample: dict, work: "_Work", strata, unit: str) -> Iterator:
        stats: dict = {}
        identity = (sample.get(URL, ""), sample.get(KEY))
        if work.keys_seen is not None and identity in work.keys_seen:
            examples = _outcome_only(SampleOutcome(failure=StageError(DUPLICATE_KEY, ValueError(
                f"key {identity[1]!r} given again in {identity[0] or 'the unit'}: each sample "
                "needs its own __key__ (examples are named, ordered and split by it)"))))
        elif identity in self._dropped:
            examples = _outcome_only(SampleOutcome(filtered="duplicate"))
        else:
            if work.keys_seen is not None:
                work.keys_seen.add(identity)
            examples = convert_sample(sample, self._recipe, self._encoder, self._sample_fn,
                                      self._example_fn, stats, strata)
        yield from self._convert_one(sample, examples, work, stats, unit)

    def _convert_one(self, sample: dict, examples, work: "_Work", stats: dict,
                     unit: str) -> Iterator:
        """A sample's (segment's, cut example's) examples written; its tallies,
        groups and dead letter kept in `work`; a cut example's SourceOutcome
        output."""
        outcome = yield from self._deliver(examples, work.shards)
        if unit == EXAMPLE:
            yield beam.pvalue.TaggedOutput(SOURCES, _source_outcome(sample, outcome))
        work.tallies.update(outcome_tallies(outcome, unit))
        if outcome.examples:
            work.groups.add((outcome.group, outcome.split))
            work.fingerprints += [(kind, digest, outcome.split, sample.get(KEY),
                                   sample.get(URL, "")) for kind, digest in outcome.fingerprints]
        for feature, moments in outcome.moments:
            key = (outcome.split, feature)
            work.moments[key] = add_moments(work.moments.get(key), moments)
        work.failures += self._count_outcome(sample, outcome, stats, unit)

    def _flush(self, work: "_Work") -> Iterator:
        """What the transform still holds, written at the end of the unit."""
        if self._transformer is not None:
            yield from self._write(self._transformer.flush(), work.shards)

    def _deliver(self, examples, shards):
        """Routes each example (through the transform, if any) and returns the
        generator's result, the sample's outcome."""
        while True:
            try:
                example = next(examples)
            except StopIteration as done:
                return done.value
            ready = self._transformer.add(example) if self._transformer else (example,)
            yield from self._write(ready, shards)

    def _write(self, examples, shards) -> Iterator:
        for example in examples:
            if shards is not None:
                shards.write(example.split, example.serialized)
            if self._options.emit_examples:
                yield example

    def _count_outcome(self, sample, outcome: SampleOutcome, stats: dict, unit: str) -> list:
        """Counters for one sample (or segment); its dead letter when it failed."""
        self._count("examples_written", outcome.examples)
        for name, n in stats.items():
            self._count(name, n)
        counted = {SEGMENT: "segments", EXAMPLE: "cut_examples"}.get(unit, "samples")
        if outcome.failure is not None:
            self._count(f"{counted}_failed")
            error = outcome.failure
            # A sample that failed while its examples were built says how many stay.
            extra = {} if outcome.split is None else {"examples_written": outcome.examples}
            if unit == SEGMENT:
                span = sample[SPAN]
                extra["segment"] = {"recording": span.recording, "index": sample["segment.index"],
                                    "start": span.start, "end": span.end}
            if str(sample.get(KEY, "")).startswith(CONTENT_KEY_PREFIX):
                # A dict keyed by its digest: what it held says which one it was.
                extra["element"] = preview({k: v for k, v in sample.items() if k != KEY}, 200)
            return [dead_letter(error.stage, error.cause, url=sample.get(URL, ""),
                                key=sample.get(KEY), member=error.member, unit=unit, **extra)]
        self._count(f"{counted}_filtered" if outcome.filtered else f"{counted}_written")
        return []


class _ConvertSplittableFn(SplittableUnits, _ConvertFn):
    """The same over a splittable reader: a restriction split off a unit writes
    shards of its own, ordered after the unit's earlier keys."""

    def process(self, unit: WorkUnit, tracker=beam.DoFn.RestrictionParam(), strata=None,
                transform_staged=None, dropped=None):  # noqa: ARG002 - as _ConvertFn.process
        self._drop(dropped)
        start = tracker.current_restriction().start
        yield from self._convert(unit, (unit.index, start), tracker, strata)


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
        self._work = self._bundle = None

    def process(self, element):
        if self._work is None:
            self._bundle = random.getrandbits(62)
            self._work = self._start((self._bundle,))
        sample = _as_sample(element)
        if isinstance(sample, dict):
            yield beam.pvalue.TaggedOutput(KEYS, (sample.get(URL, ""), sample[KEY]))
        yield from self._take(sample, self._work, None)

    def finish_bundle(self):
        if self._work is None:
            return
        for example in self._flush(self._work):
            yield GlobalWindows.windowed_value(example)
        receipt = self._work.receipt(self._bundle, None, (), ())
        yield beam.pvalue.TaggedOutput(RECEIPTS, GlobalWindows.windowed_value(receipt))


def _source_outcome(example: Mapping[str, Any], outcome: SampleOutcome) -> SourceOutcome:
    """The SourceOutcome a cut example gives its sample (itself, when it names none)."""
    source = example.get(SOURCE_KEY, example.get(KEY))
    key = source.decode("utf-8", "replace") if isinstance(source, bytes) else str(source)
    url = example.get(URL, "")
    if outcome.failure is not None:
        return SourceOutcome(url, key, "failed")
    if outcome.filtered is not None:
        return SourceOutcome(url, key, "filtered", outcome.filtered)
    return SourceOutcome(url, key, "written", outcome.split)


def _outcome_only(outcome: SampleOutcome):
    """A sample's examples and outcome, as convert_sample gives them, when it
    gives no example."""
    yield from ()
    return outcome


def _as_sample(element) -> dict | bytes | Failed:
    """An element of a PCollection as a Sample (`as_sample`) or a serialized
    example's bytes, or the dead letter of one that is neither."""
    if isinstance(element, (bytes, bytearray, memoryview)):
        return bytes(element)
    try:
        return as_sample(element, nor="a serialized tf.train.Example")
    except TypeError as e:
        return Failed.of("read_element", e, url="")


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
                RECEIPTS, SOURCES, KEYS, main="examples")


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
    arrived, examples cut or None, failed)."""

    def create_accumulator(self):
        return None, 0, None, False

    def add_input(self, accumulator, element):
        return self.merge_accumulators([accumulator, (
            (element, 1, None, False) if isinstance(element, SourceOutcome)
            else (None, 0, element.examples, element.failed))])

    def merge_accumulators(self, accumulators):
        worst, arrived, cut, failed = None, 0, None, False
        for outcome, n, examples, broke in accumulators:
            if outcome is not None and (worst is None or (
                    _STATE_RANK[outcome.state], outcome.detail)
                    < (_STATE_RANK[worst.state], worst.detail)):
                worst = outcome
            arrived += n
            cut = examples if cut is None else max(cut, examples if examples is not None else 0)
            failed = failed or broke
        return worst, arrived, cut, failed

    def extract_output(self, accumulator):
        worst, arrived, cut, failed = accumulator
        if failed or (worst is not None and worst.state == "failed"):
            what = ("failed", SAMPLE)
        elif worst is not None:
            what = ("written" if worst.state == "written" else "filtered", worst.detail)
        else:
            what = ("filtered", DROPPED if cut else "no_examples")
        tallies = [(("read", ""), 1), (what, 1)]
        dropped = max(0, (cut or 0) - arrived)
        if dropped:
            tallies += [(("cut_examples_read", ""), dropped),
                        (("cut_examples_filtered", DROPPED), dropped)]
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

    `strata` is the job's Strata (a singleton PCollection) for a stratified
    recipe; `transform_staged` the PCollection that holds an element once a
    tf.Transform is staged in `options.transform_dir`; `dropped` the (url,
    key) of the samples `--duplicates drop` drops (transforms/writer/duplicates.py).
    """

    def __init__(self, reader, recipe: ExampleRecipe, options: ConvertOptions,
                 strata: beam.PCollection | None = None,
                 transform_staged: beam.PCollection | None = None,
                 dropped: beam.PCollection | None = None):
        super().__init__()
        self._reader = reader
        self._recipe = recipe
        self._options = options
        self._strata = strata
        self._staged = transform_staged
        self._dropped = dropped

    def expand(self, units):
        side = {}
        if self._strata is not None:
            side["strata"] = beam.pvalue.AsSingleton(self._strata)
        if self._staged is not None:
            side["transform_staged"] = beam.pvalue.AsList(self._staged)
        if self._dropped is not None:
            side["dropped"] = beam.pvalue.AsList(self._dropped)
        reader = streaming(self._reader)
        fn = (_ConvertSplittableFn if reader.splittable else _ConvertFn)(
            reader, self._recipe, self._options)
        return units | "ConvertUnits" >> beam.ParDo(fn, **side).with_outputs(
            RECEIPTS, main="examples")
