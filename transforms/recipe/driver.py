"""One work unit's samples through the recipe: the per-sample loop, written once.

Beam-free. Every pass that runs the recipe over a unit's samples - the
converter (transforms/writer/convert.py), the dry run, the duplicates pass
(`--duplicates drop`), tf.Transform's analysis, the stratified splits' pass
(`groups`: up to the split only), CutSamples (`cut_element`: the cut alone)
- drives it here, so a
reader's dead letter, a recording's segments, a key given twice, a sample
`--duplicates drop` drops and the generator's outcome are handled alike in
each of them:

    driver = SampleDriver(recipe, count=counter_of)   # configuration: pickles
    driver.setup()                                    # the encoder, the user's functions
    work = driver.start(observers=(SPLIT_GROUPS, KEYS))
    for event in reader.read(unit):                   # Samples, Failed, serialized examples
        for item in driver.take(event, work, decided):
            ...                                       # an Example to write, or a Converted

`take` yields each example as it is built (a long recording streams
through), then a `Converted` saying what became of the sample (segment, cut
example); the unit's `UnitWork` keeps its tallies, dead letters, what its
observers learned of each converted sample (transforms/recipe/observers.py:
its groups, content fingerprints, keys) and its measures' accumulators
(transforms/recipe/measures/, each example fed to them as it is built) for
its receipt. What the job decided before the pass (`Decided`:
the stratified splits, the copies --duplicates drop drops, the keys given
more than once) is the same for every pass.

A unit's tallies are {Tally: n} (transforms/recipe/accounting.py: what
became of its samples, a recording's segments, the examples a cut already
made), the samples of cut examples counted by the writer from their
SourceOutcomes; the final step adds them up into the manifest's accounting.
"""

from __future__ import annotations

import collections
import dataclasses
import types
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from transforms.format.dead_letters import (
    DUPLICATE_KEY,
    EXAMPLE,
    SAMPLE,
    SEGMENT,
    StorageReadError,
    dead_letter,
)
from transforms.format.encoder import ExampleEncoder
from transforms.format.keys import KeyPlace, given_again_message, places_text
from transforms.format.outputs import CutCount
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
from transforms.media.allocator import reuse_freed_memory
from transforms.media.cutting import CutOptions, cut_sample, empty_reason
from transforms.recipe.accounting import Kind, Tally
from transforms.recipe.examples import (
    Example,
    ExampleRecipe,
    Filtered,
    SampleOutcome,
    StageError,
    admit_sample,
    convert_sample,
    convert_serialized,
    examples_filtered,
    recipe_samples,
)
from transforms.recipe.segments import overlapping
from transforms.recipe.splits import Strata
from transforms.recipe.units import Failed

__all__ = ["Converted", "Decided", "NOTHING_DECIDED", "SampleDriver", "SourceOutcome", "UnitWork",
           "as_event", "cut_element", "source_outcome"]


_READ, _CUT_EXAMPLE_READ = Tally(Kind.READ), Tally(Kind.CUT_EXAMPLES_READ)
_SEGMENT_FAILED = Tally(Kind.FAILED, SEGMENT)


class SourceOutcome(NamedTuple):
    """What became of the sample (url, key) a cut example came from, as far as
    that example says: `state` written (in `detail`, the split), filtered
    (`detail` the reason) or failed."""

    url: str
    key: str
    state: str
    detail: str = ""


class Converted(NamedTuple):
    """One input of a unit converted: the sample (a segment, a cut example),
    what became of it, and what it is (SAMPLE, SEGMENT, EXAMPLE)."""

    sample: Mapping[str, Any]
    outcome: SampleOutcome
    unit: str


class Decided(NamedTuple):
    """What the job decided before a pass over its units, the same for every
    pass: the stratified splits (`strata`), the (url, key) of the copies
    --duplicates drop drops (`dropped`), and the keys given more than once
    (`repeated`: key -> (times, its places in words); transforms/checks/keys.py),
    every sample of which is a dead letter."""

    strata: Strata | None = None
    dropped: frozenset = frozenset()
    repeated: Mapping[str, tuple] = types.MappingProxyType({})


NOTHING_DECIDED = Decided()


@dataclasses.dataclass
class UnitWork:
    """One unit's conversion so far: its tallies, dead letters, (KeyedObserver,
    its records) pairs and (Measure, accumulator) pairs."""

    tallies: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: list = dataclasses.field(default_factory=list)
    observing: tuple = ()
    measured: tuple = ()

    def observations(self) -> tuple:
        """(name, records kept) of each observer: what the receipt carries."""
        return tuple((observer.name, observer.kept(records))
                     for observer, records in self.observing)

    def measures(self) -> tuple:
        """(name, accumulator as JSON) of each measure: what the receipt carries."""
        return tuple((measure.name, measure.to_json(accumulator))
                     for measure, accumulator in self.measured)


# What an outcome is tallied as, written or filtered, by what was converted:
# a sample, a recording's segment, or an example a cut already made.
_OUTCOME_KINDS = {SAMPLE: (Kind.WRITTEN, Kind.FILTERED),
                  SEGMENT: (Kind.SEGMENTS_WRITTEN, Kind.SEGMENTS_FILTERED),
                  EXAMPLE: (Kind.CUT_EXAMPLES_WRITTEN, Kind.CUT_EXAMPLES_FILTERED)}


def _outcome_tallies(outcome: SampleOutcome, unit: str = SAMPLE) -> collections.Counter:
    """A sample's (or with `unit` SEGMENT, a segment's; EXAMPLE, a cut
    example's) {Tally: n} (its read is counted by the caller)."""
    tallies = collections.Counter()
    if outcome.examples:
        tallies[Tally(Kind.EXAMPLES, outcome.split)] = outcome.examples
    written, filtered = _OUTCOME_KINDS[unit]
    if outcome.failure is not None:
        # A cut example's failure fails its sample too: counted once, as the sample's.
        tallies[Tally(Kind.CUT_EXAMPLES_FAILED) if unit == EXAMPLE
                else Tally(Kind.FAILED, unit)] = 1
    elif outcome.filtered is not None:
        tallies[Tally(filtered, outcome.filtered)] = 1
    else:
        tallies[Tally(written, outcome.split)] = 1
    return tallies


def _given_again(segments: list, decided: Decided) -> Mapping[str, tuple]:
    """The keys given more than once, the job's and those of the recording's
    `segments` that its annotation gives twice (two lines of one time): its
    other segments' keys are its own, unique as its key is."""
    counts = collections.Counter(segment[KEY] for segment in segments)
    if all(n == 1 for n in counts.values()):
        return decided.repeated
    places = collections.defaultdict(list)
    for index, segment in enumerate(segments):
        if counts[segment[KEY]] > 1:
            places[segment[KEY]].append(KeyPlace(segment[SPAN].recording, index,
                                                 f"segment {index + 1}"))
    return collections.ChainMap({key: (len(found), places_text(found))
                                 for key, found in places.items()}, decided.repeated)


def as_event(element) -> dict | bytes | Failed:
    """An element of a PCollection as a Sample (`as_sample`) or a serialized
    example's bytes, or the dead letter of one that is neither."""
    if isinstance(element, (bytes, bytearray, memoryview)):
        return bytes(element)
    try:
        return as_sample(element, nor="a serialized tf.train.Example")
    except TypeError as e:
        return Failed.of("read_element", e, url="")


def _outcome_only(outcome: SampleOutcome):
    """A sample's examples and outcome, as convert_sample gives them, when it
    gives no example."""
    yield from ()
    return outcome


def source_outcome(example: Mapping[str, Any], outcome: SampleOutcome) -> SourceOutcome:
    """The SourceOutcome a cut example gives its sample (itself, when it names none)."""
    source = example.get(SOURCE_KEY, example.get(KEY))
    key = source.decode("utf-8", "replace") if isinstance(source, bytes) else str(source)
    url = example.get(URL, "")
    if outcome.failure is not None:
        return SourceOutcome(url, key, "failed")
    if outcome.filtered is not None:
        return SourceOutcome(url, key, "filtered", outcome.filtered)
    return SourceOutcome(url, key, "written", outcome.split)


def cut_element(element, cut: CutOptions) -> Iterator[dict | Failed | CutCount]:
    """The example dicts `cut` makes of one element (a Sample), each keyed
    `<sample key>#<n>`, for steps of the user's before the writer
    (CutSamples); then the sample's CutCount, after its dead letter when it
    failed (or the element's dead letter, when it is no Sample)."""
    try:
        sample = as_sample(element)
    except TypeError as e:
        yield Failed.of("read_element", e, url="")
        return
    key, url, emitted, stats = sample[KEY], sample.get(URL, ""), 0, {}
    try:
        for example in cut_sample(sample, cut, stats):
            yield {**example, KEY: f"{key}#{emitted}"}
            emitted += 1
    except StorageReadError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure of the data becomes a dead letter
        yield Failed.of(getattr(e, "stage", "cut"), e, url=url, key=key,
                        member=getattr(e, "member", None), examples_written=emitted)
        yield CutCount(url, str(key), emitted, True)
        return
    yield CutCount(url, str(key), emitted, empty=empty_reason(stats))


class SampleDriver:
    """Runs the recipe over a unit's reader events (module docstring);
    configuration until setup(), so it pickles to workers.

    `spec` is what examples are encoded with (the recipe's, or the features
    an analysis reads); `splits`, when given, the only splits whose examples
    are built (a sample of another stops at its split); `elements_are_examples`
    takes each element as an example a cut made (SOURCE_KEY names its
    sample); `count(name, n)` is told each counter's increments (Beam's, on a
    worker); with `measure`, each example is fed to the recipe's measures
    (ExampleRecipe.every_measure), as a job that writes does.
    """

    def __init__(self, recipe: ExampleRecipe, *, spec: FeatureSpec | None = None,
                 splits: frozenset | None = None, elements_are_examples: bool = False,
                 count: Callable[[str, int], None] | None = None, measure: bool = False):
        self._recipe = recipe
        self._spec = spec or recipe.spec
        self._splits = splits
        self._measures = recipe.every_measure if measure else ()
        self._unit = EXAMPLE if elements_are_examples else SAMPLE
        self._count_with = count

    def setup(self) -> None:
        """Makes the encoder and loads the user's functions: once per worker
        (whose malloc then reuses the large blocks a recording's arrays take:
        transforms/media/allocator.py)."""
        reuse_freed_memory()
        self._encoder = ExampleEncoder([(f.name, f.kind) for f in self._spec])
        self._sample_fn, self._example_fn = self._recipe.load_functions()

    def start(self, observers: tuple = ()) -> UnitWork:
        """A unit's (or a bundle's) conversion, each converted sample told to
        `observers` (KeyedObservers) for the receipt."""
        return UnitWork(observing=tuple((observer, []) for observer in observers),
                        measured=tuple((m, m.create()) for m in self._measures))

    def _count(self, name: str, n: int = 1) -> None:
        if self._count_with is not None and n:
            self._count_with(name, n)

    def take(self, event, work: UnitWork,
             decided: Decided = NOTHING_DECIDED) -> Iterator[Example | Converted]:
        """One reader event (a Sample, a serialized example, or a Failed) into
        `work`: its examples as they are built, then what became of it, as
        `decided` says (a key given more than once fails, a copy --duplicates
        drop drops is filtered as a duplicate)."""
        if isinstance(event, Failed):
            record = event.record
            work.tallies[Tally(Kind.FAILED, record["unit"])] += 1
            if record["unit"] == SAMPLE:  # a file that yielded no sample was not a read
                work.tallies[_READ] += 1
            work.failures.append(record)
            return
        unit = self._unit
        work.tallies[_CUT_EXAMPLE_READ if unit == EXAMPLE else _READ] += 1
        if isinstance(event, bytes):
            key = content_key(event)
            examples = convert_serialized(event, key, self._recipe, decided.strata,
                                          work.measured)
            yield from self._converted({KEY: key}, examples, work, {}, unit)
        elif not self._recipe.segments.enabled:
            yield from self._sample(event, work, decided, unit)
        else:
            yield from self._segments(event, work, decided)

    def groups(self, event, decided: Decided = NOTHING_DECIDED) -> Iterator[tuple]:
        """(group key, label) of each sample (segment) a reader event gives, as
        the split will see it, for stratified splits; none for one that fails,
        is dropped before its split (`admit_sample`: the converter's own steps)
        or has a key given more than once (converting it says so)."""
        if isinstance(event, Failed):
            return
        try:
            samples = list(recipe_samples(event, self._recipe))
        except StageError:
            return
        repeated = _given_again(samples, decided)
        plan = self._recipe.split_plan
        for sample in samples:
            if sample.get(KEY) in repeated:
                continue
            try:
                admitted = admit_sample(sample, self._recipe, self._sample_fn)
                if isinstance(admitted, Filtered):
                    continue
                yield plan.group_key(admitted), plan.label(admitted)
            except (StageError, ValueError):
                continue

    def _segments(self, recording: dict, work: UnitWork, decided: Decided) -> Iterator:
        """A recording's segments, each converted as a sample; the recording
        counts as segmented, filtered (no segments) or failed (unreadable ones).
        A listing row giving its segment in columns (a NeMo manifest's offset
        and duration) is that segment: it fails with it (failed_by_segment)."""
        try:
            segments = list(recipe_samples(recording, self._recipe))
        except StageError as e:
            work.tallies[Tally(Kind.FAILED, SAMPLE)] += 1
            work.failures += self._letters(recording, SampleOutcome(failure=e), {}, SAMPLE)
            return
        if not segments:
            work.tallies[Tally(Kind.FILTERED, "no_segments")] += 1
            self._count("samples_filtered")
            return
        work.tallies[Tally(Kind.SEGMENTS_OVERLAPPING)] += overlapping(segments)
        failed_before = work.tallies[_SEGMENT_FAILED]
        decided = decided._replace(repeated=_given_again(segments, decided))
        for segment in segments:
            work.tallies[Tally(Kind.SEGMENTS_READ)] += 1
            yield from self._sample(segment, work, decided, SEGMENT)
        if self._recipe.segments.columns and work.tallies[_SEGMENT_FAILED] > failed_before:
            work.tallies[Tally(Kind.FAILED_BY_SEGMENT)] += 1
            self._count("samples_failed")
        else:
            work.tallies[Tally(Kind.SEGMENTED)] += 1
            self._count("samples_written")

    def _sample(self, sample: dict, work: UnitWork, decided: Decided, unit: str) -> Iterator:
        """A sample's (segment's, cut example's) examples and outcome: a dead
        letter when its key is given more than once, filtered when it is a
        copy to drop."""
        stats: dict = {}
        key = sample.get(KEY)
        repeated = decided.repeated.get(key)
        if repeated is not None:
            examples = _outcome_only(SampleOutcome(failure=StageError(
                DUPLICATE_KEY, ValueError(given_again_message(key, *repeated)))))
        else:
            if (sample.get(URL, ""), key) in decided.dropped:
                examples = _outcome_only(SampleOutcome(filtered="duplicate"))
            else:
                examples = convert_sample(sample, self._recipe, self._encoder, self._sample_fn,
                                          self._example_fn, stats, decided.strata, self._splits,
                                          work.measured)
        yield from self._converted(sample, examples, work, stats, unit)

    def _converted(self, sample: Mapping, examples, work: UnitWork, stats: dict,
                   unit: str) -> Iterator:
        """A sample's (segment's, cut example's) examples, then its Converted;
        its tallies, dead letter and what the observers learn kept in `work`."""
        while True:
            try:
                yield next(examples)
            except StopIteration as done:
                outcome = done.value
                break
        work.tallies.update(_outcome_tallies(outcome, unit))
        for reason, n in examples_filtered(stats).items():
            work.tallies[Tally(Kind.EXAMPLES_FILTERED, reason)] += n
        for observer, records in work.observing:
            records.extend(observer.observe(sample, outcome))
        work.failures += self._letters(sample, outcome, stats, unit)
        yield Converted(sample, outcome, unit)

    def _letters(self, sample, outcome: SampleOutcome, stats: dict, unit: str) -> list:
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
