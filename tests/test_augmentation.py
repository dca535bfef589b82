"""Offline augmentation: speed perturbation, reverberation, gain and noise.

The speech is espeak-ng's, stored by sox, packed by GNU tar; the noise is
sox's (`synth pinknoise`, `brownnoise`, one at another sample rate), and so
are the room impulse responses (decaying noise with a direct path). sox's
own `speed` effect is the independent speed perturbation the job's is held
to, numpy's arithmetic the gain and the SNR, numpy's `convolve` the
reverberation. The dataset is the same on every
run and worker count; a copy never leaves its sample's split; the manifest
counts what the shards hold.
"""

import collections
import json
import re
import shutil
import subprocess
import tracemalloc

import numpy as np
import pytest
import soundfile

import transforms as dg
from pipelines import inspect, tar_to_tfrecord
from transforms.media import augment
from transforms.media.augment import NoiseExcerpt, Recording, augment_blocks
from transforms.media.decoded import Audio
from transforms.media.loudness import Heard, active_power
from transforms.media.recorded import RecordedAudio
from transforms.report.figure import panels
from transforms.report.gather import gather
from transforms.sources.augment_corpus import list_recordings
from transforms.testing.spoken import sentences, speak

SAMPLES = 8
FLAGS = ["--cut", "utterances", "--audio_fields", "flac",
         "--features", "speaker=json.speaker:string", "--split_by", "__key__",
         "--splits", "train=0.5,test=0.5", "--augment_copies", "2",
         "--speed_perturb", "0.9,1.1", "--gain_db", "-6,6", "--augment_seed", "3",
         "--speed_perturb_as_new_speaker", "speaker"]


def _shell(command: str, cwd) -> None:
    subprocess.run(command, shell=True, check=True, cwd=cwd, capture_output=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """speech.tar: s0..s7, a sentence each (FLAC) and its speaker (JSON)."""
    root = tmp_path_factory.mktemp("augment")
    members = []
    for i, text in enumerate(sentences(SAMPLES)):
        speak(text, str(root / f"s{i}.flac"), voice=i)
        _shell(f"printf '{{\"speaker\": \"v{i % 4}\"}}' > s{i}.json", root)
        members += [f"s{i}.flac", f"s{i}.json"]
    _shell("tar -cf speech.tar " + " ".join(members), root)
    return root


def _dead_letters(output) -> list:
    path = output / "failures" / "failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _examples(output) -> dict:
    """(key, copy) -> (split, example) of every example written."""
    found = {}
    for split in ("train", "test"):
        for example in dg.load(output, split, batch_size=None):
            key = (example["source_key"].numpy().decode(), int(example["aug.copy"]))
            found[key] = (split, example)
    return found


@pytest.fixture(scope="module")
def augmented(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("augmented") / "ds"
    tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(output), *FLAGS,
                         "--direct_num_workers", "1"])
    return output


def test_each_train_sample_has_its_copies_in_its_split_and_test_stays_clean(augmented):
    examples = _examples(augmented)
    splits = {key: split for (key, copy), (split, _) in examples.items() if copy == 0}
    assert sorted(splits) == [f"s{i}" for i in range(SAMPLES)]
    for (key, copy), (split, example) in examples.items():
        assert split == splits[key]
        assert copy in ((0, 1, 2) if split == "train" else (0,))
        kind = example["aug.kind"].numpy().decode()
        assert kind == ("none" if copy == 0 else "speed+gain")
        assert float(example["aug.speed"]) == pytest.approx({0: 1.0, 1: 0.9, 2: 1.1}[copy])
        # Kaldi's naming: a speed-perturbed copy's speaker is a new one.
        speaker = f"v{int(key[1:]) % 4}"
        assert example["speaker"].numpy().decode() == {0: speaker, 1: f"sp0.9-{speaker}",
                                                       2: f"sp1.1-{speaker}"}[copy]
    said = dg.load_info(augmented).document["augmentation"]["speed_as_new_speaker"]
    assert said == {"field": "speaker", "value": "sp<factor>-<value>", "factors": ["0.9", "1.1"]}


def test_speed_is_soxs_and_gain_is_the_recorded_decibels(corpus, augmented, tmp_path):
    examples = _examples(augmented)
    train = sorted(key for (key, copy), (split, _) in examples.items()
                   if split == "train" and copy == 0)
    for key in train[:2]:
        original = examples[(key, 0)][1]["audio"].numpy()
        for copy, factor in ((1, 0.9), (2, 1.1)):
            example = examples[(key, copy)][1]
            _shell(f"sox {corpus}/{key}.flac {tmp_path}/{key}-{copy}.wav speed {factor} "
                   "rate -h 16000", tmp_path)
            slowed, _ = soundfile.read(tmp_path / f"{key}-{copy}.wav", dtype="float32")
            audio = example["audio"].numpy()
            assert len(audio) == len(slowed) == pytest.approx(len(original) / factor, abs=2)
            gain, peak = float(example["aug.gain_db"]), np.abs(slowed).max()
            assert -6 <= gain <= 6
            # Where the gain would clip the perturbed speech, its peak is scaled to 0.99 instead.
            clips = peak * 10 ** (gain / 20) > 1
            assert bool(example["aug.peak_normalized"]) == clips
            scale = 0.99 / peak if clips else 10 ** (gain / 20)
            # Measured: 8e-5 from sox's speed effect at unit gain; scaled with it here.
            np.testing.assert_allclose(audio, slowed * scale, atol=1e-3)
            assert np.abs(audio).max() <= 1


def test_the_dataset_is_the_same_on_every_run_worker_count_and_resume(corpus, augmented, tmp_path):
    again = tmp_path / "again"
    tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(again), *FLAGS,
                         "--direct_num_workers", "2"])
    for split in ("train", "test"):
        for ours, theirs in zip(sorted((augmented / split).iterdir()),
                                sorted((again / split).iterdir())):
            assert ours.read_bytes() == theirs.read_bytes()
    first, second = (json.loads((folder / "manifest.json").read_text())["accounting"]
                     for folder in (augmented, again))
    assert first == second
    tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(again), *FLAGS,
                         "--resume"])   # every unit's receipt reused, copies and all
    resumed = json.loads((again / "manifest.json").read_text())["accounting"]
    assert resumed == first


def test_the_manifest_counts_what_the_shards_hold(augmented):
    accounting = dg.load_info(augmented).accounting
    held = collections.Counter((split, "augmented" if copy else "original")
                               for (_, copy), (split, _) in _examples(augmented).items())
    assert accounting["augmentation"]["examples"] == {
        split: {"original": held[(split, "original")], "augmented": held[(split, "augmented")]}
        for split in ("train", "test") if held[(split, "original")]}
    copies = accounting["augmentation"]["copies"]["train"]
    assert copies == 2 * held[("train", "original")]
    assert accounting["augmentation"]["speed"]["train"] == {"0.9": copies // 2,
                                                            "1.1": copies // 2}
    assert sum(accounting["augmentation"]["gain_db"]["train"].values()) == copies
    assert accounting["samples_written"] == SAMPLES   # a copy is no sample of its own


@pytest.mark.parametrize("flags, message", [
    (["--speed_perturb", "0,1.1"], "--speed_perturb 0: a speed factor must be above 0"),
    (["--augment_splits", "dev"], "--augment_splits name dev, which --splits does not"),
    (["--gain_db", "6,-6"], "--gain_db [6.0, -6.0]: a range LOW,HIGH in dB"),
    (["--cut", "none"], "--augment_copies are made from the audio a cut decodes: not with "
                        "--cut none"),
])
def test_bad_augmentation_flags_fail_before_any_work(corpus, tmp_path, flags, message):
    with pytest.raises(ValueError, match="^" + message.replace("[", "\\[").replace("]", "\\]")):
        tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output",
                             str(tmp_path / "out"), *FLAGS, *flags])
    assert not (tmp_path / "out").exists()


def test_verify_checks_every_copy_against_the_manifest(augmented, tmp_path):
    assert dg.verify_dataset(augmented).ok
    altered = tmp_path / "altered"
    shutil.copytree(augmented, altered)
    document = json.loads((altered / "manifest.json").read_text())
    document["recipe"]["cut"]["augment"]["speeds"] = [0.8, 1.2]
    document["accounting"]["augmentation"]["examples"]["train"]["augmented"] += 1
    (altered / "manifest.json").write_text(json.dumps(document))
    problems = dg.verify_dataset(altered).problems
    assert any("aug.speed 0.9 is none of the recipe's [0.8, 1.2]" in p for p in problems)
    held = _examples(augmented)
    copies = sum(1 for (_, copy), (split, _) in held.items() if copy and split == "train")
    assert (f"split train: {copies} augmented examples in its shards, the manifest says "
            f"{copies + 1}") in problems


def test_a_dataset_python_wrote_records_the_jobs_recipe_and_is_verified_alike(
        corpus, augmented, tmp_path):
    """The augmented dataset of the job, written again through the Python API:
    the same shards and the same recipe section, so verify checks its copies
    against the same ranges (with its options empty, it checked none before),
    and a manifest from before the recipe section still verifies."""
    augment = dg.AugmentOptions(copies=2, speeds=(0.9, 1.1), gain_db=(-6.0, 6.0), seed=3,
                                speed_as_new_speaker="speaker")
    with dg.make_pipeline() as p:
        _ = p | dg.WriteDataset(str(tmp_path / "api"), dg.ReadTarSamples(
            f"{corpus}/speech.tar").source, features="speaker=json.speaker:string",
            cut=dg.CutOptions(mode="utterances", audio_fields=("flac",), augment=augment),
            splits="train=0.5,test=0.5")
    job, api = (json.loads((folder / "manifest.json").read_text())
                for folder in (augmented, tmp_path / "api"))
    assert api["options"] == {} and api["recipe"] == job["recipe"]
    for split in ("train", "test"):
        assert ([f.read_bytes() for f in sorted((tmp_path / "api" / split).glob("data-*"))]
                == [f.read_bytes() for f in sorted((augmented / split).glob("data-*"))])
    api["recipe"]["cut"]["augment"]["gain_db"] = [-1.0, 1.0]
    (tmp_path / "api" / "manifest.json").write_text(json.dumps(api))
    assert any("aug.gain_db" in p and "is outside the recipe's [-1.0, 1.0]" in p
               for p in dg.verify_dataset(tmp_path / "api").problems)
    old = tmp_path / "old"     # as manifests were before they held the recipe
    shutil.copytree(augmented, old)
    job.pop("recipe")
    (old / "manifest.json").write_text(json.dumps(job))
    assert dg.verify_dataset(old).ok


@pytest.fixture(scope="module")
def noise(tmp_path_factory):
    """noise.tar: 4 s of pink noise at 16 kHz and 1.5 s of brown noise at 22.05
    kHz (shorter than most sentences: looped); long.flac: a minute of pink
    noise; empty.tar: a text member only; garbage.tar: a .flac member that
    is not audio."""
    root = tmp_path_factory.mktemp("noise")
    _shell("sox -R -n -r 16000 -b 16 -c 1 pink.flac synth 4 pinknoise vol 0.3 && "
           "sox -R -n -r 22050 -b 16 -c 1 brown.flac synth 1.5 brownnoise vol 0.3 && "
           "tar -cf noise.tar pink.flac brown.flac && "
           "printf 'no noise here' > readme.txt && tar -cf empty.tar readme.txt && "
           "head -c 3000 /dev/urandom > static.flac && tar -cf garbage.tar static.flac && "
           "sox -R -n -r 16000 -b 16 -c 1 long.flac synth 60 pinknoise vol 0.3 && "
           # Room impulse responses: a direct path 5 ms in, then a decaying tail.
           "sox -R -n -r 16000 -b 16 -c 1 tail.wav synth 0.3 whitenoise fade q 0 0.3 0.3 "
           "vol 0.2 && "
           "sox -n -r 16000 -b 16 -c 1 click.wav synth 0.001 sine 1000 vol 0.9 && "
           "sox click.wav tail.wav room.wav pad 0.005 0 && "
           "sox -R -n -r 16000 -b 16 -c 1 hall.wav synth 0.5 brownnoise fade q 0 0.5 0.5 && "
           "tar -cf rirs.tar room.wav hall.wav && "
           # A recording whose header is whole and whose audio is cut short.
           "head -c 6000 pink.flac > cut.flac && tar -cf cut.tar cut.flac && "
           "printf '{\"audio_filepath\": \"pink.flac\", \"duration\": 4.0}\\n"
           "{\"audio_filepath\": \"brown.flac\"}\\n' > noise.jsonl && "
           "printf 'pink pink.flac\\nbrown brown.flac\\n' > wav.scp && mkdir piped && "
           "printf 'hum sox -n -t wav - synth 3 sine 50 |\\n' > piped/wav.scp", root)
    return root


NOISE_FLAGS = ["--cut", "utterances", "--audio_fields", "flac", "--features", "none",
               "--splits", "train=1", "--augment_copies", "2", "--snr_db", "0,15"]


def test_noise_is_added_at_the_recorded_snr_the_same_on_every_worker_count(
        corpus, noise, tmp_path):
    outputs = []
    for workers in ("1", "2"):
        outputs.append(tmp_path / f"noisy{workers}")
        tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(outputs[-1]),
                             *NOISE_FLAGS, "--noise_input", f"{noise}/noise.tar",
                             "--direct_num_workers", workers])
    shards = [sorted((output / "train").iterdir()) for output in outputs]
    assert [f.read_bytes() for f in shards[0]] == [f.read_bytes() for f in shards[1]]
    info = dg.load_info(outputs[0])
    described = info.document["augmentation"]["noise"]
    assert described == {"recordings": 2, "seconds": 5.5, "version": described["version"]}
    assert re.fullmatch("[0-9a-f]{16}", described["version"])
    examples = {(e["source_key"].numpy().decode(), int(e["aug.copy"])): e
                for e in dg.load(outputs[0], "train", batch_size=None)}
    measured, used = 0, set()
    for (key, copy), example in examples.items():
        if not copy:
            continue
        used.add(example["aug.noise_key"].numpy().decode())
        assert example["aug.kind"].numpy().decode() == "noise"
        if bool(example["aug.peak_normalized"]):
            continue   # speech and noise scaled down alike: the SNR holds, unmeasured here
        clean = examples[(key, 0)]["audio"].numpy().astype(np.float64)
        assert _snr(clean, example["audio"].numpy()) == pytest.approx(
            float(example["aug.snr_db"]), abs=0.01)
        measured += 1
    assert measured >= 4 and used == {"pink", "brown"}
    assert dg.verify_dataset(outputs[0]).ok
    accounting = info.accounting["augmentation"]
    assert accounting["noise_recordings_used"] == {"train": 2}
    assert sum(accounting["snr_db"]["train"].values()) == accounting["copies"]["train"]


def test_a_resume_after_the_noise_corpus_changed_is_refused_naming_it(corpus, noise, tmp_path):
    shutil.copy(noise / "noise.tar", tmp_path)
    job = ["--input", f"{corpus}/speech.tar", "--output", str(tmp_path / "ds"), *NOISE_FLAGS,
           "--noise_input", str(tmp_path / "noise.tar"), "--direct_num_workers", "1"]
    tar_to_tfrecord.run(job)
    tar_to_tfrecord.run([*job, "--resume"])   # the same corpus: every unit reused
    # The same recordings packed again in another order: other draws, same flags.
    _shell(f"tar -cf {tmp_path}/noise.tar brown.flac pink.flac", noise)
    with pytest.raises(ValueError, match="^--resume: .*ds was written by another recipe: the "
                                         "noise corpus's recordings; run without --resume"):
        tar_to_tfrecord.run([*job, "--resume"])


@pytest.mark.parametrize("flags, message", [
    (["--noise_input", "{noise}/empty.tar"], "noise corpus .*empty.tar: no recording"),
    (["--noise_input", "{noise}/garbage.tar"], "noise corpus .*garbage.tar:static.flac: not audio"),
    (["--noise_input", "{noise}/noise.tar", "--rir_input", "{noise}/rirs.tar",
      "--rir_max_s", "0.4"], "--rir_input .*rirs.tar:hall.wav is 0.5 s, longer than "
                             "--rir_max_s 0.4 s \\(1 such RIRs\\)"),
    (["--noise_input", "{noise}/readme.txt"], "noise corpus .*readme.txt: neither a tar file"),
    (["--noise_input", "{noise}/piped/wav.scp"],
     "noise corpus .*piped/wav.scp: wav.scp entry of recording 'hum' is a command"),
    ([], "--snr_db and --noise_input go together"),
    (["--noise_input", "{noise}/noise-*.tar"], "^--noise_input '.*noise-\\*.tar' matches no file$"),
    (["--noise_input", "{noise}/noise.tar", "--rir_input", "{noise}/room-*.tar"],
     "^--rir_input '.*room-\\*.tar' matches no file$"),
])
def test_bad_noise_corpora_are_refused_before_any_work(corpus, noise, tmp_path, flags, message):
    flags = [flag.format(noise=noise) for flag in flags]
    with pytest.raises(ValueError, match=message):
        tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output",
                             str(tmp_path / "out"), *NOISE_FLAGS, *flags])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arguments, message", [
    ({"speeds": "0.9"}, "augment.speeds must be a tuple of numbers, got '0.9'"),
    ({"speeds": 0.9}, "augment.speeds must be a tuple of numbers, got 0.9; for one: (0.9,)"),
    ({"gain_db": None}, "augment.gain_db must be a tuple of numbers, got None"),
    ({"gain_db": (-6, 6), "seed": None}, "augment.seed must be an int, got None"),
    ({"gain_db": (-6, 6), "splits": "train"}, "augment.splits must be a tuple of field names"),
    ({"noise": ("hiss.flac",), "snr_db": (0, 5)}, "augment.noise must be Recordings"),
    ({"rirs": (Recording("hall", b"", 3.0, "rirs.tar:hall.wav"),)},
     "augment.rirs rirs.tar:hall.wav is 3 s, longer than augment.rir_max_s 2 s"),
    ({"gain_db": (0, 1), "speed_as_new_speaker": "speaker"},
     "augment.speed_as_new_speaker renames the speakers of speed-perturbed copies"),
])
def test_the_python_api_refuses_wrong_types_by_their_parameter(arguments, message):
    with pytest.raises(dg.ArgumentError, match="^" + re.escape(message)):
        dg.AugmentOptions(copies=1, **arguments)


def test_a_noise_corpus_is_the_same_from_tar_shards_audio_files_or_listings(noise):
    listed = {form: [(r.key, r.seconds) for r in list_recordings(str(noise / pattern))]
              for form, pattern in (("tar", "noise.tar"), ("listing", "noise.jsonl"),
                                    ("kaldi", "wav.scp"))}
    # Matched files come in path order; a tar's members and a listing's rows in theirs.
    listed["files"] = [(r.key, r.seconds) for r in list_recordings(str(noise / "[pb]*.flac"))]
    assert listed["tar"] == listed["listing"] == listed["kaldi"] == [("pink", 4.0),
                                                                     ("brown", 1.5)]
    assert listed["files"] == [("brown", 1.5), ("pink", 4.0)]


def _snr(speech: np.ndarray, written: np.ndarray) -> float:
    """The stated definition: the power of the speech's 20 ms frames within
    40 dB of its loudest, over that of what was added to it."""
    added = written.astype(np.float64) - speech
    frames = speech[:len(speech) // 320 * 320].reshape(-1, 320)
    return 10 * np.log10(active_power(np.mean(frames ** 2, axis=1)) / np.mean(added ** 2))


def _reverberate(rir_file, clean: np.ndarray) -> np.ndarray:
    """numpy's convolution by the RIR scaled to unit energy, aligned on its
    largest magnitude, as long as the speech."""
    rir, _ = soundfile.read(rir_file, dtype="float64")
    rir /= np.sqrt(np.sum(rir ** 2))
    delay = int(np.argmax(np.abs(rir)))
    return np.convolve(clean, rir)[delay:delay + len(clean)]


def _reverberated(corpus, noise, output, *flags):
    tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(output),
                         "--cut", "utterances", "--audio_fields", "flac", "--features", "none",
                         "--splits", "train=1", "--augment_copies", "2",
                         "--rir_input", f"{noise}/rirs.tar", "--direct_num_workers", "1", *flags])
    return {(e["source_key"].numpy().decode(), int(e["aug.copy"])): e
            for e in dg.load(output, "train", batch_size=None)}


def test_reverberation_is_numpys_convolution_by_the_unit_energy_rir(corpus, noise, tmp_path):
    reverberated = tmp_path / "ds"
    examples = _reverberated(corpus, noise, reverberated, "--gain_db", "-6,6")
    normalized = 0
    for (key, copy), example in examples.items():
        if not copy:
            continue
        assert example["aug.kind"].numpy().decode() == "reverb+gain"
        wet = _reverberate(noise / f"{example['aug.rir_key'].numpy().decode()}.wav",
                           examples[(key, 0)]["audio"].numpy().astype(np.float64))
        written = example["audio"].numpy()
        assert len(written) == len(wet)
        if bool(example["aug.peak_normalized"]):
            # Would clip: the reverberated speech's own peak is scaled to 0.99.
            expected, normalized = wet * 0.99 / np.max(np.abs(wet)), normalized + 1
        else:
            expected = wet * 10 ** (float(example["aug.gain_db"]) / 20)
        np.testing.assert_allclose(written, expected, atol=2e-5)
    assert 0 < normalized < 2 * SAMPLES
    info = dg.load_info(reverberated)
    rirs = info.document["augmentation"]["rirs"]
    assert (rirs["recordings"], rirs["seconds"]) == (2, 0.806)
    accounting = info.accounting["augmentation"]
    assert accounting["rir_recordings_used"] == {"train": 2}
    assert accounting["peak_normalized"] == ({"train": normalized} if normalized else {})
    assert dg.verify_dataset(reverberated).ok


def test_noise_on_reverberated_speech_is_at_the_snr_of_the_reverberated_speech(
        corpus, noise, tmp_path):
    examples = _reverberated(corpus, noise, tmp_path / "ds", "--noise_input",
                             f"{noise}/noise.tar", "--snr_db", "0,15")
    measured = 0
    for (key, copy), example in examples.items():
        if copy and not bool(example["aug.peak_normalized"]):
            assert example["aug.kind"].numpy().decode() == "reverb+noise"
            wet = _reverberate(noise / f"{example['aug.rir_key'].numpy().decode()}.wav",
                               examples[(key, 0)]["audio"].numpy().astype(np.float64))
            assert _snr(wet, example["audio"].numpy()) == pytest.approx(
                float(example["aug.snr_db"]), abs=0.01)
            measured += 1
    assert measured >= 4


def test_silent_speech_has_no_snr_so_its_copies_get_no_noise(corpus, noise, tmp_path):
    """A silent sample (sox's `synth ... vol 0`, undithered) beside speech:
    its copies are written without noise and say so (no noise key, no SNR,
    kind gain), and the accounting counts them; they carried a drawn SNR
    over pure noise before."""
    _shell(f"sox -D -n -r 16000 -b 16 -c 1 quiet.flac synth 1.5 sine 300 vol 0 && "
           f"cp {corpus}/s0.flac s0.flac && tar -cf mixed.tar quiet.flac s0.flac", tmp_path)
    info = tar_to_tfrecord.run(["--input", f"{tmp_path}/mixed.tar", "--output",
                                str(tmp_path / "ds"), *NOISE_FLAGS, "--gain_db", "-3,3",
                                "--noise_input", f"{noise}/noise.tar"])
    examples = {(e["source_key"].numpy().decode(), int(e["aug.copy"])): e
                for e in dg.load(tmp_path / "ds", "train", batch_size=None)}
    for copy in (1, 2):
        quiet, spoken = examples[("quiet", copy)], examples[("s0", copy)]
        assert (quiet["aug.kind"].numpy(), quiet["aug.noise_key"].numpy(),
                float(quiet["aug.snr_db"])) == (b"gain", b"", 0.0)
        assert not np.any(quiet["audio"].numpy())
        assert spoken["aug.kind"].numpy() == b"gain+noise" and spoken["aug.noise_key"].numpy()
    augmentation = info["accounting"]["augmentation"]
    assert augmentation["silent"] == {"train": 2}
    assert sum(augmentation["snr_db"]["train"].values()) == 2
    assert dg.verify_dataset(tmp_path / "ds").ok


def test_an_unreadable_noise_recording_is_a_dead_letter_naming_it(corpus, noise, tmp_path):
    output = tmp_path / "ds"
    tar_to_tfrecord.run(["--input", f"{corpus}/speech.tar", "--output", str(output),
                         *NOISE_FLAGS, "--splits", "train=0.5,test=0.5",
                         "--noise_input", f"{noise}/cut.tar,{corpus}/speech.tar",
                         "--max_failure_fraction", "1", "--augment_seed", "1"])
    failures = _dead_letters(output)
    assert failures and {(f["stage"], f["member"]) for f in failures} == {
        ("augment", f"{noise}/cut.tar:cut.flac")}
    assert all(f["message"].startswith(f"cannot decode '{noise}/cut.tar:cut.flac'")
               and f["key"] in {f"s{i}" for i in range(SAMPLES)} for f in failures)
    info = dg.load_info(output)
    accounting = info.accounting
    assert accounting["samples_read"] == SAMPLES
    assert accounting["samples_written"] + accounting["samples_failed"] == SAMPLES
    # The speech drawn on as noise is reported.
    assert any(w.startswith("the augmentation's noise or RIR corpora hold 1 file(s) that are "
                            f"also inputs: {corpus}/speech.tar") for w in info.warnings)


def test_the_report_draws_an_original_beside_its_copies(augmented, tmp_path):
    view = gather(str(augmented))
    assert [clip.caption.split(":")[0] for clip in view.family] == ["original", "copy 1",
                                                                    "copy 2"]
    key = view.family[0].source.split(" ")[0]
    held = _examples(augmented)
    for copy, clip in enumerate(view.family):
        assert clip.source.split(" ")[0] == key
        np.testing.assert_array_equal(clip.samples, held[(key, copy)][1]["audio"].numpy())
    assert view.family[1].caption.startswith("copy 1: speed+gain, x0.9, ")
    assert ("augmentation", ["original and copies"]) in panels(view)
    page = tmp_path / "report.html"
    inspect.run([str(augmented), "--examples", "0", "--report", str(page)])
    assert page.read_text().count("<figure id='copy-") == 3


def test_a_speed_perturbed_copy_near_full_scale_is_normalised_not_clipped(tmp_path):
    # A square wave at full scale: resampling it overshoots (Gibbs), by ~9%.
    _shell("sox -r 16000 -n -b 16 -c 1 loud.flac synth 1 square 300 vol 0.98 && "
           "tar -cf loud.tar loud.flac", tmp_path)
    tar_to_tfrecord.run(["--input", f"{tmp_path}/loud.tar", "--output", str(tmp_path / "ds"),
                         "--cut", "utterances", "--audio_fields", "flac", "--features", "none",
                         "--splits", "train=1", "--augment_copies", "1",
                         "--speed_perturb", "1.1"])
    original, copy = dg.load(tmp_path / "ds", "train", batch_size=None)
    assert np.max(np.abs(original["audio"].numpy())) == pytest.approx(0.98, abs=1e-3)
    assert bool(copy["aug.peak_normalized"])
    assert np.max(np.abs(copy["audio"].numpy())) == pytest.approx(0.99, abs=1e-6)


@pytest.mark.slow  # a job against the storage emulator
def test_corpora_on_gs_and_two_workers_make_the_dataset_one_makes_on_disk(
        corpus, noise, gcs_emulator, tmp_path):
    for name in ("noise.tar", "rirs.tar"):
        gcs_emulator.upload(noise / name, f"augment/{name}")
    gcs_emulator.upload(corpus / "speech.tar", "augment/speech.tar")
    flags = [*NOISE_FLAGS, "--rir_input", "{}/rirs.tar", "--noise_input", "{}/noise.tar"]
    outputs = {}
    for where, root, output, workers in (
            ("disk", str(noise), str(tmp_path / "ds"), "1"),
            ("gs", gcs_emulator.url("augment"), gcs_emulator.url("augment/ds"), "2")):
        speech = f"{corpus}/speech.tar" if where == "disk" else f"{root}/speech.tar"
        tar_to_tfrecord.run(["--input", speech, "--output", output, "--direct_num_workers",
                             workers, *(flag.format(root) for flag in flags)])
        outputs[where] = {(e["source_key"].numpy(), int(e["aug.copy"])): (
            e["aug.kind"].numpy(), e["aug.rir_key"].numpy(), e["aug.noise_key"].numpy(),
            e["audio"].numpy().tobytes()) for e in dg.load(output, "train", batch_size=None)}
    assert len(outputs["disk"]) == 3 * SAMPLES
    assert outputs["gs"] == outputs["disk"]


def test_recorded_speech_replays_as_it_was_recorded_and_spills_past_16_mib():
    rng = np.random.default_rng(0)
    blocks = [Audio(rng.standard_normal(160000).astype(np.float32), 16000, 2.0 + 10 * i)
              for i in range(30)]   # 5 minutes, 19 MB as float32
    recorded = RecordedAudio("int16")
    for block in blocks:
        recorded(block)
    assert recorded.on_disk   # past 16 MiB: in a local temporary file, not in memory
    replayed = list(recorded.blocks())
    assert [b.start for b in replayed] == [b.start for b in blocks]
    np.testing.assert_array_equal(np.concatenate([b.samples for b in replayed]),
                                  np.concatenate([b.samples for b in blocks]))
    assert recorded.dtype == np.int16
    recorded.close()


@pytest.mark.parametrize("size, offset, length", [(1000, 300, 500), (1000, 0, 2750),
                                                  (1000, 999, 1)])
def test_a_noise_excerpt_is_the_recording_cut_and_looped_without_copying_it(size, offset, length):
    recording = np.random.default_rng(size + length).standard_normal(size).astype(np.float32)
    excerpt = NoiseExcerpt(recording, offset, length)
    # Written out whole, as the copy's noise is defined: looped from the offset.
    whole = np.concatenate([recording[offset:]] + [recording] * (length // size + 1))[:length]
    assert excerpt.power() == pytest.approx(np.mean(whole.astype(np.float64) ** 2), rel=1e-12)
    assert excerpt.peak() == np.max(np.abs(whole))
    for start, count in ((0, length), (length // 3, length // 2 + 1), (length - 1, 3), (5, 0)):
        expected = np.take(whole, np.arange(start, start + count) % length)
        np.testing.assert_array_equal(excerpt.at(start, count), expected)


def test_noise_on_a_long_recording_costs_no_memory_of_its_length(noise):
    # Twenty minutes at 16 kHz (77 MB as float32) under 4 s of pink noise, looped.
    recording = Recording("pink", (noise / "pink.flac").read_bytes(), 4.0, "pink.flac")
    options = dg.AugmentOptions(copies=1, noise=(recording,), snr_db=(10, 10), seed=1)
    rate, seconds = 16000, 1200
    copy = options.plan("long", 1, Heard(peak=0.1, power=0.01, samples=rate * seconds), rate)
    speech = np.full(rate // 2, 0.1, np.float32)
    written, noise_energy = 0, 0.0
    tracemalloc.start()
    try:
        for block in augment_blocks((Audio(speech, rate, i / 2) for i in range(2 * seconds)),
                                    copy):
            added = block.samples.astype(np.float64) - 0.1 * copy.mix.speech_scale
            written, noise_energy = written + len(added), noise_energy + float(added @ added)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert written == rate * seconds and not copy.mix.peak_normalized
    # The looped noise's power over all twenty minutes is the drawn SNR's: 10 dB under 0.01.
    assert noise_energy / written == pytest.approx(0.001, rel=1e-4)
    assert peak < 4 << 20   # a few blocks, where the whole excerpt was 77 MB (231 in float64)


def test_a_long_noise_recording_of_a_big_corpus_has_only_the_copys_excerpt_decoded(
        noise, monkeypatch):
    rate, length = 16000, 3 * 16000   # a 3 s copy under a minute of noise
    options = dg.AugmentOptions(copies=1, noise=list_recordings(str(noise / "long.flac")),
                                snr_db=(10, 10), seed=1)
    heard = Heard(peak=0.1, power=0.01, samples=length)
    whole, _ = soundfile.read(noise / "long.flac", dtype="float32")
    # A small corpus stays decoded: the recording whole, in the cache.
    assert len(options.plan("s0", 1, heard, rate).mix.excerpt.recording) == len(whole)
    monkeypatch.setattr(augment, "_SMALL_NOISE_CORPUS", 0)   # as big as MUSAN (9.7 GB decoded)
    copy = options.plan("s0", 1, heard, rate)
    # The excerpt's place: its drawn start, 0 to 1 of the room the recording
    # leaves, which ends 2% short of its end.
    room = len(whole) - length - len(whole) // 50
    offset = round(copy.noise_start * room)
    assert 0 < offset < room
    excerpt = copy.mix.excerpt
    assert len(excerpt.recording) <= length + 1   # the excerpt alone was decoded
    np.testing.assert_array_equal(excerpt.at(0, length), whole[offset:offset + length])
