"""A written dataset read back and checked against its manifest: `verify_dataset`.

    from transforms.verify.dataset import verify_dataset
    result = verify_dataset("gs://bucket/datasets/v1")
    result.ok, result.problems, result.summary   # True, [], one line when all is well

It checks the manifest itself (it parses and holds what a writer records;
transforms/verify/layout.py), the files against it (none missing, none
unaccounted for, no run's temporary folder, totals that add up), then reads
every shard once in a Beam job, one shard per work item
(transforms/verify/shards.py): framing and CRCs of every record, the gzip
stream, the file's CRC32C against the one the writer recorded, counts and
bytes, the record index, every record against the spec and the --keep
clauses its writer applied, and the media of a seeded sample of records
decoded; the writer's dataset checks run on the
ledger and the manifest's accounting (transforms/verify/ledger_checks.py: a
key once, a group in one split, copies by --duplicates, the share of
failed inputs, no empty split);
and the duplicate check's list against the
manifest and the shards (transforms/verify/duplicates.py), augmented
copies' aug.* values and counts (transforms/verify/augmentation.py), and a
published tf.Transform against the features the manifest declares, applied
to the dataset's records where readers apply it (transforms/verify/transform.py).
`pipelines.verify` is its command line.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from transforms.format import manifest
from transforms.format.arguments import ArgumentError, check_path
from transforms.format.manifest import DatasetInfo
from transforms.recipe.keep import KeepFilter
from transforms.runner.runtime import make_pipeline, runs_locally, wait_for
from transforms.storage.folders import read_manifest, remove_tree
from transforms.verify.augmentation import AugmentedRange, augmented_range, count_problems
from transforms.verify.duplicates import duplicates_problems, sought_keys, written_problems
from transforms.verify.layout import layout_problems, manifest_problems
from transforms.verify.ledger_checks import LedgerChecks, judging_of, totals_problems
from transforms.verify.shards import ShardReport, VerifyShards
from transforms.verify.transform import transform_problems

__all__ = ["Verification", "verify_dataset"]


class Verification(NamedTuple):
    """What `verify_dataset` found: its problems, each a line naming the file it
    is about (none when all is well), and the summary of what it checked.

    >>> import transforms as dg
    >>> result = dg.verify_dataset("no/such/dataset")
    >>> result.ok, result.problems
    (False, ['manifest.json: missing: not a finished beam-datagen dataset'])
    """

    problems: list
    summary: str

    @property
    def ok(self) -> bool:
        """Whether the dataset is whole: no problem found."""
        return not self.problems


def _read(path: str) -> bytes:
    with FileSystems.open(path) as f:
        return f.read()


def _relative_files(root: str) -> list:
    found = FileSystems.match([FileSystems.join(root, "**")])[0].metadata_list
    return [m.path[len(root) + 1:] for m in found]


def _report_dir(options: PipelineOptions) -> str:
    """Where the job leaves its shard reports for this process to read."""
    if runs_locally(options):
        return tempfile.mkdtemp(prefix="verify-")
    temp = options.view_as(GoogleCloudOptions).temp_location
    if not temp:
        raise ArgumentError("options", "have no temp_location: a job off this machine leaves "
                                       "its reports there")
    return FileSystems.join(temp, f"verify-{uuid.uuid4().hex}")


def _write_reports(reports: list, path: str) -> None:
    with FileSystems.create(path) as f:
        f.write("".join(json.dumps(r._asdict()) + "\n" for r in reports).encode("utf-8"))


def _write_lines(lines: list, path: str) -> None:
    with FileSystems.create(path) as f:
        f.write("".join(line + "\n" for line in sorted(lines)).encode("utf-8"))


def _current_ledger(path: str) -> bool:
    """Whether the ledger at `path` is of this version: its receipts say
    what each observer kept (`observed`)."""
    with FileSystems.open(path) as f:
        return b'"observed"' in f.readline()


def _check_data(info: DatasetInfo, root: str, entries: list, media_samples: int, seed: int,
                options: PipelineOptions, sought: frozenset,
                augmented: AugmentedRange | None, ledger: str | None) -> tuple[list, list]:
    """Every shard's ShardReport, and the ledger's problems (its keys: `ledger`
    the ledger's name in the dataset, None when it has none), from a Beam job."""
    total = sum(e["num_examples"] for e in entries)
    fraction = min(1.0, media_samples / total) if total else 0.0
    folder = _report_dir(options)
    path, ledger_path = (FileSystems.join(folder, name)
                         for name in ("reports.jsonl", "ledger_problems.txt"))
    try:
        pipeline = make_pipeline(options)
        _ = (pipeline
             | "Shards" >> beam.Create(entries)
             | "Verify" >> VerifyShards(root, info.spec, info.shard_format, fraction, seed, sought,
                                        augmented, manifest.declared_classes(info.document),
                                        KeepFilter.of_manifest(info.document))
             | "Gather" >> beam.combiners.ToList()
             | "WriteReports" >> beam.Map(_write_reports, path))
        if ledger is not None:
            ledger_file = FileSystems.join(root, ledger)
            _ = (pipeline
                 | "Checks" >> LedgerChecks(ledger_file, ledger, info.document,
                                            judging_of(info, _current_ledger(ledger_file)))
                 | "GatherLedger" >> beam.combiners.ToList()
                 | "WriteLedgerProblems" >> beam.Map(_write_lines, ledger_path))
        if not wait_for(pipeline.run(), options):
            raise RuntimeError("the verification job did not finish")
        reports = [ShardReport(**json.loads(line)) for line in _read(path).splitlines()]
        ledger_problems = _read(ledger_path).decode().splitlines() if ledger is not None else []
        return reports, ledger_problems
    finally:
        remove_tree(folder)


def verify_dataset(root: str | os.PathLike, media_samples: int = 64, seed: int = 0,
                   options: PipelineOptions | None = None) -> Verification:
    """The Verification of the dataset at `root` (local or gs://): its
    problems, each a line naming the file it is about, none when all is
    well, and its summary line. About `media_samples` records, chosen by `seed`, have their media
    decoded; `options` run the shards' check (locally by default, or on
    Dataflow with --temp_location for its reports).

    >>> import apache_beam as beam, os, transforms as dg
    >>> with dg.make_pipeline() as p:
    ...     _ = (p | beam.Create([{"label": i} for i in range(20)])
    ...            | dg.WriteDataset("labels", features="label:int64", splits="train=1"))
    >>> result = dg.verify_dataset("labels")
    >>> result.ok, result.problems
    (True, [])
    >>> shard = next(f for f in os.listdir("labels/train") if f.endswith(".tfrecord"))
    >>> with open(f"labels/train/{shard}", "r+b") as f:   # one byte flipped
    ...     _ = f.seek(20); byte = f.read(1); _ = f.seek(20); _ = f.write(bytes([byte[0] ^ 1]))
    >>> print(dg.verify_dataset("labels").problems[0])
    train/...: ...
    """
    root = check_path("root", root)
    try:
        document = read_manifest(root)
    except (OSError, IOError):
        return Verification([f"{manifest.MANIFEST}: missing: not a finished beam-datagen "
                             "dataset"], "")
    except ValueError as e:  # json's, or not UTF-8
        return Verification([f"{manifest.MANIFEST}: not valid JSON: {e}"], "")
    problems = manifest_problems(document)
    if problems:
        return Verification(problems, "")
    try:
        info = DatasetInfo(document)
    except (KeyError, TypeError, ValueError) as e:  # a feature spec that does not parse
        reason = (f"has no {e.args[0]!r}" if isinstance(e, KeyError)
                  else str(e).removeprefix(f"{manifest.MANIFEST}: "))
        return Verification([f"{manifest.MANIFEST}: {reason}"], "")
    found = _relative_files(root)
    failure_lines = (_read(FileSystems.join(root, manifest.FAILURES_FILE)).count(b"\n")
                     if manifest.FAILURES_FILE in found else None)
    problems = (layout_problems(info, found, failure_lines) + totals_problems(info)
                + transform_problems(root, info))
    duplicates = (_read(FileSystems.join(root, manifest.DUPLICATES_FILE)).decode()
                  if manifest.DUPLICATES_FILE in found else None)
    problems += duplicates_problems(info, duplicates)
    entries = [shard for split in info.splits.values() for shard in split["shards"]
               if shard["file"] in found]
    augmented = augmented_range(info)
    ledger = info.document.get("ledger")
    reports, ledger_problems = _check_data(
        info, root, entries, media_samples, seed, options or PipelineOptions([]),
        sought_keys(info, duplicates), augmented, ledger if ledger in found else None)
    problems += [p for r in sorted(reports) for p in r.problems] + ledger_problems
    if augmented is not None:
        copies: dict = {}
        for report in reports:
            split = report.file.split("/", 1)[0]
            copies[split] = copies.get(split, 0) + report.augmented
        problems += count_problems(info, copies)
    problems += written_problems(info, duplicates, {(r.file.split("/", 1)[0], key)
                                                    for r in reports for key in r.found})
    examples = sum(r.num_records for r in reports)
    checked = ("the ledger holds each key once, each group in one split and the copies the "
               "manifest counts; " if ledger in found else "")
    summary = (f"verified {root}: {examples} examples in {len(reports)} shards of "
               f"{len(info.splits)} splits ({sum(r.num_bytes for r in reports) / 1e6:.1f} MB): "
               f"every record's CRCs, the files' CRC32C, "
               f"{'the record indexes, ' if any('index' in e for e in entries) else ''}"
               f"counts and spec match the manifest; {checked}"
               f"the media of {sum(r.num_decoded for r in reports)} sampled records decode")
    return Verification(problems, summary)
