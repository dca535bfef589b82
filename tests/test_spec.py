"""The feature spec: flag parsing, value coercion, inference, JSON round trip."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transforms.format import tfds_metadata
from transforms.format.infer import infer_spec
from transforms.format.spec import Feature, FeatureSpec, parse_features


def test_parse_features_names_sources_and_shapes():
    spec = parse_features("flac:bytes, speaker=json.speaker:bytes,emb:float[4,4],ids:int64[*],"
                          "cls:int64")
    assert [(f.name, f.source, f.dtype, f.shape) for f in spec] == [
        ("flac", "flac", "bytes", ()),
        ("speaker", "json.speaker", "bytes", ()),
        ("emb", "emb", "float", (4, 4)),
        ("ids", "ids", "int64", (None,)),
        ("cls", "cls", "int64", ()),
    ]


@pytest.mark.parametrize("text, message", [
    ("cls", r"is not \[name=\]source:dtype"),
    ("cls:int32x", "unknown dtype"),
    ("emb:float[0]", "must be positive"),
    ("emb:float[a]", "shape must be"),
    ("emb:float[2,*]", "shape must be"),
    ("emb:float16", "is an array: give its shape"),
    ("a:int64,a:bytes", "duplicate feature names"),
    ("", "spec is empty"),
])
def test_parse_features_rejects_bad_terms(text, message):
    with pytest.raises(ValueError, match=message):
        parse_features(text)


def test_coerce_parses_text_labels_and_lists():
    assert Feature("cls", "int64").coerce(b" 7\n").tolist() == [7]
    assert Feature("x", "float", (3,)).coerce(b"1.5, 2 3").tolist() == [1.5, 2.0, 3.0]
    assert Feature("ids", "int64", (None,)).coerce([1, 2, -3]).tolist() == [1, 2, -3]
    assert Feature("s", "bytes").coerce("spk01") == [b"spk01"]
    assert Feature("s", "bytes", (None,)).coerce(["a", b"b"]) == [b"a", b"b"]


def test_coerce_numpy_arrays_to_declared_dtype():
    out = Feature("emb", "float", (2, 2)).coerce(np.arange(4, dtype=np.float64).reshape(2, 2))
    assert out.dtype == np.float32 and out.tolist() == [0, 1, 2, 3]
    out = Feature("ids", "int64", (None,)).coerce(np.array([1, 2], dtype=np.int16))
    assert out.dtype == np.int64


@pytest.mark.parametrize("feature, value, message", [
    (Feature("cls", "int64"), b"unknown", "is not int64"),
    (Feature("cls", "int64"), 1.5, "not an integer"),
    (Feature("emb", "float", (3,)), [1.0, 2.0], "has 2 values, shape \\[3\\] needs 3"),
    (Feature("x", "float"), b"abc", "is not float"),
    # float16 arrays: finite values float16 holds, whole rows, numbers.
    (Feature("fb", "float16", (None, 2)), np.array([[1.0, 7e4]]), "not finite float16"),
    (Feature("fb", "float16", (None, 2)), [1.0, float("nan")], "not finite float16"),
    (Feature("fb", "float16", (None, 2)), [1.0, 2.0, 3.0],
     "has 3 values, not whole rows of shape \\[\\*,2\\]"),
    (Feature("fb", "float16", (None, 2)), np.zeros((2, 3)), "declares \\[\\*,2\\]"),
    (Feature("fb", "float16", (2,)), ["a", "b"], "expected a numeric array for float16"),
])
def test_coerce_errors_name_the_feature(feature, value, message):
    with pytest.raises(ValueError, match=message):
        feature.coerce(value)


def test_spec_json_round_trip():
    spec = parse_features("a=json.x:int64[*],b:float[2,3],c:bytes")
    assert FeatureSpec.from_json(spec.to_json()) == spec


def test_infer_spec_from_tar_like_samples():
    samples = [
        {"__key__": "k1", "bin": b"\x00" * 100, "cls": b"3",
         "json": b'{"speaker": "a", "gain": 0.5, "n": 2, "tags": [1, 2]}'},
        {"__key__": "k2", "bin": b"\x01" * 100, "cls": b"4",
         "json": b'{"speaker": "b", "gain": 1, "n": 3, "tags": [1]}', "extra": b"x"},
    ]
    spec = infer_spec(samples)
    assert {f.name: (f.dtype, f.shape) for f in spec} == {
        "bin": ("bytes", ()),
        "cls": ("int64", ()),
        "json.speaker": ("bytes", ()),
        "json.gain": ("float", ()),
        "json.n": ("int64", ()),
        "json.tags": ("int64", (None,)),
    }


def test_infer_spec_takes_json_bools_as_bools_and_nulls_as_absent():
    spec = infer_spec([{"json": b'{"ok": true, "n": 1, "x": null, "mixed": true}'},
                       {"json": b'{"ok": false, "n": 2, "x": null, "mixed": 3}'}])
    assert [(f.name, f.dtype) for f in spec] == [
        ("json.mixed", "bytes"), ("json.n", "int64"), ("json.ok", "bool")]


def test_infer_spec_widens_disagreeing_types():
    spec = infer_spec([{"cls": b"3"}, {"cls": b"3.5"}, {"cls": b"x"}])
    assert spec.features[0].dtype == "bytes"


def test_parse_typed_fields_and_aliases():
    spec = parse_features("ok:bool,n:int32,ids:int32[*],trio:int32[3],x:double,y:float64,"
                          "emb:float32[4],text:string")
    assert [(f.name, f.dtype, f.kind, f.shape) for f in spec] == [
        ("ok", "bool", "int64", ()),
        ("n", "int32", "int64", ()),
        ("ids", "int32", "int64", (None,)),
        ("trio", "int32", "int64", (3,)),
        ("x", "double", "float", ()),
        ("y", "double", "float", ()),
        ("emb", "float", "float", (4,)),
        ("text", "string", "bytes", ()),
    ]
    # The manifest keeps the declared dtype, so the reader can restore it.
    assert FeatureSpec.from_json(spec.to_json()) == spec
    assert [d["dtype"] for d in spec.to_json()][:3] == ["bool", "int32", "int32"]


def test_coerce_typed_fields_to_their_stored_kind():
    assert Feature("ok", "bool", (None,)).coerce(b"true, 0 FALSE").tolist() == [1, 0, 0]
    assert Feature("ok", "bool", (None,)).coerce([True, np.bool_(False), 1, 0.0]).tolist() == [
        1, 0, 1, 0]
    assert Feature("ok", "bool").coerce(np.array(True)).dtype == np.int64
    out = Feature("n", "int32", (None,)).coerce(np.array([-2 ** 31, 2 ** 31 - 1, 7], np.int32))
    assert out.dtype == np.int64 and out.tolist() == [-2 ** 31, 2 ** 31 - 1, 7]
    assert Feature("x", "double").coerce(0.1).tolist() == [np.float32(0.1)]
    assert Feature("t", "string", (None,)).coerce(["é", b"ok"]) == ["é".encode(), b"ok"]


@pytest.mark.parametrize("feature, value, message", [
    (Feature("ok", "bool"), b"yes", "is not a bool"),
    (Feature("ok", "bool"), 2, "is not a bool"),
    (Feature("n", "int32"), 2 ** 31, "outside the int32 range"),
    (Feature("n", "int32", (None,)), [0, -2 ** 31 - 1], "outside the int32 range"),
    (Feature("n", "int32"), b"x", "is not int32"),
    (Feature("t", "string"), b"\xff\xfe", "is not UTF-8 text"),
])
def test_typed_field_errors_name_the_feature(feature, value, message):
    with pytest.raises(ValueError, match=f"'{feature.name}'.*{message}"):
        feature.coerce(value)


# -- JSON values against every declared dtype ------------------------------------------
# The rules (docs/features.md): a null is never a value; a bool is a bool
# (text true/false for bytes and string); an object is JSON text for bytes and
# string, and no number; nested lists flatten only into a fixed shape; numbers
# must fit the stored kind.

_JSON = {"null": None, "true": True, "object": {"name": "x", "a": [1]},
         "nested": [[1, 2], [3]], "huge_int": 10 ** 400, "huge_float": 1e400,
         "overflow32": 1e39, "nan_text": "nan", "null_in_list": [1, None]}

_RULES = {  # (dtype, shape): {value name: coerced values, or the error's words}
    ("int64", ()): {"null": "null", "true": "is a bool", "object": "is not int64",
                    "huge_int": "int64 range", "huge_float": "is not int64",
                    "overflow32": "int64 range", "nan_text": "is not int64"},
    ("int32", ()): {"null": "null", "true": "is a bool", "huge_int": "int64 range"},
    ("float", ()): {"null": "null", "true": "is a bool", "object": "is not float",
                    "huge_int": "is not float", "huge_float": "not finite",
                    "overflow32": "not finite", "nan_text": "not finite"},
    ("bool", ()): {"null": "is not a bool", "true": [1], "object": "is not a bool",
                   "huge_int": "is not a bool"},
    ("bytes", ()): {"null": "null", "true": [b"true"], "object": [b'{"a": [1], "name": "x"}'],
                    "huge_int": [str(10 ** 400).encode()], "nan_text": [b"nan"]},
    ("string", ()): {"null": "null", "true": [b"true"], "object": [b'{"a": [1], "name": "x"}']},
    ("int64", (None,)): {"nested": "is not int64", "null_in_list": "null"},
    ("float", (None,)): {"nested": "is not float", "null_in_list": "null"},
    ("bytes", (None,)): {"nested": "nested list", "null_in_list": "null",
                         "object": [b'{"a": [1], "name": "x"}']},
    ("int64", (2, 2)): {"nested": "is not int64"},
}


@pytest.mark.parametrize("dtype, shape, name", [
    (dtype, shape, name) for (dtype, shape), cases in _RULES.items() for name in cases])
def test_json_values_coerce_by_the_rules_or_fail_naming_the_feature(dtype, shape, name):
    expected = _RULES[(dtype, shape)][name]
    feature = Feature("speaker", dtype, shape)
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=f"'speaker'.*{expected}"):
            feature.coerce(_JSON[name])
    else:
        out = feature.coerce(_JSON[name])
        assert (out.tolist() if isinstance(out, np.ndarray) else out) == expected


def test_a_fixed_shape_takes_a_nested_json_list():
    assert Feature("m", "int64", (2, 2)).coerce([[1, 2], [3, 4]]).tolist() == [1, 2, 3, 4]
    assert Feature("m", "float", (2,)).coerce([1, 2.5]).tolist() == [1.0, 2.5]


def test_packed_arrays_refuse_bools():
    with pytest.raises(ValueError, match="expected an integer array"):
        Feature("pcm", "int16", (2,)).coerce(np.array([True, False]))


@pytest.mark.parametrize("output, name", [("gs://b/datasets/VoxCeleb-2 v1/", "voxceleb_2_v1"),
                                          ("out/2024", "dataset_2024"), ("/", "dataset")])
def test_tfds_dataset_names_are_snake_case(output, name):
    assert tfds_metadata.dataset_name(output) == name


@given(st.one_of(st.integers(min_value=-2**200, max_value=2**200),
                 st.floats(allow_nan=True, allow_infinity=True)))
def test_a_plain_number_takes_the_short_way_to_the_general_ways_array(value):
    """A Python int or float is coerced without the general path's list and
    checks; whatever the short way makes is the general way's own array, and
    what either refuses stays refused (a one-item list takes the general way)."""
    for dtype in ("float", "int64"):
        feature = Feature(name="x", dtype=dtype)
        try:
            general = feature.coerce([value])
        except ValueError:
            general = None
        try:
            short = feature.coerce(value)
        except ValueError:
            short = None
        if general is None:
            assert short is None
        else:
            assert short.dtype == general.dtype and short.tobytes() == general.tobytes()
