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

from apache_beam.options.pipeline_options import PipelineOptions

import transforms as dg
from pipelines import cli
from pipelines.dataset_job import dataset_config, run_dataset_job, shard_size_bytes
from pipelines.job_options import input_patterns

__all__ = ["run"]


def run(argv=None) -> dict | None:
    """Builds and runs the job; returns the manifest once it has finished."""
    options = PipelineOptions(cli.checked_flags("tar_to_tfrecord", argv))
    with cli.in_job_terms("tar_to_tfrecord"):
        read = dg.ReadTarSamples(input_patterns(options, "a tar file pattern"),
                                 shard_size_bytes(options))
        config = dataset_config(options, read)   # matches the files: --input's error
    return run_dataset_job(options, config, read.source)


if __name__ == "__main__":
    cli.main(run)
