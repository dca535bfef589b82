"""A tf.train.Example serialiser written with numpy, byte-identical to protobuf.

Why hand-written: encoding was the measured bottleneck of the encode stage.
`tf.train.FloatList(value=array)` / `Int64List(value=array)` walk a numpy array
one element at a time, turning every element into a Python scalar; for one
16,000-value array that is 2.5-3.5 ms per example (benchmarks/encoder_bench.py).
The wire format of an Example is simple, so this module writes it directly:
float lists are one `tobytes()` of a little-endian float32 array, and int64
varints are built for the whole array at once with numpy bit operations.

The output is byte-identical to
`tf.train.Example(features=tf.train.Features(feature=...)).SerializeToString(deterministic=True)`
(tests/test_example_encoder.py checks it property-by-property):

* features are written sorted by the UTF-8 bytes of their names, which is what
  `deterministic=True` does (without it, upb writes map entries in hash order);
* an empty list is still a present list: `Feature{float_list: {}}` is `12 00`;
* floats take protobuf's path: integers and float64 are rounded through
  float64 to float32, and signalling NaNs come out quiet (the C double->float
  conversion sets the quiet bit);
* negative int64 values are 10-byte varints of their two's complement.

Beam-free and TensorFlow-free: the reader side may import it.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["ExampleEncoder"]

_KINDS = ("bytes", "int64", "float")

# Field 1 of Example (features) and of Features (the map entries), wire type LEN.
_FIELD1_LEN = b"\x0a"
# Map entry field 2 (the Feature value), wire type LEN.
_FIELD2_LEN = b"\x12"
# The Feature oneof: bytes_list = 1, float_list = 2, int64_list = 3 (all LEN).
_LIST_TAG = {"bytes": b"\x0a", "float": b"\x12", "int64": b"\x1a"}

# Up to this many values a Python loop beats numpy's fixed per-call overhead
# (measured: ~1 us per value in Python, ~30 us of set-up for the numpy path).
_SMALL = 32

_U64 = (1 << 64) - 1


# -- varints ---------------------------------------------------------------------

def _varint(value: int) -> bytes:
    """One base-128 varint; negative values as their 64-bit two's complement."""
    value &= _U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_len(value: int) -> int:
    """Bytes in the varint of `value` (1..10)."""
    return max(1, ((value & _U64).bit_length() + 6) // 7)


# Spreading the low 56 bits of a uint64 so that byte k holds bits 7k..7k+6 (the
# k-th varint group) takes three halving steps, 28|28 -> 14|14 -> 7|7, each one
# moving the upper half of every lane up by `shift` bits, written as
# x + (x & upper) * (2**shift - 1) == (x & ~upper) | ((x & upper) << shift).
_SPREAD_STEPS = (
    (np.uint64(0x00FFFFFFF0000000), np.uint64(2 ** 4 - 1)),
    (np.uint64(0x0FFFC0000FFFC000), np.uint64(2 ** 2 - 1)),
    (np.uint64(0x3F803F803F803F80), np.uint64(2 ** 1 - 1)),
)
_LOW56 = np.uint64((1 << 56) - 1)
_TOP8 = np.uint64(0xFF << 56)
_LOW7_EACH = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH_EACH = np.uint64(0x8080808080808080)
# Bytes 0..7 of a `width`-byte varint: bit 7 set in each byte but the last.
_CONTINUATION = {w: np.uint64(0x8080808080808080 & ((1 << (8 * min(w - 1, 8))) - 1))
                 for w in range(1, 11)}


def _row_dtype(width: int) -> np.dtype:
    """A `width`-byte record made of little-endian 8/4/2/1-byte unsigned fields.

    Varints are assembled as rows of such records: numpy copies a uint64 array
    into a record field (casting it down) about 20x faster than it copies an
    (n, 8) uint8 array into an (n, width) one, whose short rows it walks one by one.
    """
    names, formats, offsets, offset = [], [], [], 0
    for size in (8, 4, 2, 1):
        while width - offset >= size:
            names.append(str(offset))
            formats.append(f"<u{size}")
            offsets.append(offset)
            offset += size
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": width})


_ROWS = {w: _row_dtype(w) for w in range(2, 11)}


def _rows(low: np.ndarray, high: np.ndarray | None, width: int) -> np.ndarray:
    """Records of `width` bytes: bytes 0..7 from `low`, bytes 8..9 from `high`."""
    rows = np.empty(low.size, _ROWS[width])
    for name in rows.dtype.names:
        offset = int(name)
        if offset < 8:
            rows[name] = low >> np.uint64(8 * offset) if offset else low
        else:
            rows[name] = high
    return rows


def _groups(u: np.ndarray) -> np.ndarray:
    """uint64 array whose byte k is 7-bit group k (bits 7k..7k+6) of `u`, k < 8."""
    x = u & _LOW56
    upper = np.empty_like(x)
    for mask, factor in _SPREAD_STEPS:
        np.bitwise_and(x, mask, out=upper)
        upper *= factor
        x += upper
    return x


def _continuation(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """0x80 in byte k of each value (k < 8) where a group above k is non-zero."""
    # Byte k of `above` is group k + 1; byte 7 is the top byte of u (groups 8, 9).
    above = x >> np.uint64(8)
    above |= u & _TOP8
    # SWAR "byte is non-zero": adding 0x7F to the low 7 bits carries into bit 7
    # (never into the next byte); or-ing the byte itself catches 0x80.
    bits = above & _LOW7_EACH
    bits += _LOW7_EACH
    bits |= above
    bits &= _HIGH_EACH
    # Or each byte's flag into every byte below it.
    for shift in (8, 16, 32):
        np.right_shift(bits, np.uint64(shift), out=above)
        bits |= above
    return bits


def _varints(values: np.ndarray) -> bytes:
    """The packed varints of a flat int64 array, as protobuf writes them."""
    n = values.size
    if n <= _SMALL:
        return b"".join([_varint(v) for v in values.tolist()])
    lo, hi = int(values.min()), int(values.max())
    if hi < 0:
        width = 10                                  # all negative: all 10 bytes
    elif lo >= 0 and _varint_len(lo) == _varint_len(hi):
        width = _varint_len(hi)                     # one length for every value
    else:
        width = 0                                   # mixed lengths
    if width == 1:
        return values.astype(np.uint8).tobytes()

    u = values.view(np.uint64)
    x = _groups(u)
    # Bytes 8 and 9: the top byte of u is group 8 plus bit 63, which is group 9
    # and, exactly when present, also group 8's continuation bit.
    top = u >> np.uint64(56)
    top += (u >> np.uint64(63)) << np.uint64(8)
    if width:
        # One length: the continuation bits are a constant, no compaction needed.
        x |= _CONTINUATION[width]
        return _rows(x, top, width).tobytes()

    x |= _continuation(x, u)
    flat = _rows(x, top, 10).view(np.uint8)
    # Bytes past a varint's end are zero, and a varint's own bytes are not (every
    # byte but the last has bit 7 set, the last is its top non-zero group),
    # except the single 0x00 that encodes 0, which is always a row's byte 0.
    keep = flat != 0
    keep[::10] = True
    return flat[keep].tobytes()


# -- the three lists -----------------------------------------------------------

def _int64_array(value, name: str) -> np.ndarray:
    """A flat int64 array of `value`, or ValueError naming the feature."""
    array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    if array is not None and array.size == 0:
        return np.zeros(0, np.int64)
    # Lists of Python ints outside int64 come out as float64, uint64 or object.
    if (array is None or array.dtype.kind not in "iub" or (
            array.dtype == np.uint64 and array.max() > np.iinfo(np.int64).max)):
        raise ValueError(f"feature {name!r}: expected int64 values, got {_preview(value)}")
    return np.ascontiguousarray(array.ravel(), dtype=np.int64)


def _float32_array(value, name: str) -> np.ndarray:
    """A flat little-endian float32 array of `value`, rounded as protobuf does."""
    array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    if array is None or array.dtype.kind not in "fiubO":
        raise ValueError(f"feature {name!r}: expected float values, got {_preview(value)}")
    if not (array.dtype.kind == "f" and array.dtype.itemsize <= 4):
        # protobuf converts each value to a C double, then to float; round the
        # same way (int64 -> float32 in one step can round differently).
        try:
            array = array.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"feature {name!r}: expected float values, got {_preview(value)}") from None
    array = np.ascontiguousarray(array.ravel(), dtype="<f4")
    nan = np.isnan(array)
    if nan.any():
        # protobuf's double -> float conversion sets the quiet bit of a
        # signalling NaN (payload kept); do the same.
        bits = array.view("<u4").copy()
        bits[nan] |= np.uint32(0x00400000)
        array = bits.view("<f4")
    return array


def _preview(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _bytes_values(value, name: str) -> list:
    if isinstance(value, (bytes, str, bytearray, memoryview)):
        value = [value]
    out = []
    for v in value:
        if isinstance(v, bytes):
            out.append(v)
        elif isinstance(v, str):
            out.append(v.encode("utf-8"))
        elif isinstance(v, (bytearray, memoryview)):
            out.append(bytes(v))
        else:
            raise ValueError(
                f"feature {name!r}: expected bytes or str values, got {_preview(v)}")
    return out


def _packed(payload: bytes) -> list:
    """The body of a Float/Int64List: one packed field 1, absent when empty."""
    if not payload:
        return []
    return [_FIELD1_LEN, _varint(len(payload)), payload]


def _list_body(kind: str, value, name: str) -> list:
    """The parts of a BytesList/FloatList/Int64List message body."""
    if kind == "float":
        return _packed(_float32_array(value, name).tobytes())
    if kind == "int64":
        return _packed(_varints(_int64_array(value, name)))
    parts = []
    for v in _bytes_values(value, name):           # repeated bytes: one field each
        parts += (_FIELD1_LEN, _varint(len(v)), v)
    return parts


# -- the encoder -----------------------------------------------------------------

class ExampleEncoder:
    """Serialises examples to the tf.train.Example wire format with numpy."""

    def __init__(self, features: Sequence[tuple[str, str]]):
        """`features`: (feature name, kind) pairs, kind one of bytes/int64/float."""
        names = [name for name, _ in features]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate feature names: {duplicates}")
        fields = []
        for name, kind in features:
            if kind not in _KINDS:
                raise ValueError(
                    f"feature {name!r}: unknown kind {kind!r} (expected one of "
                    f"{', '.join(_KINDS)})")
            key = name.encode("utf-8")
            # The constant start of the map entry: key field, then the Feature's tag.
            head = _FIELD1_LEN + _varint(len(key)) + key + _FIELD2_LEN
            fields.append((key, name, kind, head))
        # deterministic=True orders map keys by their UTF-8 bytes.
        fields.sort(key=lambda f: f[0])
        self._fields = [(name, kind, head, _LIST_TAG[kind]) for _, name, kind, head in fields]

    @property
    def features(self) -> list:
        """The (name, kind) pairs in the order they are written."""
        return [(name, kind) for name, kind, _, _ in self._fields]

    def encode(self, values: Mapping[str, object]) -> bytes:
        """One serialised tf.train.Example holding `values[name]` for every feature.

        Extra keys are ignored; a missing feature raises ValueError naming it.
        """
        # Example{features: Features{feature: <one map entry per feature>}}: the
        # outer length is only known at the end, so its slot is filled last.
        parts = [_FIELD1_LEN, b""]
        total = 0
        for name, kind, head, tag in self._fields:
            try:
                value = values[name]
            except KeyError:
                raise ValueError(f"feature {name!r} is missing from the example "
                                 f"(it has {sorted(map(str, values))})") from None
            body = _list_body(kind, value, name)
            body_len = sum(map(len, body))
            body_len_varint = _varint(body_len)
            feature_len = 1 + len(body_len_varint) + body_len        # Feature{tag: body}
            feature_len_varint = _varint(feature_len)
            entry_len = len(head) + len(feature_len_varint) + feature_len
            entry_len_varint = _varint(entry_len)
            parts += (_FIELD1_LEN, entry_len_varint, head, feature_len_varint,
                      tag, body_len_varint)
            parts += body
            total += 1 + len(entry_len_varint) + entry_len
        # With no features protobuf still writes the (set, empty) Features: 0a 00.
        parts[1] = _varint(total)
        return b"".join(parts)
