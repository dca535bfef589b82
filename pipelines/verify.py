"""Verify a written dataset: every shard read back and checked against the manifest.

Locally:

    python -m pipelines.verify out/ [--media_samples 64] [--seed 0] [--direct_num_workers 2]

A dataset on Cloud Storage, as a Dataflow job (one shard per work item):

    python -m pipelines.verify gs://BUCKET/datasets/v1 \
        --runner DataflowRunner --project PROJECT --region REGION \
        --temp_location gs://BUCKET/tmp --setup_file ./setup.py

What it checks is transforms/verify/dataset.py's `verify_dataset` (which a Beam
user's code calls the same way). It prints one line when all is well (exit
0), else every problem, one per line, and exits 3.
"""

from __future__ import annotations

import argparse

from apache_beam.options.pipeline_options import PipelineOptions

from pipelines import cli
from pipelines.flag_types import Flag
from transforms.format.dead_letters import DatasetFailed
from transforms.verify.dataset import verify_dataset

__all__ = ["parser", "run"]


_FLAGS = (
    Flag("media_samples", "verification", type=int, default=64,
         help="About this many records, chosen by --seed, have their media decoded (JPEG "
              "frames, audio against its times and sample rate, encoded images and audio); "
              "0 decodes none."),
    Flag("seed", "verification", type=int, default=0,
         help="Chooses the records whose media decode."),
)


def _dataset_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", metavar="DATASET",
                        help="The dataset: a pipeline's --output directory (local or gs://).")


def parser() -> argparse.ArgumentParser:
    """The command line's parser: the flags above and Beam's."""
    return cli.command_parser("verify", __doc__, _FLAGS, usage="DATASET [flags]",
                              positional=_dataset_argument)


def run(argv=None) -> None:
    argv = cli.checked_flags("verify", argv, parser())
    # Beam's flags are what this command's own leave (checked above: nothing else).
    own = argparse.ArgumentParser(add_help=False)
    _dataset_argument(own)
    for flag in _FLAGS:
        flag.declare(own)
    args, beam_argv = own.parse_known_args(argv)
    if args.media_samples < 0:
        raise ValueError(f"--media_samples {args.media_samples}: must be 0 or more")
    # TensorFlow's C++ start-up lines (pipelines/cli.py) would bury the report.
    with cli.native_stderr_silenced():
        problems, summary = verify_dataset(args.dataset, args.media_samples, args.seed,
                                   PipelineOptions(beam_argv))
    if problems:
        print("\n".join(problems))
        raise DatasetFailed(f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in "
                            f"{args.dataset.rstrip('/')}")
    print(summary)


if __name__ == "__main__":
    cli.main(run, parser)
