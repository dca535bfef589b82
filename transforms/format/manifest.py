"""The dataset manifest: `dataset_info.json` and `schema.pbtxt`.

Beam-free and TensorFlow-free: the pipeline builds the manifest here, the
reader and `pipelines.inspect_dataset` read it back through `DatasetInfo`. The manifest
is the only contract between writer and reader: feature spec, compression, and
per split the example count, bytes and each shard's file and count.
"""

from __future__ import annotations

import datetime
import json
from importlib import metadata
from typing import Any, Mapping, Sequence

from transforms.format.spec import FeatureSpec

__all__ = ["MANIFEST", "SCHEMA", "FAILURES_FILE", "FORMAT_VERSION", "build_manifest",
           "schema_pbtxt", "schema_proto", "DatasetInfo"]

MANIFEST = "dataset_info.json"
SCHEMA = "schema.pbtxt"
FAILURES_FILE = "failures/failures.jsonl"
FORMAT_VERSION = 1

_TFMD_TYPES = {"bytes": "BYTES", "int64": "INT", "float": "FLOAT"}


def _package_version() -> str:
    try:
        return metadata.version("beam-datagen")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_manifest(*, spec: FeatureSpec, splits: Mapping[str, Any], compression: str,
                   accounting: Mapping[str, Any], num_failures: int, source: Mapping[str, Any],
                   options: Mapping[str, Any], split_names: list,
                   label_counts: Mapping[str, Mapping[str, int]] | None = None,
                   group_counts: Mapping[str, int] | None = None, warnings: Sequence[str] = (),
                   transform: Mapping[str, Any] | None = None) -> dict:
    """The dataset_info.json document (a JSON-ready dict).

    Every split named by the options is listed, with zero examples if none fell
    in it, so a reader can tell an empty split from a missing one. With
    `label_counts` ({split: {label: examples}}, for --label_field or
    --stratify_by), each split also records its examples per label; with
    `group_counts` ({split: groups}), its number of --split_by groups.
    `warnings` are the final step's (a split off its ratio). With
    `transform` (tf.Transform's section: its directories, the preprocessing
    and the raw features), `spec` is the transformed examples'.
    """
    splits = {name: dict(splits.get(name, {"num_examples": 0, "num_bytes": 0, "shards": []}))
              for name in split_names}
    if label_counts is not None:
        for name, split in splits.items():
            split["label_counts"] = dict(label_counts.get(name, {}))
    if group_counts is not None:
        for name, split in splits.items():
            split["num_groups"] = group_counts.get(name, 0)
    return {
        "format_version": FORMAT_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "package_version": _package_version(),
        "source": dict(source),
        "options": dict(options),
        "features": spec.to_json(),
        "compression": compression,
        "splits": splits,
        "accounting": dict(accounting),
        "failures": {"count": num_failures, "file": FAILURES_FILE if num_failures else None},
        "warnings": list(warnings),
        **({"transform": dict(transform)} if transform is not None else {}),
    }


def schema_pbtxt(spec: FeatureSpec) -> str:
    """The spec as a tensorflow_metadata Schema in text format."""
    from google.protobuf import text_format

    return text_format.MessageToString(schema_proto(spec))


def schema_proto(spec: FeatureSpec):
    """The spec as a tensorflow_metadata Schema (what TFXIO decodes tf.Examples with)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for f in spec:
        feature = schema.feature.add(name=f.name, type=_TFMD_TYPES[f.kind])
        feature.presence.min_fraction = 1.0
        feature.presence.min_count = 1
        if f.is_variable:
            feature.value_count.min = 0
        else:
            feature.shape.dim.extend(schema_pb2.FixedShape.Dim(size=d) for d in f.stored_shape)
    return schema


class DatasetInfo:
    """A parsed dataset_info.json: the spec, the splits and their shard files."""

    def __init__(self, document: Mapping[str, Any]):
        version = document.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"{MANIFEST}: format_version {version!r} is not {FORMAT_VERSION}")
        self.document = document
        self.spec = FeatureSpec.from_json(document["features"])
        self.compression = document["compression"]
        self.splits = document["splits"]
        # With tf.Transform, `spec` is the transformed examples' and the raw one is here.
        self.transform = document.get("transform")
        self.raw_spec = (FeatureSpec.from_json(self.transform["raw_features"])
                         if self.transform else self.spec)

    @classmethod
    def from_json(cls, text: str | bytes) -> "DatasetInfo":
        return cls(json.loads(text))

    def split(self, name: str) -> Mapping[str, Any]:
        if name not in self.splits:
            raise ValueError(f"no split {name!r}; the dataset has {', '.join(self.splits)}")
        return self.splits[name]

    def files(self, split: str) -> list:
        """The split's shard paths, relative to the output directory, in order."""
        return [s["file"] for s in self.split(split)["shards"]]

    def num_examples(self, split: str) -> int:
        return self.split(split)["num_examples"]
