"""What a launcher does around WriteDataset, before and after its pipeline runs.

    run, picked_up = open_run(config, resume=False, retry_failed=False)
    pipeline | WriteDataset(config, source, run=run)
    result = pipeline.run(); result.wait_until_finish()
    info, lines = published(config.output)      # the manifest, and what to print

- `open_run`: the run's folder (fresh, or the earlier work --resume and
  --retry_failed pick up: pipelines/resume.py), after checking that the
  output is writable: before any work, so an output it cannot write costs
  nothing;
- `dry_run`: --dry_run_samples, the recipe on the first samples here, and the
  whole job projected from them (dry_run.py, projection.py);
- `reuse_line`: what a resumed run reused and converted, from its counters;
- `published`: the finished dataset's manifest, its summary and warnings.

The command line's launcher (pipelines/dataset_job.py) is made of these; a
pipeline of a user's gets the same from WriteDataset alone, with a fresh run.
"""

from __future__ import annotations

from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter

from pipelines import projection
from pipelines.dry_run import measure_sample
from pipelines.resume import plan_run_folder, start_run
from transforms.format.manifest import summary_line
from transforms.recipe.units import Source
from transforms.runner.counters import NAMESPACE
from transforms.storage.folders import check_writable, read_manifest
from transforms.writer import ledger
from transforms.writer.ledger import RunFolder
from transforms.writer.write import DatasetConfig

__all__ = ["dry_run", "open_run", "published", "reuse_line"]


def open_run(config: DatasetConfig, *, resume: bool, retry_failed: bool) -> tuple[RunFolder, str]:
    """The run's folder, marked with the recipe, and a line saying what earlier
    work it picks up ('' for a fresh run). ValueError naming the flag or the
    output before any work: earlier work of another recipe, an output it
    cannot write."""
    recipe = config.describe()
    run, picked_up = plan_run_folder(config.output, config.fingerprint, config.options, recipe,
                                     resume=resume, retry_failed=retry_failed)
    # After every flag check, so a flag error leaves no folder behind.
    check_writable(config.output)
    start_run(run, config.fingerprint, config.options, recipe)
    return run, picked_up


def dry_run(config: DatasetConfig, source: Source, samples: int) -> projection.Projection:
    """--dry_run_samples: the recipe on the first `samples` samples, here; prints
    and returns the whole job's Projection (pipelines/projection.py)."""
    input_bytes = config.source.get("input_bytes")
    if not input_bytes:
        raise ValueError(f"--dry_run_samples: a {config.source['type']} source's size is not "
                         "known before reading it; it projects tar shards only")
    measure = measure_sample(source, config.recipe, samples)
    read_bytes = sum(m.size_in_bytes for result in FileSystems.match(list(measure.files_read))
                     for m in result.metadata_list)
    plan = config.recipe.split_plan
    projected = projection.project(
        measure, input_bytes=input_bytes, read_bytes=read_bytes,
        split_ratios=None if plan.column else dict(plan.splits), split_names=plan.names,
        shard_size_bytes=config.shard_size_bytes,
        shuffle=config.shuffle, num_shards=config.num_shards,
        shard_format=config.shard_format,
        video=config.recipe.cut.mode in ("frames", "clips"))
    print(projection.render(projected, measure, input_bytes=input_bytes, read_bytes=read_bytes,
                            input_files=config.source.get("num_files", len(measure.files_read)),
                            options={"shuffle": config.shuffle,
                                     "shard_size_mb": config.shard_size_bytes / (1 << 20)}))
    return projected


_CONVERTED_BECAUSE = {ledger.CHANGED: "whose input files changed since they were read",
                      ledger.RETRIED: "that held dead letters"}


def reuse_line(result) -> str:
    """'resume: 3 work units reused, 5 converted (2 whose input files changed
    since they were read)', from the finished job's counters."""
    counts = {name: sum(c.committed or 0 for c in result.metrics().query(
        MetricsFilter().with_namespace(NAMESPACE).with_name(name))["counters"])
        for name in (ledger.REUSE, ledger.NEW, ledger.CHANGED, ledger.RETRIED)}
    converted = counts[ledger.NEW] + counts[ledger.CHANGED] + counts[ledger.RETRIED]
    why = ", ".join(f"{counts[r]} {text}" for r, text in _CONVERTED_BECAUSE.items() if counts[r])
    return (f"resume: {counts[ledger.REUSE]} work units reused, {converted} converted"
            + (f" ({why})" if why else ""))


def published(output: str) -> tuple[dict, list]:
    """The published dataset's manifest, and the lines that tell a user of it:
    the summary, then each warning."""
    info = read_manifest(output)
    return info, [summary_line(info)] + [f"warning: {w}" for w in info["warnings"]]
