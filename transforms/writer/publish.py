"""The last step of a job: a checked dataset published (Finalise's step 3).

Once the checks passed (transforms/writer/finalise.py) and every shard is
in place, `PublishFn` removes an earlier run's data files, moves the dead
letters and the duplicates' list in, moves a staged tf.Transform next to the
data, writes `schema.pbtxt`, TFDS's files, the ledger and, last, the
manifest, and removes this run's temporary folder and any a killed run left.
`CommitPlan` is what the checks hand it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms.format import manifest, tfds_metadata
from transforms.format.manifest import AT_READ, summary_line
from transforms.format.spec import FeatureSpec
from transforms.media.features import describe_in_words
from transforms.recipe.keep import KeepFilter
from transforms.storage.folders import (
    delete_if_exists,
    ensure_dir,
    remove_tree,
    remove_trees_named,
    write_text,
)
from transforms.tft.preprocessing import TRANSFORM_DIRS
from transforms.writer.commit import move_shards, remove_stale_shards, split_entries
from transforms.writer.ledger import LEDGER

__all__ = ["CommitPlan", "PublishFn", "join_files", "run_duplicates", "run_failures"]

_LOG = logging.getLogger(__name__)


class CommitPlan(NamedTuple):
    """What the checks found, and the names the shards get."""

    named: tuple        # NamedShards (transforms/writer/commit.py)
    accounting: dict
    num_failures: int
    warnings: tuple     # the checks' (an empty split allowed, one off its ratio, copies), ...
    final_files: dict   # each shard's path as its receipt names it -> its path in the dataset
    # The dataset's checks' facts: build_manifest's keywords (group_counts, duplicates).
    facts: Mapping[str, Any]
    sections: tuple = ()  # the measures' Sections (transforms/recipe/measures/)


def run_failures(temp_dir: str) -> str:
    """Where a run keeps its dead letters until they are published."""
    return FileSystems.join(temp_dir, "failures.jsonl")


def run_duplicates(temp_dir: str) -> str:
    """Where a run keeps its list of duplicates until it is published."""
    return FileSystems.join(temp_dir, manifest.DUPLICATES_FILE)


def join_files(paths: Iterable[str], target: str) -> None:
    """Writes the files at `paths`, in that order, one after another into `target`,
    a file at a time."""
    with FileSystems.create(target) as out:
        for path in paths:
            with FileSystems.open(path) as part:
                out.write(part.read())


class PublishedTransform(NamedTuple):
    """What the final step publishes of a fitted tf.Transform: the spec of the
    examples it gives, and where it is `applied` (AT_READ: the shards hold
    the raw examples; IN_SHARDS: they hold its outputs)."""

    spec: FeatureSpec
    applied: str


@beam.typehints.with_input_types(CommitPlan, Any)  # (plan, the moves done: a barrier)
class PublishFn(beam.DoFn):
    """Runs once, after every shard is in place: step 3."""

    def __init__(self, config, temp_dir: str, transform: PublishedTransform | None):
        self._config = config
        self._temp_dir = temp_dir
        self._transform = transform

    def _publish_transform(self) -> tuple:
        """(spec of the shards, manifest transform section or None); moves a staged
        transform next to the data, or removes an earlier run's."""
        config, transform, raw_spec = self._config, self._transform, self._config.recipe.spec
        if transform is None:
            for name in TRANSFORM_DIRS:
                # Unconditionally: on gs:// a directory never "exists", its objects do.
                remove_tree(FileSystems.join(config.output, name))
            return raw_spec, None
        from transforms.tft.stage import STAGED_DIR, publish
        publish(FileSystems.join(self._temp_dir, STAGED_DIR), config.output, raw_spec)
        section = config.preprocessing.manifest_section(raw_spec, transform.spec,
                                                        transform.applied)
        return (raw_spec if transform.applied == AT_READ else transform.spec), section

    def _publish_tfds(self, spec: FeatureSpec, classes: dict, names: dict,
                      info: Mapping[str, Any]) -> None:
        """TFDS's dataset_info.json and features.json for the manifest `info`,
        and a `<feature>.labels.txt` of each ClassLabel's `names`, where TFDS
        looks for them."""
        output = self._config.output
        for feature, found in names.items():
            write_text(FileSystems.join(output, tfds_metadata.labels_file(feature)),
                       "".join(f"{name}\n" for name in found))
        description = (f"Written by beam-datagen {info['package_version']} from "
                       f"{info['source'].get('input') or info['source'].get('type')}; "
                       f"its manifest is {manifest.MANIFEST}.")
        descriptions = {name: describe_in_words(entry)
                        for name, entry in info.get("audio_features", {}).items()}
        write_text(FileSystems.join(output, tfds_metadata.TFDS_FEATURES), json.dumps(
            tfds_metadata.tfds_features(spec, classes, descriptions), indent=2) + "\n")
        write_text(FileSystems.join(output, tfds_metadata.TFDS_INFO), json.dumps(
            tfds_metadata.tfds_dataset_info(tfds_metadata.dataset_name(output), info["splits"],
                                            description, self._config.shard_format.file_format),
            indent=2) + "\n")

    # `moved` and `transform_staged` only order this step after every move and
    # the transform's staging; `ledger_parts` are the ledger's part files, when
    # the dataset keeps one.
    def process(self, plan: CommitPlan, moved, ledger_parts=None,  # noqa: ARG002
                transform_staged=None):  # noqa: ARG002
        config = self._config
        names = config.recipe.split_plan.names
        remove_stale_shards(config.output, set().union(*(n.kept_files() for n in plan.named)))
        failures = FileSystems.join(config.output, manifest.FAILURES_FILE)
        if plan.num_failures:
            ensure_dir(FileSystems.join(config.output, "failures"))
            move_shards([(run_failures(self._temp_dir), failures)])
        else:
            delete_if_exists(failures)  # an earlier run's
        duplicates = FileSystems.join(config.output, manifest.DUPLICATES_FILE)
        listed = plan.facts.get("duplicates")
        if listed and manifest.lists_duplicates(listed):
            move_shards([(run_duplicates(self._temp_dir), duplicates)])
        else:
            delete_if_exists(duplicates)  # an earlier run's
        spec, transform = self._publish_transform()
        if config.write_tfrecords:
            splits = split_entries(plan.named)
        else:  # the examples went to another sink only: counts, no files
            splits = {name: {"num_examples": n, "num_bytes": None, "shards": []}
                      for name, n in plan.accounting["examples_per_split"].items()}
        info = manifest.build_manifest(
            spec=spec, splits=splits, shard_format=config.shard_format,
            accounting=plan.accounting, num_failures=plan.num_failures, source=config.source,
            options=config.options, split_names=names,
            warnings=plan.warnings, transform=transform, recipe_fingerprint=config.fingerprint,
            ledger=LEDGER if ledger_parts is not None else None,
            audio_features=_audio_features_section(config.recipe.cut),
            augmentation=config.recipe.cut.augment.describe(), recipe=config.describe(),
            sections=plan.sections, **plan.facts)
        names, classes = manifest.class_names(info), manifest.declared_classes(info)
        write_text(FileSystems.join(config.output, manifest.SCHEMA),
                    manifest.schema_pbtxt(spec, classes, KeepFilter.of_manifest(info).bounds()))
        if ledger_parts is not None:
            join_files(sorted(ledger_parts), FileSystems.join(config.output, LEDGER))
        else:
            delete_if_exists(FileSystems.join(config.output, LEDGER))  # an earlier run's
        if config.write_tfrecords and config.shard_format.tfds_readable:
            self._publish_tfds(spec, classes, names, info)
        write_text(FileSystems.join(config.output, manifest.MANIFEST),
                    json.dumps(info, indent=2, sort_keys=False) + "\n")
        # This run's temporary folder, and any a killed run left behind.
        remove_trees_named(config.output, manifest.TEMP_PREFIX)
        # A Python caller sees what the command line prints: the summary, then
        # each warning, through logging.
        _LOG.info(summary_line(info))
        for warning in info["warnings"]:
            _LOG.warning(warning)
        yield info


def _audio_features_section(cut) -> dict:
    """{feature: what it is} of the audio features the cut computes."""
    features = cut.audio_features
    return {features.kind: features.describe(cut.audio.sample_rate)} if features else {}
