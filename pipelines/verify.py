"""Verify a written dataset: every shard read back and checked against the manifest.

Locally:

    python -m pipelines.verify out/ [--media_samples 64] [--seed 0] [--direct_num_workers 2]

A dataset on Cloud Storage, as a Dataflow job (one shard per work item):

    python -m pipelines.verify gs://BUCKET/datasets/v1 \
        --runner DataflowRunner --project PROJECT --region REGION \
        --temp_location gs://BUCKET/tmp --setup_file ./setup.py

It checks the files against the manifest (none missing, none unaccounted
for, no run's temporary folder, totals that add up; transforms/verify/layout.py),
then reads every shard once (transforms/verify/shards.py): framing and CRCs
of every record, the gzip stream, the file's CRC32C against the one the
writer recorded, counts and bytes, the record index, every record against the
spec, and the media of a seeded sample of records decoded. It prints one
line when all is well (exit 0), else every problem, one per line, and exits 3.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import uuid

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from pipelines import cli
from pipelines.dataset_job import read_manifest
from pipelines.flag_types import flag, flag_group
from transforms.dataset.finalise import DatasetFailed
from transforms.dataset.fileops import remove_tree
from transforms.format import manifest
from transforms.format.manifest import DatasetInfo
from transforms.runner.runtime import make_pipeline, runs_locally, wait_for
from transforms.verify.layout import layout_problems, manifest_problems
from transforms.verify.shards import ShardReport, VerifyShards

__all__ = ["parser", "run", "verify"]


def _add_flags(command) -> None:
    command.add_argument("dataset", metavar="DATASET",
                        help="The dataset: a pipeline's --output directory (local or gs://).")
    checks = flag_group(command, "verification")
    flag(checks, "--media_samples", type=int, default=64,
         help="About this many records, chosen by --seed, have their media decoded (JPEG "
              "frames, audio against its times and sample rate, encoded images and audio); "
              "0 decodes none.")
    flag(checks, "--seed", type=int, default=0, help="Chooses the records whose media decode.")


def parser() -> argparse.ArgumentParser:
    """The command line's parser: the flags above and Beam's."""
    return cli.command_parser("verify", __doc__, _add_flags, usage="DATASET [flags]")


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
        raise ValueError("--temp_location is needed: the job leaves its reports there")
    return FileSystems.join(temp, f"verify-{uuid.uuid4().hex}")


def _write_reports(reports: list, path: str) -> None:
    with FileSystems.create(path) as f:
        f.write("".join(json.dumps(r._asdict()) + "\n" for r in reports).encode("utf-8"))


def _check_shards(info: DatasetInfo, root: str, entries: list, media_samples: int, seed: int,
                  options: PipelineOptions) -> list:
    """Every shard's ShardReport, from a Beam job."""
    total = sum(e["num_examples"] for e in entries)
    fraction = min(1.0, media_samples / total) if total else 0.0
    folder = _report_dir(options)
    path = FileSystems.join(folder, "reports.jsonl")
    try:
        pipeline = make_pipeline(options)
        _ = (pipeline
             | "Shards" >> beam.Create(entries)
             | "Verify" >> VerifyShards(root, info.spec, info.compression, fraction, seed)
             | "Gather" >> beam.combiners.ToList()
             | "WriteReports" >> beam.Map(_write_reports, path))
        if not wait_for(pipeline.run(), options):
            raise RuntimeError("the verification job did not finish")
        return [ShardReport(**json.loads(line)) for line in _read(path).splitlines()]
    finally:
        remove_tree(folder)


def verify(root: str, media_samples: int = 64, seed: int = 0,
           options: PipelineOptions | None = None) -> tuple:
    """(problems, summary line) for the dataset at `root`."""
    root = root.rstrip("/")
    try:
        document = read_manifest(root)
    except (OSError, IOError):
        return [f"{manifest.MANIFEST}: missing: not a finished beam-datagen dataset"], ""
    except ValueError as e:  # json's, or not UTF-8
        return [f"{manifest.MANIFEST}: not valid JSON: {e}"], ""
    problems = manifest_problems(document)
    if problems:
        return problems, ""
    try:
        info = DatasetInfo(document)
    except (KeyError, TypeError, ValueError) as e:  # a feature spec that does not parse
        reason = (f"has no {e.args[0]!r}" if isinstance(e, KeyError)
                  else str(e).removeprefix(f"{manifest.MANIFEST}: "))
        return [f"{manifest.MANIFEST}: {reason}"], ""
    found = _relative_files(root)
    failure_lines = (_read(FileSystems.join(root, manifest.FAILURES_FILE)).count(b"\n")
                     if manifest.FAILURES_FILE in found else None)
    problems = layout_problems(info, found, failure_lines)
    entries = [shard for split in info.splits.values() for shard in split["shards"]
               if shard["file"] in found]
    reports = _check_shards(info, root, entries, media_samples, seed,
                            options or PipelineOptions([])) if entries else []
    problems += [p for r in sorted(reports) for p in r.problems]
    examples = sum(r.num_records for r in reports)
    summary = (f"verified {root}: {examples} examples in {len(reports)} shards of "
               f"{len(info.splits)} splits ({sum(r.num_bytes for r in reports) / 1e6:.1f} MB): "
               f"every record's CRCs, the files' CRC32C, "
               f"{'the record indexes, ' if any('index' in e for e in entries) else ''}"
               f"counts and spec match the manifest; "
               f"the media of {sum(r.num_decoded for r in reports)} sampled records decode")
    return problems, summary


def run(argv=None) -> None:
    argv = cli.checked_flags("verify", argv, parser())
    # Beam's flags are what this command's own leave (checked above: nothing else).
    own = argparse.ArgumentParser(add_help=False)
    _add_flags(own)
    args, beam_argv = own.parse_known_args(argv)
    if args.media_samples < 0:
        raise ValueError(f"--media_samples {args.media_samples}: must be 0 or more")
    # TensorFlow's C++ start-up lines (pipelines/cli.py) would bury the report.
    with cli.native_stderr_silenced():
        problems, summary = verify(args.dataset, args.media_samples, args.seed,
                                   PipelineOptions(beam_argv))
    if problems:
        print("\n".join(problems))
        raise DatasetFailed(f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in "
                            f"{args.dataset.rstrip('/')}")
    print(summary)


if __name__ == "__main__":
    cli.main(run, parser)
