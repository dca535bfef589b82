"""Tar shards of raw files -> a sharded TFRecord dataset with a manifest.

Locally (DirectRunner):

    python -m pipelines.tar_to_tfrecord \
        --input 'data/*.tar*' --output out/ \
        --features 'flac:bytes,cls:int64,json.speaker:bytes' \
        --split_by '__key__:^([^_]+)' --splits train=0.8,eval=0.1,test=0.1 \
        [--direct_num_workers 2]

On Dataflow:

    python -m pipelines.tar_to_tfrecord \
        --input 'gs://BUCKET/raw/*.tar' --output gs://BUCKET/datasets/v1 \
        --features 'flac:bytes,cls:int64' \
        --runner DataflowRunner --project PROJECT --region REGION \
        --temp_location gs://BUCKET/tmp --setup_file ./setup.py

Members are grouped into samples by WebDataset's rules (`transforms.sources.tar`);
each worker converts whole tar files (consecutive small ones grouped up to
--shard_size_mb) and writes their examples itself. Every other flag is shared
by all pipelines (`pipelines.dataset_options`).
"""

from __future__ import annotations

import functools

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import cli
from pipelines.dataset_job import dataset_config, feature_spec, run_dataset_job
from pipelines.job_options import InputOptions
from transforms.format.text import comma_list
from transforms.sources.file_match import matched_files
from transforms.sources.input_files import open_input
from transforms.sources.tar import ReadTarSamples
from transforms.sources.tar_stream import iter_tar

__all__ = ["run"]


def _samples_in(files: list):
    """The readable samples of `files`, in order (lazy: --features auto reads a
    few, unverified: they only show which fields there are)."""
    for path in files:
        with open_input(path) as f:
            yield from (item for item in iter_tar(f, path, verify=False,
                                                  reopen=functools.partial(open_input, path))
                        if isinstance(item, dict))


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    argv = cli.checked_flags("tar_to_tfrecord", argv)
    options = PipelineOptions(argv)
    tar = options.view_as(InputOptions)
    if not tar.input:
        raise ValueError("--input is required (a tar file pattern)")
    patterns = comma_list(tar.input)
    matched = matched_files(patterns)
    files = [m.path for m in matched]
    spec = feature_spec(options, _samples_in(files))
    config = dataset_config(options, spec, source={
        "type": "tar", "input": tar.input, "num_files": len(files),
        "input_bytes": sum(m.size_in_bytes for m in matched)})
    return run_dataset_job(options, config,
                           ReadTarSamples(patterns, config.target_shard_bytes).source)


if __name__ == "__main__":
    cli.main(run)
