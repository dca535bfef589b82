"""`--features auto`: a FeatureSpec inferred from a corpus's first samples.
Beam-free.

    spec = infer_spec(samples[:16])   # fields every sample has, the widest dtype seen

The rules are `infer_spec`'s docstring; a `json` field (or `*.json`) is
projected into its top-level keys (`json.speaker`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

import numpy as np

from transforms.format.sample import field_text
from transforms.format.spec import Feature, FeatureSpec, npy_array

__all__ = ["infer_spec"]


_RANK = {"int64": 0, "float": 1, "bytes": 2}
# A `.npy` member's numpy dtype kind -> its feature dtype (others: bytes).
_NPY_DTYPES = {"f": "float", "i": "int64", "u": "int64", "b": "bool"}


def _infer_leaf(value) -> tuple:
    """(dtype, shape) for one JSON or text value."""
    if isinstance(value, bool):
        return "bool", ()
    if isinstance(value, list) and value and all(isinstance(v, bool) for v in value):
        return "bool", (None,)
    if isinstance(value, int):
        return "int64", ()
    if isinstance(value, float):
        return "float", ()
    if isinstance(value, list):
        if value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                         for v in value):
            dtype = "float" if any(isinstance(v, float) for v in value) else "int64"
            return dtype, (None,)
        return "bytes", (None,)
    if isinstance(value, (bytes, str)):
        text = field_text(value)
        try:
            int(text)
            return "int64", ()
        except ValueError:
            pass
        try:
            float(text)
            return "float", ()
        except ValueError:
            pass
    return "bytes", ()


def _infer_sample(sample: Mapping[str, Any]) -> dict:
    """source -> (dtype, shape) for every data field of one sample."""

    found = {}
    for field, value in sample.items():
        if field.startswith("__"):
            continue
        if field == "json" or field.endswith(".json"):
            try:
                obj = json.loads(value)
            except (ValueError, RecursionError):
                obj = None
            if isinstance(obj, dict):
                for k, v in obj.items():
                    if not isinstance(v, dict) and v is not None:  # a null is no value
                        found[f"{field}.{k}"] = _infer_leaf(v)
                continue
        try:
            array = npy_array(value, field)
        except ValueError:
            array = value   # an object array: bytes, and a dead letter if declared otherwise
        if isinstance(array, np.ndarray):
            found[field] = (_NPY_DTYPES.get(array.dtype.kind, "bytes"),
                            array.shape if array.dtype.kind in _NPY_DTYPES else ())
        elif isinstance(value, bytes) and len(value) > 64:
            found[field] = ("bytes", ())
        else:
            found[field] = _infer_leaf(value)
    return found


def infer_spec(samples: Iterable[Mapping[str, Any]],
               declared: Mapping[str, str] | None = None) -> FeatureSpec:
    """Infers a spec from a few samples: fields present in all of them.

    Text that parses as an integer is int64, as a number float; a JSON bool is
    bool; a `.npy` array is float, int64 or bool of its shape; JSON members are
    projected one feature per top-level key that is not null or an object;
    anything else is bytes. When the samples disagree, the wider type wins
    (int64 < float < bytes; a bool and anything else: bytes) and differing
    shapes become variable-length. A field of `declared` ({field: dtype}, what
    the input's own schema says: a Hugging Face `Value("string")`) takes that
    dtype, its shape still the samples'.
    """
    merged = None
    for sample in samples:
        found = _infer_sample(sample)
        if merged is None:
            merged = found
            continue
        merged = {k: _unify(merged[k], found[k]) for k in merged if k in found}
    if not merged:
        raise ValueError("cannot infer a feature spec: no field is present in every sample")
    declared = declared or {}
    return FeatureSpec(tuple(Feature(name=k, dtype=declared.get(k, d), shape=s, source=k)
                             for k, (d, s) in sorted(merged.items())))


def _unify(a: tuple, b: tuple) -> tuple:
    if "bool" in (a[0], b[0]):  # a bool is no number (Feature.coerce), but has text
        dtype = "bool" if a[0] == b[0] else "bytes"
    else:
        dtype = a[0] if _RANK[a[0]] >= _RANK[b[0]] else b[0]
    shape = a[1] if a[1] == b[1] else (None,)
    return dtype, shape
