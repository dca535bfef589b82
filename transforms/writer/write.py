"""Samples in, a finished dataset out: the composite every pipeline shares.

    plan = functools.partial(plan_tar_units, patterns, config.shard_size_bytes)
    info = pipeline | "WriteDataset" >> WriteDataset(config, Source(plan, TarReader()))
    info = samples | "WriteDataset" >> WriteDataset(config)    # any PCollection of dicts

`WriteDataset` reads the source's work units (transforms/recipe/units.py), or
takes a PCollection's elements bundle by bundle, builds the examples and
writes them in one of two layouts (`DatasetConfig.shuffle`):

- "none", the default: each worker converts whole units and writes their
  examples into rolling per-split shards as they are built
  (transforms/writer/convert.py), in source order. Only a few numbers per shard and
  per unit reach the final step: no example is shuffled or held anywhere, so
  memory stays flat however large the corpus, every worker writes, and on
  Dataflow there is no shuffle to pay for. Readers mix the shards (the reader
  interleaves many and shuffles a buffer).
- "global": the examples are shuffled by a stable hash into balanced shards,
  each a uniform sample of its split (transforms/writer/global_shards.py), the layout
  of TFDS. It costs a shuffle of every example.

What it does is decided once, before any step is built
(transforms/writer/plan.py: the layout, tf.Transform's mode, the passes
over the units before converting, reuse). Job-wide views come from light
passes of their own over the units, never from held examples: the keys
given twice, stratified splits (--stratify_by) from the samples' group keys
and labels (transforms/checks/stratify.py), the copies --duplicates drop
drops; tf.Transform is fitted on the train examples as they are converted
(transforms/tft/stage.py).

Every converted unit leaves a receipt (transforms/writer/ledger.py): given
earlier work to reuse (--resume, --retry_failed), the units whose receipts
stand for them are not converted again, and their receipts join the new ones.

The final step (transforms/writer/finalise.py) checks the accounting, writes the dead
letters, runs the dataset's checks (transforms/checks/dataset_checks.py: the
share of failed inputs, a group in one split, a key once, empty splits,
copies), names and moves the shards, and writes the ledger and, last, the
manifest (its presence means the dataset is complete).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import weakref
from typing import Any, Mapping, Sequence, Tuple

import apache_beam as beam

from transforms.checks.duplicates import DuplicatesToDrop
from transforms.checks.keys import KeysGivenTwice
from transforms.checks.stratify import StratifySplits
from transforms.format.arguments import (
    ArgumentError,
    ArgumentTypeError,
    check_choice,
)
from transforms.format.dead_letters import SAMPLE
from transforms.format.manifest import AT_READ, IN_SHARDS
from transforms.format.outputs import CutCount, ExampleResult, SampleResult
from transforms.format.sample import KEY
from transforms.format.shard_format import ShardFormat
from transforms.media.cutting import CutOptions
from transforms.recipe.accounting import Kind, Tally
from transforms.recipe.measures import Measure
from transforms.recipe.segments import SegmentOptions
from transforms.recipe.splits import DEFAULT_SPLITS
from transforms.recipe.units import SHARD_SIZE_BYTES, Source
from transforms.sources.units import Decisions, PlanUnits
from transforms.storage.folders import check_writable
from transforms.writer.config import (
    SHUFFLES,
    DatasetConfig,
    check_reuse,
    keyword_config,
    with_declared_classes,
)
from transforms.writer.convert import (
    ANALYZED,
    RECEIPTS,
    SOURCES,
    ConvertElements,
    ConvertOptions,
    ConvertUnits,
    SampleOutcomes,
)
from transforms.writer.finalise import Finalise
from transforms.writer.global_shards import WriteShards
from transforms.writer.ledger import REUSED, RunFolder, SkipCommitted
from transforms.writer.plan import (
    COPIES,
    FIRST,
    ON_SHARDS,
    STRATA,
    WritePlan,
    plan_write,
)
from transforms.writer.publish import PublishedTransform
from transforms.writer.upstream import cut_counts, unwired_failures

__all__ = ["DatasetConfig", "SHUFFLES", "WriteDataset", "check_reuse"]

# What WriteDataset does with the dead letters of library steps before it that
# it was not given (transforms/writer/upstream.py).
UNWIRED = ("refuse", "drop")


def _failure_collections(failures: Any) -> list:
    """`failures` (None, a PCollection of dead letters, a result with
    `.failures`, or a list or tuple of them) as a list of PCollections."""
    if failures is None:
        return []
    several = isinstance(failures, (list, tuple)) and not hasattr(failures, "failures")
    items = list(failures) if several else [failures]
    collections = [getattr(item, "failures", item) for item in items]
    if not all(isinstance(c, beam.PCollection) for c in collections):
        raise ArgumentTypeError("failures", "must be a PCollection of dead letters, a result "
                                            f"with .failures, or a list of them; got {failures!r}")
    return collections


def _distinct(collections: list) -> list:
    """`collections` with each PCollection once: dead letters given twice (a
    result piped in and its `failures=` too) are counted once."""
    return list({id(c): c for c in collections}.values())


class _TallyCoder(beam.coders.Coder):
    """A Tally as its kind and detail in text: deterministic, so the job's
    tallies are summed by key without Beam's fallback coder."""

    def encode(self, tally: Tally) -> bytes:
        return f"{tally.kind.value}\n{tally.detail}".encode("utf-8")

    def decode(self, data: bytes) -> Tally:
        kind, detail = data.decode("utf-8").split("\n", 1)
        return Tally(Kind(kind), detail)

    def is_deterministic(self) -> bool:
        return True


beam.coders.registry.register_coder(Tally, _TallyCoder)


def _upstream_tallies(record: Mapping[str, Any], cut_examples: bool) -> list:
    """The tallies of a dead letter of a step before the writer: a failed sample
    is a sample read (with `cut_examples`, SampleOutcomes counts it), a file that
    yielded none is not."""
    unit = record.get("unit", SAMPLE)
    if unit != SAMPLE:
        return [(Tally(Kind.FAILED, unit), 1)]
    return [] if cut_examples else [(Tally(Kind.READ), 1), (Tally(Kind.FAILED, SAMPLE), 1)]


def _failed_source(record: Mapping[str, Any]) -> list:
    """A sample's dead letter as the CutCount of a failed sample, beside its
    cut examples' outcomes."""
    if record.get("unit", SAMPLE) != SAMPLE:
        return []
    return [CutCount(record.get("url") or "", str(record.get("key")),
                     record.get("examples_written") or 0, failed=True)]


def _given_keywords(keywords: Mapping[str, Any]) -> list:
    """The names of the dataset keywords given other than their defaults."""
    defaults = {name: parameter.default for name, parameter
                in inspect.signature(WriteDataset.__init__).parameters.items()}
    return [name for name, value in keywords.items()
            if value is not defaults[name] and value != defaults[name]]


# Outputs written by this pipeline's WriteDatasets: a second into one is refused.
_OUTPUTS_OF: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _published_transform(plan: WritePlan, analysis) -> PublishedTransform | None:
    """What the final step publishes of the fitted transform, if any."""
    if analysis is None:
        return None
    return PublishedTransform(analysis.spec, AT_READ if plan.transform == AT_READ else IN_SHARDS)


def _claim_output(pipeline, output: str) -> None:
    claimed = _OUTPUTS_OF.setdefault(pipeline, set())
    where = output if "://" in output else os.path.abspath(output)
    if where in claimed:
        raise ArgumentError("output", f"{output!r} is written by another WriteDataset of this "
                                      "pipeline: one dataset a folder")
    claimed.add(where)


class WriteDataset(beam.PTransform):
    """Samples in, a finished dataset out; its output is the manifest dict.

    Three ways in, the same guarantees (see the module docstring for the layout):

        pipeline | WriteDataset(config, source)       # a Source's work units
        read | WriteDataset("out/", features=...)     # a reader's SampleResult
        samples | WriteDataset("out/", features="emb:float32[192],label:int64",
                               split_by="speaker", failures=read.failures)

    From a `Source` (transforms/recipe/units.py: the project's tar, listing
    and Bigtable readers, or your own), each unit is converted whole, so the
    output is byte-identical on every run and runner, and --resume can reuse
    units. A PCollection's elements are Samples, feature dicts a Beam step of
    yours built (a dict without `__key__` is keyed by a digest of its content),
    or serialized tf.train.Examples (checked against the spec and written as
    they are); each bundle rolls its own shards, named at commit in an order
    that may differ between runs. Either way it builds examples with the
    recipe, writes sharded TFRecords per split under `output`, dead letters
    (an element that is no dict, a value that does not fit the spec, a missing
    field, the `failures` of the steps before) to `failures/failures.jsonl`,
    then `schema.pbtxt`, TFDS's files and, last, `manifest.json`, and logs its
    summary and warnings. It fails the job, publishing nothing, when the share
    of failed inputs exceeds `max_failure_fraction`, a group key is in two
    splits, a key is given twice, or no example was written (unless
    `allow_empty_splits`).

    Args:
      output: the dataset's folder (str or os.PathLike, local or gs://), or a
        whole DatasetConfig (then none of the dataset keywords below).
      source: a Source to read at the pipeline's root, instead of a PCollection.
      features: the feature spec: 'emb:float32[192],label=json.cls:int64', a
        list of such terms, or a FeatureSpec (transforms/format/spec.py). A
        cut's own features (audio with its sample rate, times) come first by
        themselves.
      split_by: the group key (FIELD[:REGEX]) every example of one group
        shares a split by; default `__key__`, with `cut_by` `source_key`.
      splits: the split ratios, 'train=0.8,test=0.2' or {'train': 0.8, ...}.
      split_column: take each sample's split from this field instead.
      stratify_by: a label field: each label's groups are split by the ratios.
      label_field: a label field to count per split in the manifest.
      cut: CutOptions to cut the samples with here (audio windows, frames...).
      cut_by: the CutOptions CutSamples cut the elements with, when they are
        its examples: its features are declared, examples counted as
        examples and samples by their `source_key`.
      segments: SegmentOptions: where each sample's time-aligned segments are
        (a field of RTTM, JSON or CSV text, or two columns: a Kaldi data
        directory's start,end, a NeMo manifest's offset,duration); each
        segment is then cut as a sample of its own.
      text_field: the string feature holding each utterance's transcript: its
        text normalised (Unicode NFC, then `text_case` 'keep', 'lower' or
        'upper', `text_punctuation` 'keep' or 'strip'), its characters
        counted per split in the manifest. A cut that splits utterances apart
        is refused unless `drop_transcript` leaves the transcript out.
      file_format: the shard files: 'tfrecord' (tf.data, Keras, TFDS, DALI) or
        'array_record' (random access: TFDS's as_data_source, Grain).
      compression: 'none' (TFDS and DALI read it) or 'gzip' (TFRecord only).
      shard_size_bytes: the shards' target size.
      max_failure_fraction: the share of inputs that may fail, 0 to 1.
      allow_empty_splits: publish even when a split (or all) came out empty.
      duplicates: identical content under two keys: 'warn', 'fail', 'drop'
        (a Source only) or 'off'.
      failures: the dead letters of the steps before (a PCollection, a list of
        them, or results with `.failures`): written and counted with the
        dataset's own, each once. A SampleResult or ExampleResult piped in
        brings its own. Those of a library step upstream (a reader,
        CutSamples, BuildExamples) left out are refused, naming the step.
      unwired_failures: 'refuse' (the default) or 'drop': write without the
        dead letters of the library steps upstream not given (their failed
        samples are then not counted); the manifest names the steps.
      measures: Measures of your own (transforms.recipe.measures.Measure):
        what the job learns from every example it writes, each merged over
        the whole job into a manifest section of its name.
      examples_sink: a PTransform over the Examples (split, order key,
        serialized) returning its dead letters, writing them somewhere else
        too (a Bigtable examples table), in the same pass.
      run: where the run writes until it publishes (a fresh temporary folder
        by default) and the earlier work it reuses (transforms/writer/ledger.py).

    Stratified splits, tf.Transform (`DatasetConfig.preprocessing`),
    `duplicates='drop'` and reused work need a Source: they read its units
    twice, or plan them again.

    >>> import apache_beam as beam, json, numpy as np, transforms as dg
    >>> rows = [{"emb": np.full(4, i, np.float32), "label": i % 3, "speaker": f"s{i % 20}"}
    ...         for i in range(40)] + [{"emb": np.zeros(3, np.float32), "label": 1,
    ...                                 "speaker": "s1"}]     # the wrong shape
    >>> with dg.make_pipeline() as p:
    ...     _ = (p | beam.Create(rows)
    ...            | dg.WriteDataset("embeddings", features="emb:float32[4],label:int64",
    ...                              split_by="speaker", splits="train=0.8,test=0.2",
    ...                              max_failure_fraction=0.05))
    >>> accounting = json.load(open("embeddings/manifest.json"))["accounting"]
    >>> accounting["samples_written"], accounting["samples_failed"]
    (40, 1)
    >>> dg.verify_dataset("embeddings").ok
    True
    """

    def __init__(self, output: DatasetConfig | str | os.PathLike, source: Source | None = None,
                 *, features: Any = None, split_by: str = KEY,
                 splits: str | Mapping[str, float] = DEFAULT_SPLITS, split_column: str = "",
                 stratify_by: str = "", label_field: str = "", cut: CutOptions | None = None,
                 cut_by: CutOptions | None = None, segments: SegmentOptions | None = None,
                 text_field: str = "", text_case: str = "keep", text_punctuation: str = "keep",
                 drop_transcript: bool = False, file_format: str = "tfrecord",
                 compression: str = "none",
                 shard_size_bytes: int = SHARD_SIZE_BYTES, max_failure_fraction: float = 0.01,
                 allow_empty_splits: bool = False, duplicates: str = "warn",
                 measures: Sequence[Measure] = (), failures: Any = None,
                 unwired_failures: str = "refuse", examples_sink: beam.PTransform | None = None,
                 run: RunFolder | None = None):
        super().__init__()
        keywords = dict(features=features, split_by=split_by, splits=splits,
                        split_column=split_column, stratify_by=stratify_by,
                        label_field=label_field, cut=cut, cut_by=cut_by, segments=segments,
                        text_field=text_field, text_case=text_case,
                        text_punctuation=text_punctuation, drop_transcript=drop_transcript,
                        file_format=file_format, compression=compression,
                        shard_size_bytes=shard_size_bytes,
                        max_failure_fraction=max_failure_fraction,
                        allow_empty_splits=allow_empty_splits, duplicates=duplicates,
                        measures=measures)
        if isinstance(output, DatasetConfig):
            given = _given_keywords(keywords)
            if given:
                raise ArgumentError(given[0], "is the DatasetConfig's to say: give {output} a "
                                              "DatasetConfig, or the folder and keywords")
            self._config = output
        else:
            self._config = keyword_config(output, **keywords)
        if source is not None and not isinstance(source, Source):
            # A reader (ReadTarSamples, ...) holds its Source: say where.
            hint = (f": give its .source ({type(source).__name__}(...).source)"
                    if isinstance(getattr(source, "source", None), Source) else "")
            raise ArgumentTypeError("source", f"must be a Source, got {source!r}{hint}")
        if source is not None:
            source.reader.check_recipe(self._config.recipe)
            self._config = with_declared_classes(self._config, source.reader.class_names)
        self._source = source
        self._cut_by = cut_by
        self._failures = _failure_collections(failures)
        self._unwired = check_choice("unwired_failures", unwired_failures, UNWIRED)
        self._examples_sink = examples_sink
        self._run = run or RunFolder.fresh(self._config.output)
        if self._run.reuse:
            check_reuse(self._config, "run", examples_sink)

    @property
    def config(self) -> DatasetConfig:
        """The DatasetConfig it writes by: the one given, or its keywords' (for a
        launcher, or to see what the keywords made)."""
        return self._config

    def _convert_options(self, plan: WritePlan, analysis=None) -> ConvertOptions:
        config = self._config
        return ConvertOptions(
            temp_dir=self._run.temp_dir, shard_format=config.shard_format,
            shard_size_bytes=config.shard_size_bytes, write_shards=plan.write_shards,
            emit_examples=plan.emit_examples,
            transform_dir=analysis.directory if analysis else None,
            transformed_spec=analysis.spec if analysis else None,
            passed_through=analysis.passed_through if analysis else frozenset())

    def expand(self, input_or_root):
        upstream = list(self._failures)
        if isinstance(input_or_root, (SampleResult, ExampleResult)):
            upstream.append(input_or_root.failures)
            input_or_root = input_or_root[0]
        upstream = _distinct(upstream)
        _claim_output(input_or_root.pipeline, self._config.output)
        from_source = isinstance(input_or_root, beam.pvalue.PBegin)
        if from_source and self._source is None:
            raise ArgumentError("source", "is needed at the pipeline's root: "
                                          "WriteDataset(output, source)")
        if not from_source and self._source is not None:
            raise ArgumentError("source", "is not taken over a PCollection: its elements are "
                                          "the samples")
        plan = plan_write(self._config, from_source, self._examples_sink is not None,
                          self._run.reuse)
        if from_source:
            return self._from_source(input_or_root, plan, upstream)
        self._check_unwired(input_or_root, upstream)
        return self._from_elements(input_or_root, plan, upstream)

    def _check_unwired(self, elements, upstream: list) -> None:
        """Refuses, before any work, to lose the dead letters of a library step
        before `elements` that `upstream` lacks; with unwired_failures 'drop',
        the manifest's source names the steps instead."""
        unwired = unwired_failures(elements, upstream)
        if not unwired:
            return
        steps = ", ".join(f"{step.label!r} ({step.name})" for step in unwired)
        if self._unwired == "refuse":
            raise ArgumentError("failures", f"misses the dead letters of {steps}, before this "
                                "WriteDataset: their failed samples would vanish from the "
                                "accounting; give them (failures=[read, cut, ...], each "
                                "step's result or its .failures), or unwired_failures='drop'")
        config = self._config
        self._config = dataclasses.replace(config, source={
            **config.source, "failures_dropped_from": [step.label for step in unwired]})

    def _check_output(self) -> None:
        """Before any work, on every way in (a job's launcher checked too), once
        the arguments are: a folder that cannot be written, a bucket that is
        not there, refused in one line."""
        check_writable(self._config.output, self._config.said("{output}"))

    def _from_source(self, pbegin, plan: WritePlan, upstream: list):
        self._check_output()
        config, reader = self._config, self._source.reader
        recipe, temp_dir = config.recipe, self._run.temp_dir
        units = pbegin | "Units" >> PlanUnits(self._source)
        # What the job decides before converting, which every pass takes alike.
        decisions = Decisions(repeated=units | "KeysGivenTwice" >> KeysGivenTwice(
            reader, recipe.segments))
        if STRATA in plan.pre_passes:
            decisions = dataclasses.replace(decisions, strata=units | "StratifySplits" >> (
                StratifySplits(recipe, reader, decisions)))
        options, analysis = self._convert_options(plan), None
        # tf.Transform is imported only when asked for: it loads TensorFlow.
        if plan.transform in (AT_READ, ON_SHARDS):
            from transforms.tft.stage import AnalysisPlan
            analysis_plan = AnalysisPlan.of(config.preprocessing, recipe.spec)
            options = dataclasses.replace(options, analyzed=analysis_plan.analyzed)
            if plan.transform == ON_SHARDS:  # converted uncompressed, to be read back
                options = dataclasses.replace(options, shard_format=ShardFormat())
        elif plan.transform == FIRST:
            from transforms.tft.stage import AnalyzeTrainSplit
            analysis = units | "Preprocess" >> AnalyzeTrainSplit(
                config.preprocessing, reader, recipe, temp_dir, decisions)
            options = self._convert_options(plan, analysis)
        found_before = {}
        if COPIES in plan.pre_passes:
            copies = units | "DuplicatesToDrop" >> DuplicatesToDrop(
                recipe, reader, decisions, config.near_duplicates)
            decisions = dataclasses.replace(decisions, dropped=copies["dropped"])
            found_before["duplicates"] = copies["groups"]
        pending = units | "SkipCommitted" >> SkipCommitted(self._run, reader.splittable)
        converted = pending.units | "Convert" >> ConvertUnits(
            reader, recipe, options, decisions, analysis.staged if analysis else None)
        receipts = ((converted[RECEIPTS], pending[REUSED])
                    | "AllReceipts" >> beam.Flatten())
        if plan.transform in (AT_READ, ON_SHARDS):
            from transforms.tft.stage import FitAnalysis
            analysis = converted[ANALYZED] | "Preprocess" >> FitAnalysis(
                analysis_plan, config.preprocessing, recipe.spec, temp_dir)
        if plan.transform == ON_SHARDS:
            from transforms.writer.transformed import TransformShards
            receipts = receipts | "Transform" >> TransformShards(
                analysis, recipe.spec, temp_dir, config.shard_format, config.shard_size_bytes)
        splittable = reader.splittable
        planned = units | "PlannedSpans" >> beam.Map(
            lambda u: (u.index, u.inputs if splittable else None))
        return self._finish(plan, converted, receipts, planned, analysis, upstream,
                            found_before)

    def _from_elements(self, elements, plan: WritePlan, upstream: list):
        config = self._config
        if "type" not in config.source:
            self._config = config = dataclasses.replace(
                config, source={"type": "pcollection", **config.source})
        self._check_output()
        options = dataclasses.replace(self._convert_options(plan),
                                      elements_are_examples=self._cut_by is not None)
        converted = elements | "Convert" >> ConvertElements(config.recipe, options)
        receipts = converted[RECEIPTS]
        # A bundle is its own plan: reported once, as it was converted.
        planned = receipts | "PlannedBundles" >> beam.Map(lambda r: (r.unit, None))
        sources = None
        if self._cut_by is not None:
            # What each CutSamples before said it cut: the examples a step of the
            # user's dropped are counted, and so is a sample it left with none.
            sources = ([converted[SOURCES], *cut_counts(elements)]
                       | "CutAndWritten" >> beam.Flatten())
        return self._finish(plan, converted, receipts, planned, None, upstream, sources=sources)

    def _finish(self, plan: WritePlan, converted, receipts, planned, analysis,
                upstream: list, found_before=None, sources=None):
        """The converted examples' shards, checked, named and published;
        `upstream` the dead letters of the steps before; `found_before` what a
        dataset check found by a pass before writing (the copies --duplicates
        drop drops), by its name; `sources` the SourceOutcomes of cut examples
        and the CutCounts of their samples, which are counted."""
        config, temp_dir = self._config, self._run.temp_dir
        if plan.global_shards:
            shards = converted.examples | "WriteShards" >> WriteShards(
                temp_dir, config.shard_format, config.shard_size_bytes, config.num_shards)
        else:
            shards = receipts | "UnitShards" >> beam.FlatMap(lambda r: r.shards)
        tally_parts = [receipts | "UnitTallies" >> beam.FlatMap(lambda r: r.tallies)]
        # The receipts hold the converter's dead letters; a sink's and the steps'
        # before are new.
        failure_parts = list(upstream)
        if upstream:
            before = (upstream | "FailuresBefore" >> beam.Flatten())
            tally_parts.append(before | "TallyBefore" >> beam.FlatMap(
                _upstream_tallies, sources is not None))
            if sources is not None:
                sources = ((sources, before | "FailedSources" >> beam.FlatMap(_failed_source))
                           | "AllSources" >> beam.Flatten())
        if sources is not None:
            tally_parts.append(sources | "SampleOfSources" >> SampleOutcomes())
        if self._examples_sink is not None:
            refused = converted.examples | "WriteExamplesSink" >> self._examples_sink
            tally_parts.append(refused | "TallyRefused" >> beam.Map(
                lambda r: (Tally(Kind.FAILED, r["unit"]), 1)))
            failure_parts.append(refused)
        if not failure_parts:
            failure_parts.append(receipts.pipeline | "NothingRefused" >> beam.Create([]))
        refused = failure_parts | "NotInReceipts" >> beam.Flatten()
        tallies = (
            tally_parts
            # Typed, so the tallies are summed by the Tally's own deterministic coder.
            | "AllTallies" >> beam.Flatten().with_output_types(Tuple[Tally, int])
            | "SumTallies" >> beam.CombinePerKey(sum))
        return {
            "planned": planned,
            "shards": shards,
            "tallies": tallies,
            "failures": refused,
            "receipts": receipts,
            **({"transform_staged": analysis.staged} if analysis else {}),
            **(found_before or {}),
        } | "Finalise" >> Finalise(config, temp_dir, _published_transform(plan, analysis),
                                   plan.keep_ledger)
