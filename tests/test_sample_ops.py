"""Sample operations: selection, rename, where, empty filters, user functions."""

import pytest

from transforms.recipe import sample_ops

SAMPLE = {"__key__": "k", "__url__": "u", "flac": b"a", "cls": b"3", "json": b'{"lang": "en"}',
          "frame.jpg": b"j", "audio_left": b"l"}


def test_select_by_key_prefix_suffix_substring():
    sel = sample_ops.parse_selection("cls,prefix:fl,suffix:.jpg,contains:_le")
    out = sample_ops.select_fields(SAMPLE, sel)
    assert set(out) == {"__key__", "__url__", "cls", "flac", "frame.jpg", "audio_left"}
    assert out is not SAMPLE and "json" in SAMPLE  # input untouched


def test_select_rejects_unknown_selector():
    with pytest.raises(ValueError, match="^select term 'regex:x'"):
        sample_ops.parse_selection("regex:x")


def test_rename_and_collision():
    renames = sample_ops.parse_pairs("flac=audio,cls=label", "rename")
    out = sample_ops.rename_fields(SAMPLE, renames)
    assert out["audio"] == b"a" and out["label"] == b"3" and "flac" not in out
    with pytest.raises(ValueError, match="already has 'cls'"):
        sample_ops.rename_fields(SAMPLE, (("flac", "cls"),))


def test_where_compares_fields_and_json_as_text():
    assert sample_ops.matches_where(SAMPLE, (("cls", "3"), ("json.lang", "en")))
    assert not sample_ops.matches_where(SAMPLE, (("cls", "4"),))
    assert not sample_ops.matches_where(SAMPLE, (("missing", "x"),))


def test_is_empty():
    assert sample_ops.is_empty({"__key__": "k"})
    assert sample_ops.is_empty({"__key__": "k", "a": b"", "b": []})
    assert not sample_ops.is_empty({"a": 0})
    assert not sample_ops.is_empty({"a": b"x"})


def test_load_function_errors_name_the_parameter():
    assert sample_ops.load_function("json:dumps", "sample_fn") is __import__("json").dumps
    with pytest.raises(ValueError, match="^sample_fn 'nope.nothing:f': cannot import"):
        sample_ops.load_function("nope.nothing:f", "sample_fn")
    with pytest.raises(ValueError, match="^example_fn 'json:nothing': .* no function 'nothing'"):
        sample_ops.load_function("json:nothing", "example_fn")
    with pytest.raises(ValueError, match="^example_fn 'json' is not module:function"):
        sample_ops.load_function("json", "example_fn")
