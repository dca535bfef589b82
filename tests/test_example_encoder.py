"""ExampleEncoder against protobuf: byte-identical output and a clean round trip.

The reference is always
`tf.train.Example(features=tf.train.Features(feature=...)).SerializeToString(deterministic=True)`
built from the same values; random specs and values come from hypothesis.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from transforms.format.encoder import ExampleEncoder
from transforms.format.spec import Feature

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Varint length boundaries, the int64 extremes, and values around them.
INT64_EDGES = sorted({v for k in range(1, 9) for v in (2 ** (7 * k) - 1, 2 ** (7 * k))}
                     | {0, 1, -1, INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1})


# -- reference ---------------------------------------------------------------------

def _to_bytes_list(value):
    if isinstance(value, (bytes, str)):
        value = [value]
    return [v.encode("utf-8") if isinstance(v, str) else v for v in value]


def reference_feature(kind, value):
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=np.ravel(value)))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.ravel(value)))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=_to_bytes_list(value)))


def reference(spec, values):
    example = tf.train.Example(features=tf.train.Features(feature={
        name: reference_feature(kind, values[name]) for name, kind in spec}))
    return example.SerializeToString(deterministic=True)


def quiet_float32_bits(values):
    """float32 bit patterns as protobuf stores them: NaNs get the quiet bit."""
    array = np.asarray(values, np.float32).ravel()
    bits = array.view(np.uint32).copy()
    bits[np.isnan(array)] |= 0x00400000
    return bits


# -- strategies ----------------------------------------------------------------------

float_elements = (st.floats(width=32, allow_nan=True, allow_infinity=True)
                  | st.sampled_from([0.0, -0.0, float("nan"), float("inf"), float("-inf")]))
float_arrays = hnp.arrays(np.float32, st.integers(0, 300), elements=float_elements)

int64_elements = (st.integers(INT64_MIN, INT64_MAX) | st.sampled_from(INT64_EDGES)
                  | st.integers(-300, 300) | st.integers(0, 2 ** 35))


def _one_length(width):
    """int64 values whose varints are all `width` bytes (the encoder's fast path)."""
    if width == 10:
        return st.integers(INT64_MIN, -1)
    low = 0 if width == 1 else 2 ** (7 * (width - 1))
    return st.integers(low, min(2 ** (7 * width) - 1, INT64_MAX))


int64_arrays = (
    hnp.arrays(np.int64, st.integers(0, 300), elements=int64_elements)
    | st.integers(1, 10).flatmap(
        lambda w: hnp.arrays(np.int64, st.integers(33, 300), elements=_one_length(w))))

byte_values = (st.lists(st.binary(max_size=20) | st.text(max_size=10), max_size=6)
               | st.binary(max_size=20) | st.text(max_size=10))

VALUES = {"float": float_arrays, "int64": int64_arrays, "bytes": byte_values}


@st.composite
def specs_and_values(draw):
    # A small alphabet half the time, so that names often prefix one another.
    name = st.text(max_size=8) | st.text(alphabet="ab_é", max_size=4)
    names = draw(st.lists(name, min_size=1, max_size=6, unique=True))
    spec = [(name, draw(st.sampled_from(sorted(VALUES)))) for name in names]
    return spec, {name: draw(VALUES[kind]) for name, kind in spec}


# -- property test ---------------------------------------------------------------------

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs_and_values())
def test_matches_protobuf_and_round_trips(spec_values):
    spec, values = spec_values
    encoded = ExampleEncoder(spec).encode(values)

    assert encoded == reference(spec, values)

    parsed = tf.train.Example.FromString(encoded).features.feature
    assert sorted(parsed) == sorted(name for name, _ in spec)
    for name, kind in spec:
        feature = parsed[name]
        if kind == "float":
            got = np.array(feature.float_list.value, np.float32)
            np.testing.assert_array_equal(got.view(np.uint32), quiet_float32_bits(values[name]))
        elif kind == "int64":
            assert list(feature.int64_list.value) == np.ravel(values[name]).tolist()
        else:
            assert list(feature.bytes_list.value) == _to_bytes_list(values[name])


@st.composite
def specs_and_columns(draw):
    """A spec and `count` examples' values as columns: per feature a float
    array with a row per example, a list of one value per example, or one
    value that every example holds (the very same object)."""
    spec, _ = draw(specs_and_values())
    count = draw(st.integers(1, 5))
    columns = {}
    for name, kind in spec:
        how = draw(st.sampled_from(["rows", "each", "shared"] if kind == "float"
                                   else ["each", "shared"]))
        if how == "rows":
            columns[name] = draw(hnp.arrays(st.sampled_from([np.float32, np.float64]),
                                            st.tuples(st.just(count), st.integers(0, 40)),
                                            elements=float_elements))
        elif how == "each":
            columns[name] = [draw(VALUES[kind]) for _ in range(count)]
        else:
            columns[name] = [draw(VALUES[kind])] * count
    return spec, columns, count


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs_and_columns())
def test_columns_encode_as_each_row_alone(spec_columns):
    spec, columns, count = spec_columns
    encoder = ExampleEncoder(spec)
    rows = [{name: column[i] for name, column in columns.items()} for i in range(count)]
    assert encoder.encode_columns(columns, count) == [encoder.encode(row) for row in rows]


# -- declared dtypes (transforms.format.spec) ------------------------------------------------
# A spec's declared dtype is coerced (Feature.coerce) to its tf.Example kind,
# then encoded; the reference is protobuf given the declared numpy values
# directly: bools and int32 in an Int64List, float64 in a FloatList (protobuf
# rounds each through a C double to float), text as its UTF-8 bytes.

def _declared_arrays(dtype, elements):
    return st.booleans().flatmap(lambda scalar: (
        hnp.arrays(dtype, (), elements=elements) if scalar
        else hnp.arrays(dtype, st.integers(0, 60), elements=elements)))


DECLARED = {
    "bool": _declared_arrays(np.bool_, st.booleans()),
    "int32": _declared_arrays(np.int32, st.integers(-2 ** 31, 2 ** 31 - 1)
                              | st.sampled_from([-2 ** 31, 2 ** 31 - 1, 0, 127, 128])),
    "int64": _declared_arrays(np.int64, int64_elements),
    # Finite values only: a float feature refuses NaN, infinity and float32 overflow
    # (tests/test_spec.py).
    "float": _declared_arrays(np.float32, st.floats(width=32, allow_nan=False,
                                                    allow_infinity=False)),
    "double": _declared_arrays(np.float64, st.floats(-3.4e38, 3.4e38)),
    "string": st.text(max_size=10) | st.lists(st.text(max_size=10), max_size=5),
    "bytes": byte_values,
}


def _reference_declared(dtype, value):
    if dtype == "string":  # stored as the text rule reads it: no BOM, no surrounding space
        texts = value if isinstance(value, list) else [value]
        return "bytes", [t.removeprefix("\ufeff").strip() for t in texts]
    if dtype in ("bool", "int32"):
        return "int64", np.asarray(value).astype(np.int64)
    return ("float" if dtype in ("float", "double") else dtype), value


@given(specs_and_values(), st.data())
def test_entries_of_two_encodings_join_into_the_encoding_of_both(spec_values, data):
    spec, values = spec_values
    cut = data.draw(st.integers(0, len(spec)))
    first, second = (ExampleEncoder(part).encode(values) for part in (spec[:cut], spec[cut:]))
    entries = {**ExampleEncoder.entries(first), **ExampleEncoder.entries(second)}
    assert set(entries) == {name.encode() for name, _ in spec}
    assert ExampleEncoder.joined(entries) == ExampleEncoder(spec).encode(values)


@st.composite
def declared_specs_and_values(draw):
    names = draw(st.lists(st.text(alphabet="abc_", min_size=1, max_size=4), min_size=1,
                          max_size=6, unique=True))
    spec = [Feature(name, draw(st.sampled_from(sorted(DECLARED))), (None,)) for name in names]
    return spec, {f.name: draw(DECLARED[f.dtype]) for f in spec}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(declared_specs_and_values())
def test_declared_dtypes_match_protobuf(spec_values):
    spec, values = spec_values
    encoder = ExampleEncoder([(f.name, f.kind) for f in spec])
    encoded = encoder.encode({f.name: f.coerce(values[f.name]) for f in spec})
    kinds, reference_values = {}, {}
    for f in spec:
        kinds[f.name], reference_values[f.name] = _reference_declared(f.dtype, values[f.name])
    assert encoded == reference([(f.name, kinds[f.name]) for f in spec], reference_values)


# -- direct tests ----------------------------------------------------------------------

def encode_one(kind, value, name="x"):
    return ExampleEncoder([(name, kind)]).encode({name: value})


def assert_same_as_protobuf(kind, value):
    assert encode_one(kind, value) == reference([("x", kind)], {"x": value})


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.uint16,
                                   np.uint32, np.uint64, np.int64])
def test_integer_dtypes_become_int64(dtype):
    info = np.iinfo(dtype)
    values = np.array([info.min, 0, 1, info.max // 3, min(info.max, INT64_MAX)] * 10,
                      dtype=dtype)
    assert_same_as_protobuf("int64", values)


def test_int32_array_round_trips_as_int64():
    values = np.arange(-50, 50, dtype=np.int32) * 1_000_003
    parsed = tf.train.Example.FromString(encode_one("int64", values))
    assert list(parsed.features.feature["x"].int64_list.value) == values.tolist()


@pytest.mark.parametrize("values", [
    np.array([0.1, 1e-50, 1e300, -1e300, 16777217.0, -0.0, np.pi], np.float64),
    np.arange(100, dtype=np.float64) / 7,
    np.array([2 ** 60 + 2 ** 36 + 1, 16777217, INT64_MAX, INT64_MIN], np.int64),
    np.array([1.5, -2.25, 65504.0], np.float16),
    np.array([True, False]),
    [1, 2.5, 3],
    [2 ** 70, -(2 ** 64), 1],
])
def test_float_inputs_round_like_protobuf(values):
    # int64 -> float32 goes through double in protobuf: 2**60 + 2**36 + 1 rounds
    # differently than a direct cast would.
    assert_same_as_protobuf("float", values)


def test_float64_array_is_stored_as_float32():
    values = np.linspace(-3, 3, 50)
    parsed = tf.train.Example.FromString(encode_one("float", values))
    np.testing.assert_array_equal(
        np.array(parsed.features.feature["x"].float_list.value, np.float32),
        values.astype(np.float32))


def test_signalling_nans_come_out_quiet_like_protobuf():
    bits = np.array([0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001, 0xFFFFFFFF], np.uint32)
    assert_same_as_protobuf("float", bits.view(np.float32))


@pytest.mark.parametrize("kind, value", [
    ("int64", 7), ("int64", -7), ("int64", np.int64(INT64_MIN)), ("int64", np.uint8(200)),
    ("float", 1.5), ("float", np.float32(-0.0)), ("float", float("nan")), ("float", 3),
    ("bytes", b"raw"), ("bytes", "é"), ("bytes", b""),
])
def test_scalars(kind, value):
    assert_same_as_protobuf(kind, value)


def test_str_is_utf8_bytes():
    encoded = encode_one("bytes", ["héllo", b"\xff", "", "日本"])
    parsed = tf.train.Example.FromString(encoded)
    assert list(parsed.features.feature["x"].bytes_list.value) == [
        "héllo".encode(), b"\xff", b"", "日本".encode()]


@pytest.mark.parametrize("kind", ["float", "int64", "bytes"])
def test_empty_lists(kind):
    # An empty list is a present, empty Feature list: e.g. 12 00 for floats.
    assert_same_as_protobuf(kind, [])


def test_no_features_matches_protobuf():
    assert ExampleEncoder([]).encode({"ignored": 1}) == reference([], {})


def test_keys_follow_upb_deterministic_order():
    # Bytewise by UTF-8, but a name after the longer names it is a prefix of.
    names = ["b", "a", "é", "z", "\U0001F600", "\uffff", "A", "", "frame", "frame_ts",
             "frame_t", "ab", "\x00"]
    spec = [(name, "int64") for name in names]
    encoder = ExampleEncoder(spec)
    values = {name: i for i, name in enumerate(names)}
    assert encoder.encode(values) == reference(spec, values)
    assert [n for n, _ in encoder.features] == [
        "\x00", "A", "ab", "a", "b", "frame_ts", "frame_t", "frame", "z", "é", "\uffff",
        "\U0001F600", ""]


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).integers(INT64_MIN, INT64_MAX, 40_000, endpoint=True)
    >> np.random.default_rng(1).integers(0, 64, 40_000),                # mixed lengths
    -np.arange(1, 40_001, dtype=np.int64),                               # all 10 bytes
    np.arange(40_000, dtype=np.int64) % 128,                             # all 1 byte
    np.arange(40_000, dtype=np.int64) * 2 ** 40,                         # mixed, growing
], ids=["mixed", "negative", "one-byte", "growing"])
def test_long_int64_arrays_span_chunks(values):
    assert_same_as_protobuf("int64", values)


def test_missing_feature_is_named():
    encoder = ExampleEncoder([("label", "int64"), ("audio", "bytes")])
    with pytest.raises(ValueError, match="'audio' is missing"):
        encoder.encode({"label": 1})


def test_extra_keys_are_ignored():
    encoder = ExampleEncoder([("label", "int64")])
    assert encoder.encode({"label": 3, "other": "x"}) == encoder.encode({"label": 3})


@pytest.mark.parametrize("kind, value, message", [
    ("int64", np.array([1.5]), "'x': expected int64 values"),
    ("int64", [2 ** 64], "'x': expected int64 values"),
    ("int64", np.array([2 ** 63], np.uint64), "'x': expected int64 values"),
    ("int64", "12", "'x': expected int64 values"),
    ("float", "1.5", "'x': expected float values"),
    ("float", [1 + 2j], "'x': expected float values"),
    ("float", [1.0, None], "'x': expected float values"),
    ("float", [2 ** 70, "2"], "'x': expected float values"),
    ("bytes", [b"a", 3], "'x': expected bytes or str values"),
])
def test_bad_values_raise_naming_the_feature(kind, value, message):
    with pytest.raises(ValueError, match=message):
        encode_one(kind, value)


def test_bad_specs_raise():
    with pytest.raises(ValueError, match="unknown kind 'string'"):
        ExampleEncoder([("a", "string")])
    with pytest.raises(ValueError, match="duplicate feature names"):
        ExampleEncoder([("a", "int64"), ("a", "float")])


def test_parse_single_example_reads_the_values():
    rng = np.random.default_rng(7)
    values = {
        "audio": rng.standard_normal(1600).astype(np.float32),
        "ids": rng.integers(-10 ** 12, 10 ** 12, 57),
        "label": 3,
        "speaker": "spk-é",
        "frames": [b"\x00jpeg1", b"jpeg2"],
    }
    spec = [("audio", "float"), ("ids", "int64"), ("label", "int64"),
            ("speaker", "bytes"), ("frames", "bytes")]
    parsed = tf.io.parse_single_example(ExampleEncoder(spec).encode(values), {
        "audio": tf.io.FixedLenFeature([1600], tf.float32),
        "ids": tf.io.VarLenFeature(tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "speaker": tf.io.FixedLenFeature([], tf.string),
        "frames": tf.io.VarLenFeature(tf.string),
    })
    np.testing.assert_array_equal(parsed["audio"].numpy(), values["audio"])
    np.testing.assert_array_equal(tf.sparse.to_dense(parsed["ids"]).numpy(), values["ids"])
    assert parsed["label"].numpy() == 3
    assert parsed["speaker"].numpy() == "spk-é".encode()
    assert list(tf.sparse.to_dense(parsed["frames"]).numpy()) == values["frames"]


def test_threads_do_not_share_work_arrays():
    # The int64 path reuses per-thread work arrays; concurrent encodes must not mix.
    rng = np.random.default_rng(3)
    arrays = [rng.integers(INT64_MIN, INT64_MAX, 5000, endpoint=True) >> (i % 64)
              for i in range(32)]
    encoder = ExampleEncoder([("x", "int64")])
    expected = [reference([("x", "int64")], {"x": a}) for a in arrays]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda a: encoder.encode({"x": a}), arrays))
            assert got == expected
