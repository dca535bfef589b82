"""A tf.train.Example serialiser written with numpy, byte-identical to protobuf.

Why hand-written: serialising was the measured bottleneck of the encode stage.
`tf.train.FloatList(value=array)` and `Int64List(value=array)` walk a numpy
array one element at a time, turning each into a Python scalar. The wire format
of an Example is small and fixed, so this module writes it directly: a float
list is one `tobytes()` of a little-endian float32 array, and int64 varints are
computed for a whole array at once with numpy bit operations. Mixed varint
lengths gain least: cutting each varint out of a fixed 10-byte row dominates,
and numpy has no cheaper variable-length gather. The figures, and those behind
the choices below: docs/performance.md (benchmarks/encoder_bench.py).

The output is byte-identical to
`tf.train.Example(features=tf.train.Features(feature=...)).SerializeToString(deterministic=True)`
(tests/test_example_encoder.py checks this on random specs and values):

* features are written in the order upb's `deterministic=True` writes map
  entries (without it, upb writes them in hash order): by the UTF-8 bytes of
  their names, except that a name comes *after* the longer names it is a prefix
  of ("frame_ts" before "frame"). That is upb's comparator (`memcmp` negated,
  then the sorted entries emitted back to front); protobuf's C++ and pure-Python
  backends write "frame" first, so the bytes match the upb backend only;
* an empty list is still a present list: an empty FloatList is `12 00`;
* floats follow protobuf's conversion: every value goes through a C double to
  float32 (so int64 and float64 inputs round exactly as protobuf rounds them),
  and signalling NaNs come out quiet, payload kept;
* a negative int64 is the 10-byte varint of its two's complement;
* an example with no features is `0a 00`: protobuf writes the empty `Features`
  message because it was set (only a bare `tf.train.Example()` is `b""`).

Beam-free and TensorFlow-free (numpy and the standard library only), so the
training side can import it.
"""

from __future__ import annotations

import threading
from typing import Mapping, Sequence

import numpy as np

from transforms.format.text import preview

__all__ = ["ExampleEncoder", "byte_strings"]

_KINDS = ("bytes", "int64", "float")

# Field 1, wire type LEN: Example.features, Features.feature (a map entry),
# the map entry's key, and the `value` of every list (packed for numbers).
_FIELD1_LEN = b"\x0a"
# Field 2, wire type LEN: the map entry's value (the Feature).
_FIELD2_LEN = b"\x12"
# The Feature oneof: bytes_list = 1, float_list = 2, int64_list = 3.
_LIST_TAG = {"bytes": b"\x0a", "float": b"\x12", "int64": b"\x1a"}


# -- varints ---------------------------------------------------------------------

_U64 = (1 << 64) - 1

# Up to this many values a Python loop beats the numpy path's fixed set-up cost.
_SMALL = 32

# Arrays are encoded in chunks of this many values, so that the work arrays are
# small enough (about 1 MB) to keep for each thread; smaller chunks are slower,
# as numpy's fixed cost per call starts to dominate.
_CHUNK = 16384


def _read_varint(data: memoryview, position: int) -> tuple[int, int]:
    """(the base-128 varint at `position`, the position after it)."""
    value = shift = 0
    while True:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7


def _varint(value: int) -> bytes:
    """One base-128 varint; a negative value as its 64-bit two's complement."""
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
# varint's k-th 7-bit group) takes three halving steps, 28|28 -> 14|14 -> 7|7.
# Each moves the upper half of every lane up by `shift` bits, written as
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
# Bytes 0..7 of a `width`-byte varint: bit 7 set in every byte but the last.
_CONTINUATION = {w: np.uint64(0x8080808080808080 & ((1 << (8 * min(w - 1, 8))) - 1))
                 for w in range(1, 11)}


def _row_dtype(width: int) -> np.dtype:
    """A `width`-byte record of little-endian 8/4/2/1-byte unsigned fields.

    Varints are laid out as such records: numpy casts a uint64 array into a
    record field much faster than it copies an (n, 8) uint8 array into an
    (n, width) one, whose short rows it walks one at a time.
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


class _Scratch(threading.local):
    """Work arrays for one chunk, made once per thread and reused.

    Fresh ~100 KB temporaries on every call made the int64 path slower: glibc
    hands blocks that size back to the OS when they are freed (its trim
    threshold is 128 KB), so every call page-faulted its temporaries in again.
    """

    def __init__(self):
        self.x, self.top, self.bits, self.tmp = np.empty((4, _CHUNK), np.uint64)
        self.rows = np.empty(10 * _CHUNK, np.uint8)
        self.keep = np.empty(10 * _CHUNK, bool)


_scratch = _Scratch()


def _groups(u: np.ndarray, x: np.ndarray, tmp: np.ndarray, width: int) -> None:
    """Sets byte k of `x` to the 7-bit group k of `u`, for k < 8.

    `width` is the varint length of every value (0 if mixed): shorter varints
    need fewer spreading steps, and below 2**56 no masking of the top byte.
    """
    source = u
    if width == 0 or width > 8:
        np.bitwise_and(u, _LOW56, out=x)
        source = x
    steps = 3 if width == 0 or width > 4 else 2 if width > 2 else 1
    for mask, factor in _SPREAD_STEPS[3 - steps:]:
        np.bitwise_and(source, mask, out=tmp)
        tmp *= factor
        np.add(source, tmp, out=x)
        source = x


def _continuation(x: np.ndarray, u: np.ndarray, bits: np.ndarray, tmp: np.ndarray) -> None:
    """Sets bit 7 of byte k of `bits` (k < 8) where `u` has a group above k."""
    # Byte k of `above` is group k + 1; its byte 7 is u's top byte (groups 8, 9).
    above = tmp
    np.right_shift(x, np.uint64(8), out=above)
    np.bitwise_and(u, _TOP8, out=bits)
    above |= bits
    # SWAR "byte is non-zero": adding 0x7F to a byte's low 7 bits carries into
    # its bit 7 but never into the next byte; or-ing in the byte catches 0x80.
    np.bitwise_and(above, _LOW7_EACH, out=bits)
    bits += _LOW7_EACH
    bits |= above
    bits &= _HIGH_EACH
    # Copy every byte's flag into all the bytes below it.
    for shift in (8, 16, 32):
        np.right_shift(bits, np.uint64(shift), out=tmp)
        bits |= tmp


def _rows(low: np.ndarray, high: np.ndarray, width: int, out: np.ndarray) -> np.ndarray:
    """Writes `width`-byte rows to `out`: bytes 0..7 from `low`, 8..9 from `high`."""
    flat = out[:low.size * width]
    rows = flat.view(_ROWS[width])
    for name in rows.dtype.names:
        offset = int(name)
        if offset == 0:
            rows[name] = low
        elif offset < 8:
            rows[name] = low >> np.uint64(8 * offset)
        else:
            rows[name] = high
    return flat


def _varints(values: np.ndarray) -> bytes:
    """The packed varints of a flat int64 array, as protobuf writes them."""
    if values.size <= _SMALL:
        return b"".join([_varint(v) for v in values.tolist()])
    return b"".join([_varints_chunk(values[i:i + _CHUNK])
                     for i in range(0, values.size, _CHUNK)])


def _varints_chunk(values: np.ndarray) -> bytes:
    """`_varints` for at most _CHUNK values."""
    n = values.size
    lo, hi = int(values.min()), int(values.max())
    if hi < 0:
        width = 10                                  # all negative: 10 bytes each
    elif lo >= 0 and _varint_len(lo) == _varint_len(hi):
        width = _varint_len(hi)                     # all the same length
    else:
        width = 0                                   # mixed lengths
    if width == 1:
        return values.astype(np.uint8).tobytes()

    s = _scratch
    x, top, bits, tmp = s.x[:n], s.top[:n], s.bits[:n], s.tmp[:n]
    u = values.view(np.uint64)
    _groups(u, x, tmp, width)
    if width == 0 or width > 8:
        # Bytes 8 and 9: u's top byte holds group 8 and bit 63, which is group 9
        # and, exactly when set, also group 8's continuation bit.
        np.right_shift(u, np.uint64(63), out=tmp)
        np.left_shift(tmp, np.uint64(8), out=top)
        np.right_shift(u, np.uint64(56), out=tmp)
        top += tmp
    if width:
        # One length: the continuation bits are a constant, nothing is cut out.
        x |= _CONTINUATION[width]
        return _rows(x, top, width, s.rows).tobytes()

    _continuation(x, u, bits, tmp)
    x |= bits
    flat = _rows(x, top, 10, s.rows)
    # Cut each 10-byte row down to its varint. Bytes past a varint's end are 0
    # and its own bytes are not (all but the last have bit 7 set, the last is
    # its top non-zero group), except the lone 0x00 encoding 0, at a row's start.
    keep = s.keep[:flat.size]
    np.not_equal(flat, 0, out=keep)
    keep[::10] = True
    # Gathering by index beats np.compress and boolean indexing, whose cost
    # grows with the number of runs (here one or two per value).
    return flat.take(np.flatnonzero(keep)).tobytes()


# -- the three lists -----------------------------------------------------------

def _int64_array(value, name: str) -> np.ndarray:
    """A flat int64 array of `value`, or ValueError naming the feature."""
    array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    if array is not None and array.size == 0:
        return np.zeros(0, np.int64)
    # Python ints outside int64 make numpy pick float64, uint64 or object.
    if array is None or array.dtype.kind not in "iub" or (
            array.dtype == np.uint64 and array.max() > np.iinfo(np.int64).max):
        raise ValueError(f"feature {name!r}: expected int64 values, got {preview(value)}")
    return np.ascontiguousarray(array.ravel(), dtype=np.int64)


def _float32_array(value, name: str) -> np.ndarray:
    """A flat little-endian float32 array of `value`, rounded as protobuf does."""
    def error():
        return ValueError(f"feature {name!r}: expected float values, got {preview(value)}")

    array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    if array is None or array.dtype.kind not in "fiubO":
        raise error()
    if array.dtype.kind == "O":
        # Ints too big for int64, or mixed objects: float() each one as protobuf
        # does (numpy's cast would turn None into NaN and parse strings).
        items = array.ravel().tolist()
        if any(isinstance(v, (str, bytes)) for v in items):
            raise error()
        try:
            array = np.array([float(v) for v in items], np.float64)
        except (TypeError, ValueError, OverflowError):
            raise error() from None
    elif not (array.dtype.kind == "f" and array.dtype.itemsize <= 4):
        # protobuf turns each value into a C double, then a float: round the
        # same way (int64 -> float32 in one step can round differently).
        array = array.astype(np.float64)
    with np.errstate(over="ignore"):               # 1e300 -> inf, as in C
        array = np.ascontiguousarray(array.ravel(), dtype="<f4")
    nan = np.isnan(array)
    if nan.any():
        # That double -> float conversion sets a signalling NaN's quiet bit.
        bits = array.view("<u4").copy()
        bits[nan] |= np.uint32(0x00400000)
        array = bits.view("<f4")
    return array


def byte_strings(value, name: str) -> list:
    """A list of bytes from bytes, str (UTF-8) or a sequence of them."""
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
                f"feature {name!r}: expected bytes or str values, got {preview(v)}")
    return out


def _list_body(kind: str, value, name: str) -> list:
    """The body of a BytesList / FloatList / Int64List message, as parts."""
    if kind == "bytes":
        parts = []
        for v in byte_strings(value, name):        # repeated bytes: a field each
            parts += (_FIELD1_LEN, _varint(len(v)), v)
        return parts
    packed = (_float32_array(value, name).tobytes() if kind == "float"
              else _varints(_int64_array(value, name)))
    # A packed field with no values is left out: the list message is empty.
    return [_FIELD1_LEN, _varint(len(packed)), packed] if packed else []


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
                raise ValueError(f"feature {name!r}: unknown kind {kind!r} "
                                 f"(expected one of {', '.join(_KINDS)})")
            key = name.encode("utf-8")
            # The map entry up to the Feature's length: key field, value tag.
            head = _FIELD1_LEN + _varint(len(key)) + key + _FIELD2_LEN
            fields.append((key, name, kind, head))
        # upb's deterministic order (module docstring): bytewise, a prefix after
        # its extensions. UTF-8 never contains 0xFF, so a trailing 0xFF sorts
        # every name after the longer names that start with it.
        fields.sort(key=lambda field: field[0] + b"\xff")
        self._fields = [(name, kind, head, _LIST_TAG[kind])
                        for _, name, kind, head in fields]

    @staticmethod
    def entries(serialized: bytes) -> dict:
        """A serialized Example this encoder wrote -> its map entries by feature
        name (bytes), each as written (its tag and length included)."""
        view = memoryview(serialized)
        _, position = _read_varint(view, 1)           # Example.features: tag, length
        entries = {}
        while position < len(view):
            length, start = _read_varint(view, position + 1)
            key_length, key_start = _read_varint(view, start + 1)
            entries[bytes(view[key_start:key_start + key_length])] = view[position:start + length]
            position = start + length
        return entries

    @staticmethod
    def float_payload(entry) -> memoryview:
        """A float feature's map entry (as `entries` gives it) -> its values as
        written: little-endian float32, packed (empty for an empty list)."""
        view = memoryview(entry)
        _, position = _read_varint(view, 1)                       # the entry: tag, length
        key_length, position = _read_varint(view, position + 1)   # its key
        _, position = _read_varint(view, position + 1 + key_length)   # Feature: tag, length
        list_length, position = _read_varint(view, position + 1)  # FloatList: tag, length
        if not list_length:
            return view[position:position]
        length, position = _read_varint(view, position + 1)       # the packed field
        return view[position:position + length]

    @staticmethod
    def joined(entries: Mapping[bytes, bytes]) -> bytes:
        """The serialized Example of map `entries` (as `entries` gives them), in
        the encoder's order: `encode`'s very bytes for the same values."""
        ordered = [entries[key] for key in sorted(entries, key=lambda key: key + b"\xff")]
        return b"".join([_FIELD1_LEN, _varint(sum(map(len, ordered))), *ordered])

    @staticmethod
    def kept(serialized: bytes, names: frozenset) -> bytes:
        """A serialized Example this encoder wrote, holding only the features
        `names` (bytes) that it has: what encoding only them gives."""
        entries = ExampleEncoder.entries(serialized)
        return ExampleEncoder.joined({name: entries[name] for name in names if name in entries})

    @property
    def features(self) -> list:
        """The (name, kind) pairs, in the order they are written."""
        return [(name, kind) for name, kind, _, _ in self._fields]

    def encode(self, values: Mapping[str, object]) -> bytes:
        """One serialised tf.train.Example holding `values[name]` for each feature.

        Extra keys are ignored; a missing feature raises ValueError naming it.
        """
        # Example{features: Features{feature: <a map entry per feature>}}: the
        # outer length is known only at the end, so its slot is filled last.
        parts = [_FIELD1_LEN, b""]
        total = 0
        for name, kind, head, tag in self._fields:
            entry, length = _entry(head, tag, kind, _value(values, name), name)
            parts += entry
            total += length
        parts[1] = _varint(total)
        return b"".join(parts)

    def encode_columns(self, columns: Mapping[str, object], count: int) -> list:
        """`count` serialised tf.train.Examples at once, each `encode`'s bytes
        for its row of `columns`: per feature, a 2-D float array with a row per
        example, or a sequence of a value per example.

        What is the same in every example is written once: an entry whose
        value is the very same object in each (a recording's label), and the
        entry head of a float array's rows, written from the array's own
        memory (a recording's windows).
        """
        if not count:
            return []
        rows = [[] for _ in range(count)]
        totals = [0] * count
        for name, kind, head, tag in self._fields:
            column = _value(columns, name)
            if isinstance(column, np.ndarray) and column.ndim == 2 and kind == "float":
                floats = _float32_array(column, name).reshape(count, -1)
                entry, length = _entry(head, tag, kind, floats[0], name)
                # Every row's entry is this head (all of the entry, rows of no
                # values), then the row's own memory.
                width = floats.shape[1]
                entry_head = b"".join(entry[:-1] if width else entry)
                for i in range(count):
                    rows[i] += (entry_head, floats[i]) if width else (entry_head,)
                    totals[i] += length
                continue
            entry = last = None
            for i in range(count):
                value = column[i]
                if entry is None or value is not last:
                    entry, length = _entry(head, tag, kind, value, name)
                    last = value
                elif len(entry) > 1:   # the same value again: its parts joined once
                    entry = [b"".join(entry)]
                rows[i] += entry
                totals[i] += length
        return [b"".join([_FIELD1_LEN, _varint(total), *parts])
                for parts, total in zip(rows, totals)]


def _value(values: Mapping[str, object], name: str):
    """`values[name]`, or ValueError naming the missing feature."""
    try:
        return values[name]
    except KeyError:
        raise ValueError(f"feature {name!r} is missing from the example "
                         f"(it has {sorted(map(str, values))})") from None


def _entry(head: bytes, tag: bytes, kind: str, value, name: str) -> tuple[list, int]:
    """One feature's map entry as parts (the list's own values last), and the
    bytes it takes in the Features message, its field tag and length included."""
    body = _list_body(kind, value, name)
    body_len = sum(map(len, body))
    body_len_varint = _varint(body_len)
    feature_len = 1 + len(body_len_varint) + body_len     # Feature{tag: body}
    feature_len_varint = _varint(feature_len)
    entry_len = len(head) + len(feature_len_varint) + feature_len
    entry_len_varint = _varint(entry_len)
    return ([_FIELD1_LEN, entry_len_varint, head, feature_len_varint, tag, body_len_varint,
             *body], 1 + len(entry_len_varint) + entry_len)
