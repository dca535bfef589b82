"""One sample -> examples: outcomes, stage names in dead letters; the converter DoFn
directly, writing real shards read back with TensorFlow."""

import dataclasses

import pytest
import tensorflow as tf

from transforms.format.encoder import ExampleEncoder
from transforms.format.spec import parse_features
from transforms.recipe import examples as examples_module
from transforms.recipe import sample_ops
from transforms.recipe.accounting import Kind, Tally
from transforms.recipe.examples import (
    Built,
    ExampleRecipe,
    Filtered,
    SampleOutcome,
    StageError,
    build_examples,
    convert_sample,
)
from transforms.recipe.measures.durations import Durations
from transforms.recipe.splits import SplitPlan
from transforms.writer.convert import RECEIPTS, ConvertOptions, _ConvertFn
from transforms.writer.ledger import parse_receipt

from memory_source import memory_source

SPEC = parse_features("label=cls:int64,speaker=json.speaker:bytes")
SAMPLE = {"__key__": "spk01_0001", "__url__": "file.tar", "cls": b"4",
          "json": b'{"speaker": "spk01"}', "extra": b"x"}


def _recipe(**kwargs):
    plan = SplitPlan.from_flags("train=0.5,test=0.5", "__key__:^([^_]+)")
    return ExampleRecipe(spec=SPEC, split_plan=plan, **kwargs)


def _build(sample, recipe=None, sample_fn=None, example_fn=None, measured=()):
    """build_examples with its lazy examples run to the end (so their errors raise here)."""
    recipe = recipe or _recipe()
    out = build_examples(sample, recipe, ExampleEncoder([(f.name, f.kind) for f in recipe.spec]),
                         sample_fn, example_fn, measured=measured)
    return Built(out.split, list(out.examples)) if isinstance(out, Built) else out


def test_a_good_sample_becomes_one_parsed_example_in_its_groups_split():
    durations = Durations()
    measured = durations.create()
    out = _build(SAMPLE, measured=((durations, measured),))
    assert isinstance(out, Built)
    assert out.split == _recipe().split_plan.split_of("spk01")
    [(order, serialized)] = out.examples
    assert measured == {}  # no duration_s, no start and end times
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


def _convert(sample, recipe=None):
    """(examples, outcome) of convert_sample run to the end."""
    recipe = recipe or _recipe()
    gen = convert_sample(sample, recipe, ExampleEncoder([(f.name, f.kind) for f in recipe.spec]))
    examples = []
    while True:
        try:
            examples.append(next(gen))
        except StopIteration as done:
            return examples, done.value


def test_convert_sample_ends_every_sample_in_one_outcome():
    split = _recipe().split_plan.split_of("spk01")
    examples, outcome = _convert(SAMPLE)
    assert [e.split for e in examples] == [split]
    assert outcome == SampleOutcome(split, 1, "spk01")
    assert _convert(SAMPLE, _recipe(where=(("cls", "5"),))) == ([], SampleOutcome(filtered="where"))
    examples, outcome = _convert({**SAMPLE, "cls": b"x"})
    assert examples == [] and (outcome.split, outcome.examples) == (split, 0)
    assert outcome.failure.stage == "encode"
    _, outcome = _convert({**SAMPLE, "__key__": "nounderscore"},
                          ExampleRecipe(spec=SPEC, split_plan=SplitPlan.from_flags(
                              "train=1", "__key__:^(\\w+)_")))
    assert outcome.split is None and outcome.failure.stage == "split"


def _convert_fn(recipe, tmp_path, **options):
    fn = _ConvertFn(memory_source([]).reader, recipe,
                    ConvertOptions(temp_dir=str(tmp_path), **options))
    fn.setup()
    return fn


def _tagged(outputs):
    by_tag = {}
    for o in outputs:
        by_tag.setdefault(getattr(o, "tag", "examples"), []).append(getattr(o, "value", o))
    return by_tag


def test_converter_writes_a_units_shards_and_a_receipt_of_every_sample(tmp_path):
    samples = [{**SAMPLE, "__key__": "spk01_0000"},               # written
               {**SAMPLE, "__key__": "spk02_0000",                # filtered by where
                "json": b'{"speaker": "spk02"}'},
               {**SAMPLE, "cls": b"x"}]                           # dead letter
    fn = _convert_fn(_recipe(where=(("json.speaker", "spk01"),)), tmp_path)
    [unit] = memory_source(samples).plan()
    out = _tagged(fn.process(unit))
    split = _recipe().split_plan.split_of("spk01")
    [receipt] = out[RECEIPTS]
    [shard] = receipt.shards
    assert (shard.split, shard.order, shard.num_examples) == (split, (0, 0), 1)
    [record] = [r.numpy() for r in tf.data.TFRecordDataset(shard.temp)]
    assert tf.train.Example.FromString(record).features.feature["label"].int64_list.value == [4]
    assert len(record) == shard.num_bytes
    assert dict(receipt.tallies) == {Tally(Kind.READ): 3, Tally(Kind.WRITTEN, split): 1,
                                     Tally(Kind.EXAMPLES, split): 1,
                                     Tally(Kind.FILTERED, "where"): 1,
                                     Tally(Kind.FAILED, "sample"): 1}
    observed = dict(receipt.observed)   # what the dataset's checks join
    assert observed["groups"] == (("spk01", split),) and receipt.span is None
    assert len(observed["keys"]) == 3 and "spk01_0001" in observed["keys"]
    assert receipt.inputs == unit.inputs
    [letter] = receipt.failures
    assert letter["key"] == "spk01_0001" and letter["url"] == "file.tar"
    assert letter["stage"] == "encode" and letter["unit"] == "sample"
    assert letter["examples_written"] == 0
    assert "examples" not in out  # written where built: nothing else leaves the worker
    # The same receipt is in the run's folder, for a --resume.
    [written] = (tmp_path / "units").glob("000000-*.json")
    assert parse_receipt(written.read_text()) == receipt


def drop_every_example(values):
    """--example_fn for the test below."""
    return None


def test_a_sample_whose_examples_were_all_dropped_is_filtered(tmp_path):
    fn = _convert_fn(_recipe(example_fn=f"{__name__}:drop_every_example"), tmp_path,
                     emit_examples=True)
    [unit] = memory_source([SAMPLE]).plan()
    out = _tagged(fn.process(unit))
    [receipt] = out[RECEIPTS]
    assert dict(receipt.tallies) == {Tally(Kind.READ): 1, Tally(Kind.FILTERED, "no_examples"): 1}
    assert receipt.shards == () and "examples" not in out


def test_converter_emits_examples_when_asked(tmp_path):
    fn = _convert_fn(_recipe(), tmp_path, write_shards=False, emit_examples=True)
    [unit] = memory_source([SAMPLE, {**SAMPLE, "__key__": "spk01_0002"}]).plan()
    out = _tagged(fn.process(unit))
    assert [e.split for e in out["examples"]] == [_recipe().split_plan.split_of("spk01")] * 2
    [receipt] = out[RECEIPTS]
    assert receipt.shards == () and not (tmp_path / "units").exists()


def test_an_example_protobuf_cannot_read_back_is_a_dead_letter(monkeypatch):
    """Over 2 GiB in production; the limit is lowered here so the test stays small."""
    monkeypatch.setattr(examples_module, "PROTOBUF_LIMIT", 60)
    _, outcome = _convert({**SAMPLE, "json": b'{"speaker": "' + b"s" * 80 + b'"}'})
    assert outcome.failure.stage == "encode" and "protobuf reads none over 60" in str(
        outcome.failure)
    examples, outcome = _convert(SAMPLE)
    assert len(examples) == 1 and outcome.failure is None


def _windows_recipe():
    from transforms.media.cutting import CutOptions
    from transforms.media.windows import WindowOptions
    cut = CutOptions(mode="audio_windows", audio_fields=("flac",),
                     windows=WindowOptions(window_s=0.5))
    return ExampleRecipe(spec=parse_features("label=cls:int64"), cut=cut,
                         split_plan=SplitPlan.from_flags("train=1", "__key__:^([^_]+)"))


def _windows_run(recipe, example_fn=None):
    """A 3.5 s recording's 0.5 s windows: (its examples, outcome, the statistics
    measure's accumulator)."""
    from transforms.recipe.measures.statistics import Statistics
    from transforms.testing.synthetic_media import flac_bytes, voice
    sample = {"__key__": "spk01_0001", "cls": b"4", "flac": flac_bytes(voice(220, 3.5), 16000)}
    statistics = Statistics((("audio", 1, "float"),))
    measured = statistics.create()
    encoder = ExampleEncoder([(f.name, f.kind) for f in recipe.spec])
    gen = convert_sample(sample, recipe, encoder, example_fn=example_fn,
                         measured=((statistics, measured),))
    examples = []
    while True:
        try:
            examples.append(next(gen))
        except StopIteration as done:
            return examples, done.value, measured


def test_a_recordings_windows_are_encoded_a_chunk_at_a_time_as_one_at_a_time(monkeypatch):
    recipe = _windows_recipe()
    whole, outcome, measured = _windows_run(recipe)
    monkeypatch.setattr(examples_module, "_CHUNK_EXAMPLES", 3)
    chunked, _, measured_in_threes = _windows_run(recipe)
    monkeypatch.setattr(examples_module, "_CHUNK_EXAMPLES", 1)
    alone, _, measured_alone = _windows_run(recipe)
    assert outcome.examples == 7 and whole == chunked == alone
    audio = [tf.train.Example.FromString(e.serialized).features.feature["audio"].float_list.value
             for e in whole]
    assert [len(a) for a in audio] == [8000] * 7 and any(audio[3])
    [(count, sums, squares)] = measured.values()
    [(count_3, sums_3, squares_3)] = measured_in_threes.values()
    [(count_1, sums_1, squares_1)] = measured_alone.values()
    assert count == count_3 == count_1 == 7 * 8000
    # The same float64 partial sums, bit for bit, however many come at once.
    assert sums.tobytes() == sums_3.tobytes() == sums_1.tobytes()
    assert squares.tobytes() == squares_3.tobytes() == squares_1.tobytes()


def test_a_window_that_fails_to_encode_keeps_the_windows_before_it():
    import numpy as np

    def spoil_the_fifth(values):
        return {**values, "audio": np.full(8000, np.nan, np.float32)} if (
            values["start_time"] == 2.0) else values

    examples, outcome, measured = _windows_run(_windows_recipe(), spoil_the_fifth)
    assert len(examples) == outcome.examples == 4 and outcome.failure.stage == "encode"
    assert "not finite" in str(outcome.failure)
    [(count, _, _)] = measured.values()
    assert count == 4 * 8000   # only the windows written are measured
