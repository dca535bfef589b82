"""The dataset manifest: `manifest.json` and `schema.pbtxt`.

Beam-free and TensorFlow-free: the pipeline builds the manifest here, the
reader and `pipelines.inspect` read it back through `DatasetInfo`. The manifest
is the only contract between writer and reader: feature spec, compression, and
per split the example count, bytes and each shard's file and count.
"""

from __future__ import annotations

import datetime
import json
import math
from importlib import metadata
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

from transforms.format.shard_format import ShardFormat
from transforms.format.spec import FeatureSpec
from transforms.format.text import comma_list

__all__ = ["MANIFEST", "LEGACY_MANIFEST", "SCHEMA", "FAILURES_FILE", "DUPLICATES_FILE", "AT_READ",
           "IN_SHARDS",
           "FORMAT_VERSION", "MANIFEST_KEYS", "Section", "TOP", "PER_SPLIT", "ACCOUNTING",
           "TEMP_PREFIX", "build_manifest", "class_names", "declared_classes", "lists_duplicates",
           "schema_pbtxt",
           "schema_proto",
           "DatasetInfo"]

MANIFEST = "manifest.json"
# Where datasets written before TFDS's files took that name kept their manifest.
LEGACY_MANIFEST = "dataset_info.json"
SCHEMA = "schema.pbtxt"
FAILURES_FILE = "failures/failures.jsonl"
# Where a tf.Transform is applied (its section's `applied`): by readers, the
# shards holding the raw features, or in the shards.
AT_READ, IN_SHARDS = "at_read", "in_shards"
# Groups of samples of identical content (transforms/checks/duplicates.py).
DUPLICATES_FILE = "duplicates.jsonl"
FORMAT_VERSION = 1
# Every run writes under <output>/<TEMP_PREFIX><run id>/ until it is published.
TEMP_PREFIX = ".temp-datagen-"

# The names the manifest gives its own entries (at its top, in a split's entry
# and in the accounting): no measure's section may take one.
MANIFEST_KEYS = frozenset((
    "format_version", "created", "package_version", "source", "options", "recipe",
    "recipe_fingerprint", "features", "compression", "splits", "accounting", "failures",
    "warnings", "ledger", "duplicates", "transform", "audio_features", "augmentation",
    "num_examples", "num_bytes", "shards", "num_groups", "segments", "cut_examples"))


# Where a Section goes: the manifest's key of its name, each split entry's
# (the value is {split: entry}), or the accounting's.
TOP, PER_SPLIT, ACCOUNTING = "manifest", "splits", "accounting"


class Section(NamedTuple):
    """A measure's section (transforms/recipe/measures/): its `name`, its
    `value`, and its `place`: TOP, PER_SPLIT or ACCOUNTING."""

    place: str
    name: str
    value: Any


_TFMD_TYPES = {"bytes": "BYTES", "int64": "INT", "float": "FLOAT"}


def _package_version() -> str:
    try:
        return metadata.version("beam-datagen")
    except metadata.PackageNotFoundError:
        return "unknown"


def build_manifest(*, spec: FeatureSpec, splits: Mapping[str, Any], shard_format: ShardFormat,
                   accounting: Mapping[str, Any], num_failures: int, source: Mapping[str, Any],
                   options: Mapping[str, Any], split_names: list,
                   group_counts: Mapping[str, int] | None = None, warnings: Sequence[str] = (),
                   transform: Mapping[str, Any] | None = None, recipe_fingerprint: str = "",
                   ledger: str | None = None,
                   duplicates: Mapping[str, Any] | None = None,
                   audio_features: Mapping[str, Any] | None = None,
                   augmentation: Mapping[str, Any] | None = None,
                   recipe: Mapping[str, Any] | None = None,
                   sections: Sequence[Section] = ()) -> dict:
    """The manifest.json document (a JSON-ready dict).

    Every split named by the options is listed, with zero examples if none fell
    in it, so a reader can tell an empty split from a missing one. With
    `group_counts` ({split: groups}), each split records its number of
    --split_by groups. `warnings` are the final step's (a split off its
    ratio). `spec` is what the shards hold; `transform` is tf.Transform's
    section (its directories, the preprocessing, where it is applied, the raw
    and the transformed features).
    `recipe_fingerprint` and `ledger` (its units.jsonl) let a rerun with
    --resume or --retry_failed reuse its units (transforms/writer/ledger.py).
    `duplicates` is the duplicate check's summary (transforms/checks/duplicates.py),
    None when it was off. `audio_features` ({feature: its description}) is
    what the audio features are; `augmentation` what the augmentation's
    corpora held (transforms/media/augment.py). `recipe` is the recipe as it
    describes itself (the cut, splits, sample operations, segments,
    transcripts, measures, preprocessing and writing: DatasetConfig.describe),
    the same whichever way in wrote the dataset; `options` the command line's
    flags, empty for a dataset Python wrote. `sections` are the measures'
    (transforms/recipe/measures/): each split's examples per label
    (`label_counts`) and durations (`durations`, transforms/format/durations.py),
    the statistics of the features the cut made (`statistics`), the
    transcripts' characters (`transcripts`), and any of the recipe's own.
    """
    splits = {name: dict(splits.get(name, {"num_examples": 0, "num_bytes": 0, "shards": []}))
              for name in split_names}
    if group_counts is not None:
        for name, split in splits.items():
            split["num_groups"] = group_counts.get(name, 0)
    placed = {TOP: {}, ACCOUNTING: {}}
    for section in sections:
        if section.place == PER_SPLIT:
            for name, entry in section.value.items():
                if name in splits:
                    splits[name][section.name] = entry
        else:
            placed[section.place][section.name] = section.value
    return {
        "format_version": FORMAT_VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "package_version": _package_version(),
        "source": dict(source),
        "options": dict(options),
        **({"recipe": dict(recipe)} if recipe is not None else {}),
        "recipe_fingerprint": recipe_fingerprint,
        "features": spec.to_json(),
        "file_format": shard_format.file_format,
        "compression": shard_format.compression,
        "splits": splits,
        "accounting": {**accounting, **placed[ACCOUNTING]},
        "failures": {"count": num_failures, "file": FAILURES_FILE if num_failures else None},
        "warnings": list(warnings),
        "ledger": ledger,
        **({"duplicates": {**duplicates, "file": DUPLICATES_FILE if lists_duplicates(duplicates)
                           else None}} if duplicates is not None else {}),
        **({"transform": dict(transform)} if transform is not None else {}),
        **({"audio_features": dict(audio_features)} if audio_features else {}),
        **placed[TOP],
        **({"augmentation": dict(augmentation)} if augmentation else {}),
    }


def schema_pbtxt(spec: FeatureSpec, num_classes: Mapping[str, int] | None = None,
                 bounds: Mapping[str, tuple] | None = None) -> str:
    """The spec as a tensorflow_metadata Schema in text format."""
    from google.protobuf import text_format

    return text_format.MessageToString(schema_proto(spec, num_classes, bounds))


_INT32 = (-2**31, 2**31 - 1)


def _bound(feature, kind: str, low: float | None, high: float | None) -> None:
    """The Schema `feature`'s float_domain (int_domain: the whole numbers
    within) of values from `low` to `high`."""
    if kind == "float":
        domain = feature.float_domain
    else:
        domain = feature.int_domain
        low = None if low is None else math.ceil(low)
        high = None if high is None else math.floor(high)
    if low is not None:
        domain.min = low
    if high is not None:
        domain.max = high


def lists_duplicates(summary: Mapping[str, Any]) -> bool:
    """Whether the duplicate check's summary lists anything (a group of copies
    or a pair alike but not one recording): then duplicates.jsonl is published."""
    return bool(summary["groups"] or summary.get("similar"))


def _label_classes(spec: FeatureSpec, label_source: str | None,
                   label_counts: Iterable[Mapping[str, int]]) -> dict:
    """{feature: number of classes} for the int64 scalar holding the labels
    counted per split (--label_field, --stratify_by), when every label is a
    non-negative integer (the classes are then 0..max); {} otherwise."""
    labels = {label for counts in label_counts for label in counts}
    if not labels or not all(label.isdigit() for label in labels):
        return {}
    return {f.name: max(map(int, labels)) + 1 for f in spec
            if f.source == label_source and f.dtype == "int64" and not f.shape}


def class_names(document: Mapping[str, Any]) -> dict:
    """{feature: its classes' names} of the manifest's int64 scalars whose
    source column the input declares names for (a Hugging Face ClassLabel:
    the recipe's `class_names`, {column: names}; an earlier version's source
    section held them)."""
    declared = (document.get("recipe", {}).get("class_names")
                or document.get("source", {}).get("class_names") or {})
    return {f.name: list(declared[f.source]) for f in FeatureSpec.from_json(document["features"])
            if f.source in declared and f.dtype == "int64" and not f.shape}


def declared_classes(document: Mapping[str, Any]) -> dict:
    """{feature: its number of classes 0..n-1}, as a manifest declares them:
    a label's (--label_field, --stratify_by) by the labels counted, all
    non-negative integers, and a column's whose class names the input
    declares. What schema.pbtxt's int_domain and TFDS's ClassLabel say, and
    what verify holds every value to."""
    spec = FeatureSpec.from_json(document["features"])
    splits = document.get("recipe", {}).get("splits") or {}
    counts = (split.get("label_counts") or {} for split in document["splits"].values())
    return {**_label_classes(spec, splits.get("stratify_by") or splits.get("label_field"),
                             counts),
            **{feature: len(names) for feature, names in class_names(document).items()}}


def schema_proto(spec: FeatureSpec, num_classes: Mapping[str, int] | None = None,
                 bounds: Mapping[str, tuple] | None = None):
    """The spec as a tensorflow_metadata Schema (what TFXIO decodes tf.Examples
    with, and TFDV validates statistics against).

    Beside type, presence and shape, each feature says what the schema
    language can: `image_domain` for JPEG frames, `audio_domain` for audio,
    `bool_domain` for bools, an `int_domain` for int32 (its range) and for
    labels with `num_classes` ({feature: classes}: categorical, 0..n-1), and
    a `float_domain` or `int_domain` for a number within `bounds` ({feature:
    (lowest or None, highest or None)}: what --keep kept). What
    it cannot say (int16, uint8 or float16 arrays packed into one bytes value, a
    double stored as float32, the sample rate) goes in the feature's
    annotation: `beam_datagen.dtype:int16`, `beam_datagen.shape:[8000]`,
    `beam_datagen.sample_rate:16000`, with a comment in words.
    """
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for f in spec:
        feature = schema.feature.add(name=f.name, type=_TFMD_TYPES[f.kind])
        feature.presence.min_fraction = 1.0
        feature.presence.min_count = 1
        if f.stored_variable:
            feature.value_count.min = 0
        else:
            feature.shape.dim.extend(schema_pb2.FixedShape.Dim(size=d) for d in f.stored_shape)
        _describe(feature, f, (num_classes or {}).get(f.name), (bounds or {}).get(f.name))
    return schema


def _describe(feature, f, num_classes: int | None, bounds: tuple | None) -> None:
    """Sets the domain and annotation of the Schema `feature` for spec feature `f`."""
    if bounds is not None and not f.shape and f.kind in ("float", "int64"):
        _bound(feature, f.kind, *bounds)
    if f.dtype == "jpeg":
        feature.image_domain.SetInParent()
    elif f.sample_rate:
        feature.audio_domain.SetInParent()
    elif num_classes is not None:
        feature.int_domain.min, feature.int_domain.max = 0, num_classes - 1
        feature.int_domain.is_categorical = True
    elif f.dtype == "bool":
        feature.bool_domain.SetInParent()
    elif f.dtype == "int32":
        feature.int_domain.min, feature.int_domain.max = _INT32
    if f.dtype == _STORED_AS[f.kind] and not f.sample_rate:
        return
    feature.annotation.tag.append(f"beam_datagen.dtype:{f.dtype}")
    if f.stored_shape != f.shape:
        feature.annotation.tag.append(f"beam_datagen.shape:{list(f.shape)}")
    if f.sample_rate:
        feature.annotation.tag.append(f"beam_datagen.sample_rate:{f.sample_rate}")
    words = _COMMENTS.get(f.dtype, f"{f.dtype}{{shape}}").format(shape=list(f.shape))
    feature.annotation.comment.append(
        f"{words}: audio at {f.sample_rate} Hz" if f.sample_rate else words)


# The declared dtype a tf.Example list holds without saying more.
_STORED_AS = {"bytes": "bytes", "int64": "int64", "float": "float"}
_COMMENTS = {
    "int16": "int16{shape}, packed little-endian into one bytes value",
    "uint8": "uint8{shape}, packed into one bytes value",
    "float16": "float16{shape}, packed little-endian into one bytes value, read as float32",
    "jpeg": "JPEG image(s) of shape {shape}",
    "string": "UTF-8 text",
    "bool": "bool, stored as 0/1",
    "int32": "int32, stored as int64",
    "double": "float64, stored as float32",
}


def summary_line(info: Mapping[str, Any]) -> str:
    """'datagen: 120 samples read -> 118 written (train 94, eval 12, test 12), ...'."""
    a = info["accounting"]
    per_split = ", ".join(f"{name} {s['num_examples']}" for name, s in info["splits"].items())
    examples = sum(s["num_examples"] for s in info["splits"].values())
    line = f"datagen: {a['samples_read']} samples read, "
    segments = a.get("segments")
    if segments:
        line += (f"{segments['read']} segments ({segments['written']} written, "
                 f"{segments['filtered']} filtered, {segments['failed']} failed), ")
    line += (f"{examples} examples written ({per_split}), {a['samples_filtered']} filtered, "
             f"{a['samples_failed']} samples + {a['files_failed']} files failed")
    if info["failures"]["file"]:
        line += f" (see {info['failures']['file']})"
    return line


class DatasetInfo:
    """A parsed manifest.json: the spec, the splits and their shard files, and
    what the run that wrote it counted and warned of.

    >>> import apache_beam as beam, transforms as dg
    >>> with dg.make_pipeline() as p:
    ...     _ = p | beam.Create([{"x": i} for i in range(10)]) | dg.WriteDataset(
    ...         "numbers", features="x:int64", splits="train=1")
    >>> info = dg.load_info("numbers")
    >>> print(info.summary)
    datagen: 10 samples read, 10 examples written (train 10), 0 filtered, 0 samples + 0 files
    failed
    >>> info.accounting["samples_written"], info.warnings
    (10, [])
    """

    def __init__(self, document: Mapping[str, Any]):
        version = document.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"{MANIFEST}: format_version {version!r} is not {FORMAT_VERSION}")
        self.document = document
        self.spec = FeatureSpec.from_json(document["features"])
        # Manifests from before ArrayRecord have no file_format: theirs is TFRecord.
        self.shard_format = ShardFormat(document.get("file_format", "tfrecord"),
                                        document["compression"])
        self.splits = document["splits"]
        # `spec` is what the shards hold. With tf.Transform the raw features are
        # `raw_spec`, and a reader gets `read_spec`: the transform's outputs, which
        # it computes as it reads where the transform is applied at read time.
        self.transform = document.get("transform")
        self.transform_at_read = bool(self.transform) and self.transform.get("applied") == AT_READ
        self.raw_spec = (FeatureSpec.from_json(self.transform["raw_features"])
                         if self.transform else self.spec)
        self.read_spec = (FeatureSpec.from_json(self.transform["transformed_features"])
                          if self.transform_at_read else self.spec)

    @classmethod
    def from_json(cls, text: str | bytes) -> "DatasetInfo":
        return cls(json.loads(text))

    @property
    def recipe(self) -> dict:
        """The recipe the dataset was written by (DatasetConfig.describe), as
        its manifest records it; for a manifest from before it did, what its
        flags said of the cut, its augmentation, the label, the segments and
        the duplicates policy."""
        if "recipe" in self.document:
            return self.document["recipe"]
        options = self.document.get("options", {})

        def items(flag):
            return list(comma_list(str(options.get(flag) or "")))

        def numbers(flag):
            return [float(n) for n in items(flag)]
        return {"cut": {"mode": options.get("cut") or "none",
                        "audio_fields": items("audio_fields"),
                        "augment": {"copies": options.get("augment_copies") or 0,
                                    "speeds": numbers("speed_perturb"),
                                    "gain_db": numbers("gain_db"),
                                    "snr_db": numbers("snr_db")}},
                "splits": {"label_field": options.get("label_field") or None,
                           "stratify_by": options.get("stratify_by") or None},
                "segments": {"field": options.get("segments_field") or "",
                             "columns": items("segment_columns")},
                "writing": {"duplicates": options.get("duplicates", "warn")}}

    def split(self, name: str) -> Mapping[str, Any]:
        if name not in self.splits:
            raise ValueError(f"no split {name!r}; the dataset has {', '.join(self.splits)}")
        return self.splits[name]

    def files(self, split: str) -> list:
        """The split's shard paths, relative to the output directory, in order."""
        return [s["file"] for s in self.split(split)["shards"]]

    def stored_files(self) -> set:
        """Every shard and record index the manifest lists, relative to the output."""
        return {f for split in self.splits.values() for shard in split["shards"]
                for f in (shard["file"], shard.get("index", {}).get("file")) if f}

    def num_examples(self, split: str) -> int:
        return self.split(split)["num_examples"]

    @property
    def accounting(self) -> Mapping[str, Any]:
        """What the run counted: samples read, written, filtered, failed, ..."""
        return self.document["accounting"]

    @property
    def warnings(self) -> list:
        """What the run warned of (an empty split allowed, a lopsided one, duplicates)."""
        return self.document.get("warnings", [])

    @property
    def class_names(self) -> dict:
        """{feature: the names of its classes 0..n-1} where the input declared
        them (a Hugging Face ClassLabel column); {} otherwise."""
        return class_names(self.document)

    @property
    def statistics(self) -> Mapping[str, Any]:
        """{feature: {split: {"count", "mean", "variance"}}}: the per-value
        statistics of the audio features and waveforms a cut made."""
        return self.document.get("statistics", {})

    @property
    def summary(self) -> str:
        """The run's one-line summary, as the command line prints it."""
        return summary_line(self.document)
