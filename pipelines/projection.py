"""What a whole job would make and cost, projected from a dry run (pipelines/dry_run.py).

Pure arithmetic. Every count scales by the input's stored bytes over those of
the files the dry run read whole: examples and bytes, dead letters and
samples. They go to the splits by the split ratios when splits are hashed
groups (the first samples hold few groups, so their shares say little of
the job's; with many groups the job's shares come near the ratios), by the
shares in the samples built for --split_column. Shards follow the writer:
with `--shuffle none` each work unit rolls its own shards per split at the
target size, so a unit of `u` input
bytes makes ceil(its split's bytes / target) of them; with `--shuffle
global`, `--num_shards` per split or the split's bytes over the target. The
Dataflow cost is docs/scale.md's model: the per-core rate measured by the
dry run, planned at 60% of it on a Dataflow vCPU; list prices as recorded
there; a shuffle priced only for the global layout (every example, twice).
"""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple, Sequence

from pipelines.dry_run import SampleMeasure
from transforms.format.shard_format import ShardFormat
from transforms.recipe.accounting import Accounting
from transforms.recipe.examples import PROTOBUF_LIMIT
from transforms.recipe.measures.quality import quality_lines

__all__ = ["Projection", "project", "render"]

# docs/scale.md, section 2.
PLANNING_FACTOR = 0.6
VCPU_HOUR = 0.056
GB_HOUR = 0.003557
SHUFFLE_GB = 0.011
SHUFFLE_TIERS = ((250, 0.25), (4870, 0.5), (math.inf, 1.0))  # (GB, share of the price)
CLASS_A_OP = 0.05 / 10_000
STORAGE_GB_MONTH = 0.020
# Memory per vCPU: n2-highcpu for audio, n2-standard for video's decoded frames.
MACHINES = {False: ("n2-highcpu-4", 1.0), True: ("n2-standard-4", 4.0)}


class Projection(NamedTuple):
    scale: float            # whole input / what the dry run read
    samples: int
    examples: dict          # split -> examples
    bytes: dict             # split -> serialized bytes
    shards: dict            # split -> shards
    dead_letters: int
    largest: int            # bytes of the largest example built
    sizes: tuple            # every example built, bytes
    rate: float             # MB of input per second on one core, measured
    vcpu_hours: float
    machine: str
    cost: dict              # what -> dollars


def _shuffle_dollars(gb: float) -> float:
    dollars, left = 0.0, gb
    for tier, share in SHUFFLE_TIERS:
        used = min(left, tier)
        dollars += used * share * SHUFFLE_GB
        left -= used
    return dollars


def project(measure: SampleMeasure, *, input_bytes: int, read_bytes: int,
            split_ratios: Mapping[str, float] | None, split_names: Sequence[str],
            shard_size_bytes: int,
            shuffle: str, num_shards: int, shard_format: ShardFormat,
            video: bool) -> Projection:
    """The whole job's figures from `measure`, whose whole files hold `read_bytes`
    of the input's `input_bytes` (the module docstring says how)."""
    scale = 1.0 if measure.complete else input_bytes / max(read_bytes, 1)
    per_built = scale * measure.samples_read / max(measure.samples_built, 1)
    examples = {s: len(measure.example_sizes.get(s, ())) * per_built for s in split_names}
    split_bytes = {s: sum(measure.example_sizes.get(s, ())) * per_built for s in split_names}
    if split_ratios:  # hashed groups: the first samples' few groups say little of the shares
        examples = {s: sum(examples.values()) * split_ratios[s] for s in split_names}
        split_bytes = {s: sum(split_bytes.values()) * split_ratios[s] for s in split_names}
    examples = {s: round(n) for s, n in examples.items()}
    split_bytes = {s: round(n) for s, n in split_bytes.items()}
    if shuffle == "global":
        shards = {s: (num_shards or math.ceil(b / shard_size_bytes)) if b else 0
                  for s, b in split_bytes.items()}
    else:
        shards = {s: sum(math.ceil(b * u / input_bytes / shard_size_bytes)
                         for u in measure.unit_sizes) if b else 0 for s, b in split_bytes.items()}
    failed = Accounting(measure.tallies).failed
    sizes = tuple(n for values in measure.example_sizes.values() for n in values)
    built_bytes = read_bytes * measure.samples_built / max(measure.samples_read, 1)
    rate = built_bytes / 1e6 / max(measure.seconds, 1e-9)
    vcpu_hours = input_bytes / 1e6 / (rate * PLANNING_FACTOR) / 3600
    machine, memory_gb = MACHINES[video]
    files_per_shard = 2 if shard_format.has_record_index else 1  # a record index beside each
    total_bytes = sum(split_bytes.values())
    cost = {
        "compute": vcpu_hours * (VCPU_HOUR + memory_gb * GB_HOUR),
        "shuffle": _shuffle_dollars(2 * total_bytes / 1e9) if shuffle == "global" else 0.0,
        # each file written to the temporary folder, then copied into place
        "objects": 2 * files_per_shard * sum(shards.values()) * CLASS_A_OP,
    }
    cost["storage_per_month"] = total_bytes / 1e9 * STORAGE_GB_MONTH
    return Projection(scale, round(measure.samples_read * scale), examples, split_bytes, shards,
                      round((failed + measure.files_failed) * per_built), max(sizes, default=0),
                      sizes, rate, vcpu_hours, machine, cost)


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def _histogram(sizes: Sequence[int]) -> list:
    """Example sizes in powers-of-two bins, as text lines with bars."""
    if not sizes:
        return []
    bins: dict = {}
    for n in sizes:
        bins[max(n, 1).bit_length()] = bins.get(max(n, 1).bit_length(), 0) + 1
    widest = max(bins.values())
    return [f"      {_kb(1 << (b - 1))}-{_kb(1 << b)} {'#' * max(1, 40 * n // widest):<40} {n}"
            for b, n in sorted(bins.items())]


def _kb(n: int) -> str:
    return f"{n / 1024:>7.1f} KB"


def render(p: Projection, measure: SampleMeasure, *, input_bytes: int, read_bytes: int,
           input_files: int, options: Mapping[str, object]) -> str:
    """The dry run's report (what `--dry_run_samples` prints)."""
    def per_split(values: dict, show) -> str:
        return ", ".join(f"{s} {show(v)}" for s, v in values.items())

    built_failed = Accounting(measure.tallies).failed
    lines = [
        f"dry run: the recipe ran on {measure.samples_built} samples here in "
        f"{measure.seconds:.1f} s; nothing was written",
        f"  read whole: {len(measure.files_read)} of {input_files} input files, "
        f"{_mb(read_bytes)} of "
        f"{_mb(input_bytes)} ({'all of it' if measure.complete else f'scale x{p.scale:.2f}'}), "
        f"{measure.samples_read} samples",
        f"  projected for the whole input, about {p.samples} samples:",
        f"    examples     {per_split(p.examples, str)} (total {sum(p.examples.values())})",
        f"    bytes        {per_split(p.bytes, _mb)} (serialized, before compression)",
        f"    shards       {per_split(p.shards, str)} (--shuffle {options['shuffle']}, "
        f"--shard_size_mb {options['shard_size_mb']:g})",
        f"    dead letters about {p.dead_letters} ({built_failed} among the samples built)",
        f"  example sizes, of the {len(p.sizes)} built:",
        *_histogram(p.sizes),
        f"  largest example {_kb(p.largest).strip()}: {p.largest / PROTOBUF_LIMIT:.4%} of "
        "protobuf's 2 GiB limit (a larger one would be a dead letter)",
        f"  Dataflow (docs/scale.md): {_mb(input_bytes)} at {PLANNING_FACTOR} x "
        f"{p.rate:.1f} MB/s per core measured here = {p.vcpu_hours:.3g} vCPU-hours on "
        f"{p.machine}: compute ${p.cost['compute']:.2f}, shuffle ${p.cost['shuffle']:.2f}, "
        f"object writes ${p.cost['objects']:.2f}; the shards cost "
        f"${p.cost['storage_per_month']:.2f} a month to keep",
    ]
    if measure.quality:
        filtered = Accounting(measure.tallies).section.get("examples_filtered_per_reason", {})
        lines += ["  quality of the examples built (--quality), and what --keep removed:",
                  *(f"    {line}" for line in quality_lines(measure.quality, filtered))]
    return "\n".join(lines)
