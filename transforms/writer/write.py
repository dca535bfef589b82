"""Samples in, a finished dataset out: the composite every pipeline shares.

    plan = functools.partial(plan_tar_units, patterns, config.target_shard_bytes)
    info = pipeline | "WriteDataset" >> WriteDataset(config, Source(plan, TarReader()))
    info = samples | "WriteDataset" >> WriteDataset(config)    # any PCollection of dicts

`WriteDataset` reads the source's work units (transforms/sources/units.py), or
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

Job-wide views come from light passes of their own over the units, never from
held examples: stratified splits (--stratify_by) read the samples' group keys
and labels first (transforms/writer/stratify.py); tf.Transform's analysis builds the
train split's examples in its own pass (transforms/tft/stage.py) and the
converter applies the staged transform to every example before writing it.

Every converted unit leaves a receipt (transforms/writer/ledger.py): given
earlier work to reuse (--resume, --retry_failed), the units whose receipts
stand for them are not converted again, and their receipts join the new ones.

The final step (transforms/writer/finalise.py) checks the accounting, writes the dead
letters, enforces --max_failure_fraction, checks that no group key is in two
splits (transforms/writer/leakage.py), names and moves the shards, and writes the
ledger and, last, the manifest (its presence means the dataset is complete).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import apache_beam as beam

from transforms.format.sample import KEY
from transforms.format.spec import FeatureSpec, parse_features
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.splits import DEFAULT_SPLITS, SplitPlan
from transforms.sources.units import PlanUnits, Source
from transforms.storage.folders import check_writable
from transforms.tft.preprocessing import Preprocessing
from transforms.writer.convert import RECEIPTS, ConvertElements, ConvertOptions, ConvertUnits
from transforms.writer.duplicates import POLICIES, DuplicatesToDrop, FindDuplicates
from transforms.writer.finalise import Finalise
from transforms.writer.global_shards import WriteShards
from transforms.writer.leakage import SplitGroups
from transforms.writer.ledger import REUSED, RunFolder, SkipCommitted, recipe_fingerprint
from transforms.writer.stratify import StratifySplits
from transforms.writer.tfrecord import COMPRESSIONS

__all__ = ["COMPRESSIONS", "DatasetConfig", "SHUFFLES", "WriteDataset", "simple_config"]

# --shuffle: where examples are written (module docstring).
SHUFFLES = ("none", "global")


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """Where and how to write: pickled to workers, so configuration only.

    `num_shards` (shards per split) is the global layout's; the default layout
    rolls shards at `target_shard_bytes`, which also sizes the work units.
    `simple_config` makes one from a feature spec, a group key and ratios.

    >>> import transforms as dg
    >>> recipe = dg.ExampleRecipe(spec=dg.FeatureSpec.parse("flac:bytes,label=cls:int64"),
    ...                           split_plan=dg.SplitPlan.from_flags("train=0.9,test=0.1",
    ...                                                              "json.speaker"))
    >>> config = dg.DatasetConfig("out", recipe, compression="gzip", target_shard_bytes=64 << 20)
    >>> config.shuffle, len(config.fingerprint)   # the default layout; the recipe's hash
    ('none', 16)
    >>> dg.DatasetConfig("out", recipe, num_shards=8)
    Traceback (most recent call last):
    ValueError: --num_shards needs --shuffle global: ...
    """

    output: str
    recipe: ExampleRecipe
    compression: str = "none"
    target_shard_bytes: int = 128 << 20
    num_shards: int = 0
    max_failure_fraction: float = 0.01
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    write_tfrecords: bool = True
    preprocessing: Preprocessing | None = None
    shuffle: str = "none"
    allow_empty_splits: bool = False
    duplicates: str = "warn"   # transforms/writer/duplicates.py POLICIES
    near_duplicates: float = 0.0  # the similarity of a near pair; 0: none looked for

    @property
    def fingerprint(self) -> str:
        """The recipe's fingerprint, recorded in the manifest (ledger.recipe_fingerprint)."""
        return recipe_fingerprint(self.options, self.source, self.recipe.spec.to_json())

    def __post_init__(self):
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"--compression {self.compression!r}: expected one of "
                             f"{', '.join(COMPRESSIONS)}")
        if self.shuffle not in SHUFFLES:
            raise ValueError(f"--shuffle {self.shuffle!r}: expected one of {', '.join(SHUFFLES)}")
        if self.duplicates not in POLICIES:
            raise ValueError(f"--duplicates {self.duplicates!r}: expected one of "
                             f"{', '.join(POLICIES)}")
        if not 0 <= self.near_duplicates <= 1:
            raise ValueError(f"--near_duplicates {self.near_duplicates}: a similarity from 0 "
                             "(off) to 1")
        if self.near_duplicates and self.duplicates == "off":
            raise ValueError("--near_duplicates needs --duplicates warn, fail or drop: it "
                             "says what to do with them")
        fingerprints = {"content_fingerprints": self.duplicates != "off",
                        "near_fingerprints": bool(self.near_duplicates)}
        if any(getattr(self.recipe, name) != value for name, value in fingerprints.items()):
            # The recipe takes the fingerprints the check needs, and only then.
            object.__setattr__(self, "recipe", dataclasses.replace(self.recipe, **fingerprints))
        if self.num_shards and self.shuffle != "global":
            raise ValueError("--num_shards needs --shuffle global: the default writer rolls "
                             "shards at --shard_size_mb where the examples are built")


def simple_config(output: str, features: FeatureSpec | str, split_by: str = KEY,
                  splits: str = DEFAULT_SPLITS, **settings) -> DatasetConfig:
    """A DatasetConfig from the few things most datasets need: the feature spec
    (a FeatureSpec or the --features grammar), the group key (--split_by) and
    the split ratios; `settings` are DatasetConfig's other fields."""
    spec = features if isinstance(features, FeatureSpec) else parse_features(features)
    plan = SplitPlan.from_flags(splits, split_by, spec=spec)
    return DatasetConfig(output=output, recipe=ExampleRecipe(spec=spec, split_plan=plan),
                         **settings)


class WriteDataset(beam.PTransform):
    """Samples in, a finished dataset out; its output is the manifest dict.

    Two ways in, the same dataset out (see the module docstring for the layout):

        pipeline | WriteDataset(config, source)    # a Source's work units, e.g.
                                                    # ReadTarSamples(patterns, size).source
        samples | WriteDataset(config)              # any PCollection of dicts or examples
        samples | WriteDataset("out/", features="emb:float32[192],label:int64",
                               split_by="speaker")

    From a `Source` (transforms/sources/units.py: the project's tar, listing
    and Bigtable readers, or your own), each unit is converted whole, so the
    output is byte-identical on every run and runner, and --resume can reuse
    units. A PCollection's elements are Samples, feature dicts a Beam step of
    yours built (a dict without `__key__` is keyed by a digest of its content),
    or serialized tf.train.Examples (checked against the spec and written as
    they are); each bundle rolls its own shards, named at commit in an order
    that may differ between runs. Either way it builds examples with the
    config's recipe, writes sharded TFRecords per split under `config.output`,
    dead letters (an element that is no dict, a value that does not fit the
    spec, a missing field) to `failures/failures.jsonl`, then `schema.pbtxt`,
    TFDS's files and, last, `manifest.json`. Fails the job when the share of
    failed inputs exceeds `config.max_failure_fraction` or a group key is in
    two splits.

    `config` is a DatasetConfig, or the output folder, with `simple_config`'s
    keyword arguments. `examples_sink`, a PTransform over the Examples (split,
    order key, serialized) returning its dead letters, writes them somewhere
    else too (a Bigtable examples table), in the same pass; with
    `config.write_tfrecords` false, only there. The manifest is written after
    the sink has finished. With `config.preprocessing`, tf.Transform analyzes
    the train split and the shards and sink get the transformed examples. `run`
    is where the run writes until it publishes (a fresh temporary folder by
    default), and the earlier work it reuses (transforms/writer/ledger.py).
    Stratified splits, tf.Transform and reused work need a Source: they read
    its units twice, or plan them again.

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
    >>> dg.verify_dataset("embeddings")[0]   # no problems
    []
    """

    def __init__(self, config: DatasetConfig | str, source: Source | None = None,
                 examples_sink: beam.PTransform | None = None, run: RunFolder | None = None,
                 **simple):
        super().__init__()
        self._config = (config if isinstance(config, DatasetConfig)
                        else simple_config(config, **simple))
        self._source = source
        self._examples_sink = examples_sink
        self._run = run or RunFolder.fresh(self._config.output)

    def _convert_options(self, analysis) -> ConvertOptions:
        config = self._config
        hashed = config.shuffle == "global"
        return ConvertOptions(
            temp_dir=self._run.temp_dir, compression=config.compression,
            target_shard_bytes=config.target_shard_bytes,
            write_shards=config.write_tfrecords and not hashed,
            emit_examples=hashed or self._examples_sink is not None,
            transform_dir=analysis.directory if analysis else None,
            transformed_spec=analysis.spec if analysis else None,
            passed_through=analysis.passed_through if analysis else frozenset())

    def expand(self, root_or_elements):
        if isinstance(root_or_elements, beam.pvalue.PBegin):
            if self._source is None:
                raise ValueError("WriteDataset at the pipeline's root reads a Source: "
                                 "WriteDataset(config, source)")
            return self._from_source(root_or_elements)
        if self._source is not None:
            raise ValueError("WriteDataset over a PCollection takes no Source: its elements "
                             "are the samples")
        return self._from_elements(root_or_elements)

    def _from_source(self, pbegin):
        config, reader = self._config, self._source.reader
        recipe = config.recipe
        units = pbegin | "Units" >> PlanUnits(self._source)
        strata = (units | "StratifySplits" >> StratifySplits(recipe, reader)
                  if recipe.split_plan.stratify_by else None)
        analysis = None
        if config.preprocessing is not None:
            # Imported only when asked for: it loads TensorFlow and tf.Transform.
            from transforms.tft.stage import AnalyzeTrainSplit
            analysis = units | "Preprocess" >> AnalyzeTrainSplit(
                config.preprocessing, reader, recipe, self._run.temp_dir, strata)
        duplicates = (units | "DuplicatesToDrop" >> DuplicatesToDrop(
            recipe, reader, strata, config.near_duplicates)
                      if config.duplicates == "drop" else None)
        pending = units | "SkipCommitted" >> SkipCommitted(self._run, reader.splittable)
        converted = pending.units | "Convert" >> ConvertUnits(
            reader, recipe, self._convert_options(analysis), strata,
            analysis.staged if analysis else None, duplicates and duplicates["dropped"])
        receipts = ((converted[RECEIPTS], pending[REUSED])
                    | "AllReceipts" >> beam.Flatten())
        splittable = reader.splittable
        planned = units | "PlannedSpans" >> beam.Map(
            lambda u: (u.index, u.inputs if splittable else None))
        return self._finish(converted, receipts, planned, analysis, keep_ledger=True,
                            duplicates=duplicates and duplicates["groups"])

    def _from_elements(self, elements):
        config = self._config
        if (config.recipe.split_plan.stratify_by or config.preprocessing or self._run.reuse
                or config.duplicates == "drop"):
            raise ValueError("stratified splits, tf.Transform, --duplicates drop and --resume "
                             "read a Source's units again: give WriteDataset a Source, not a "
                             "PCollection")
        if not config.source:
            self._config = dataclasses.replace(config, source={"type": "pcollection"})
        # Before any work, as the jobs' launchers do before they plan a Source's
        # units: a PCollection comes from a pipeline of the user's, no launcher.
        check_writable(config.output, "WriteDataset output")
        converted = elements | "Convert" >> ConvertElements(config.recipe,
                                                            self._convert_options(None))
        receipts = converted[RECEIPTS]
        # A bundle is its own plan: reported once, as it was converted.
        planned = receipts | "PlannedBundles" >> beam.Map(lambda r: (r.unit, None))
        return self._finish(converted, receipts, planned, None, keep_ledger=False)

    def _finish(self, converted, receipts, planned, analysis, keep_ledger: bool,
                duplicates=None):
        """The converted examples' shards, checked, named and published;
        `duplicates` the groups of identical content found before they were
        written (--duplicates drop), else they are found in the receipts."""
        config, temp_dir = self._config, self._run.temp_dir
        if config.shuffle == "global" and config.write_tfrecords:
            shards = converted.examples | "WriteShards" >> WriteShards(
                temp_dir, config.compression, config.target_shard_bytes, config.num_shards)
        else:
            shards = receipts | "UnitShards" >> beam.FlatMap(lambda r: r.shards)
        tally_parts = [receipts | "UnitTallies" >> beam.FlatMap(lambda r: r.tallies)]
        # The receipts hold the converter's dead letters; a sink's are new.
        if self._examples_sink is not None:
            refused = converted.examples | "WriteExamplesSink" >> self._examples_sink
            tally_parts.append(refused | "TallyRefused" >> beam.Map(
                lambda r: (("failed", r["unit"]), 1)))
        else:
            refused = receipts.pipeline | "NothingRefused" >> beam.Create([])
        tallies = (
            tally_parts
            | "AllTallies" >> beam.Flatten()
            | "SumTallies" >> beam.CombinePerKey(sum)
            | "TallyDict" >> beam.combiners.ToDict())
        groups = (receipts
                  | "GroupSplits" >> beam.FlatMap(lambda r: r.groups)  # (group key, split)
                  | "SplitGroups" >> SplitGroups())
        if duplicates is None:
            duplicates = receipts | "FindDuplicates" >> FindDuplicates(config.near_duplicates)
        return {
            "planned": planned,
            "shards": shards,
            "tallies": tallies,
            "failures": refused,
            "leaks": groups["leaks"],
            "group_counts": groups["counts"],
            "duplicates": duplicates,
            "receipts": receipts,
        } | "Finalise" >> Finalise(config, temp_dir, analysis.spec if analysis else None,
                                   keep_ledger)
