"""The job's last steps: check everything, move the shards into place, publish.

    info = ({"planned": ..., "shards": ..., "tallies": ..., "failures": ...,
             "receipts": ...}
            | "Finalise" >> Finalise(config, temp_dir, published_transform))

1. **Check**, once every shard is written. Samples read = written + filtered +
   failed; every planned work unit reported exactly once (a key range split
   by the runner: its parts tile it); the shards hold exactly the examples
   built. The dead letters go to the run's temporary folder, in the input's
   order (unit by unit, each unit's in reading order; a sink's refusals last):
   written in parts of LEDGER_PART_UNITS units, each by one worker, and
   joined a part at a time, so no step holds them all. The list of copies
   is written so too (in parts by a hash of each group, each part sorted).
   Each of the dataset's checks (transforms/checks/dataset_checks.py) has
   joined its records of the receipts, and only what it sums them to
   reaches this step, which judges them all in order: the job fails, in
   the first refusal's line, when more than --max_failure_fraction of the
   inputs failed, a group key is in two splits, a key was given twice, no
   example or an empty split was written (unless --allow_empty_splits), or
   copies lie across splits with --duplicates fail. It keeps its shards and
   receipts for --resume (not when no rerun could publish them) and its
   dead letters where its error says (`<output>/.temp-datagen-<run>/failures.jsonl`),
   and leaves the output exactly as it was - an earlier dataset there stays whole.
   Otherwise an earlier run's manifest is deleted (while files change, no
   reader takes the folder for a dataset) and the shards are named in order
   (transforms/writer/commit.py); a reused shard already in the dataset
   whose name changes is first moved aside into the temporary folder, so no
   move lands on a file another move has still to take.
2. **Move**, in parallel batches any worker may take and any runner may retry.
3. **Publish** (transforms/writer/publish.py): data files of an earlier run
   are removed, the dead letters moved to `failures/failures.jsonl`, a staged
   tf.Transform moved next to the data, `schema.pbtxt`, TFDS's
   `features.json` and `dataset_info.json` (for uncompressed shards,
   transforms/format/tfds_metadata.py), the ledger
   `units.jsonl` (transforms/writer/ledger.py) and `manifest.json` written
   last (its presence means the dataset is complete), and the temporary
   folders of this and of earlier, killed runs removed.
"""

from __future__ import annotations

import collections
import json
import logging
import zlib
from typing import Iterable, Mapping, NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms.checks.check import Judging, Policy
from transforms.checks.dataset_checks import FOUND, FindAll, judge
from transforms.checks.duplicates import DuplicateGroup, duplicates_lines
from transforms.checks.duplicates_check import Duplicates
from transforms.format import manifest, tfds_metadata
from transforms.format.dead_letters import DatasetFailed, failure_line
from transforms.format.text import comma_list
from transforms.recipe.accounting import Accounting
from transforms.recipe.measures import ACCOUNTING, manifest_sections
from transforms.recipe.units import unit_coverage_errors
from transforms.runner.launcher_steps import OnSmallRecords
from transforms.sources.augment_corpus import files_shared
from transforms.sources.file_match import match_files
from transforms.storage.folders import (
    delete_if_exists,
    ensure_dir,
    remove_tree,
    write_text,
)
from transforms.writer.commit import (
    NamedShard,
    move_shards,
    name_shards,
)
from transforms.writer.ledger import ledger_part, ledger_text
from transforms.writer.publish import (
    CommitPlan,
    PublishedTransform,
    PublishFn,
    join_files,
    run_duplicates,
    run_failures,
)

__all__ = ["Finalise"]

_LOG = logging.getLogger(__name__)

# Shards a move batch holds: one batch copy and one batch delete request on gs://.
_MOVE_BATCH = 100



class _MergeMeasure(beam.CombineFn):
    """(name, a unit's accumulator as JSON) of one measure -> (name, the job's
    accumulator), merged by the recipe's measure of that name."""

    def __init__(self, measures: tuple):
        self._measures = {m.name: m for m in measures}

    def create_accumulator(self):
        return None

    def add_input(self, accumulator, named):
        name, data = named
        return self.merge_accumulators(
            [accumulator, (name, self._measures[name].from_json(data))])

    def merge_accumulators(self, accumulators):
        found = [a for a in accumulators if a is not None]
        if not found:
            return None
        name = found[0][0]
        return name, self._measures[name].merge(a for _, a in found)

    def extract_output(self, accumulator):
        return accumulator[1]


def _corpora_in_input(config) -> list:
    """A warning when the augmentation's noise or RIR corpora share files
    with the input: speech drawn on as noise, or a split's data in another's
    copies."""
    augment = config.recipe.cut.augment
    patterns = config.source.get("input")
    if not (augment.noise or augment.rirs) or not patterns:
        return []
    shared = files_shared(augment.noise + augment.rirs, match_files(comma_list(patterns)))
    if not shared:
        return []
    return [f"the augmentation's noise or RIR corpora hold {len(shared)} file(s) that are "
            f"also inputs: {', '.join(shared[:3])}{', ...' if len(shared) > 3 else ''}"]


def _failures_dropped(config) -> list:
    """A warning when the dead letters of library steps before the writer were
    dropped by choice (unwired_failures 'drop'): their failed samples are not
    counted."""
    steps = config.source.get("failures_dropped_from")
    if not steps:
        return []
    return [config.said(f"the dead letters of {', '.join(steps)} were not given and were "
                        "dropped ({unwired_failures} 'drop'): the samples they failed are in "
                        "no count")]


def _transcript_dropped(config) -> list:
    """A warning when the transcript named was left out of the cut's examples."""
    dropped = config.recipe.dropped_transcript
    return [config.said(dropped)] if dropped else []


def _check_totals(counted: Accounting, planned: Mapping[int, tuple | None],
                  spans: Iterable[tuple], shards: Iterable, write_tfrecords: bool) -> None:
    """AssertionError when the job lost or repeated anything: the accounting
    does not add up, a planned unit was not reported exactly once (its parts
    tiling it), or the shards do not hold exactly the examples built."""
    if counted.mismatch():
        raise AssertionError(counted.mismatch())
    problems = unit_coverage_errors(planned, spans)
    if problems:
        raise AssertionError(f"work units lost or repeated: {'; '.join(problems[:5])}")
    in_shards = collections.Counter()
    for shard in shards:
        in_shards[shard.split] += shard.num_examples
    built = counted.section["examples_per_split"]
    if write_tfrecords and dict(in_shards) != built:
        raise AssertionError(f"examples built {built} but shards hold {dict(in_shards)}")


@beam.typehints.with_output_types(CommitPlan)
class _CheckFn(beam.DoFn):
    """Runs once, after every shard is written: the checks of step 1."""

    def __init__(self, config, temp_dir: str):
        self._config = config
        self._temp_dir = temp_dir

    def process(self, _, planned, shards, tallies, failure_parts, spans, duplicate_parts, found,
                measured):
        """`found` is what each of the DATASET_CHECKS found, by its name;
        `duplicate_parts` the written parts of the list of copies."""
        config = self._config
        counted = Accounting(tallies)
        _check_totals(counted, dict(planned), spans, shards, config.write_tfrecords)
        num_failures, first = self._join_failures(sorted(failure_parts))
        sections = manifest_sections(config.recipe.every_measure, measured,
                                     config.recipe.split_plan.names)
        verdicts = judge(found, Judging(
            Policy.of_config(config),
            {**counted.section, **{s.name: s.value for s in sections if s.place == ACCOUNTING}},
            # Every message in the caller's terms: flags for a job, parameters in Python;
            # what publishes this run's work: a job resumes it, a Python caller runs again.
            config.said, "{resume} with" if config.command_line else "a rerun with", first,
            run_failures(self._temp_dir), run_duplicates(self._temp_dir)))
        facts = {name: value for verdict in verdicts for name, value in verdict.facts.items()}
        if "duplicates" in facts and manifest.lists_duplicates(facts["duplicates"]):
            join_files(sorted(duplicate_parts), run_duplicates(self._temp_dir))
        refusal = next((v.refusal for v in verdicts if v.refusal), "")
        if refusal:
            # The output stays exactly as it was; this run's dead letters stay in
            # its temporary folder, and so does its work when only a policy failed
            # it (--max_failure_fraction, --allow_empty_splits, --duplicates fail):
            # a rerun with --resume publishes it. A leak would fail every rerun.
            if any(v.refusal and v.final for v in verdicts):
                remove_tree(self._temp_dir)
            raise DatasetFailed(refusal)
        named, final_files = self._name_shards(shards)
        yield CommitPlan(named, counted.section, num_failures,
                         tuple(w for v in verdicts for w in v.warnings)
                         + tuple(_corpora_in_input(config) + _failures_dropped(config)
                                 + _transcript_dropped(config)),
                         final_files, facts, sections)

    def _join_failures(self, parts: list) -> tuple[int, dict | None]:
        """The dead letters' parts joined, in order, into the run's file: how many
        there are, and the first."""
        num_failures = sum(part.count for part in parts)
        if not num_failures:
            return 0, None
        join_files([part.path for part in parts], run_failures(self._temp_dir))
        return num_failures, json.loads(parts[0].first)

    def _name_shards(self, shards) -> tuple[tuple, dict]:
        """The shards' final names, and each one's path as its receipt names it
        -> its path in the dataset; an earlier run's manifests deleted first
        (while files are replaced, no reader, ours or TFDS, takes the output
        for a complete dataset) and shards already in place moved aside."""
        output = self._config.output
        for name in (manifest.MANIFEST, tfds_metadata.TFDS_INFO, tfds_metadata.TFDS_FEATURES):
            delete_if_exists(FileSystems.join(output, name))
        labels = FileSystems.match([FileSystems.join(output, tfds_metadata.labels_file("*"))])
        if labels[0].metadata_list:   # TFDS's class names of an earlier run's
            FileSystems.delete([m.path for m in labels[0].metadata_list])
        named = name_shards(shards, self._config.shard_format)
        final_files = {n.shard.temp: n.file for n in named}  # before any is moved aside
        named = _move_aside(named, output, self._temp_dir)
        for split in sorted({n.shard.split for n in named}):
            ensure_dir(FileSystems.join(output, split))  # before parallel moves into it
        return tuple(named), final_files


def _move_aside(named: list, output: str, temp_dir: str) -> list:
    """The named shards, those already in the dataset under another name first
    moved into `temp_dir` (their moves could otherwise land on each other)."""
    aside, result = [], []
    for n in named:
        in_place = not n.shard.temp.startswith(temp_dir + "/")
        if in_place and n.shard.temp != FileSystems.join(output, n.file):
            parked = FileSystems.join(temp_dir, "aside", n.file)
            aside += [(old, parked + old[len(n.shard.temp):]) for old, _ in n.moves(output)]
            n = NamedShard(n.shard._replace(temp=parked), n.file)
        result.append(n)
    if aside:
        for split in sorted({n.file.split("/")[0] for n in named}):
            ensure_dir(FileSystems.join(temp_dir, "aside", split))
        move_shards(aside)
    return result


def _move_batches(plan: CommitPlan, output: str) -> Iterable[list]:
    # A reused shard already in place under its name stays where it is.
    moves = [(temp, final) for n in plan.named for temp, final in n.moves(output) if temp != final]
    for i in range(0, len(moves), _MOVE_BATCH):
        yield moves[i:i + _MOVE_BATCH]


class FailurePart(NamedTuple):
    """One written part of the dead letters (parts are in order of `path`)."""

    path: str
    count: int
    first: str      # its first line


# The part of the dead letters no unit's receipt holds (a sink's refusals): the last.
_OTHER_FAILURES_PART = 1 << 62


def _unit_failure_lines(receipt) -> Iterable[tuple]:
    """(part, (order, line)) for each of a unit's dead letters, in reading order."""
    part, order = ledger_part(receipt), (receipt.unit, receipt.span or ())
    for i, record in enumerate(receipt.failures):
        yield part, ((*order, i), failure_line(record))


class _WriteFailurePartFn(beam.DoFn):
    """(part, its (order, line) pairs) -> the part's dead letters in order, written
    into the run's folder; outputs its FailurePart."""

    def __init__(self, temp_dir: str):
        self._temp_dir = temp_dir

    def process(self, part_lines):
        part, lines = part_lines
        lines = [line for _, line in sorted(lines)]
        path = FileSystems.join(self._temp_dir, "failures", f"{part:020d}.jsonl")
        write_text(path, "".join(lines))
        yield FailurePart(path, len(lines), lines[0])


# The duplicate list's parts: a group goes to the part of a hash of its
# members' keys and splits, so a part holds about 1/_DUPLICATE_PARTS of the
# groups, sorted, and the list's order is the same wherever the input lies
# (its urls are not hashed).
_DUPLICATE_PARTS = 1024


def _duplicates_part(group: DuplicateGroup) -> int:
    keys = [(key, split) for key, split, _ in group.members]
    return zlib.crc32(repr(keys).encode("utf-8")) % _DUPLICATE_PARTS


class _WriteDuplicatesPartFn(beam.DoFn):
    """(part, its groups) -> their lines, sorted, written into the run's folder;
    outputs the part's path."""

    def __init__(self, temp_dir: str):
        self._temp_dir = temp_dir

    def process(self, part_groups):
        part, groups = part_groups
        path = FileSystems.join(self._temp_dir, "duplicates", f"{part:05d}.jsonl")
        write_text(path, duplicates_lines(sorted(groups)))
        yield path


class _WriteDuplicatesList(beam.PTransform):
    """DuplicateGroups -> the paths of the parts of their list, written into
    the run's folder."""

    def __init__(self, temp_dir: str):
        super().__init__()
        self._temp_dir = temp_dir

    def expand(self, groups):
        return (groups
                | "ToParts" >> beam.Map(lambda group: (_duplicates_part(group), group))
                | "ByPart" >> beam.GroupByKey()
                | "WriteDuplicatesParts" >> beam.ParDo(_WriteDuplicatesPartFn(self._temp_dir)))


def _ledger_part_path(temp_dir: str, part: int) -> str:
    return FileSystems.join(temp_dir, "ledger", f"{part:08d}.jsonl")


class _WriteLedgerPartFn(beam.DoFn):
    """(part, its receipts) -> the part's ledger lines, in unit order, written into
    the run's folder once the shards are named; outputs the part's path."""

    def __init__(self, temp_dir: str):
        self._temp_dir = temp_dir

    def process(self, part_receipts, plan: CommitPlan):
        part, receipts = part_receipts
        path = _ledger_part_path(self._temp_dir, part)
        write_text(path, ledger_text(receipts, plan.final_files))
        yield path


class Finalise(OnSmallRecords, beam.PTransform):
    """{"planned", "shards", "tallies", "failures", "receipts"[, "duplicates"]}
    -> the manifest dict, once the dataset is published (see the module
    docstring), every one of the DATASET_CHECKS run over the receipts.

    `planned` are the work units as (index, span or None) pairs, `shards`
    ShardRecords, `tallies` (Tally, count) pairs, one a tally, `failures`
    the dead letters no receipt holds (a sink's refusals, the steps' before the
    writer), `receipts` the units'
    UnitReceipts (transforms/writer/ledger.py), checked against `planned`,
    their dead letters written out and kept in the ledger when `keep_ledger`
    (WritePlan.keep_ledger: not for units no rerun plans again, a
    PCollection's bundles, nor shards not written where built);
    `duplicates` the DuplicateGroups found before anything was written
    (--duplicates drop), else the check finds them in the receipts;
    `transform_staged` the fitted tf.Transform's one element, once staged
    (the `transform` published).
    """

    def __init__(self, config, temp_dir: str, transform: PublishedTransform | None = None,
                 keep_ledger: bool = True):
        super().__init__()
        self._config = config
        self._temp_dir = temp_dir
        self._transform = transform
        self._keep_ledger = keep_ledger

    def expand(self, inputs):
        config = self._config
        spans = inputs["receipts"] | "ReceiptSpans" >> beam.Map(lambda r: (r.unit, r.span))
        failure_parts = (
            [inputs["receipts"] | "UnitFailures" >> beam.FlatMap(_unit_failure_lines),
             inputs["failures"] | "OtherFailures" >> beam.Map(
                 lambda r: (_OTHER_FAILURES_PART, ((), failure_line(r))))]
            | "AllFailures" >> beam.Flatten()
            | "ByFailurePart" >> beam.GroupByKey()
            | "WriteFailureParts" >> beam.ParDo(_WriteFailurePartFn(self._temp_dir)))
        measured = (inputs["receipts"]
                    # (name, (name, its accumulator as JSON)) of each unit's measures
                    | "UnitMeasures" >> beam.FlatMap(lambda r: ((n, (n, a)) for n, a in r.measures))
                    | "MergeMeasures" >> beam.CombinePerKey(
                        _MergeMeasure(config.recipe.every_measure)))
        given = {Duplicates.name: inputs["duplicates"]} if "duplicates" in inputs else {}
        checks = inputs["receipts"] | "DatasetChecks" >> FindAll(Policy.of_config(config), given)
        duplicate_parts = (
            checks[Duplicates.name] | "DuplicatesList" >> _WriteDuplicatesList(self._temp_dir)
            if Duplicates.name in checks
            else inputs["shards"].pipeline | "NoDuplicatesList" >> beam.Create([]))
        plan = (
            inputs["shards"].pipeline
            | "Start" >> beam.Create([None])
            | "Check" >> beam.ParDo(
                _CheckFn(config, self._temp_dir),
                planned=beam.pvalue.AsList(inputs["planned"]),
                shards=beam.pvalue.AsList(inputs["shards"]),
                tallies=beam.pvalue.AsDict(inputs["tallies"]),
                failure_parts=beam.pvalue.AsList(failure_parts),
                spans=beam.pvalue.AsList(spans),
                duplicate_parts=beam.pvalue.AsList(duplicate_parts),
                found=beam.pvalue.AsMultiMap(checks[FOUND]),
                measured=beam.pvalue.AsDict(measured)))
        moved = (
            plan
            | "MoveBatches" >> beam.FlatMap(_move_batches, config.output)
            | "SpreadMoves" >> beam.Reshuffle()
            | "MoveShards" >> beam.Map(move_shards))
        ledger = {}
        if self._keep_ledger:
            parts = (inputs["receipts"]
                     | "LedgerParts" >> beam.Map(lambda r: (ledger_part(r), r))
                     | "ByLedgerPart" >> beam.GroupByKey()
                     # (part, [receipts of up to LEDGER_PART_UNITS units])
                     | "WriteLedgerParts" >> beam.ParDo(_WriteLedgerPartFn(self._temp_dir),
                                                        plan=beam.pvalue.AsSingleton(plan)))
            ledger["ledger_parts"] = beam.pvalue.AsList(parts)
        if "transform_staged" in inputs:
            ledger["transform_staged"] = beam.pvalue.AsList(inputs["transform_staged"])
        return plan | "Publish" >> beam.ParDo(
            PublishFn(config, self._temp_dir, self._transform),
            moved=beam.pvalue.AsList(moved), **ledger)
