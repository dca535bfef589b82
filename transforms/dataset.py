"""Samples in, a finished dataset out: the composite every pipeline shares.

`WriteDataset` takes a source's samples and dead letters and does the rest:
build examples, write shards, and in one final step check the accounting,
write the dead letters, enforce --max_failure_fraction, check that no group
key is in two splits (transforms/leakage.py), move the shards into place and
write the manifest last (its presence means the dataset is complete). With
--stratify_by, the split assignment is computed from all samples first
(transforms/stratify.py) and the manifest counts examples per split and label.
With preprocessing (transforms/transform_stage.py), the built examples pass
through tf.Transform one for one: the shards hold the transformed examples, and
the final step moves transform_fn/ and its metadata next to them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from typing import Any, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms import manifest
from transforms.dead_letters import EXAMPLE, FAILURES, FILE, SAMPLE, describe
from transforms.examples import BUILT, FILTERED, BuildExamples, ExampleRecipe
from transforms.leakage import FindLeakingGroups, leakage_message
from transforms.preprocessing import TRANSFORM_DIRS, Preprocessing
from transforms.fileops import delete_if_exists, ensure_dir, remove_tree
from transforms.shard_writer import WriteShards, commit_shards
from transforms.spec import FeatureSpec
from transforms.stratify import StratifySplits

__all__ = ["DatasetConfig", "WriteDataset", "DatasetFailed", "summary_line"]

_LOG = logging.getLogger(__name__)


class DatasetFailed(RuntimeError):
    """The job produced more dead letters than --max_failure_fraction allows."""


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """Where and how to write: pickled to workers, so configuration only."""

    output: str
    recipe: ExampleRecipe
    compression: str = "gzip"
    target_shard_bytes: int = 128 << 20
    num_shards: int = 0
    max_failure_fraction: float = 0.01
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    write_tfrecords: bool = True
    preprocessing: Preprocessing | None = None


def account(tallies: Mapping[tuple, int]) -> dict:
    """Tallies {(what, detail): n} -> the manifest's accounting section.

    `what` is read, written, examples, filtered or failed; `detail` the split,
    the filter reason or the dead letter's unit.
    """
    def total(what):
        return sum(n for (w, _), n in tallies.items() if w == what)

    def by_detail(what):
        return {d: n for (w, d), n in sorted(tallies.items()) if w == what}

    return {
        "samples_read": total("read"),
        "samples_written": total("written"),
        "samples_filtered": total("filtered"),
        "samples_failed": tallies.get(("failed", SAMPLE), 0),
        "files_failed": tallies.get(("failed", FILE), 0),
        "examples_failed": tallies.get(("failed", EXAMPLE), 0),
        "samples_written_per_split": by_detail("written"),
        "examples_per_split": by_detail("examples"),
        "samples_filtered_per_reason": by_detail("filtered"),
    }


def _built_tallies(built: tuple) -> list:
    split, examples, complete, _, label = built
    return ([(("examples", split), examples)] + ([(("written", split), 1)] if complete else [])
            + ([(("label", (split, label)), examples)] if label is not None else []))


def _label_counts(tallies: Mapping[tuple, int]) -> dict:
    """{split: {label: examples}} from the ("label", (split, label)) tallies."""
    counts: dict = {}
    for (what, detail), n in sorted(tallies.items()):
        if what == "label":
            counts.setdefault(detail[0], {})[detail[1]] = n
    return counts


def summary_line(info: Mapping[str, Any]) -> str:
    """'datagen: 120 samples read -> 118 written (train 94, eval 12, test 12), ...'."""
    a = info["accounting"]
    per_split = ", ".join(f"{name} {s['num_examples']}" for name, s in info["splits"].items())
    examples = sum(s["num_examples"] for s in info["splits"].values())
    line = (f"datagen: {a['samples_read']} samples read, {examples} examples written "
            f"({per_split}), {a['samples_filtered']} filtered, "
            f"{a['samples_failed']} samples + {a['files_failed']} files failed")
    if info["failures"]["file"]:
        line += f" (see {info['failures']['file']})"
    return line


def _write_text(path: str, text: str) -> None:
    with FileSystems.create(path) as f:
        f.write(text.encode("utf-8"))


class _FinaliseFn(beam.DoFn):
    """Runs once, after every shard is written (see the module docstring)."""

    def __init__(self, config: DatasetConfig, temp_dir: str,
                 transformed_spec: FeatureSpec | None = None):
        self._config = config
        self._temp_dir = temp_dir
        self._transformed_spec = transformed_spec

    def _publish_transform(self) -> tuple:
        """(spec of the shards, manifest transform section or None); moves a staged
        transform next to the data, or removes an earlier run's."""
        config = self._config
        if self._transformed_spec is None:
            for name in TRANSFORM_DIRS:
                # Unconditionally: on gs:// a directory never "exists", its objects do.
                remove_tree(FileSystems.join(config.output, name))
            return config.recipe.spec, None
        from transforms.transform_stage import STAGED_DIR, publish
        publish(FileSystems.join(self._temp_dir, STAGED_DIR), config.output, config.recipe.spec)
        return (self._transformed_spec,
                config.preprocessing.manifest_section(config.recipe.spec))

    def process(self, shards, tallies, failures, leaks, staged=None):
        # `staged` (the transform's, when there is one) only orders this step after it.
        config = self._config
        accounting = account(tallies)
        accounted = (accounting["samples_written"] + accounting["samples_filtered"]
                     + accounting["samples_failed"])
        if accounting["samples_read"] != accounted:
            raise AssertionError(f"accounting mismatch: {accounting}")
        in_shards = {}
        for shard in shards:
            in_shards[shard["split"]] = in_shards.get(shard["split"], 0) + shard["num_examples"]
        if config.write_tfrecords and in_shards != accounting["examples_per_split"]:
            raise AssertionError(f"examples built {accounting['examples_per_split']} "
                                 f"but shards hold {in_shards}")

        failures = sorted(failures, key=lambda r: json.dumps(r, sort_keys=True))
        failures_path = FileSystems.join(config.output, manifest.FAILURES_FILE)
        if failures:
            ensure_dir(FileSystems.join(config.output, "failures"))
            _write_text(failures_path,
                        "".join(json.dumps(r, sort_keys=True) + "\n" for r in failures))
        else:
            delete_if_exists(failures_path)  # left by an earlier run

        inputs = accounting["samples_read"] + accounting["files_failed"]
        failed = (accounting["samples_failed"] + accounting["files_failed"]
                  + accounting["examples_failed"])
        if inputs and failed / inputs > config.max_failure_fraction:
            remove_tree(self._temp_dir)
            raise DatasetFailed(
                f"{failed} of {inputs} inputs failed ({failed / inputs:.2%} > "
                f"--max_failure_fraction {config.max_failure_fraction:.2%}); dead letters in "
                f"{failures_path}; first: {describe(failures[0])}")
        if leaks:
            remove_tree(self._temp_dir)
            raise DatasetFailed(leakage_message(leaks))

        # An earlier run's manifest goes first: while files are replaced, no
        # reader takes this output for a complete dataset.
        delete_if_exists(FileSystems.join(config.output, manifest.MANIFEST))
        spec, transform = self._publish_transform()
        if config.write_tfrecords:
            splits = commit_shards(shards, config.output, config.recipe.split_plan.names)
        else:  # the examples went to another sink only: counts, no files
            splits = {name: {"num_examples": n, "num_bytes": None, "shards": []}
                      for name, n in accounting["examples_per_split"].items()}
        remove_tree(self._temp_dir)
        info = manifest.build_manifest(
            spec=spec, splits=splits, compression=config.compression,
            accounting=accounting, num_failures=len(failures), source=config.source,
            options=config.options, split_names=config.recipe.split_plan.names,
            label_counts=(_label_counts(tallies) if config.recipe.split_plan.label_source
                          else None),
            transform=transform)
        _write_text(FileSystems.join(config.output, manifest.SCHEMA),
                    manifest.schema_pbtxt(spec))
        _write_text(FileSystems.join(config.output, manifest.MANIFEST),
                    json.dumps(info, indent=2, sort_keys=False) + "\n")
        _LOG.info(summary_line(info))
        yield info


class WriteDataset(beam.PTransform):
    """{"samples": Samples, "failures": dead letters} -> the manifest dict, once written.

    Builds examples with the config's recipe, writes sharded TFRecords per split
    under `config.output`, dead letters to `failures/failures.jsonl`, then
    `schema.pbtxt` and `dataset_info.json`. Fails the job when the share of
    failed inputs exceeds `config.max_failure_fraction`.

    `examples_sink`, a PTransform over the (split, order key, serialized)
    examples returning its dead letters, writes them somewhere else too (a
    Bigtable examples table); with `config.write_tfrecords` false, only there.
    The manifest is written after the sink has finished.

    With `config.preprocessing`, tf.Transform analyzes the train split's examples
    and the shards and sink get the transformed examples (AnalyzeAndTransform).
    """

    def __init__(self, config: DatasetConfig, examples_sink: beam.PTransform | None = None):
        super().__init__()
        self._config = config
        self._examples_sink = examples_sink

    def expand(self, inputs):
        config = self._config
        samples, source_failures = inputs["samples"], inputs[FAILURES]
        temp_dir = FileSystems.join(config.output, f".temp-datagen-{uuid.uuid4().hex}")

        strata = (samples | "StratifySplits" >> StratifySplits(config.recipe)
                  if config.recipe.split_plan.stratify_by else None)
        built = samples | "BuildExamples" >> BuildExamples(config.recipe, strata)
        examples, transform = built.examples, None
        if config.preprocessing is not None:
            # Imported only when asked for: it loads TensorFlow and tf.Transform.
            from transforms.transform_stage import AnalyzeAndTransform
            transform = examples | "Preprocess" >> AnalyzeAndTransform(
                config.preprocessing, config.recipe.spec, temp_dir)
            examples = transform.examples
        if config.write_tfrecords:
            shards = (
                examples
                | "WriteShards" >> WriteShards(temp_dir, config.compression,
                                               config.target_shard_bytes, config.num_shards)
                | "CollectShards" >> beam.combiners.ToList())
        else:
            shards = samples.pipeline | "NoShards" >> beam.Create([[]])
        failures = [source_failures, built[FAILURES]]
        if self._examples_sink is not None:
            failures.append(examples | "WriteExamplesSink" >> self._examples_sink)
        failures = failures | "AllFailures" >> beam.Flatten()
        tallies = (
            (samples | "TallyRead" >> beam.Map(lambda _: (("read", ""), 1)),
             source_failures
             | "ReadFailures" >> beam.Filter(lambda r: r["unit"] == SAMPLE)
             | "TallyReadFailures" >> beam.Map(lambda _: (("read", ""), 1)),
             built[BUILT] | "TallyBuilt" >> beam.FlatMap(_built_tallies),
             built[FILTERED] | "TallyFiltered" >> beam.Map(lambda why: (("filtered", why), 1)),
             failures | "TallyFailed" >> beam.Map(lambda r: (("failed", r["unit"]), 1)))
            | "AllTallies" >> beam.Flatten()
            | "SumTallies" >> beam.CombinePerKey(sum)
            | "TallyDict" >> beam.combiners.ToDict())
        leaks = (built[BUILT]
                 | "GroupSplits" >> beam.Map(lambda b: (b[3], b[0]))  # (group key, split)
                 | "FindLeakingGroups" >> FindLeakingGroups())
        staged = {"staged": beam.pvalue.AsList(transform.staged)} if transform else {}
        return shards | "Finalise" >> beam.ParDo(
            _FinaliseFn(config, temp_dir, transform.spec if transform else None),
            tallies=beam.pvalue.AsSingleton(tallies),
            failures=beam.pvalue.AsList(failures),
            leaks=beam.pvalue.AsList(leaks), **staged)
