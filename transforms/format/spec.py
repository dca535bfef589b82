"""The feature spec: which Sample fields become which tf.Example features.

Beam-free (the reader imports it). A spec is an ordered tuple of `Feature`s; it
is parsed from the `--features` flag, or inferred from the first samples
(transforms/format/infer.py), and
written to the manifest so the writer and the reader never disagree.

Flag grammar, comma separated: `[name=]source:dtype[shape]`, e.g.
`flac:bytes,cls:int64,speaker=json.speaker:bytes,emb:float[128],ids:int64[*]`.
`source` is a Sample field (`cls`) or a JSON projection (`json.speaker`,
`json.meta.age`); `shape` is `[]`-less for a scalar, `[k]` / `[h,w]` for a fixed
shape and `[*]` for a variable-length list (`[*,80]`: rows of 80).

Declared dtypes (TFRecorder's types and the media ones) and where they are
stored: `bool`, `int32`, `int64` in an int64_list; `float` (alias `float32`)
and `double` (alias `float64`) in a float_list, so a double is rounded to
float32 on the wire (tf.Example has no wider float); `bytes` (as stored) and
`string` (UTF-8 text, checked, stored as `field_text` reads it) in a
bytes_list; `int16`/`uint8`/`float16` arrays and `jpeg` images packed into
bytes, one bytes value an example (a packed array's first dimension may be
variable, `float16[*,80]`: the byte count says how many rows; a
`jpeg[k,h,w,c]` feature is k images, and k may be variable: a segment's
frames). The manifest records the declared dtype and the reader restores it
(tf.bool, tf.int32, tf.float64, ...); a float16 array reads back as float32,
its values rounded to float16's 11 significant bits (a relative error of at
most 2^-11, 0.05%). A numeric or
bool feature reads a `.npy` member (numpy.save's format, as WebDataset's
TarWriter stores arrays) as the array it holds, never unpickling.
"""

from __future__ import annotations

import dataclasses
import decimal
import io
import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from transforms.format.arguments import ArgumentError
from transforms.format.encoder import byte_strings
from transforms.format.sample import field_text
from transforms.format.text import preview

__all__ = [
    "Feature",
    "FeatureSpec",
    "KINDS",
    "ALIASES",
    "npy_array",
    "parse_features",
    "shape_text",
    "unpacked",
]

# Declared dtype -> the tf.Example list it is stored in.
KINDS = {"bytes": "bytes", "string": "bytes", "bool": "int64", "int32": "int64",
         "int64": "int64", "float": "float", "double": "float",
         "int16": "bytes", "uint8": "bytes", "float16": "bytes", "jpeg": "bytes"}
# numpy's names for the float dtypes, accepted in specs and stored as the dtype they mean.
ALIASES = {"float32": "float", "float64": "double"}
_INT32 = np.iinfo(np.int32)

_NUMPY_DTYPES = {"int64": np.int64, "float": np.float32}
# Packed arrays: declared dtype -> little-endian numpy dtype of the bytes.
PACKED = {"int16": "<i2", "uint8": "u1", "float16": "<f2"}


@dataclasses.dataclass(frozen=True)
class Feature:
    """One tf.Example feature: its name, where its value comes from, and its type.

    `shape` is `()` for a scalar, a tuple of ints for a fixed shape, and
    `(None,)` for a variable-length list. `sample_rate` marks a feature as
    audio: samples per second (a cut's audio windows have it).
    """

    name: str
    dtype: str
    shape: tuple = ()
    source: str = ""
    encoding: str = "raw"
    sample_rate: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "dtype", ALIASES.get(self.dtype, self.dtype))
        if self.dtype not in KINDS:
            raise ValueError(
                f"feature {self.name!r}: unknown dtype {self.dtype!r} "
                f"(expected one of {', '.join(KINDS)})")
        if any(d is None for d in self.shape[1:]) or any(
                d is not None and d < 0 for d in self.shape):
            raise ValueError(
                f"feature {self.name!r}: only the first dimension may be variable, "
                f"got shape {self.shape}")
        if self.dtype in PACKED and not self.shape:
            raise ValueError(f"feature {self.name!r}: {self.dtype} is an array: give its "
                             f"shape, e.g. {self.dtype}[16000] or {self.dtype}[*]")
        if self.dtype == "jpeg" and (len(self.shape) not in (3, 4) or self.shape[-1] not in (1, 3)
                                     or self.is_variable and len(self.shape) == 3):
            raise ValueError(f"feature {self.name!r}: jpeg needs [h,w,c] or [k,h,w,c] (k "
                             f"variable: None) with c 1 or 3, got {list(self.shape)}")
        if not self.source:
            object.__setattr__(self, "source", self.name)

    @property
    def kind(self) -> str:
        """The tf.Example list kind: 'bytes', 'int64' or 'float'."""
        return KINDS[self.dtype]

    @property
    def is_variable(self) -> bool:
        return bool(self.shape) and self.shape[0] is None

    @property
    def stored_variable(self) -> bool:
        """Whether the tf.Example list's length varies (a packed array's does
        not: it is one bytes value whatever its rows)."""
        return bool(self.stored_shape) and self.stored_shape[0] is None

    @property
    def size(self) -> int | None:
        """Number of values in one example, or None when variable."""
        return None if self.is_variable else math.prod(self.shape)

    @property
    def stored_shape(self) -> tuple:
        """The shape of the tf.Example list: one bytes value per packed array or image."""
        if self.dtype in PACKED:
            return ()
        if self.dtype == "jpeg":
            return self.shape[:1] if len(self.shape) == 4 else ()
        return self.shape

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "encoding": self.encoding,
            **({"sample_rate": self.sample_rate} if self.sample_rate else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Feature":
        return cls(name=d["name"], dtype=d["dtype"], shape=tuple(d["shape"]),
                   source=d.get("source", d["name"]),
                   encoding=d.get("encoding", "raw"), sample_rate=d.get("sample_rate"))

    def coerce(self, value: Any):
        """Converts a Sample value to what the encoder takes for this feature.

        Returns a list of bytes for bytes-stored features and otherwise a flat
        numpy array of the stored kind (int64 for bool and int32, float32 for
        float and double). Raises ValueError naming the feature when the
        value does not fit the declared dtype or shape.
        """
        if self.kind != "bytes" or self.dtype in PACKED:
            value = npy_array(value, self.name)
        self._check_array_shape(value)
        if self.dtype in PACKED:
            return [_pack(value, self)]
        if self.dtype == "bool":
            values = _to_bool_array(value, self.name)
        elif self.dtype == "string":
            values = _to_text_list(value, self.name)
        elif self.kind == "bytes":
            values = _to_bytes_list(value, self.name)
        else:
            values = _to_number_array(value, self)
            if self.dtype == "int32" and values.size and (
                    values.min() < _INT32.min or values.max() > _INT32.max):
                raise ValueError(f"feature {self.name!r}: {preview(value)} has values "
                                 f"outside the int32 range")
        n = len(values)
        expected = None if self.is_variable else math.prod(self.stored_shape)
        row = math.prod(self.stored_shape[1:]) if self.is_variable else 1
        if n % row:
            raise ValueError(f"feature {self.name!r} (from {self.source!r}) has {n} values, "
                             f"not whole rows of shape {list(self.shape)}")
        if expected is not None and n != expected:
            raise ValueError(
                f"feature {self.name!r} (from {self.source!r}) has {n} values, "
                f"shape {list(self.shape)} needs {expected}")
        return values

    def coerce_rows(self, values: Sequence) -> np.ndarray | None:
        """What `coerce` makes of each of `values` (a recording's windows), as
        the rows of one 2-D array, when this is a fixed-size float feature and
        each value is already a float32 array of its shape (or flat), or a
        Python float for a one-value feature, and every number is finite;
        None otherwise: then `coerce` each, which says what is wrong."""
        if self.kind != "float" or self.dtype in PACKED or self.is_variable:
            return None
        size = math.prod(self.shape)
        if all(type(v) is float for v in values):
            if size != 1:
                return None
            numbers = np.array(values, np.float64)
            if not (np.abs(numbers) <= _FLOAT32_MAX).all():   # NaN fails too
                return None
            return numbers.astype(np.float32).reshape(-1, 1)
        shapes = (self.shape, (size,))
        if not all(type(v) is np.ndarray and v.dtype == np.float32 and v.shape in shapes
                   for v in values):
            return None
        rows = np.stack(values).reshape(len(values), size)
        return rows if np.isfinite(rows).all() else None

    def _check_array_shape(self, value) -> None:
        """ValueError when `value` is an array (or a list of lists) of another
        shape than the declared one: a (2, 2) array is no float32[4], a stereo
        (8000, 2) clip no float32[16000]. A scalar may be a one-value array;
        a flat list is checked by its length alone."""
        shape = _array_shape(value)
        if shape is None:
            return
        declared = self.shape if self.dtype in PACKED else self.stored_shape
        if not declared:
            fits = shape == (1,)
        elif self.is_variable:
            fits = len(shape) == len(declared) and shape[1:] == declared[1:]
        else:
            fits = shape == declared
        if not fits:
            wanted = shape_text(declared) if declared else "a scalar"
            raise ValueError(f"feature {self.name!r} (from {self.source!r}) is an array of "
                             f"shape {list(shape)}; the spec declares {wanted}")


def _array_shape(value) -> tuple | None:
    """The shape of an array value: an ndarray's, or a list of lists' (None for
    a scalar, a 0-d array among them, text, or a flat list)."""
    if isinstance(value, np.ndarray):
        return value.shape or None
    if (isinstance(value, (list, tuple)) and value
            and isinstance(value[0], (list, tuple, np.ndarray))):
        array = np.asarray(value, dtype=object)
        # A ragged list is an array of lists: the number parser says what is wrong.
        return None if isinstance(array.flat[0], (list, tuple, np.ndarray)) else array.shape
    return None


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """An ordered set of features with unique names: what each example holds,
    written to the manifest so that writer and reader never disagree.

    `parse` reads the --features grammar, `[name=]source:dtype[shape]` comma
    separated (dtypes: bytes, string, int64, int32, float, float32, jpeg, ...;
    `[*]` a variable length):

    >>> import transforms as dg
    >>> spec = dg.FeatureSpec.parse("emb:float32[192],label=json.cls:int64,tags:string[*]")
    >>> [(f.name, f.source, f.dtype, f.shape) for f in spec]
    [('emb', 'emb', 'float', (192,)), ('label', 'json.cls', 'int64', ()),
     ('tags', 'tags', 'string', (None,))]
    """

    features: tuple

    def __post_init__(self):
        names = [f.name for f in self.features]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate feature names in spec: {duplicates}")
        if not names:
            raise ValueError("the feature spec is empty")

    def __iter__(self):
        return iter(self.features)

    def __len__(self):
        return len(self.features)

    @property
    def names(self) -> list:
        return [f.name for f in self.features]

    @classmethod
    def parse(cls, text: str) -> "FeatureSpec":
        """The spec the --features grammar describes: 'emb:float32[192],label:int64'."""
        return parse_features(text)

    def to_json(self) -> list:
        return [f.to_json() for f in self.features]

    @classmethod
    def from_json(cls, items: Sequence[Mapping[str, Any]]) -> "FeatureSpec":
        return cls(tuple(Feature.from_json(d) for d in items))


_TERM = re.compile(
    r"^\s*(?:(?P<name>[^=:\s]+)\s*=\s*)?(?P<source>[^:\s]+)\s*:\s*(?P<dtype>\w+)"
    r"\s*(?:\[(?P<shape>[^\]]*)\])?\s*$")


def _split_terms(text: str) -> list:
    """Splits on commas that are not inside [...]."""
    terms, depth, current = [], 0, []
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _parse_shape(text: str | None, term: str) -> tuple:
    if text is None:
        return ()
    parts = [part.strip() for part in text.split(",")]
    variable = parts[0] == "*"
    try:
        dims = tuple(int(d) for d in parts[variable:])
    except ValueError:
        raise ArgumentError("features", f"term {term!r}: shape must be integers like [128] "
                                        "or [4,4], the first may be * (variable): [*], [*,80]"
                            ) from None
    if any(d <= 0 for d in dims):
        raise ArgumentError("features", f"term {term!r}: dimensions must be positive")
    return (None,) * variable + dims


def parse_features(text: str) -> FeatureSpec:
    """Parses the `--features` flag (see the module docstring for the grammar)."""
    features = []
    for term in _split_terms(text):
        m = _TERM.match(term)
        if not m:
            raise ArgumentError("features", f"term {term.strip()!r} is not "
                                            "[name=]source:dtype[shape], e.g. 'cls:int64' or "
                                            "'speaker=json.speaker:bytes'")
        source = m["source"]
        features.append(Feature(name=m["name"] or source, dtype=m["dtype"],
                                shape=_parse_shape(m["shape"], term), source=source))
    return FeatureSpec(tuple(features))


# numpy.save's format starts so; WebDataset's TarWriter stores arrays (`.npy`) in it.
_NPY_MAGIC = b"\x93NUMPY"


def npy_array(value, name: str):
    """The array a `.npy` member holds (read without unpickling anything); any
    other value as it is. ValueError naming feature `name` for one that cannot
    be read."""
    if isinstance(value, (bytes, bytearray, memoryview)) and bytes(value[:6]) == _NPY_MAGIC:
        try:
            return np.load(io.BytesIO(value), allow_pickle=False)
        except ValueError as e:   # an object array, or a damaged header
            raise ValueError(f"feature {name!r}: a .npy value that cannot be read: {e}") from None
    return value


def _to_bytes_list(value, name: str) -> list:
    """Bytes values: bytes and text as they are, one value or a list of them;
    other scalars and objects as their `field_text` (`7`, `true`, JSON text)."""
    if isinstance(value, np.ndarray):
        items = value.ravel().tolist()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        items = [value]
    return byte_strings([_bytes_item(v, name) for v in items], name)


def _bytes_item(value, name: str):
    if isinstance(value, (bytes, str, bytearray, memoryview)):
        return value
    if isinstance(value, (list, tuple)):
        raise ValueError(f"feature {name!r}: {preview(value)} is a nested list; a bytes "
                         f"feature holds a flat list")
    try:
        return field_text(value)
    except ValueError as e:
        raise ValueError(f"feature {name!r}: {e}") from None


def _to_text_list(value, name: str) -> list:
    """A `string` feature's values: each must be UTF-8, and is stored as its
    `field_text` (no byte-order mark, no surrounding whitespace)."""
    texts = []
    for v in _to_bytes_list(value, name):
        try:
            texts.append(field_text(v.decode("utf-8")).encode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"feature {name!r}: {preview(v)} is not UTF-8 text: {e}") from None
    return texts


_BOOL_TEXT = {"true": 1, "false": 0, "1": 1, "0": 0}


def _to_bool_array(value, name: str) -> np.ndarray:
    """0/1 int64 values from bools, 0/1 numbers or the text true/false/1/0."""
    if isinstance(value, (bytes, str)):
        value = _text_numbers(value)
    out = []
    for v in np.ravel(np.asarray(value, dtype=object)).tolist():
        text = v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        bit = _BOOL_TEXT.get(text.strip().lower()) if isinstance(text, str) else text
        if bit is None or bit not in (0, 1):
            raise ValueError(f"feature {name!r}: {preview(v)} is not a bool (true/false/1/0)")
        out.append(int(bit))
    return np.asarray(out, dtype=np.int64)


def _pack(value, feature: Feature) -> bytes:
    """An array of the feature's shape as little-endian bytes of its dtype:
    integers in the int16/uint8 range, or numbers float16 holds (finite,
    within ±65504; rounded to the nearest float16)."""
    array = np.asarray(value)
    floating = feature.dtype == "float16"
    if array.dtype.kind not in ("iuf" if floating else "iu"):
        wanted = "a numeric" if floating else "an integer"
        raise ValueError(f"feature {feature.name!r}: expected {wanted} array for "
                         f"{feature.dtype}, got {array.dtype}")
    fits = (array.size % math.prod(feature.shape[1:]) == 0 if feature.is_variable
            else array.size == feature.size)
    if not fits:
        raise ValueError(f"feature {feature.name!r} (from {feature.source!r}) has "
                         f"{array.size} values, not {_rows_of(feature.shape)}")
    stored = PACKED[feature.dtype]
    if floating:
        with np.errstate(over="ignore", invalid="ignore"):
            packed = np.ascontiguousarray(array, dtype=stored)
        if not np.isfinite(packed).all():
            raise ValueError(f"feature {feature.name!r}: values that are not finite float16 "
                             f"numbers (NaN, infinity, or beyond ±65504)")
        return packed.tobytes()
    info = np.iinfo(stored)
    if array.size and (array.min() < info.min or array.max() > info.max):
        raise ValueError(f"feature {feature.name!r}: values outside the {feature.dtype} range")
    return np.ascontiguousarray(array, dtype=stored).tobytes()


def unpacked(values, dtype: str) -> np.ndarray:
    """A feature's coerced (or stored) values as the numbers the reader gives:
    a packed array's bytes read as its dtype, any other list as it is."""
    if dtype in PACKED:
        return np.frombuffer(values[0], PACKED[dtype])
    return np.asarray(values)


def shape_text(shape: tuple) -> str:
    """A shape as the --features grammar writes it: '[98,40]', '[*,80]'."""
    return "[" + ",".join("*" if d is None else str(d) for d in shape) + "]"


def _rows_of(shape: tuple) -> str:
    """'shape [98,40]' / 'whole rows of shape [*,40]', what an array must fill."""
    return ("whole rows of shape " if shape and shape[0] is None else "shape ") + shape_text(shape)


def _text_numbers(value: bytes | str) -> list:
    """'3' -> ['3']; '1, 2 3' -> ['1', '2', '3'] (label and list files), read as
    `field_text` reads text."""
    return [t for t in re.split(r"[\s,]+", field_text(value)) if t]


def _text_int(text: str) -> int:
    """An integer written any way a tool writes one: '3', '03', '+3', and the
    integral '3.0' or '3e0' that float columns (pandas, numpy.savetxt) give,
    read exactly (no float rounding of a large value); ValueError otherwise."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = decimal.Decimal(text)
    except decimal.InvalidOperation:
        raise ValueError(f"{text!r} is not a number") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise ValueError(f"{text!r} is not an integer")
    return int(number)


_NUMBERS = (int, float, np.integer, np.floating)
_INT64_LIMIT = 2.0**63
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _number_elements(value, feature: "Feature") -> list:
    """The scalars of a text, JSON or Python value, flattened; ValueError for
    what is no number: a null, a bool, an object, a ragged list."""
    if isinstance(value, (bytes, str)):
        return _text_numbers(value)
    if isinstance(value, (list, tuple)):
        flat = np.ravel(np.asarray(value, dtype=object)).tolist()
    else:
        flat = [value]
    for v in flat:
        if v is None:
            raise ValueError(f"feature {feature.name!r}: the value is null")
        if isinstance(v, (bool, np.bool_)):
            raise ValueError(f"feature {feature.name!r}: {v!r} is a bool, not {feature.dtype} "
                             f"(declare the feature bool)")
        if not isinstance(v, _NUMBERS + (bytes, str)):
            raise ValueError(f"feature {feature.name!r}: {preview(v)} is not {feature.dtype}")
    return flat


def _plain_number(value: int | float, kind: str) -> np.ndarray | None:
    """The one-value array of a plain Python number, the commonest scalar (a
    window's times, a label): the array the general way makes, sooner; None
    for any value it would refuse or round otherwise, left to that way."""
    if kind == "float":
        if type(value) is int and abs(value) >= 2**128:  # beyond float32 (float() may overflow)
            return None
        number = float(value)
        return np.array([number], np.float32) if abs(number) <= _FLOAT32_MAX else None
    if type(value) is float and not value.is_integer():
        return None
    return np.array([int(value)], np.int64) if -_INT64_LIMIT <= value < _INT64_LIMIT else None


def _to_number_array(value, feature: "Feature") -> np.ndarray:
    """A flat array of the feature's tf.Example kind (int64 or float32); every
    value must fit it: an int64 in range, a float32 finite."""
    kind, name = feature.kind, feature.name
    if (type(value) is np.ndarray and value.dtype == _NUMPY_DTYPES[kind] and value.ndim == 1
            and value.flags.c_contiguous):
        return _finite(value, value, feature)  # already what the general way makes
    # Exact types: a bool, an int subclass, is no number here (below).
    if type(value) in (int, float):
        array = _plain_number(value, kind)
        if array is not None:
            return array
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        array = value
    elif isinstance(value, np.ndarray) and value.dtype.kind == "b":
        raise ValueError(f"feature {name!r}: a bool array is not {feature.dtype} (declare "
                         f"the feature bool)")
    else:
        flat = _number_elements(value, feature)
        try:
            array = (np.asarray([_to_int(v) for v in flat], dtype=np.int64) if kind == "int64"
                     else np.asarray([float(v) for v in flat], dtype=np.float64))
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(
                f"feature {name!r}: {preview(value)} is not {feature.dtype}: {e}") from None
    if kind == "int64" and array.dtype.kind in "uf" and array.size:
        if array.dtype.kind == "f" and not np.all(np.mod(array, 1) == 0):
            raise ValueError(f"feature {name!r}: {preview(value)} has non-integer values")
        if array.max() >= _INT64_LIMIT or array.min() < -_INT64_LIMIT:
            raise ValueError(f"feature {name!r}: {preview(value)} has values outside the "
                             f"int64 range")
    with np.errstate(over="ignore"):               # overflow is caught just below
        array = np.ascontiguousarray(np.ravel(array), dtype=_NUMPY_DTYPES[kind])
    return _finite(array, value, feature)


def _finite(array: np.ndarray, value, feature: "Feature") -> np.ndarray:
    """`array` (made of `value`), once a float one is checked to be finite."""
    if feature.kind == "float" and not np.isfinite(array).all():
        raise ValueError(f"feature {feature.name!r}: {preview(value)} has values that are not "
                         f"finite float32 numbers (NaN, infinity, or beyond ±3.4e38)")
    return array


def _to_int(v) -> int:
    if isinstance(v, (bytes, str)):
        return _text_int(v.decode("utf-8") if isinstance(v, bytes) else v)
    if isinstance(v, (float, np.floating)) and not float(v).is_integer():
        raise ValueError(f"{v!r} is not an integer")
    value = int(v)
    if not -2**63 <= value < 2**63:
        raise OverflowError(f"{v!r} is outside the int64 range")
    return value
