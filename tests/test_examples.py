"""One sample -> examples: outcomes, stage names in dead letters, the DoFn directly."""

import dataclasses

import apache_beam as beam
import pytest
import tensorflow as tf
from apache_beam.testing.util import assert_that, equal_to

from transforms import sample_ops
from transforms.dead_letters import FAILURES
from transforms.example_encoder import ExampleEncoder
from transforms.examples import (BUILT, FILTERED, Built, BuildExamples, ExampleRecipe, Filtered,
                                 StageError, _BuildExamplesFn, build_examples)
from transforms.spec import parse_features
from transforms.splits import SplitPlan

SPEC = parse_features("label=cls:int64,speaker=json.speaker:bytes")
SAMPLE = {"__key__": "spk01_0001", "__url__": "file.tar", "cls": b"4",
          "json": b'{"speaker": "spk01"}', "extra": b"x"}


def _recipe(**kwargs):
    return ExampleRecipe(spec=SPEC, split_plan=SplitPlan.from_flags("train=0.5,test=0.5", "__key__:^([^_]+)"),
                         **kwargs)


def _build(sample, recipe=None, sample_fn=None, example_fn=None):
    """build_examples with its lazy examples run to the end (so their errors raise here)."""
    recipe = recipe or _recipe()
    out = build_examples(sample, recipe, ExampleEncoder([(f.name, f.kind) for f in recipe.spec]),
                         sample_fn, example_fn)
    return Built(out.split, list(out.examples)) if isinstance(out, Built) else out


def test_a_good_sample_becomes_one_parsed_example_in_its_groups_split():
    out = _build(SAMPLE)
    assert isinstance(out, Built)
    assert out.split == _recipe().split_plan.split_of("spk01")
    [(order, serialized)] = out.examples
    example = tf.train.Example.FromString(serialized)
    assert example.features.feature["label"].int64_list.value == [4]
    assert example.features.feature["speaker"].bytes_list.value == [b"spk01"]
    assert _build(dict(SAMPLE)).examples[0][0] == order  # order key is stable


@pytest.mark.parametrize("sample, recipe, stage, message", [
    ({**SAMPLE, "cls": b"four"}, None, "encode", "feature 'label'"),
    ({k: v for k, v in SAMPLE.items() if k != "cls"}, None, "features", "'label' is required"),
    ({**SAMPLE, "json": b"{not json"}, None, "features", "not valid JSON"),
    ({**SAMPLE, "__key__": "nounderscore"}, "split_regex", "split", "does not match"),
    (SAMPLE, "rename_clash", "rename", "already has 'cls'"),
])
def test_failures_name_their_stage(sample, recipe, stage, message):
    recipes = {
        None: None,
        "split_regex": ExampleRecipe(spec=SPEC, split_plan=SplitPlan.from_flags(
            "train=1", "__key__:^(\\w+)_")),
        "rename_clash": _recipe(renames=(("extra", "cls"),)),
    }
    with pytest.raises(StageError, match=message) as info:
        _build(sample, recipes[recipe])
    assert info.value.stage == stage


def test_user_function_errors_and_drops():
    def boom(_):
        raise RuntimeError("user bug")

    with pytest.raises(StageError) as info:
        _build(SAMPLE, sample_fn=boom)
    assert info.value.stage == "sample_fn" and isinstance(info.value.cause, RuntimeError)
    assert _build(SAMPLE, sample_fn=lambda s: None) == Filtered("sample_fn")
    # An example dropped by example_fn leaves the sample with no examples (the
    # DoFn then reports it filtered as "no_examples").
    assert _build(SAMPLE, example_fn=lambda v: None).examples == []


def test_where_and_filter_empty():
    assert _build(SAMPLE, _recipe(where=(("cls", "5"),))) == Filtered("where")
    assert isinstance(_build(SAMPLE, _recipe(where=(("cls", "4"),))), Built)
    empty_recipe = ExampleRecipe(spec=parse_features("ids:int64[*]"),
                                 split_plan=SplitPlan.from_flags("train=1", "__key__"),
                                 filter_empty=True)
    selecting = dataclasses.replace(empty_recipe, selection=sample_ops.parse_selection("ids"))
    assert _build({"__key__": "k", "other": b"x"}, selecting) == Filtered("empty_sample")
    assert _build({"__key__": "k", "ids": b"", "other": b"x"}, empty_recipe).examples == []
    assert isinstance(_build({"__key__": "k", "ids": b"1 2"}, empty_recipe), Built)


def test_build_does_not_mutate_its_input():
    sample = dict(SAMPLE)
    _build(sample, _recipe(renames=(("extra", "more"),), selection=sample_ops.parse_selection(
        "extra,json,cls")), sample_fn=lambda s: {**s, "new": b"1"})
    assert sample == SAMPLE


def test_dofn_routes_every_sample_to_exactly_one_output():
    fn = _BuildExamplesFn(_recipe(where=(("json.speaker", "spk01"),)))
    fn.setup()
    outputs = [list(fn.process(s)) for s in (
        SAMPLE,                                            # written
        {**SAMPLE, "json": b'{"speaker": "spk02"}'},       # filtered by where
        {**SAMPLE, "cls": b"x"},                           # dead letter
    )]
    written, filtered, failed = outputs
    split = _recipe().split_plan.split_of("spk01")
    assert [(o.tag, o.value) for o in written if hasattr(o, "tag")] == [
        (BUILT, (split, 1, True, "spk01", None))]
    assert len(written) == 2
    assert [(o.tag, o.value) for o in filtered] == [(FILTERED, "where")]
    [letter] = failed
    assert letter.tag == FAILURES
    assert letter.value["key"] == "spk01_0001" and letter.value["url"] == "file.tar"
    assert letter.value["stage"] == "encode" and letter.value["unit"] == "sample"
    assert letter.value["examples_written"] == 0


def drop_every_example(values):
    """--example_fn for the test below."""
    return None


def test_dofn_reports_a_sample_whose_examples_were_all_dropped_as_filtered():
    fn = _BuildExamplesFn(_recipe(example_fn=f"{__name__}:drop_every_example"))
    fn.setup()
    assert [(o.tag, o.value) for o in fn.process(SAMPLE)] == [(FILTERED, "no_examples")]


def test_build_examples_transform(pipeline):
    samples = pipeline | beam.Create([SAMPLE, {**SAMPLE, "__key__": "spk01_0002", "cls": b"?"}])
    out = samples | BuildExamples(_recipe())
    assert_that(out.examples | beam.Map(lambda e: (e[0], len(e[2]) > 0)),
                equal_to([(_recipe().split_plan.split_of("spk01"), True)]), label="examples")
    assert_that(out[FAILURES] | beam.Map(lambda r: (r["key"], r["stage"])),
                equal_to([("spk01_0002", "encode")]), label="failures")
    pipeline.run()
