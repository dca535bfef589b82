"""One sample in, encoded tf.Examples out: the per-sample half of every pipeline.

`recipe_samples` gives what a recipe converts: the sample, or with segments
(transforms/recipe/segments.py) one sample per segment of the recording.
`build_examples` is the pure function: where → select → rename → sample_fn →
filter empty (`prepare_sample`) → media length and duration bounds
(`admit_sample`) → split,
then lazily cut (transforms.media.cutting) → features → example_fn → filter
empty → encode → the measures (transforms/recipe/measures/). The cut streams,
so a long recording goes through in constant memory; its examples are
coerced, encoded and measured a chunk at a time, as columns (a recording's
windows as one array: one call each, not one per window).

`convert_sample` runs it to the end: it yields the sample's `Example`s and
returns its `SampleOutcome`. A sample ends in exactly one outcome: written (it
produced all its examples), filtered (with a reason), or failed, naming the
stage. A sample that fails after some examples were emitted says how many;
those examples stay in the dataset and are counted, so the shards always hold
exactly the examples built (transforms/recipe/driver.py tallies them).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Callable, Generator, Iterator, Mapping, NamedTuple

import numpy as np

from transforms.format.arguments import ArgumentError, ArgumentTypeError, check_option_types
from transforms.format.dead_letters import StorageReadError
from transforms.format.encoder import ExampleEncoder
from transforms.format.example_check import example_problems, parse_example, stored_values
from transforms.format.manifest import MANIFEST_KEYS
from transforms.format.plain import plain
from transforms.format.sample import KEY, SPAN, FieldReader, read_stored
from transforms.format.spec import FeatureSpec
from transforms.format.stable_hash import stable_hash64
from transforms.media.augment import Augmentation, new_speaker
from transforms.media.cutting import (
    CutOptions,
    cut_sample,
    empty_reason,
    hear_copy,
    media_fields,
    with_cut_features,
)
from transforms.media.decoded import NoSamples
from transforms.media.encoded import check_encoded
from transforms.media.length import MediaLength, probe_length
from transforms.media.loudness import ActivePower, Heard
from transforms.media.near_duplicates import NEAR, NearTap, near_fingerprints
from transforms.media.speech import SPEECH_TOO_SHORT
from transforms.recipe import sample_ops
from transforms.recipe.fingerprints import (
    FEATURE,
    feature_fingerprints,
    member_fingerprints,
    stream_fingerprints,
)
from transforms.recipe.keep import KEEP_PREFIX, KeepFilter
from transforms.recipe.measures import SeenExamples, check_measures
from transforms.recipe.measures.augmentation import AugmentedCopies
from transforms.recipe.measures.durations import Durations
from transforms.recipe.measures.labels import Labels
from transforms.recipe.measures.quality import QualityDistributions
from transforms.recipe.measures.statistics import Statistics
from transforms.recipe.measures.transcripts import Transcripts
from transforms.recipe.sample_watch import (
    Hashed,
    Known,
    Measured,
    SampleWatch,
    Tapped,
    one_tap,
)
from transforms.recipe.segments import SegmentOptions, segment_samples
from transforms.recipe.splits import DEFAULT_SPLITS, SplitPlan, Strata
from transforms.recipe.transcripts import TranscriptOptions

# Protobuf parses no message of 2 GiB or more: an example that large could be
# written but never read back.
PROTOBUF_LIMIT = 2**31 - 1

__all__ = ["NO_LABEL", "PROTOBUF_LIMIT", "Example", "ExampleRecipe", "SampleOutcome", "StageError",
           "admit_sample", "build_examples", "convert_sample", "convert_serialized",
           "examples_filtered", "prepare_sample", "recipe_samples"]


# The names a measure of the caller's may not take: the recipe's own measures'
# and the manifest's own entries.
_TAKEN_NAMES = (Durations.name, Labels.name, Transcripts.name, Statistics.name,
                AugmentedCopies.name, QualityDistributions.name, *sorted(MANIFEST_KEYS))


@dataclasses.dataclass(frozen=True)
class ExampleRecipe:
    """Everything that turns one sample into examples; pickles as plain configuration.

    The spec says which features an example has, after those the cut makes
    (audio windows with their sample rate, a whole sample's duration: added
    here, so the spec need name only labels and metadata); the split plan where it goes
    (by default DEFAULT_SPLITS by `__key__`); the sample operations (select,
    where, rename, drop empty, functions of the user's) what of a sample is
    kept; the cut how its media become examples; `segments` where a
    recording's segments are, when each segment is a sample of its own;
    `measures` what the job learns from every example besides the recipe's
    own (transforms/recipe/measures/), each a manifest section.

    >>> import apache_beam as beam, numpy as np, transforms as dg
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> recipe = dg.ExampleRecipe(
    ...     spec=dg.FeatureSpec.parse("label=cls:int64,emb:float[2]"),
    ...     split_plan=dg.SplitPlan.from_flags("train=0.5,test=0.5", "speaker"),
    ...     where=(("lang", "en"),))
    >>> samples = [{"__key__": f"k{i}", "cls": b"3", "emb": np.ones(2), "speaker": "s1",
    ...             "lang": lang} for i, lang in enumerate(["en", "fr", "en"])]
    >>> split = recipe.split_plan.split_of("s1")    # every example of speaker s1 goes there
    >>> with dg.make_pipeline() as p:               # the French one is filtered out
    ...     built = p | beam.Create(samples) | dg.BuildExamples(recipe)
    ...     _ = assert_that(built.examples | beam.Map(lambda e: e.split), equal_to([split] * 2))
    """

    spec: FeatureSpec
    split_plan: SplitPlan = SplitPlan.from_flags(DEFAULT_SPLITS, KEY)
    selection: sample_ops.Selection | None = None
    where: tuple = ()
    renames: tuple = ()
    filter_empty: bool = False
    sample_fn: str | None = None
    example_fn: str | None = None
    cut: CutOptions = CutOptions()
    segments: SegmentOptions = SegmentOptions()
    # Each outcome carries its sample's content fingerprints (--duplicates).
    content_fingerprints: bool = False
    # ... and the `near` signature of its audio (--near_duplicates).
    near_fingerprints: bool = False
    # The feature holding each utterance's transcript, and its normalisation.
    transcripts: TranscriptOptions = TranscriptOptions()
    measures: tuple = ()
    # (field, the names of its classes 0..n-1) the input declares (a Hugging
    # Face ClassLabel column, UnitReader.class_names): a sample's value there
    # is one of them, or -1, "no label", and the sample is filtered (`no_label`).
    class_names: tuple = ()
    # Which examples stay (transforms/recipe/keep.py): a KeepFilter, or its text.
    keep: KeepFilter | str = KeepFilter()

    def __post_init__(self):
        if not isinstance(self.spec, FeatureSpec):
            raise ArgumentTypeError("spec", f"must be a FeatureSpec (FeatureSpec.parse('...')), "
                                            f"got {type(self.spec).__name__}")
        check_option_types(self, skip=("keep",))
        # The cut's own features lead the spec, as the command line's: a spec of
        # labels and metadata is complete with them.
        features = with_cut_features(self.spec.features, self.cut)
        field = self.transcripts.field
        if not self.transcripts.dropped(self.cut.mode):
            self.transcripts.check(features, self.cut.mode)
        else:   # the manifest warns of it (`dropped_transcript`)
            features = tuple(f for f in features if f.name != field)
        if features != self.spec.features:
            object.__setattr__(self, "spec", FeatureSpec(features))
        self.segments.check(self.cut.mode)
        unknown = set(self.cut.augment.splits) - set(self.split_plan.names)
        if self.cut.augment and unknown:
            raise ArgumentError("augment.splits", f"name {', '.join(sorted(unknown))}, which "
                                f"{{splits}} does not: {', '.join(self.split_plan.names)}")
        renamed = self.cut.augment.speed_as_new_speaker
        if renamed and not any(f.name == renamed and f.dtype == "string" for f in features):
            raise ArgumentError("augment.speed_as_new_speaker", f"{renamed!r} is not a string "
                                "feature of the spec: name the speaker feature")
        object.__setattr__(self, "measures", check_measures(self.measures, _TAKEN_NAMES))
        if isinstance(self.keep, str):
            object.__setattr__(self, "keep", KeepFilter.parse(self.keep))
        if not isinstance(self.keep, KeepFilter):
            raise ArgumentTypeError("keep", "must be its text ('snr_db >= 15 and ...') or a "
                                    f"KeepFilter, got {self.keep!r}")
        self.keep.check(features)

    def describe(self) -> dict:
        """What the manifest records of the recipe (its `recipe` section), the
        same whether the command line or Python made it: the cut, its
        augmentation's corpora by their recordings' versions, the splits, the
        sample operations, the segments and the transcripts (the features are
        the manifest's `features`). Settings that change no byte written (how
        many threads decode frames, a worker's corpus cache) are left out."""
        cut = plain(self.cut)
        cut["frames"].pop("threads")
        augment = cut["augment"]
        augment.pop("cache_mb")
        corpora = self.cut.augment.describe()
        augment.update(noise=corpora.get("noise"), rirs=corpora.get("rirs"))
        return {"cut": cut, "splits": plain(self.split_plan),
                "sample_operations": {"where": plain(self.where),
                                      "select": plain(self.selection),
                                      "rename": plain(self.renames),
                                      "filter_empty": self.filter_empty,
                                      "sample_fn": self.sample_fn,
                                      "example_fn": self.example_fn},
                "segments": plain(self.segments), "transcripts": plain(self.transcripts),
                **({"keep": [str(clause) for clause in self.keep.clauses]} if self.keep else {}),
                **({"measures": [m.name for m in self.measures]} if self.measures else {}),
                **({"class_names": {field: list(names) for field, names in self.class_names}}
                   if self.class_names else {})}

    def _own_measures(self) -> tuple:
        """The measures the recipe makes of itself (`every_measure`)."""
        own = [Durations()]
        if self.split_plan.label_source:
            own.append(Labels())
        if self.transcribed:
            own.append(Transcripts(self.transcripts))
        if self.cut.measured_features:
            own.append(Statistics(self.cut.measured_features))
        if self.cut.augment:
            own.append(AugmentedCopies())
        if self.cut.quality:
            own.append(QualityDistributions(self.cut.quality,
                                            tuple(str(c) for c in self.keep.clauses)))
        return tuple(own)

    @functools.cached_property
    def every_measure(self) -> tuple:
        """What a job learns from every example it writes
        (transforms/recipe/measures/): the examples' durations, with a label
        the examples per label, with transcripts their characters, the
        statistics of the features the cut computes, with augmentation its
        copies' accounting, with quality measures their distributions, then
        `measures`."""
        return self._own_measures() + self.measures

    @property
    def dropped_transcript(self) -> str:
        """Why the transcript named is left out of the examples ('' when it is
        not): the manifest's warning."""
        if not self.transcripts.dropped(self.cut.mode):
            return ""
        return (f"the transcript {self.transcripts.field!r} is left out: {self.cut.mode} "
                "examples do not hold their utterance's words ({drop_transcript})")

    @property
    def transcribed(self) -> bool:
        """Whether its examples hold a normalised transcript (one is named, and
        the cut keeps utterances whole or the transcript is not dropped)."""
        return bool(self.transcripts) and not self.transcripts.dropped(self.cut.mode)

    @functools.cached_property
    def streamed_fields(self) -> frozenset:
        """The input fields a reader may leave stored (transforms/format/sample.py
        StoredBytes) for the cut to stream: those it decodes, unless a sample
        function or a --where term reads them first."""
        if self.sample_fn:
            return frozenset()
        renamed_from = {new: old for old, new in self.renames}
        fields = {renamed_from.get(field, field) for field in self.cut.streamed_fields}
        return frozenset(field for field in fields if not any(
            term == field or term.startswith(f"{field}.") for term, _ in self.where))

    @property
    def fingerprinted_features(self) -> tuple:
        """The features whose media fingerprints find a sample's copies: the
        media a cut makes (`content`), or with no cut each bytes feature that
        holds media (`feature`: media kept whole, under whatever field or
        key); none for a spec of text and numbers."""
        if self.cut.mode != "none":
            return self.cut.media_feature_names
        return tuple(f.name for f in self.bytes_features)

    @functools.cached_property   # asked of every sample: made once
    def bytes_features(self) -> tuple:
        """The spec's bytes features: with no cut, where media are kept whole."""
        return tuple(f for f in self.spec if f.dtype == "bytes")

    @property
    def fingerprint_kinds(self) -> tuple:
        """The content fingerprints its samples get: their media members' bytes
        (of the audio and video fields named), their video's coded streams,
        their `fingerprinted_features` (transforms/recipe/fingerprints.py), and
        when asked the landmarks of their audio (near_duplicates.py)."""
        cut = self.cut
        features = (("content" if cut.mode != "none" else FEATURE,)
                    if self.fingerprinted_features else ())
        kinds = (("bytes",) if cut.audio_fields or cut.video_field else ()) + (
            ("streams",) if cut.video_field else ()) + features
        return kinds + (NEAR,) if self.near_fingerprints else kinds

    def load_functions(self) -> tuple:
        """The user's sample and example functions (None where not given)."""
        return (self.sample_fn and sample_ops.load_function(self.sample_fn, "sample_fn"),
                self.example_fn and sample_ops.load_function(self.example_fn, "example_fn"))


class StageError(Exception):
    """A failure inside build_examples, tagged with its stage and the field it read."""

    def __init__(self, stage: str, cause: BaseException, member: str | None = None):
        super().__init__(str(cause))
        self.stage = getattr(cause, "stage", None) or stage
        self.member = member or getattr(cause, "member", None)
        self.cause = cause


@dataclasses.dataclass(frozen=True)
class Built:
    """A sample's split and its examples: a lazy iterator of (order key,
    serialized).

    `group` and `label` are the split's group key and label (--label_field or
    --stratify_by).
    """

    split: str
    examples: Iterator
    group: str | None = None
    label: str | None = None
    augmented: bool = False             # its split is augmented: copies follow its examples
    # What watches it as its examples are built (transforms/recipe/sample_watch.py).
    watch: SampleWatch = SampleWatch("", None, ())


@dataclasses.dataclass(frozen=True)
class Filtered:
    reason: str


def _stage(name: str, fn: Callable, *args, member: str | None = None):
    try:
        return fn(*args)
    except StorageReadError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure of the data becomes a dead letter
        raise StageError(name, e, member) from e


def _stage_iter(name: str, iterator: Iterator) -> Iterator:
    try:
        yield from iterator
    except StorageReadError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure of the data becomes a dead letter
        raise StageError(name, e) from e


def _feature_values(example: Mapping[str, Any], spec: FeatureSpec) -> dict:
    reader = FieldReader(example)
    values = {KEY: example.get(KEY)}
    for feature in spec:
        try:
            values[feature.name] = reader.get(feature.source)
        except KeyError as e:
            raise ValueError(f"feature {feature.name!r} is required: {e.args[0]}") from None
    return values


# Values coerced once per sample: what its examples share (its label, its
# metadata) is the very same object in each of them.
_IMMUTABLE = (bytes, str, int, float)


class _SampleCoercion:
    """One sample's examples' values -> what the encoder takes, feature by
    feature, as columns (`columns`), an image or audio file kept whole in a
    bytes feature decoded first (transforms/media/encoded.py); an immutable
    value the previous example had too is not checked and converted again."""

    def __init__(self, spec: FeatureSpec):
        self._spec = spec
        self._last: dict = {}   # feature name -> (its value, the coerced value)

    def columns(self, examples: list) -> dict:
        """The coerced values of `examples` (each one's values), a column per
        feature: the rows of one 2-D array where Feature.coerce_rows makes
        one (a recording's windows), else a list of each one's value."""
        columns = {}
        for feature in self._spec:
            values = [values[feature.name] for values in examples]
            rows = feature.coerce_rows(values) if len(values) > 1 else None
            columns[feature.name] = (rows if rows is not None
                                     else [self._one(feature, value) for value in values])
        return columns

    def _one(self, feature, value):
        last = self._last.get(feature.name)
        if last is not None and last[0] is value:
            return last[1]
        # Per feature, so a value that does not convert names the field it
        # came from (a CSV column, a JSON member) as the dead letter's member.
        coerced = _stage("encode", feature.coerce, value, member=feature.source)
        if feature.dtype == "bytes":  # media kept whole must decode, as verify decodes it
            for item in coerced:
                _stage("decode", check_encoded, item, member=feature.source)
        if type(value) in _IMMUTABLE:
            self._last[feature.name] = (value, coerced)
        return coerced


# A sample's examples are coerced, encoded and measured in chunks of at most
# this many, holding at most about this many bytes of arrays (a video clip's
# frames are large): few enough that a chunk's copy stays small.
_CHUNK_EXAMPLES = 64
_CHUNK_BYTES = 4 << 20


def _chunks(prepared: Iterator[tuple]) -> Iterator[list]:
    """Consecutive (index, values) of `prepared` in chunks; when it fails,
    the examples before the failure first, as one at a time would give them."""
    chunk, size = [], 0
    try:
        for index, values in prepared:
            chunk.append((index, values))
            size += sum(v.nbytes for v in values.values() if type(v) is np.ndarray)
            if len(chunk) == _CHUNK_EXAMPLES or size >= _CHUNK_BYTES:
                yield chunk
                chunk, size = [], 0
    except StageError:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


def _encoded(chunk: list, coerce: _SampleCoercion, encoder: ExampleEncoder,
             watch: SampleWatch) -> list:
    """The serialized examples of a chunk of (index, values), told to `watch`
    once all are encoded; StageError when one fails."""
    columns = coerce.columns([values for _, values in chunk])
    serialized = _stage("encode", encoder.encode_columns, columns, len(chunk))
    for (index, _), data in zip(chunk, serialized):
        if len(data) > PROTOBUF_LIMIT:
            raise StageError("encode", ValueError(
                f"example {index} is {len(data)} bytes; protobuf reads none over "
                f"{PROTOBUF_LIMIT} (cut the media into smaller examples)"))
    watch.examples(columns, len(chunk))
    return serialized


def _examples(sample: Mapping[str, Any], recipe: ExampleRecipe, encoder: ExampleEncoder,
              example_fn, stats: dict, built: Built) -> Iterator[tuple]:
    """(order key, serialized) for each example the sample is cut into;
    `built`'s watch is told each one's values, the audio the cut decodes and
    each augmented copy's plan."""
    coerce = _SampleCoercion(recipe.spec)
    watch = built.watch
    if not built.augmented:
        examples = cut_sample(sample, recipe.cut, stats, watch.audio_tap)
    else:
        heard = ActivePower()
        examples = itertools.chain(
            cut_sample(sample, recipe.cut, stats, one_tap(watch.audio_tap, heard)),
            _copies(sample, recipe.cut, stats, heard, built))
    key = sample[KEY]
    for chunk in _chunks(_prepared(examples, recipe, example_fn, stats, watch)):
        try:
            encoded = [(chunk, _encoded(chunk, coerce, encoder, watch))]
        except StageError:
            # One at a time: those before the one that fails stand.
            encoded = (([one], _encoded([one], coerce, encoder, watch)) for one in chunk)
        for part, serialized in encoded:
            for (index, _), data in zip(part, serialized):
                yield stable_hash64(f"{key}#{index}", b"datagen-order"), data


def _prepared(examples: Iterator[dict], recipe: ExampleRecipe, example_fn,
              stats: dict, watch: SampleWatch) -> Iterator[tuple]:
    """(index, feature values) of each example the cut makes, after
    --example_fn, the empty filter and --keep (those dropped counted in
    `stats`; those --keep removes told to `watch`)."""
    transcripts = recipe.transcripts if recipe.transcribed else None
    if transcripts is not None:
        source = next(f.source for f in recipe.spec if f.name == transcripts.field)
    renamed = recipe.cut.augment.speed_as_new_speaker
    for index, example in enumerate(_stage_iter("cut", examples)):
        values = _stage("features", _feature_values, example, recipe.spec)
        if renamed and example["aug.speed"] != 1.0 and values.get(renamed) is not None:
            values[renamed] = new_speaker(values[renamed], example["aug.speed"])
        if transcripts is not None:
            values[transcripts.field] = _stage("transcript", transcripts.normalize,
                                               values[transcripts.field], member=source)
        if example_fn is not None:
            values = _stage("example_fn", example_fn, values)
        if values is None or (recipe.filter_empty and sample_ops.is_empty(
                {f.name: values.get(f.name) for f in recipe.spec})):
            stats["examples_filtered"] = stats.get("examples_filtered", 0) + 1
            continue
        removed_by = recipe.keep.removed_by(values) if recipe.keep else None
        if removed_by is not None:
            reason = KEEP_PREFIX + removed_by
            stats[reason] = stats.get(reason, 0) + 1
            watch.removed(values, removed_by)
            continue
        yield index, values


def _copies(sample: Mapping[str, Any], cut: CutOptions, stats: dict, heard: ActivePower,
            built: Built) -> Iterator[dict]:
    """The examples of the sample's augmented copies, each planned once the
    original's examples are cut (its audio's peak and power `heard`), or,
    for a copy its plan must hear, once a first pass has measured and
    recorded its perturbed speech; each copy's plan told to `built`'s watch."""
    def hear(dry: Augmentation) -> Heard:
        return hear_copy(sample, cut, dry, stats)

    for copy in range(1, cut.augment.copies + 1):
        augmentation = cut.augment.plan(sample[KEY], copy, heard.heard(),
                                        cut.audio.sample_rate, hear)
        built.watch.copy(augmentation)
        try:
            yield from cut_sample(sample, cut, stats, None, augmentation)
        finally:
            if augmentation.mix.recorded is not None:
                augmentation.mix.recorded.close()


def recipe_samples(sample: Mapping[str, Any], recipe: ExampleRecipe) -> Iterator[Mapping]:
    """The samples the recipe converts: `sample` itself, or the sample of each
    of its segments when the recipe has segments; StageError (stage
    `segments`) when they cannot be read, before any is given."""
    if not recipe.segments.enabled:
        return iter((sample,))
    segments = recipe.segments
    return iter(_stage("segments", lambda: list(segment_samples(sample, segments)),
                       member=segments.reads[0]))


def _measured(sample: Mapping[str, Any], cut: CutOptions) -> MediaLength | None:
    """The sample's media length (a segment's: its span's); None for a
    recording of no length when --min_duration_s is set: it is below any
    minimum. Without one, such a recording is a dead letter (NoSamples), as a
    cut would make it."""
    if SPAN in sample:
        return MediaLength(sample[SPAN].end - sample[SPAN].start)
    try:
        return probe_length(sample, cut.audio_fields, cut.video_field, cut.sequence_fps)
    except NoSamples:
        if cut.min_duration_s:
            return None
        raise


def prepare_sample(sample: Mapping[str, Any], recipe: ExampleRecipe,
                   sample_fn=None) -> Mapping[str, Any] | Filtered:
    """The recipe's sample-level steps, before the split: the sample as the
    split and the cut see it, or why it is dropped; raises StageError. A field
    left stored is read now, unless the cut streams it."""
    sample = _stage("read", read_stored, sample, recipe.streamed_fields)
    if recipe.where and not _stage("where", sample_ops.matches_where, sample, recipe.where):
        return Filtered("where")
    if recipe.selection is not None:
        sample = sample_ops.select_fields(sample, recipe.selection)
    if recipe.renames:
        sample = _stage("rename", sample_ops.rename_fields, sample, recipe.renames)
    if sample_fn is not None:
        sample = _stage("sample_fn", sample_fn, dict(sample))
        if sample is None:
            return Filtered("sample_fn")
    if recipe.filter_empty and sample_ops.is_empty(sample):
        return Filtered("empty_sample")
    return sample


# Why a sample whose declared class is -1 (a Hugging Face ClassLabel's "no
# label", as `datasets` writes an unlabeled row) is filtered: -1 names no class.
NO_LABEL = "no_label"


def _unlabeled(sample: Mapping[str, Any], class_names: tuple) -> bool:
    """Whether one of the sample's declared class fields is -1; ValueError for
    a value that is none of its classes."""
    unlabeled = False
    for field, names in class_names:
        value = sample.get(field)
        if value is None:
            continue   # the spec says whether the field is needed
        number = int(value)
        if number == -1:
            unlabeled = True
        elif not 0 <= number < len(names):
            raise ValueError(f"{field} {number} is none of the {len(names)} classes its input "
                             f"declares (0..{len(names) - 1}: {', '.join(names[:5])}"
                             f"{', ...' if len(names) > 5 else ''})")
    return unlabeled


def admit_sample(sample: Mapping[str, Any], recipe: ExampleRecipe,
                 sample_fn=None) -> Mapping[str, Any] | Filtered:
    """The recipe up to the split: its declared classes (-1, no label:
    filtered), `prepare_sample`, then the media length
    against the duration bounds: the sample as the split and the cut see it
    (with no cut, its length fields added), or why it is dropped. Raises
    StageError. The stratified splits' pass (SampleDriver.groups) counts
    what this admits, as the converter splits it."""
    if recipe.class_names and _stage("classes", _unlabeled, sample, recipe.class_names):
        return Filtered(NO_LABEL)
    sample = prepare_sample(sample, recipe, sample_fn)
    if isinstance(sample, Filtered):
        return sample
    cut = recipe.cut
    if cut.measures_length:
        length = _stage("probe", _measured, sample, cut)
        if length is None or not cut.admits(length.duration_s):
            return Filtered("duration")
        if cut.mode == "none":
            sample = {**sample, **length.fields()}
    return sample


def build_examples(sample: Mapping[str, Any], recipe: ExampleRecipe, encoder: ExampleEncoder,
                   sample_fn=None, example_fn=None, stats: dict | None = None,
                   strata: Strata | None = None, measured: tuple = ()) -> Built | Filtered:
    """Runs the recipe on one sample; raises StageError naming the failing stage.

    The sample-level steps run now; cutting and encoding run as the returned
    `Built.examples` is iterated (and may raise StageError then). `stats`
    collects counts of dropped windows, examples and frames; `strata` is the
    job's stratified assignment when the split plan stratifies; `measured`
    the (Measure, accumulator) pairs each example is fed to.
    """
    sample = admit_sample(sample, recipe, sample_fn)
    if isinstance(sample, Filtered):
        return sample
    cut = recipe.cut
    split, group, label = _stage("split", recipe.split_plan.assign, sample, strata)
    augmented = bool(cut.augment) and split in cut.augment.splits
    built = Built(split, iter(()), group, label, augmented,
                  SampleWatch(split, label, _watchers(sample, recipe, split, label, measured)))
    return dataclasses.replace(built, examples=_examples(
        sample, recipe, encoder, example_fn, stats if stats is not None else {}, built))


def _watchers(sample: Mapping[str, Any], recipe: ExampleRecipe, split: str, label: str | None,
              measured: tuple) -> list:
    """What watches the sample as its examples are built: the fingerprints of
    its stored media the duplicate checks take (its members', or with no cut
    its bytes features'), those of what its cut decodes (a content hash of
    its examples' media, the near tap's landmarks of its audio: no second
    decode), and the unit's `measured` measures (of a sample in `split`
    under `label`)."""
    cut = recipe.cut
    known = ()
    if recipe.content_fingerprints:
        known = (_stage("fingerprint", member_fingerprints, sample, _media_members(sample, cut))
                 + stream_fingerprints(sample, cut.video_field))
        if cut.mode == "none":
            known += _stage("fingerprint", feature_fingerprints, sample, recipe.bytes_features)
    if recipe.near_fingerprints and not cut.streams_audio:
        known += _stage("fingerprint", near_fingerprints, sample, cut.audio_fields,
                        cut.video_field, cut.audio)
    watchers = [Known(known)] if known else []
    if recipe.near_fingerprints and cut.streams_audio:
        watchers.append(Tapped(NearTap()))
    if recipe.content_fingerprints and cut.mode != "none":
        watchers.append(Hashed(cut.media_feature_names))
    if measured:
        watchers.append(Measured(measured, split, label))
    return watchers


def _media_members(sample: Mapping[str, Any], cut: CutOptions) -> set:
    """The sample's fields holding media: those the cut decodes, or with no cut
    the --audio_fields and --video_field it has."""
    if cut.mode != "none":
        return media_fields(sample, cut)
    return {field for field in (*cut.audio_fields, cut.video_field) if field in sample}


def examples_filtered(stats: Mapping[str, int]) -> dict:
    """{reason: n} of the examples a sample's cut or --keep removed, from its
    `stats`: each --keep clause's, and the speech pieces too short."""
    return {("speech_too_short" if name == SPEECH_TOO_SHORT else name): n
            for name, n in stats.items()
            if name.startswith(KEEP_PREFIX) or name == SPEECH_TOO_SHORT}


class Example(NamedTuple):
    """One encoded tf.Example and where it goes."""

    split: str
    order: int        # a stable 64-bit hash of (sample key, index): the global layout's order
    serialized: bytes


class SampleOutcome(NamedTuple):
    """What became of one sample: written, filtered (`filtered` says why) or failed
    (`failure`), and how many examples it gave in `split`."""

    split: str | None = None
    examples: int = 0
    group: str | None = None        # the split's group key
    filtered: str | None = None
    failure: StageError | None = None
    # What its watchers learned: (kind, digest) fingerprints
    # (transforms/recipe/sample_watch.py, transforms/recipe/fingerprints.py).
    learned: tuple = ()


def convert_serialized(data: bytes, key: str, recipe: ExampleRecipe,
                       strata: Strata | None = None,
                       measured: tuple = ()) -> Generator[Example, None, SampleOutcome]:
    """A serialized tf.train.Example given as it is, under `key`: checked against
    the spec (transforms/format/example_check.py), split by its own feature
    values (`--split_by` names a feature), measured (`measured`, as
    `build_examples`) and yielded byte for byte; returns its SampleOutcome,
    as `convert_sample` does."""
    try:
        parsed = _stage("parse", parse_example, bytes(data))
        problems = example_problems(parsed, recipe.spec)
        if problems:
            raise StageError("encode", ValueError("; ".join(problems[:3])))
        values = {f.name: stored_values(parsed, f.name, f.kind) for f in recipe.spec}
        sample = {KEY: key, **{f.name: values[f.name][0] if not f.shape else list(values[f.name])
                               for f in recipe.spec}}
        split, group, label = _stage("split", recipe.split_plan.assign, sample, strata)
    except StageError as e:
        return SampleOutcome(failure=e)
    Measured(measured, split, label).examples(
        SeenExamples(split, label, {name: [value] for name, value in values.items()}, 1))
    yield Example(split, stable_hash64(f"{key}#0", b"datagen-order"), bytes(data))
    return SampleOutcome(split, 1, group)


def convert_sample(sample: Mapping[str, Any], recipe: ExampleRecipe, encoder: ExampleEncoder,
                   sample_fn=None, example_fn=None, stats: dict | None = None,
                   strata: Strata | None = None, splits: frozenset | None = None,
                   measured: tuple = ()) -> Generator[Example, None, SampleOutcome]:
    """Yields the sample's examples one at a time; returns its SampleOutcome.

        outcome = yield from convert_sample(sample, recipe, encoder)

    Never raises a StageError: a failure ends the examples and is the outcome.
    A sample whose examples were all dropped (by the cut or --example_fn) is
    filtered as "no_examples" (or as the cut says: `empty_reason`; "keep" when
    --keep removed them); with
    `splits`, one split elsewhere stops there,
    its media not decoded (filtered as "other_split"). Each example is fed
    to the `measured` (Measure, accumulator) pairs as it is built.
    """
    stats = stats if stats is not None else {}
    try:
        built = build_examples(sample, recipe, encoder, sample_fn, example_fn, stats, strata,
                               measured)
    except StageError as e:
        return SampleOutcome(failure=e)
    if isinstance(built, Filtered):
        return SampleOutcome(filtered=built.reason)
    if splits is not None and built.split not in splits:
        return SampleOutcome(built.split, group=built.group,
                             filtered="other_split")
    emitted = 0
    try:
        for order, serialized in built.examples:
            yield Example(built.split, order, serialized)
            emitted += 1
    except StageError as e:
        return SampleOutcome(built.split, emitted, built.group, failure=e)
    if not emitted:
        return SampleOutcome(filtered="keep" if any(name.startswith(KEEP_PREFIX) for name in stats)
                             else empty_reason(stats))
    return SampleOutcome(built.split, emitted, built.group, learned=built.watch.finished())
