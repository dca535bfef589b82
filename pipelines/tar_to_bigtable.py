"""Tar shards -> a raw Cloud Bigtable table: one row per sample, one cell per field.

Locally, against the Bigtable emulator and the demo corpus:

    gcloud beta emulators bigtable start --host-port=localhost:8086 &
    export BIGTABLE_EMULATOR_HOST=localhost:8086
    python -m pipelines.sample_corpus --kind av --output demo/av --shards 2 --samples_per_shard 8
    python -m pipelines.tar_to_bigtable \
        --input 'demo/av/*.tar' --project demo --instance demo --table raw --create_table \
        [--family raw] [--failures_output demo/raw_failures.jsonl] [--max_failure_fraction 0.01]
    cbt -project demo -instance demo count raw

On Dataflow:

    python -m pipelines.tar_to_bigtable \
        --input 'gs://BUCKET/raw/*.tar' --project PROJECT --instance INSTANCE --table raw \
        --failures_output gs://BUCKET/loads/raw_failures.jsonl \
        --runner DataflowRunner --region REGION --temp_location gs://BUCKET/tmp \
        --setup_file ./setup.py

Row key = the sample key, qualifier = the field name, value = the member's
bytes (layout and size limits: transforms/sources/bigtable/sink.py). The table and the
family are checked before any work; `--create_table` creates whichever is
missing. Dead letters (unreadable tar members or files, refused rows) go to
`--failures_output` as JSON lines, or to the log without it; the job prints one
summary line and fails when more than `--max_failure_fraction` of the inputs
became dead letters (rows already written stay). The dead letters' order and
file, the threshold and its DatasetFailed are the dataset jobs' own
(transforms/format/dead_letters.py).

Flags (the flex template parameters): `--instance`, `--table`
(BigtableTableOptions), `--family`, `--create_table`, `--failures_output`
(BigtableLoadOptions), and flags other modules already define, because Beam
parses every options class loaded in the process together and a flag defined
twice is an error: `--input` (pipelines.tar_to_tfrecord), `--max_failure_fraction`
(pipelines.dataset_options) and `--project` (Beam's GoogleCloudOptions, also the
Dataflow project).
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Dict, Iterable, List, Mapping

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.runner import PipelineResult

import transforms as dg
from pipelines import cli
from pipelines.dataset_options import DatasetOptions
from pipelines.job_options import BigtableLoadOptions, bigtable_table, input_patterns
from transforms.format.arguments import said
from transforms.format.dead_letters import (
    FILE,
    SAMPLE,
    check_failure_fraction,
    describe,
    sorted_failures,
)
from transforms.runner import wait_for
from transforms.sources.bigtable import STAGE, WriteSamplesToBigtable
from transforms.storage import check_writable, write_failures

__all__ = ["load_summary",
           "summary_line", "run"]

_LOG = logging.getLogger(__name__)

# Without --failures_output, at most this many dead letters are logged one by one.
_MAX_LOGGED = 100


def load_summary(samples_yielded: int, failures: Iterable[Mapping]) -> dict:
    """The load's accounting from the samples the source yielded and all dead letters.

    Every sample read is either a row or a SAMPLE dead letter (of the tar
    reader or of the writer); a FILE dead letter is a file that yielded none.
    """
    read_failed = write_refused = files_failed = 0
    for record in failures:
        if record["unit"] == FILE:
            files_failed += 1
        elif record["stage"] == STAGE:
            write_refused += 1
        elif record["unit"] == SAMPLE:
            read_failed += 1
    return {
        "samples_read": samples_yielded + read_failed,
        "rows_written": samples_yielded - write_refused,
        "samples_failed": read_failed + write_refused,
        "files_failed": files_failed,
    }


def summary_line(summary: Mapping, table: str) -> str:
    """'datagen: 8 samples read -> 8 rows written to bigtable://p/i/t, 0 samples +
    0 files failed'."""
    return (f"datagen: {summary['samples_read']} samples read -> {summary['rows_written']} "
            f"rows written to {table}, {summary['samples_failed']} samples + "
            f"{summary['files_failed']} files failed")


@beam.typehints.with_input_types(int, List[Dict[str, Any]])  # (samples written, dead letters)
class _ReportFn(beam.DoFn):
    """Runs once: writes or logs the dead letters, prints the summary, enforces the threshold."""

    def __init__(self, table: str, failures_output: str, max_failure_fraction: float):
        self._table = table
        self._failures_output = failures_output
        self._max_failure_fraction = max_failure_fraction

    def _keep(self, failures: list) -> None:
        if self._failures_output:
            write_failures(self._failures_output, failures)
            return
        for record in failures[:_MAX_LOGGED]:
            _LOG.warning("dead letter: %s", describe(record))
        if len(failures) > _MAX_LOGGED:
            _LOG.warning("... and %d more dead letters (pass --failures_output to keep them all)",
                         len(failures) - _MAX_LOGGED)

    def process(self, samples_yielded, failures):
        failures = sorted_failures(failures)
        self._keep(failures)
        summary = load_summary(samples_yielded, failures)
        print(summary_line(summary, self._table))
        check_failure_fraction(summary["samples_failed"] + summary["files_failed"],
                               summary["samples_read"] + summary["files_failed"],
                               self._max_failure_fraction, failures[0] if failures else None,
                               self._failures_output or "the log", functools.partial(
                                   said, name_of=cli.flag_names(DatasetOptions.FLAGS)))


def run(argv=None) -> PipelineResult:
    """Checks the flags and the table, then loads the shards; returns the job's result,
    finished unless --no_wait_until_finish (a flex template launch).

    Flag, input and table problems are ValueErrors raised before the job starts.
    """
    options = PipelineOptions(cli.checked_flags("tar_to_bigtable", argv))
    load = options.view_as(BigtableLoadOptions)
    max_failure_fraction = options.view_as(DatasetOptions).max_failure_fraction
    with cli.in_job_terms("tar_to_bigtable"):
        read = dg.ReadTarSamples(input_patterns(options, "a tar file pattern"))
        table = bigtable_table(options)
        if not 0 <= max_failure_fraction <= 1:
            raise ValueError("--max_failure_fraction must be between 0 and 1")
        read.describe()  # a pattern that matches nothing fails now
    if load.failures_output:
        check_writable(FileSystems.split(load.failures_output)[0], "--failures_output")
    write = WriteSamplesToBigtable(table, family=load.family)
    created = write.ensure_table(create=load.create_table, create_flag="--create_table")
    if created:
        _LOG.info("created in %s: column families %s", table.url, ", ".join(created))
    pipeline = dg.make_pipeline(options)
    samples = pipeline | "ReadTar" >> read
    refused = samples.samples | "WriteBigtable" >> write
    failures = (samples.failures, refused) | "AllFailures" >> beam.Flatten()
    _ = (samples.samples
         | "CountSamples" >> beam.combiners.Count.Globally()
         | "Report" >> beam.ParDo(
             _ReportFn(table.url, load.failures_output, max_failure_fraction),
             failures=beam.pvalue.AsList(failures)))
    result = pipeline.run()
    wait_for(result, options)
    return result


if __name__ == "__main__":
    cli.main(run)
