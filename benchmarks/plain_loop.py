"""The baseline of the writer benchmarks: tar shards to TFRecords in a plain loop on one core.

    python -m benchmarks.plain_loop [--part I/N] --input 'corpus/*.tar' --output out/ \
        [tar_to_tfrecord's flags]

What the pipeline does to each work unit, with nothing else: the same flags
parsed by the same launch code (pipelines.dataset_options), the same units
(transforms.sources.tar.plan_tar_units), then for each unit in order the tar
reader (leaving large members stored, as the converter's does), the sample
driver the converter runs (transforms/recipe/driver.py: decode, cut, encode,
the tallies) and `RollingShards` (frame, compress, write). No Beam runner, no
final naming, no manifest: the fastest this project's own functions convert a
corpus on one core, so a pipeline's ratio to it is the price (or the gain) of
running them in Beam.

`--part I/N` converts only the units whose index is I modulo N (how the
local runner deals units to N workers): N such loops side by side are the most
any N-way split of this work can gain on the machine, Beam or not.
"""

from __future__ import annotations

import argparse

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipelines.dataset_job import dataset_config
from pipelines.job_options import InputOptions
from transforms.recipe.driver import SampleDriver
from transforms.recipe.examples import Example
from transforms.recipe.observers import CONTENT_FINGERPRINTS, KEYS, SPLIT_GROUPS
from transforms.recipe.units import streaming
from transforms.sources.tar import ReadTarSamples, TarReader, plan_tar_units
from transforms.writer.rolling_shards import RollingShards


def convert(argv: list, part: int = 0, parts: int = 1) -> int:
    """Converts the corpus the flags name (units `part` modulo `parts`); returns the
    examples written."""
    options = PipelineOptions(argv)
    patterns = options.view_as(InputOptions).input.split(",")
    config = dataset_config(options, ReadTarSamples(patterns))
    recipe = config.recipe
    reader = streaming(TarReader())
    reader.setup()
    driver = SampleDriver(recipe, measure=True)
    driver.setup()
    temp_dir = FileSystems.join(config.output, "plain-loop")
    written = 0
    for unit in plan_tar_units(patterns, config.shard_size_bytes)[part::parts]:
        shards = RollingShards(temp_dir, (unit.index,), config.shard_format,
                               config.shard_size_bytes)
        work = driver.start((SPLIT_GROUPS, KEYS, CONTENT_FINGERPRINTS))
        for event in reader.read(unit):
            for example in driver.take(event, work):
                if isinstance(example, Example):
                    shards.write(example.split, example.serialized)
                    written += 1
        shards.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="0/1", help="I/N: the units I modulo N")
    args, flags = parser.parse_known_args()
    part, parts = (int(n) for n in args.part.split("/"))
    print(f"plain loop: {convert(flags, part, parts)} examples written")


if __name__ == "__main__":
    main()
