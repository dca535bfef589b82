"""TFDV's check, made with tfx-bsl: statistics of a dataset, validated against its schema.

TFDV itself does not install with our stack here: TFDV 1.21 (the release for
tfx-bsl 1.21 and TensorFlow 2.21) needs glibc 2.38, and this machine image has
2.36; TFDV 1.16 pins tfx-bsl 1.16. So this does what
`tfdv.validate_statistics(tfdv.generate_statistics_from_tfrecord(...), schema)`
does for the constraints our schema states, with the parts TFDV is built on:
tfx-bsl decodes the tf.Examples with nothing but `schema.pbtxt` into Arrow
(its `ExamplesToRecordBatchDecoder`, what TFDV's and TFX's readers use),
`statistics` summarises them into tensorflow_metadata's
`DatasetFeatureStatistics` (TFDV's output proto), and `anomalies` checks those
against the schema as TFDV's validator would: type, presence, value counts,
int domains, bool domains, and for image domains that every value is an image.
Packed arrays (annotation `beam_datagen.dtype`) must have the byte length their
declared shape needs.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2
from tfx_bsl.arrow import array_util
from tfx_bsl.coders import example_coder

_ITEM_BYTES = {"int16": 2, "uint8": 1}
_TYPES = {schema_pb2.INT: statistics_pb2.FeatureNameStatistics.INT,
          schema_pb2.FLOAT: statistics_pb2.FeatureNameStatistics.FLOAT,
          schema_pb2.BYTES: statistics_pb2.FeatureNameStatistics.BYTES}
_IMAGE_FRACTION = "image_fraction"  # custom stat: values that start like a JPEG or PNG


def decode(serialized: list, schema) -> pa.RecordBatch:
    """tf.Examples -> an Arrow RecordBatch, decoded with the schema alone (tfx-bsl)."""
    decoder = example_coder.ExamplesToRecordBatchDecoder(schema.SerializeToString())
    return decoder.DecodeBatch(serialized)


def statistics(batch: pa.RecordBatch, schema) -> statistics_pb2.DatasetFeatureStatistics:
    """What TFDV's generators record per feature, computed on the decoded batch."""
    stats = statistics_pb2.DatasetFeatureStatistics(num_examples=batch.num_rows)
    for feature in schema.feature:
        column = batch.column(batch.schema.get_field_index(feature.name))
        out = stats.features.add(type=_TYPES[feature.type])
        out.path.step.append(feature.name)
        lengths = np.asarray(array_util.ListLengthsFromListArray(column))
        present = ~np.asarray(column.is_null())
        common = (out.num_stats.common_stats if feature.type != schema_pb2.BYTES
                  else out.bytes_stats.common_stats)
        common.num_non_missing = int(present.sum())
        common.num_missing = int((~present).sum())
        common.min_num_values = int(lengths[present].min()) if present.any() else 0
        common.max_num_values = int(lengths[present].max()) if present.any() else 0
        values = column.flatten()
        if feature.type == schema_pb2.BYTES:
            sizes = np.asarray(pc.binary_length(values)) if len(values) else np.zeros(0)
            out.bytes_stats.min_num_bytes = float(sizes.min()) if len(sizes) else 0
            out.bytes_stats.max_num_bytes = float(sizes.max()) if len(sizes) else 0
            images = sum(v.startswith((b"\xff\xd8\xff", b"\x89PNG")) for v in values.to_pylist())
            out.custom_stats.add(name=_IMAGE_FRACTION, num=images / max(1, len(values)))
        elif len(values):
            out.num_stats.min = float(pc.min(values).as_py())
            out.num_stats.max = float(pc.max(values).as_py())
    return stats


def _tags(feature) -> dict:
    return dict(re.match(r"beam_datagen\.(\w+):(.*)", t).groups() for t in feature.annotation.tag)


def anomalies(stats, schema) -> list[str]:
    """What in `stats` breaks `schema`; [] when nothing does."""
    by_name = {f.path.step[0]: f for f in stats.features}
    problems = []
    for feature in schema.feature:
        got = by_name.get(feature.name)
        if got is None:
            problems.append(f"{feature.name}: missing from the data")
            continue
        if got.type != _TYPES[feature.type]:
            problems.append(f"{feature.name}: type {got.type}, schema {feature.type}")
        common = (got.bytes_stats.common_stats if feature.type == schema_pb2.BYTES
                  else got.num_stats.common_stats)
        total = common.num_non_missing + common.num_missing
        if total and common.num_non_missing / total < feature.presence.min_fraction:
            problems.append(f"{feature.name}: present in {common.num_non_missing} of {total}")
        if feature.HasField("shape"):
            size = math.prod(d.size for d in feature.shape.dim)
            if (common.min_num_values, common.max_num_values) != (size, size):
                problems.append(f"{feature.name}: {common.min_num_values}..."
                                f"{common.max_num_values} values, its shape needs {size}")
        domain = feature.int_domain if feature.HasField("int_domain") else None
        if domain is not None and common.num_non_missing and (
                got.num_stats.min < domain.min or got.num_stats.max > domain.max):
            problems.append(f"{feature.name}: values {got.num_stats.min}..{got.num_stats.max} "
                            f"outside its int_domain {domain.min}..{domain.max}")
        if feature.HasField("bool_domain") and common.num_non_missing and (
                got.num_stats.min < 0 or got.num_stats.max > 1):
            problems.append(f"{feature.name}: values outside its bool_domain")
        if feature.HasField("image_domain"):
            fraction = {c.name: c.num for c in got.custom_stats}[_IMAGE_FRACTION]
            if fraction < 1:
                problems.append(f"{feature.name}: {1 - fraction:.0%} of values are no image")
        tags = _tags(feature)
        if tags.get("dtype") in _ITEM_BYTES:
            need = math.prod(json.loads(tags["shape"])) * _ITEM_BYTES[tags["dtype"]]
            if (got.bytes_stats.min_num_bytes, got.bytes_stats.max_num_bytes) != (need, need):
                problems.append(f"{feature.name}: packed {tags['dtype']} values of "
                                f"{got.bytes_stats.min_num_bytes:.0f}..."
                                f"{got.bytes_stats.max_num_bytes:.0f} bytes, need {need}")
    return problems
