"""A serialized tf.train.Example against a feature spec (Beam-free).

`example_problems` checks a parsed record the way the reader will take it:
every feature present, in the tf.Example list of its declared kind, with as
many values (or packed bytes) as its shape holds, and within its declared
dtype (a bool is 0 or 1, an int32 fits, a string is UTF-8, a float finite)
and its declared classes (a label's, a Hugging Face ClassLabel's: 0..n-1,
transforms/format/manifest.py `declared_classes`); a feature the
spec does not name is a problem too. `pipelines.verify` checks every record
of a dataset so, and WriteDataset every serialized example a PCollection
gives it. The record is parsed with TensorFlow's own protobuf.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from transforms.format.spec import PACKED, FeatureSpec, shape_text

__all__ = ["example_problems", "parse_example", "stored_values"]

_INT32 = np.iinfo(np.int32)


def parse_example(record: bytes):
    """The record as a tf.train.Example (ValueError if it is not one)."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.example import example_pb2

    try:
        return example_pb2.Example.FromString(record)
    except DecodeError as e:
        raise ValueError(f"not a tf.train.Example: {e}") from None


def stored_values(example, name: str, kind: str):
    """The values of feature `name`'s `kind` list (bytes, int64 or float)."""
    feature = example.features.feature[name]
    return getattr(feature, f"{kind}_list").value


def example_problems(example, spec: FeatureSpec, classes: Mapping[str, int] | None = None) -> list:
    """What in the parsed `example` differs from `spec` and the `classes`
    ({feature: number of classes}) it declares (module docstring)."""
    problems = []
    stored = example.features.feature
    for extra in sorted(set(stored) - set(spec.names)):
        problems.append(f"feature {extra!r} is not in the manifest's spec")
    for f in spec:
        if f.name not in stored:
            problems.append(f"feature {f.name!r} is missing")
            continue
        kind = stored[f.name].WhichOneof("kind")
        if kind is not None and kind != f"{f.kind}_list":
            problems.append(f"feature {f.name!r} is a {kind}, the spec says {f.kind}_list")
            continue
        values = stored_values(example, f.name, f.kind)
        problem = (_count_problem(f, values) or _domain_problem(f, values)
                   or _class_problem(values, (classes or {}).get(f.name)))
        if problem:
            problems.append(f"feature {f.name!r}: {problem}")
    return problems


def _count_problem(f, values) -> str | None:
    if f.stored_variable:
        return None
    expected = math.prod(f.stored_shape)
    if len(values) != expected:
        return f"{len(values)} values, its shape {shape_text(f.shape)} holds {expected}"
    if f.dtype in PACKED:
        item, size = np.dtype(PACKED[f.dtype]).itemsize, len(values[0])
        declared = f"{f.dtype}{shape_text(f.shape)}"
        if f.is_variable and size % (math.prod(f.shape[1:]) * item):
            return f"{size} bytes, not whole rows of {declared}"
        if not f.is_variable and size != f.size * item:
            return f"{size} bytes, {declared} packs into {f.size * item}"
    return None


def _class_problem(values, classes: int | None) -> str | None:
    if classes is not None and any(not 0 <= v < classes for v in values):
        wrong = next(v for v in values if not 0 <= v < classes)
        return f"{wrong} is none of its {classes} declared classes (0..{classes - 1})"
    return None


def _domain_problem(f, values) -> str | None:
    if f.dtype == "bool" and any(v not in (0, 1) for v in values):
        return "a bool that is not 0 or 1"
    if f.dtype == "int32" and any(not _INT32.min <= v <= _INT32.max for v in values):
        return "a value outside int32"
    if f.dtype == "string":
        try:
            for v in values:
                v.decode("utf-8")
        except UnicodeDecodeError:
            return "text that is not UTF-8"
    if f.kind == "float" and not np.isfinite(np.asarray(values, np.float32)).all():
        return "a NaN or infinite value"
    if f.dtype == "float16" and not np.isfinite(np.frombuffer(values[0], PACKED["float16"])).all():
        return "a NaN or infinite value"
    return None
