"""Flex template metadata (dataflow_templates/<pipeline>/metadata.json), made from the flags.

    python -m pipelines.template_metadata            # rewrite every metadata.json
    python -m pipelines.template_metadata --check    # exit 1 naming the stale ones

A template's parameters are exactly the flags its pipeline reads: every flag
of the options classes it owns or shares whole (`Template.classes`), plus the
single flags it borrows from a class another job owns (`Template.borrowed`:
Beam parses every loaded options class together, so a flag is defined once
per process and borrowed, never redefined). Beam's own flags (--project,
--region, --temp_location, ...) are not parameters: Dataflow sets them for a
template job, so the Bigtable pipelines' table is in the job's project.

Each parameter comes from the flag's record (pipelines/flag_types.py `Flag`):

- helpText: the flag's help, plus `Example: X.` (its declared example, else
  its default) when the help gives no `e.g.`;
- isOptional: unless the help says "Required.";
- regexes: from the type (int, float, true/false switch) or the choices, else
  its declared regex for text of a known shape (gs:// paths, HxW, ...);
- label: its declared label, else the flag's name in words.

After adding or changing a flag, run the first command above and commit the
metadata; tests/test_dataflow_templates.py fails while it is stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from pipelines.dataset_options import DatasetOptions
from pipelines.flag_types import Flag
from pipelines.job_options import (
    BigtableLoadOptions,
    BigtableReadOptions,
    BigtableTableOptions,
    InputOptions,
    ListingOptions,
)

__all__ = ["TEMPLATES", "TEMPLATE_DIR", "Template", "example", "metadata", "path", "render"]

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "dataflow_templates")


@dataclasses.dataclass(frozen=True)
class Template:
    """One pipeline's flex template: what it is and which flags it reads."""

    title: str
    description: str
    classes: tuple                     # options classes whose every flag the job reads
    borrowed: tuple = ()               # (options class, flag name) it reads alone
    help: dict = dataclasses.field(default_factory=dict)  # flag -> help for this job

    @property
    def flags(self) -> tuple:
        """Every flag the job reads, in its classes' table order, then the borrowed."""
        borrowed = tuple(next(f for f in cls.FLAGS if f.name == name)
                         for cls, name in self.borrowed)
        return tuple(f for cls in self.classes for f in cls.FLAGS) + borrowed


_GS = "gs://my-bucket/"

TEMPLATES = {
    "tar_to_tfrecord": Template(
        "beam-datagen: tar shards to TFRecord",
        "Tar shards of raw media (WebDataset layout) on Cloud Storage -> a sharded TFRecord "
        "dataset of tf.train.Examples per split, with a manifest and dead letters.",
        (InputOptions, DatasetOptions),
        help={"input": "Tar shards on Cloud Storage: a file pattern, or several comma "
                       "separated (.tar, .tar.gz, .tar.bz2, .tar.xz). Required."}),
    "manifest_to_tfrecord": Template(
        "beam-datagen: CSV/JSONL manifest to TFRecord",
        "CSV or JSONL manifests whose rows name media files -> a sharded TFRecord dataset "
        "of tf.train.Examples per split, with a manifest and dead letters.",
        (InputOptions, ListingOptions, DatasetOptions),
        help={"input": "CSV/TSV or JSONL manifests on Cloud Storage (optionally compressed): "
                       "a file pattern, or several comma separated. Required."}),
    "parquet_to_tfrecord": Template(
        "beam-datagen: Parquet to TFRecord",
        "Parquet files whose rows hold media (embedded bytes, a Hugging Face audio struct, or "
        "a path) -> a sharded TFRecord dataset of tf.train.Examples per split, with a "
        "manifest and dead letters.",
        (InputOptions, ListingOptions, DatasetOptions),
        help={"input": "Parquet files on Cloud Storage: a file pattern, or several comma "
                       "separated. Required."}),
    "bigtable_to_tfrecord": Template(
        "beam-datagen: Bigtable to TFRecord",
        "Cloud Bigtable rows of raw media (a table in the job's project) -> a sharded "
        "TFRecord dataset per split, and/or the encoded examples in a Bigtable table.",
        (BigtableTableOptions, BigtableReadOptions, DatasetOptions),
        help={"instance": "Bigtable instance id (in the job's project). Required.",
              "table": "Bigtable table of raw media rows. Required."}),
    "tar_to_bigtable": Template(
        "beam-datagen: tar shards to Bigtable",
        "Tar shards of raw media on Cloud Storage -> a raw Cloud Bigtable table (in the "
        "job's project): one row per sample, one cell per member.",
        (BigtableTableOptions, BigtableLoadOptions),
        borrowed=((InputOptions, "input"), (DatasetOptions, "max_failure_fraction")),
        help={"input": "Tar shards on Cloud Storage: a file pattern, or several comma "
                       "separated. Required.",
              "instance": "Bigtable instance id (in the job's project). Required.",
              "table": "Bigtable table to load (created with create_table). Required."}),
}

_INT = r"^-?[0-9]+$"
_FLOAT = r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)$"
_SWITCH = r"^(true|false)$"

def example(flag: Flag) -> str | None:
    """An example value for the flag: its declared one, or for a switch true, or its
    last choice, or its default unless that is empty."""
    if flag.example:
        return flag.example
    if flag.switch:
        return "true"
    if flag.choices:
        return str(flag.choices[-1])
    if flag.default not in (None, ""):
        return str(flag.default)
    return None


def _regexes(flag: Flag) -> list:
    if flag.switch:
        return [_SWITCH]
    if flag.choices:
        return ["^(" + "|".join(map(str, flag.choices)) + ")$"]
    if flag.type is int:
        return [_INT]
    if flag.type is float:
        return [_FLOAT]
    return [flag.regex] if flag.regex else []


def _label(flag: Flag) -> str:
    if flag.label:
        return flag.label
    words = flag.name.split("_")
    if words[-1] == "s":
        words[-1] = "(s)"
    return " ".join(words).capitalize()


def _parameter(flag: Flag, help_text: str) -> dict[str, Any]:
    value = example(flag)
    if "e.g." not in help_text:
        if value is None:
            raise ValueError(f"--{flag.name}: its help gives no example; declare one "
                             f"(pipelines/flag_types.py Flag(..., example=...))")
        help_text = f"{help_text.rstrip()} Example: {value}."
    parameter = {"name": flag.name, "label": _label(flag), "helpText": help_text,
                 "isOptional": "Required." not in help_text}
    regexes = _regexes(flag)
    if regexes:
        parameter["regexes"] = regexes
    return parameter


def metadata(name: str) -> dict:
    """The metadata.json document of the template for pipeline `name`."""
    template = TEMPLATES[name]
    return {
        "name": template.title,
        "description": template.description,
        "parameters": [_parameter(f, template.help.get(f.name, f.help))
                       for f in template.flags],
    }


def path(name: str) -> str:
    return os.path.join(TEMPLATE_DIR, name, "metadata.json")


def render(name: str) -> str:
    return json.dumps(metadata(name), indent=2) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="Write nothing; exit 1 if a metadata.json differs from the flags.")
    args = parser.parse_args(argv)
    stale = []
    for name in TEMPLATES:
        text = render(name)
        try:
            with open(path(name)) as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current == text:
            continue
        stale.append(path(name))
        if not args.check:
            os.makedirs(os.path.dirname(path(name)), exist_ok=True)
            with open(path(name), "w") as f:
                f.write(text)
    verb = "stale" if args.check else "written"
    for p in stale:
        print(f"{verb}: {os.path.relpath(p)}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
