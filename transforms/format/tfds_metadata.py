"""TFDS's description of a dataset, so `tfds.builder_from_directory(out)` reads it.

Beam-free and TensorFlow-free: the final step writes these two files beside
the manifest, in the JSON TFDS 4.x writes for its own datasets (its
`DatasetInfo` and `FeaturesDict` protos):

- `dataset_info.json`: name, version, file format and, per split, the shard
  lengths and TFDS's file template for our names,
  `{SPLIT}/data-{SHARD_X_OF_Y}.{FILEFORMAT}`;
- `features.json`: one TFDS feature per spec feature, chosen so TFDS decodes
  the bytes we wrote: `Image` for a JPEG frame, `Video` for a clip's JPEG
  frames, `Audio` for a window (raw float32 values, or int16 packed as
  bytes), `ClassLabel` for an integer label whose classes are known (their
  names, where the input declared them, in `<feature>.labels.txt`), `Text`
  for UTF-8 strings and `Tensor` for everything else (packed arrays with
  TFDS's bytes encoding; TFDS gives a float16 array as float16, where our
  reader casts it to float32).

TFDS reads uncompressed shards only (TFRecord through `as_dataset`, ArrayRecord
through `as_data_source`), so a gzip dataset gets neither file
(ShardFormat.tfds_readable).
"""

from __future__ import annotations

import re
from typing import Mapping

from transforms.format.spec import PACKED, Feature, FeatureSpec

__all__ = ["TFDS_INFO", "TFDS_FEATURES", "FILEPATH_TEMPLATE", "VERSION",
           "dataset_name", "labels_file", "tfds_feature", "tfds_features", "tfds_dataset_info"]

TFDS_INFO = "dataset_info.json"
TFDS_FEATURES = "features.json"
FILEPATH_TEMPLATE = "{SPLIT}/data-{SHARD_X_OF_Y}.{FILEFORMAT}"
# TFDS wants a semantic version; ours is the layout's, not the data's.
VERSION = "1.0.0"

_CLASS = "tensorflow_datasets.core.features."
# Declared dtype -> TFDS's dtype name (as stored: int64 lists widen bool and
# int32, float lists narrow double; TFDS casts back, as our reader does).
_DTYPES = {"bytes": "string", "string": "string", "bool": "bool", "int32": "int32",
           "int64": "int64", "float": "float32", "double": "float64",
           "int16": "int16", "uint8": "uint8", "float16": "float16"}


def labels_file(feature: str) -> str:
    """The file TFDS reads a ClassLabel feature's names from, a name a line."""
    return f"{feature}.labels.txt"


def dataset_name(output_dir: str) -> str:
    """The output folder's name as a TFDS dataset name (snake_case)."""
    base = output_dir.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_")
    return name if name and name[0].isalpha() else f"dataset_{name}".rstrip("_")


def _shape(shape: tuple) -> dict:
    dims = [str(-1 if d is None else d) for d in shape]
    return {"dimensions": dims} if dims else {}


def _tensor(feature: Feature) -> dict:
    return {"pythonClassName": _CLASS + "tensor_feature.Tensor",
            "tensor": {"dtype": _DTYPES[feature.dtype], "shape": _shape(feature.shape),
                       "encoding": "bytes" if feature.dtype in PACKED else "none"}}


def tfds_feature(feature: Feature, num_classes: int | None = None) -> dict:
    """One feature in TFDS's JSON; `num_classes` makes an int64 scalar a ClassLabel."""
    if feature.dtype == "jpeg":
        kind = "image" if len(feature.shape) == 3 else "video"
        return {"pythonClassName": _CLASS + f"{kind}_feature.{kind.capitalize()}",
                kind: {"dtype": "uint8", "encodingFormat": "jpeg",
                       "shape": _shape(feature.shape)}}
    if feature.sample_rate and feature.dtype in ("float", "int16"):
        return {"pythonClassName": _CLASS + "audio_feature.Audio",
                "audio": {"dtype": _DTYPES[feature.dtype], "shape": _shape(feature.shape),
                          "sampleRate": str(feature.sample_rate),
                          "encoding": "BYTES" if feature.dtype in PACKED else "NONE"}}
    if num_classes is not None and feature.dtype == "int64" and not feature.shape:
        return {"pythonClassName": _CLASS + "class_label_feature.ClassLabel",
                "classLabel": {"numClasses": str(num_classes)}}
    if feature.dtype == "string" and not feature.shape:
        return {"pythonClassName": _CLASS + "text_feature.Text", "text": {}}
    return _tensor(feature)


def tfds_features(spec: FeatureSpec, num_classes: Mapping[str, int],
                  descriptions: Mapping[str, str] | None = None) -> dict:
    """`features.json`: a FeaturesDict of every feature, keyed as in the
    tf.Examples; `descriptions` ({feature: text}) become TFDS's feature docs."""
    features = {}
    for f in spec:
        features[f.name] = tfds_feature(f, num_classes.get(f.name))
        if descriptions and f.name in descriptions:
            features[f.name]["description"] = descriptions[f.name]
    return {"pythonClassName": _CLASS + "features_dict.FeaturesDict",
            "featuresDict": {"features": features}}


def tfds_dataset_info(name: str, splits: Mapping[str, Mapping], description: str,
                      file_format: str = "tfrecord") -> dict:
    """`dataset_info.json` for the manifest's `splits` (each with its shards),
    whose files are `file_format`'s (TFDS's name for it: tfrecord, array_record)."""
    return {
        "name": name,
        "version": VERSION,
        "description": description,
        "fileFormat": file_format,
        "splits": [{"name": split,
                    "filepathTemplate": FILEPATH_TEMPLATE,
                    "numBytes": str(entry["num_bytes"]),
                    "shardLengths": [str(s["num_examples"]) for s in entry["shards"]]}
                   for split, entry in splits.items()],
    }
