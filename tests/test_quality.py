"""--quality and --keep (issue #58): each example's audio measured, examples kept by clause.

The audio is made by other tools: espeak-ng speaks, sox trims, mixes noise
at known SNRs (`sox -m -v`), resamples to 8 kHz and back (a telephone's
band), low-passes, clips and shifts; pyloudnorm is the reference loudness.
"""

import json
import subprocess
import sys

import numpy as np
import pyloudnorm
import pytest
import soundfile
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

import transforms as dg
from transforms.media.quality import bandwidth_hz, clipping, dc_offset, loudness_lufs, snr_db
from transforms.recipe.keep import KeepFilter
from transforms.testing.spoken import speak


def _sox(*args):
    subprocess.run(["sox", *map(str, args)], check=True, capture_output=True)


def _read(path):
    audio, rate = soundfile.read(str(path), dtype="float32")
    return audio, rate


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """A Harvard sentence by espeak-ng, its silences trimmed by sox, and white noise as long."""
    root = tmp_path_factory.mktemp("quality")
    spoken = root / "spoken.flac"
    speak("The birch canoe slid on the smooth planks.", str(spoken))
    _sox(spoken, root / "speech.flac", "silence", 1, 0.005, "-60d", "reverse", "silence", 1,
         0.005, "-60d", "reverse")
    seconds = soundfile.info(str(root / "speech.flac")).duration
    _sox("-n", "-r", 16000, "-c", 1, "-b", 16, root / "noise.flac", "synth", seconds,
         "whitenoise", "vol", 0.1)
    return root


def test_snr_follows_the_snr_sox_mixed_within_a_decibel_and_a_half_up_to_15_db(speech):
    clean, _ = _read(speech / "speech.flac")
    noise, _ = _read(speech / "noise.flac")
    estimates = []
    for target in (0, 5, 10, 15, 20, 30):
        # The noise's volume for `target` dB against the speech's power.
        volume = np.sqrt(np.mean(clean.astype(np.float64) ** 2)
                         / np.mean(noise.astype(np.float64) ** 2) / 10 ** (target / 10))
        mixed = speech / f"mixed{target}.flac"
        _sox("-m", "-v", 1, speech / "speech.flac", "-v", volume, speech / "noise.flac", mixed)
        audio, rate = _read(mixed)
        estimates.append(snr_db(audio, rate))
        if target <= 15:
            assert abs(estimates[-1] - target) < 1.5, (target, estimates[-1])
    # Above, WADA's model of speech fits espeak-ng's less: low, but still rising.
    assert estimates == sorted(estimates) and estimates[-1] > 20
    assert snr_db(clean, 16000) > 40


def test_bandwidth_finds_a_telephones_band_and_a_low_pass(speech):
    _sox(speech / "speech.flac", "-r", 8000, speech / "phone8.flac")
    _sox(speech / "phone8.flac", "-r", 16000, speech / "phone.flac")
    _sox(speech / "speech.flac", speech / "low.flac", "sinc", "-3000")
    assert bandwidth_hz(*_read(speech / "speech.flac")) > 6000
    assert 3700 <= bandwidth_hz(*_read(speech / "phone.flac")) <= 4100
    assert 2800 <= bandwidth_hz(*_read(speech / "low.flac")) <= 3300


def test_loudness_is_pyloudnorms_and_silence_is_the_gate(speech):
    audio, rate = _read(speech / "speech.flac")
    meter = pyloudnorm.Meter(rate)
    for gain in (1.0, 0.25, 0.02):
        quieter = (audio * gain).astype(np.float32)
        assert loudness_lufs(quieter, rate) == pytest.approx(
            meter.integrated_loudness(quieter.astype(np.float64)), abs=0.01)
    assert loudness_lufs(np.zeros(rate, np.float32), rate) == -70.0


def test_clipping_and_dc_offset_of_what_sox_did(speech):
    _sox(speech / "speech.flac", speech / "loud.flac", "gain", 20)
    _sox(speech / "speech.flac", speech / "shifted.flac", "dcshift", 0.1)
    assert clipping(*_read(speech / "speech.flac")) == 0
    assert clipping(*_read(speech / "loud.flac")) > 0.01
    assert dc_offset(*_read(speech / "shifted.flac")) == pytest.approx(0.1, abs=0.005)


def _job(*flags):
    return subprocess.run([sys.executable, "-m", "pipelines.tar_to_tfrecord", *flags],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def corpus(speech):
    """A GNU tar of the sentence, its telephone copy and a noisy mix (0 dB)."""
    _sox(speech / "speech.flac", "-r", 8000, speech / "corpus-phone8.flac")
    _sox(speech / "corpus-phone8.flac", "-r", 16000, speech / "phone.flac")
    _sox("-m", speech / "speech.flac", "-v", 4, speech / "noise.flac", speech / "noisy.flac")
    subprocess.run(["tar", "--format=gnu", "-cf", "corpus.tar", "speech.flac", "phone.flac",
                    "noisy.flac"], cwd=speech, check=True)
    return speech / "corpus.tar"


def test_keep_removes_by_clause_counts_each_and_keeps_what_holds(corpus, tmp_path):
    output = tmp_path / "kept"
    done = _job("--input", str(corpus), "--output", str(output), "--cut", "utterances",
                "--audio_fields", "flac", "--features", "none", "--splits", "train=1",
                "--quality", "clipping", "--keep", "snr_db >= 15 and bandwidth_hz >= 6000")
    assert done.returncode == 0, done.stderr
    info = json.loads((output / "manifest.json").read_text())
    accounting = info["accounting"]
    assert (accounting["samples_read"], accounting["samples_written"]) == (3, 1)
    assert accounting["samples_filtered_per_reason"] == {"keep": 2}
    assert accounting["examples_filtered_per_reason"] == {"keep: snr_db >= 15": 1,
                                                         "keep: bandwidth_hz >= 6000": 1}
    # The measures --keep names are measured and written, beside --quality's.
    names = [f["name"] for f in info["features"]]
    assert {"clipping", "snr_db", "bandwidth_hz"} <= set(names)
    quality = info["quality"]
    assert quality["keep"] == ["snr_db >= 15", "bandwidth_hz >= 6000"]
    snr = quality["measures"]["snr_db"]["splits"]["train"]
    assert (sum(snr["all"]), sum(snr["kept"])) == (3, 1)   # what the threshold cost
    assert snr["min"] < 5 < 15 < snr["max"]
    # schema.pbtxt declares what was kept as the measures' domains (TFDV checks them).
    schema = schema_pb2.Schema()
    text_format.Parse((output / "schema.pbtxt").read_text(), schema)
    domains = {f.name: f.float_domain for f in schema.feature if f.HasField("float_domain")}
    assert set(domains) == {"snr_db", "bandwidth_hz"}
    assert (domains["snr_db"].min, domains["bandwidth_hz"].min) == (15, 6000)
    assert not domains["snr_db"].HasField("max")
    # verify holds what was written to the clauses; a stricter one than the
    # writer applied (the manifest edited) finds the record that fails it.
    assert dg.verify_dataset(str(output)).ok
    written = pytest.approx(snr["max"], abs=0.01)
    info["recipe"]["keep"] = ["snr_db >= 15", "bandwidth_hz >= 6000", "snr_db > 90"]
    (output / "manifest.json").write_text(json.dumps(info))
    [problem] = dg.verify_dataset(str(output)).problems
    assert problem.startswith("train/") and "record 0" in problem
    assert "which the writer's --keep 'snr_db > 90' removes" in problem
    assert float(problem.split("'snr_db' is ")[1].split(",")[0]) == written


@pytest.mark.parametrize("keep, says", [
    ("loudness >= -30", "names 'loudness', which the examples do not hold as a number"),
    ("snr_db >= high", "'snr_db >= high' is not 'NAME OP NUMBER'"),
])
def test_a_bad_keep_is_refused_in_one_line_before_work(corpus, tmp_path, keep, says):
    done = _job("--input", str(corpus), "--output", str(tmp_path / "out"), "--cut", "utterances",
                "--audio_fields", "flac", "--features", "none", "--keep", keep)
    assert done.returncode == 2
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert says in line
    assert not (tmp_path / "out").exists()


def test_keep_from_python_is_refused_in_pythons_terms():
    spec = dg.FeatureSpec.parse("cls:int64")
    with pytest.raises(dg.ArgumentError, match="keep must be its text"):
        dg.ExampleRecipe(spec=spec, keep=5)
    with pytest.raises(dg.ArgumentError, match="clauses joined by 'and'"):
        dg.ExampleRecipe(spec=spec, keep="cls >= 1 or cls < 0")
    assert str(dg.ExampleRecipe(spec=spec, keep="cls>=1").keep.clauses[0]) == "cls >= 1"
    # The recipe's other options, as its cut's, are refused by type and name.
    with pytest.raises(dg.ArgumentError, match="^cut must be a CutOptions, got None"):
        dg.ExampleRecipe(spec=spec, cut=None)


def test_what_keep_promises_of_the_records_and_their_schema():
    keep = KeepFilter.parse("snr_db >= 15 and snr_db < 40 and clipping != 0 and num_samples > "
                            "8000.5")
    assert keep.bounds() == {"snr_db": (15, 40), "num_samples": (8000.5, None)}
    # Of a transform materialized in the shards, only the clauses on features
    # it passed through still hold of what the records store.
    document = {"recipe": {"keep": [str(c) for c in keep.clauses]},
                "transform": {"applied": "in_shards", "passed_through": ["clipping"]}}
    assert [str(c) for c in KeepFilter.of_manifest(document).clauses] == ["clipping != 0"]
    document["transform"]["applied"] = "at_read"
    assert KeepFilter.of_manifest(document) == keep
