"""Speech datasets: whole utterances, filterbank / log-mel / MFCC features, and
their statistics fitted on train.

The corpus is made by other tools: espeak-ng speaks Harvard sentences in four
voices, sox stores them as 16 kHz FLAC (transforms/testing/spoken.py), printf
writes each transcript member and each speaker's JSON, GNU tar packs them.
The features are checked against implementations written here from Kaldi's
and TensorFlow's definitions (numpy), against kaldi-native-fbank and against
tf.signal itself; the statistics against numpy over the split as TensorFlow
reads it back.
"""

import json
import shlex
import subprocess

import kaldi_native_fbank as knf
import numpy as np
import pytest
import soundfile
import tensorflow as tf
import tensorflow_datasets as tfds

import transforms as dg
from pipelines import tar_to_tfrecord
from transforms.format import reader
from transforms.media.cutting import cut_sample
from transforms.media.features import AudioFeatures, compute_features
from transforms.testing.spoken import sentences, speak

UTTERANCES = 8
FLAGS = ["--audio_fields", "flac", "--split_by", "json.speaker",
         "--splits", "train=0.5,test=0.5"]


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """speech.tar: u0..u7, each a FLAC of a sentence, its transcript (.txt) and
    its speaker (.json, one of four voices); bad.tar: `short`, a 10 ms
    utterance (shorter than a feature frame), and `latin1`, u0's audio with a
    transcript in Latin-1, not UTF-8."""
    root = tmp_path_factory.mktemp("speech")
    files = root / "files"
    files.mkdir()
    members = []
    for i, text in enumerate(sentences(UTTERANCES)):
        speak(text, str(files / f"u{i}.flac"), voice=i)
        _shell(f"printf '%s' {shlex.quote(text)} > u{i}.txt; "
               f"printf '{{\"speaker\": \"v{i % 4}\"}}' > u{i}.json", files)
        members += [f"u{i}.flac", f"u{i}.txt", f"u{i}.json"]
    _shell("tar -cf ../speech.tar " + " ".join(members), files)
    _shell("sox -n -r 16000 -b 16 -c 1 short.flac synth 0.01 sine 300; printf 'oh' > short.txt;"
           " cp u0.flac latin1.flac; printf 'caf\\351' > latin1.txt;"
           " for k in short latin1; do printf '{\"speaker\": \"v9\"}' > $k.json; done;"
           " tar -cf ../bad.tar short.flac short.txt short.json latin1.flac latin1.txt"
           " latin1.json", files)
    return root


def _shell(command: str, cwd) -> None:
    subprocess.run(command, shell=True, check=True, cwd=cwd, capture_output=True)


def _utterance(speech, i: int) -> np.ndarray:
    audio, rate = soundfile.read(speech / "files" / f"u{i}.flac", dtype="float32")
    assert rate == 16000
    return audio


# --- independent implementations -------------------------------------------------

def _kaldi_frames(audio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kaldi's framing of 16-bit-scale audio at 16 kHz, 25/10 ms, snip_edges:
    (windowed frames padded to 512, raw log energy of each)."""
    x = audio.astype(np.float64) * 32768
    count = 1 + (len(x) - 400) // 160
    frames = np.stack([x[i * 160:i * 160 + 400] for i in range(count)])
    frames -= frames.mean(axis=1, keepdims=True)                      # remove_dc_offset
    energy = np.log(np.maximum((frames ** 2).sum(axis=1), np.finfo(np.float32).eps))
    frames[:, 1:] -= 0.97 * frames[:, :-1].copy()                     # pre-emphasis
    frames[:, 0] *= 1 - 0.97
    n = np.arange(400)
    frames *= (0.5 - 0.5 * np.cos(2 * np.pi * n / 399)) ** 0.85      # Povey window
    return np.pad(frames, ((0, 0), (0, 112))), energy


def _kaldi_mel_banks(bins: int) -> np.ndarray:
    """Kaldi's triangular bins, equal in mel = 1127 ln(1 + f / 700), 20 Hz to 8 kHz."""
    def mel(f):
        return 1127 * np.log1p(f / 700)
    low, high = mel(20.0), mel(8000.0)
    step = (high - low) / (bins + 1)
    fft_mel = mel(np.arange(256) * 16000 / 512)
    banks = np.zeros((257, bins))
    for b in range(bins):
        left, centre, right = low + b * step, low + (b + 1) * step, low + (b + 2) * step
        inside = (fft_mel > left) & (fft_mel < right)
        banks[:256, b] = np.where(inside, np.minimum((fft_mel - left) / (centre - left),
                                                     (right - fft_mel) / (right - centre)), 0)
    return banks


def _kaldi_fbank(audio: np.ndarray, bins: int) -> np.ndarray:
    frames, _ = _kaldi_frames(audio)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return np.log(np.maximum(power @ _kaldi_mel_banks(bins), np.finfo(np.float32).eps))


def _kaldi_mfcc(audio: np.ndarray, bins: int, ceps: int) -> np.ndarray:
    frames, energy = _kaldi_frames(audio)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    log_mel = np.log(np.maximum(power @ _kaldi_mel_banks(bins), np.finfo(np.float32).eps))
    k, n = np.arange(ceps)[:, None], np.arange(bins)[None, :]
    dct = np.sqrt(2 / bins) * np.cos(np.pi / bins * (n + 0.5) * k)   # Kaldi's ComputeDctMatrix
    dct[0] = np.sqrt(1 / bins)
    lifter = 1 + 11 * np.sin(np.pi * np.arange(ceps) / 22)           # cepstral_lifter 22
    mfcc = (log_mel @ dct.T) * lifter
    mfcc[:, 0] = energy                                              # use_energy
    return mfcc


def _tf_logmel(audio: np.ndarray, bins: int) -> np.ndarray:
    magnitude = tf.abs(tf.signal.stft(audio, 400, 160))
    weights = tf.signal.linear_to_mel_weight_matrix(bins, magnitude.shape[-1], 16000, 20.0,
                                                    8000.0)
    return tf.math.log(tf.matmul(magnitude, weights) + 1e-6).numpy()


# --- the features ------------------------------------------------------------------

def _kaldi_native(audio: np.ndarray, kind: str, bins: int) -> np.ndarray:
    """kaldi-native-fbank's features, frame by frame (16-bit scale, no dither)."""
    opts = knf.MfccOptions() if kind == "mfcc" else knf.FbankOptions()
    opts.frame_opts.dither = 0.0
    opts.mel_opts.num_bins = bins
    computer = knf.OnlineMfcc(opts) if kind == "mfcc" else knf.OnlineFbank(opts)
    computer.accept_waveform(16000, audio * 32768)
    computer.input_finished()
    return np.array([computer.get_frame(i) for i in range(computer.num_frames_ready)])


@pytest.mark.parametrize("i", [0, 3])
def test_fbank_and_mfcc_are_kaldis(speech, i):
    audio = _utterance(speech, i)
    fbank = compute_features(audio, 16000, AudioFeatures("fbank", num_mel_bins=80))
    mfcc = compute_features(audio, 16000, AudioFeatures("mfcc", num_mel_bins=23, num_ceps=13))
    assert fbank.shape == (1 + (len(audio) - 400) // 160, 80) and fbank.dtype == np.float32
    for expected in (_kaldi_fbank(audio, 80), _kaldi_native(audio, "fbank", 80)):
        # Measured over the eight utterances, against each: at most 2.7e-3 (in
        # near-silent frames, log energy ~1), 99.9% of values within 5.4e-4.
        difference = np.abs(fbank - expected)
        assert difference.max() < 1e-2 and np.percentile(difference, 99.9) < 1e-3
    for expected in (_kaldi_mfcc(audio, 23, 13), _kaldi_native(audio, "mfcc", 23)):
        assert mfcc.shape == expected.shape
        assert np.abs(mfcc - expected).max() < 1e-2   # measured: at most 2.8e-3, of up to 160


@pytest.mark.parametrize("kind", ["fbank", "mfcc", "logmel"])
@pytest.mark.parametrize("windows", [dg.WindowOptions(window_s=1.0, hop_s=0.25),
                                     dg.WindowOptions(window_s=0.5, random_crops=6)])
def test_overlapping_windows_features_are_each_windows_own(speech, kind, windows):
    """Windows 0.25 s apart share three quarters of their frames, taken from
    the window before; random crops, off the frame grid, are computed whole:
    either way each window's features are those of its own audio, even when
    a step after the cut changes the window before's in place."""
    features = AudioFeatures(kind, num_mel_bins=40, keep_waveform=True)
    cut = dg.CutOptions(mode="audio_windows", audio_fields=("flac",), windows=windows,
                        audio_features=features)
    flac = (speech / "files" / "u1.flac").read_bytes()
    count = 0
    for example in cut_sample({"__key__": "u1", "flac": flac}, cut):
        # To float32's last bits of the largest value (MFCCs reach ~100): BLAS
        # sums a product's rows in an order that depends on how many rows it
        # is given at once.
        expected = compute_features(example["audio"], 16000, features)
        np.testing.assert_allclose(example[kind], expected, rtol=0,
                                   atol=4e-6 * np.abs(expected).max())
        example[kind][:] = 0   # an example_fn's in-place change
        count += 1
    assert count >= 6


def test_logmel_is_tf_signals(speech):
    audio = _utterance(speech, 1)
    ours = compute_features(audio, 16000, AudioFeatures("logmel", num_mel_bins=64))
    expected = _tf_logmel(audio, 64)
    assert ours.shape == expected.shape
    # Where the speech has energy the logs agree to float32 rounding; in near
    # silence (mel energy ~1e-5) TensorFlow's float32 FFT's noise floor shows,
    # so there the energies themselves are compared.
    loud = expected > np.log(1e-3)
    assert loud.mean() > 0.5
    assert np.abs(ours - expected)[loud].max() < 1e-3   # measured: at most 2.3e-4
    assert np.abs(np.exp(ours) - np.exp(expected)).max() < 1e-4 * np.exp(expected).max()


# --- the jobs ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def utterances(speech, tmp_path_factory):
    """Whole utterances as fbank [*, 80] with their waveform, and the short one."""
    output = tmp_path_factory.mktemp("utterances") / "ds"
    tar_to_tfrecord.run(_utterances_job(speech, output))
    return output


def _utterances_job(speech, output, *flags: str) -> list:
    """The utterances job's flags, with `flags` added."""
    return ["--input", f"{speech}/*.tar", "--output", str(output), "--cut", "utterances",
            "--audio_features", "fbank", "--keep_waveform", "--max_failure_fraction", "0.2",
            *FLAGS, "--features", "text=txt:string,speaker=json.speaker:string",
            "--text_field", "text", "--text_case", "lower", "--text_punctuation", "strip",
            *flags]


def _records(output, split: str) -> list[dict]:
    """Each example of the split as TensorFlow's own parser reads it."""
    info = reader.load_info(output)
    files = [str(output / f) for f in info.files(split)]
    parsing = reader.parsing_spec(info.spec)
    return [{k: v.numpy() if not isinstance(v, tf.RaggedTensor) else v.numpy()
             for k, v in tf.io.parse_single_example(r, parsing).items()}
            for r in tf.data.TFRecordDataset(files)]


def test_each_utterance_is_one_example_with_its_features_and_transcript(speech, utterances):
    info = reader.load_info(utterances)
    assert [(f.name, f.shape) for f in info.spec][:3] == [
        ("fbank", (None, 80)), ("audio", (None,)), ("duration_s", ())]
    examples = {}
    for split in ("train", "test"):
        for example in _records(utterances, split):
            examples[example["source_key"].decode()] = example
    assert sorted(examples) == [f"u{i}" for i in range(UTTERANCES)]
    texts = sentences(UTTERANCES)
    for i in range(UTTERANCES):
        example, audio = examples[f"u{i}"], _utterance(speech, i)
        np.testing.assert_allclose(example["audio"], audio, atol=1e-7)
        assert example["num_samples"] == len(audio)
        assert example["duration_s"] == pytest.approx(len(audio) / 16000, abs=1e-6)
        assert example["text"].decode() == _normalized(texts[i])
        fbank = example["fbank"].reshape(-1, 80)
        np.testing.assert_array_equal(fbank, compute_features(
            audio, 16000, AudioFeatures("fbank")))
    by_tfds = {e["source_key"].numpy().decode(): e["fbank"].numpy() for e in
               tfds.builder_from_directory(str(utterances)).as_dataset(split="test")}
    assert by_tfds and all(np.array_equal(fbank, examples[key]["fbank"].reshape(-1, 80))
                           for key, fbank in by_tfds.items())
    features = tfds.builder_from_directory(str(utterances)).info.features
    assert features["fbank"].doc.desc == (
        "80 log mel energies a frame (Kaldi's compute-fbank-feats --dither=0), 25 ms frames "
        "every 10 ms of 16000 Hz audio")
    described = info.document["audio_features"]["fbank"]
    assert (described["kind"], described["num_mel_bins"], described["frame_shift_ms"],
            described["sample_rate"]) == ("fbank", 80, 10.0, 16000)


def _normalized(sentence: str) -> str:
    """A Harvard sentence as --text_case lower --text_punctuation strip leave it."""
    return " ".join(sentence.lower().replace(",", "").replace(".", "").split())


def test_a_short_utterance_and_a_transcript_not_utf8_are_dead_letters(utterances):
    info = reader.load_info(utterances)
    assert info.accounting["samples_failed"] == 2
    with open(utterances / "failures" / "failures.jsonl") as f:
        letters = {letter["key"]: letter for letter in map(json.loads, f)}
    short, latin1 = letters["short"], letters["latin1"]
    assert (short["stage"], short["member"]) == ("features", "flac")
    assert short["message"] == "160 samples at 16000 Hz is shorter than one 25 ms feature frame"
    assert (latin1["stage"], latin1["member"]) == ("transcript", "txt")
    assert latin1["message"].startswith("the transcript is not UTF-8 text")


def test_the_character_vocabulary_is_trains_and_unseen_characters_are_counted(utterances):
    texts = {split: [e["text"].decode() for e in _records(utterances, split)]
             for split in ("train", "test")}
    section = reader.load_info(utterances).document["transcripts"]
    assert (section["feature"], section["unicode"], section["case"], section["punctuation"]) == (
        "text", "NFC", "lower", "strip")
    vocabulary = set("".join(texts["train"]))
    assert section["vocabulary"] == sorted(vocabulary)
    test = "".join(texts["test"])
    unseen = {c: test.count(c) for c in sorted(set(test) - vocabulary)}
    assert unseen  # four voices, two speakers a split: the test sentences have letters of their own
    assert section["splits"]["test"] == {"characters": len(test), "unseen": sum(unseen.values()),
                                         "unseen_characters": unseen}
    assert section["splits"]["train"]["unseen"] == 0


def test_a_transcript_with_a_cut_into_windows_is_refused_or_dropped(speech, tmp_path):
    flags = ["--input", f"{speech}/speech.tar", "--cut", "audio_windows", *FLAGS,
             "--features", "text=txt:string", "--text_field", "text"]
    with pytest.raises(ValueError, match="^--text_field 'text' is an utterance's text, and "
                                         "--cut audio_windows cuts utterances apart"):
        tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "refused")])
    assert not (tmp_path / "refused").exists()
    tar_to_tfrecord.run([*flags, "--output", str(tmp_path / "dropped"), "--drop_transcript"])
    info = reader.load_info(tmp_path / "dropped")
    assert "text" not in info.spec.names
    assert ("the transcript 'text' is left out: audio_windows examples do not hold their "
            "utterance's words (--drop_transcript)") in info.warnings
    with dg.make_pipeline() as p:   # the same in Python, by WriteDataset's keywords
        _ = (p | dg.ReadTarSamples(f"{speech}/speech.tar")
               | dg.WriteDataset(tmp_path / "api", features="text=txt:string",
                                 cut=dg.CutOptions(mode="audio_windows", audio_fields=("flac",)),
                                 text_field="text", drop_transcript=True, splits="train=1"))
    assert ("the transcript 'text' is left out: audio_windows examples do not hold their "
            "utterance's words (drop_transcript)") in dg.load_info(tmp_path / "api").warnings


def test_statistics_are_numpys_over_each_written_split(utterances):
    statistics = reader.load_info(utterances).statistics
    assert sorted(statistics) == ["audio", "fbank"]
    for split in ("train", "test"):
        examples = _records(utterances, split)
        fbank = np.concatenate([e["fbank"].reshape(-1, 80) for e in examples]).astype(np.float64)
        audio = np.concatenate([e["audio"] for e in examples]).astype(np.float64)
        for name, values in (("fbank", fbank), ("audio", audio[:, None])):
            entry = statistics[name][split]
            assert entry["count"] == len(values)
            np.testing.assert_allclose(entry["mean"], values.mean(axis=0), rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(entry["variance"], values.var(axis=0), rtol=1e-9)


def test_float16_features_read_back_as_float32_rounded_at_half_the_bytes(
        speech, utterances, tmp_path):
    """--feature_dtype float16: the utterances job's features, each value the
    float32 one rounded to float16 (within 0.008 on fbank's scale), read as
    float32 by our reader and as float16 by TFDS, measured as read, two bytes
    a value smaller, and verified."""
    half = tmp_path / "half"
    tar_to_tfrecord.run(_utterances_job(speech, half, "--feature_dtype", "float16"))
    info = reader.load_info(half)
    assert (info.spec.features[0].dtype, info.spec.features[0].shape) == ("float16", (None, 80))
    assert info.document["audio_features"]["fbank"]["dtype"] == "float16"
    full = {e["source_key"].decode(): e["fbank"].reshape(-1, 80)
            for split in ("train", "test") for e in _records(utterances, split)}
    values, largest_error = 0, 0.0
    for split in ("train", "test"):
        read = []
        for batch in reader.load(half, split, batch_size=3, features=["source_key", "fbank"]):
            assert batch["fbank"].dtype == tf.float32 and batch["fbank"].shape[2] == 80
            for key, fbank in zip(batch["source_key"].numpy(), batch["fbank"]):
                expected = full[key.decode()]
                fbank = fbank.numpy()
                np.testing.assert_array_equal(fbank, expected.astype(np.float16).astype(np.float32))
                largest_error = max(largest_error, np.abs(fbank - expected).max())
                values += expected.size
                read.append(fbank.astype(np.float64))
        rows = np.concatenate(read)
        entry = info.statistics["fbank"][split]
        assert entry["count"] == len(rows)
        np.testing.assert_allclose(entry["mean"], rows.mean(axis=0), rtol=1e-9, atol=1e-12)
    assert 0 < largest_error < 0.008 and values == sum(f.size for f in full.values())
    by_tfds = tfds.builder_from_directory(str(half)).as_dataset(split="test")
    for example in by_tfds:
        fbank = example["fbank"].numpy()
        assert fbank.dtype == np.float16
        np.testing.assert_array_equal(fbank, full[example["source_key"].numpy().decode()]
                                      .astype(np.float16))
    saved = sum(s["num_bytes"] for s in reader.load_info(utterances).splits.values()) - sum(
        s["num_bytes"] for s in info.splits.values())
    assert saved == pytest.approx(2 * values, rel=0.01)
    assert dg.verify_dataset(half).ok


def test_the_reader_normalizes_with_trains_statistics_or_each_utterances(utterances):
    train = np.concatenate([b.flat_values.numpy() for b in reader.load(
        utterances, "train", batch_size=2, features="fbank", normalize="global")])
    np.testing.assert_allclose(train.mean(axis=0), 0, atol=1e-4)
    np.testing.assert_allclose(train.std(axis=0), 1, atol=1e-4)
    test = next(iter(reader.load(utterances, "test", batch_size=1, features="fbank",
                                 normalize="global"))).flat_values.numpy()
    statistics = reader.load_info(utterances).statistics["fbank"]["train"]
    raw = next(iter(reader.load(utterances, "test", batch_size=1,
                                features="fbank"))).flat_values.numpy()
    np.testing.assert_allclose(test, (raw - statistics["mean"]) / np.sqrt(
        statistics["variance"]), rtol=1e-4, atol=1e-4)
    for batch in reader.load(utterances, "test", batch_size=1, features="fbank",
                             normalize="utterance"):
        frames = batch[0].numpy()
        np.testing.assert_allclose(frames.mean(axis=0), 0, atol=1e-4)
        np.testing.assert_allclose(frames.std(axis=0), 1, atol=1e-3)
    model = tf.keras.Sequential([tf.keras.Input((80,)), tf.keras.layers.Dense(1)])
    model.compile("adam", "mse")   # an utterance's mean filterbank, each example its own length
    history = model.fit(reader.load(utterances, "train", batch_size=2, features="fbank",
                                    normalize="global").map(
        lambda fbank: (tf.reduce_mean(fbank, axis=1), tf.zeros([tf.shape(fbank)[0], 1]))),
        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    with pytest.raises(ValueError, match="none of \\['text'\\] has statistics"):
        reader.load(utterances, "train", features="text", normalize="global")


def test_fixed_windows_of_mfcc_train_a_keras_model_and_resume_keeps_the_statistics(
        speech, tmp_path):
    output = tmp_path / "windows"
    flags = ["--input", f"{speech}/speech.tar", "--output", str(output),
             "--cut", "audio_windows", "--audio_features", "mfcc", *FLAGS,
             "--features", "speaker=json.speaker:string"]
    tar_to_tfrecord.run(flags)
    info = reader.load_info(output)
    assert [(f.name, f.shape) for f in info.spec][0] == ("mfcc", (98, 13))
    assert "audio" not in {f.name for f in info.spec}
    model = tf.keras.Sequential([tf.keras.Input((98, 13)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(1)])
    model.compile("adam", "mse")
    history = model.fit(reader.load(output, "train", batch_size=4, features="mfcc",
                                    normalize="global", drop_remainder=True).map(
                                        lambda x: (x, tf.zeros([4, 1]))),
                        epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    before = info.statistics
    tar_to_tfrecord.run([*flags, "--resume"])   # every unit's receipt reused
    assert reader.load_info(output).statistics == before


@pytest.mark.parametrize("kind", ["fbank", "mfcc", "logmel"])
def test_mel_bins_with_no_fft_bin_are_refused_before_work_where_kaldi_refuses_them(
        speech, tmp_path, kind):
    """At 8 kHz with 25 ms frames, kaldi-native-fbank takes 95 bins and refuses
    96: so do we, before any work, naming the bins and the most the rate allows
    (128 bins wrote 4 constant at the log floor in every frame)."""
    def kaldi_takes(bins):
        opts = knf.FbankOptions()
        opts.frame_opts.samp_freq, opts.frame_opts.dither, opts.mel_opts.num_bins = 8000, 0, bins
        try:
            knf.OnlineFbank(opts)
        except Exception:  # noqa: BLE001 - its refusal is what is compared
            return False
        return True
    assert kaldi_takes(95) and not kaldi_takes(96)
    flags = ["--input", f"{speech}/speech.tar", "--cut", "utterances", *FLAGS,
             "--sample_rate", "8000", "--audio_features", kind]
    with pytest.raises(ValueError, match=r"^--num_mel_bins 96 is too many for 8000 Hz audio in "
                                         r"25 ms frames: 1 mel bins would hold no FFT bin .*; "
                                         r"at most 95 at that rate$"):
        tar_to_tfrecord.run([*flags, "--num_mel_bins", "96", "--output", str(tmp_path / "no")])
    assert not (tmp_path / "no").exists()
    with pytest.raises(dg.ArgumentError, match="^num_mel_bins 96 is too many for 8000 Hz"):
        dg.CutOptions(mode="utterances", audio_fields=("flac",),
                      audio=dg.AudioOptions(sample_rate=8000),
                      audio_features=dg.AudioFeatures(kind, num_mel_bins=96))
    info = tar_to_tfrecord.run([*flags, "--num_mel_bins", "95", "--output", str(tmp_path / "ok")])
    assert info["accounting"]["samples_written"] == UTTERANCES


def test_features_of_windows_shorter_than_a_frame_are_refused_before_work(speech, tmp_path):
    with pytest.raises(ValueError, match=r"^--audio_features fbank: audio_windows of 0.02 s are "
                                         r"shorter than one 25 ms feature frame: longer "
                                         r"examples, or a shorter --feature_frame_ms$"):
        tar_to_tfrecord.run(["--input", f"{speech}/speech.tar", "--cut", "audio_windows",
                             "--window_s", "0.02", *FLAGS, "--audio_features", "fbank",
                             "--output", str(tmp_path / "no")])
    assert not (tmp_path / "no").exists()
