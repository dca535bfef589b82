"""--cut speech against the truth of meetings made by other tools, and what it costs.

    python -m benchmarks.speech_bench [--meetings 8] [--repeats 3] [--copies 10]
                                      [--workdir DIR]

Makes meetings with espeak-ng and sox (transforms/testing/spoken.py): Harvard
sentences spoken in turns by four voices, pauses of 0.25 to 2.5 s, a few
seconds of sox-synthesised music (plucked chords) between some turns, and in
half of them a pink-noise bed mixed at 10 to 25 dB; the truth is each turn's
speech, as its RTTM gives it. Then, in this one process run:

- accuracy of each detector (`--vad silero`, `webrtc`; the default
  thresholds, pauses and margins): pieces (their margins taken off) against
  the turns on a 10 ms grid: missed and false speech seconds, the detection
  error rate ((missed + false) / speech), and each turn's start and end
  error against the piece that covers its middle (median and 90th
  percentile, ms; turns less than --speech_pause_s apart joined first, as
  the cut joins them); false speech in the music alone;
- WADA-SNR against the SNR sox mixed: one utterance with white noise at 0 to
  30 dB, the error at each;
- each detector's CPU per second of audio, and the jobs on 1 worker, each a
  process of its own, interleaved, medians, on a tar of `--copies` copies of
  every meeting: `--cut audio_windows` (1 s),
  `--cut speech`, and `--cut speech --quality` with every measure; beside
  them silero-vad's own `get_speech_timestamps` over the same recordings
  (its process: reading them, the detector and its rules; no TFRecord
  written, so it is the peer's floor).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import soundfile

from benchmarks.peers.peer_runs import peer_python
from benchmarks.process_tree import interleaved
from transforms.media.decoded import Audio
from transforms.media.quality import QUALITY_MEASURES, snr_db
from transforms.media.speech import SpeechOptions, speech_pieces
from transforms.media.vad import detector
from transforms.testing.spoken import meeting, sentences, speak

_GRID_S = 0.01
# Silero VAD's own pipeline runs in a venv of its own, kept between runs.
PEER_VENVS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "peers")
SILERO_SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers",
                           "silero_side.py")
# silero-vad without its dependencies: torchaudio, which it needs only to read files.
SILERO_PACKAGES = ["torch==2.13.0", "numpy", "soundfile", "packaging"]
REFERENCE_JOB = "silero-vad's own"
_PAD_S = SpeechOptions().pad_s


def _sox(*args) -> None:
    subprocess.run(["sox", *map(str, args)], check=True, capture_output=True)


def _meetings(folder: str, count: int) -> list:
    """(path, turns, music spans) of each meeting (module docstring)."""
    rng = np.random.default_rng(58)
    texts = sentences(30)
    made = []
    for m in range(count):
        picked = [texts[(m * 5 + i) % len(texts)] for i in range(5)]
        pauses = [float(p) for p in rng.choice([0.25, 0.5, 1.0, 1.5, 2.5], size=6)]
        made_meeting = meeting(folder, f"meeting{m}", picked, pauses)
        path, turns, music = made_meeting.path, list(made_meeting.turns), []
        if m % 2:   # 3 s of music after the recording, then the noise bed over all of it
            chord = os.path.join(folder, f"music{m}.flac")
            _sox("-n", "-r", 16000, "-c", 1, "-b", 16, chord, "synth", 3, "pluck", "C4", "pluck",
                 "E4", "pluck", "G4", "vol", 0.3)
            length = soundfile.info(path).duration
            with_music = os.path.join(folder, f"meeting{m}.music.flac")
            _sox(path, chord, with_music)
            music.append((length, length + 3.0))
            seconds = length + 3.0
            noise = os.path.join(folder, f"noise{m}.flac")
            _sox("-n", "-r", 16000, "-c", 1, "-b", 16, noise, "synth", seconds, "pinknoise")
            speech_power = _power(path)
            snr = float(rng.choice([10, 15, 20, 25]))
            volume = np.sqrt(speech_power / _power(noise) / 10 ** (snr / 10))
            _sox("-m", "-v", 1, with_music, "-v", volume, noise, path)
            for part in (chord, with_music, noise):
                os.remove(part)
        made.append((path, turns, music))
    return made


def _power(path: str) -> float:
    audio, _ = soundfile.read(path, dtype="float64")
    return float(np.mean(audio ** 2))


def _grid(spans, seconds: float) -> np.ndarray:
    marks = np.zeros(int(np.ceil(seconds / _GRID_S)), bool)
    for start, end in spans:
        marks[int(round(start / _GRID_S)):int(round(end / _GRID_S))] = True
    return marks


def _merged(turns: list, pause_s: float) -> list:
    """The turns joined across pauses shorter than `pause_s`: what the cut makes
    one piece of, by design."""
    joined = [list(turns[0])]
    for start, end in turns[1:]:
        if start - joined[-1][1] < pause_s:
            joined[-1][1] = end
        else:
            joined.append([start, end])
    return [tuple(span) for span in joined]


def our_speech(made: list, kind: str) -> tuple[dict, float]:
    """{path: the speech of each piece the cut finds, its margins taken off},
    and the CPU seconds it took."""
    found, cpu = {}, 0.0
    detector(kind, 16000)   # its model loaded, untimed (as the reference's is)
    for path, _, _ in made:
        audio, rate = soundfile.read(path, dtype="float32")
        blocks = [Audio(audio[i:i + 10 * rate], rate, start=i / rate)
                  for i in range(0, len(audio), 10 * rate)]
        began = time.process_time()
        pieces = list(speech_pieces(blocks, SpeechOptions(detector=kind), 30.0))
        cpu += time.process_time() - began
        seconds = len(audio) / rate
        found[path] = [(p.start + (_PAD_S if p.start > 0 else 0), min(p.end - _PAD_S, seconds))
                       for p in pieces]
    return found, cpu


def _reference_request(paths: list, folder: str, name: str, probabilities: dict) -> list:
    """The command that runs Silero's own `get_speech_timestamps` on `paths`,
    with the cut's threshold, pause and longest piece and no margin
    (benchmarks/peers/silero_side.py), and its rules on our `probabilities`."""
    request = {"paths": paths, "probabilities": probabilities,
               "options": {"threshold": SpeechOptions().threshold, "speech_pad_ms": 0,
                           "min_silence_duration_ms": round(SpeechOptions().pause_s * 1000),
                           "max_speech_duration_s": 30.0, "min_speech_duration_ms": 0}}
    request_path = os.path.join(folder, f"{name}.json")
    with open(request_path, "w") as f:
        json.dump(request, f)
    return [peer_python(PEER_VENVS, "silero-venv", SILERO_PACKAGES, ["silero-vad"]),
            SILERO_SIDE, request_path]


def reference_speech(made: list, folder: str) -> dict:
    """Silero's own pipeline on the meetings: its spans and CPU, and its rules
    on our probabilities."""
    probabilities = {}
    for path, _, _ in made:
        audio, rate = soundfile.read(path, dtype="float32")
        found = detector("silero", rate)
        probabilities[path] = [*found.probabilities(audio), *found.finish()]
    command = _reference_request([path for path, _, _ in made], folder, "silero-request",
                                 probabilities)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def accuracy(made: list, found: dict, cpu: float) -> dict:
    """Missed, false and music-false seconds, DER, boundary errors and CPU a
    second of the speech `found` in each meeting (its path: spans) in `cpu`
    seconds."""
    missed = false = music_false = speech = audio_s = 0.0
    starts, ends = [], []
    for path, turns, music in made:
        seconds = soundfile.info(path).duration
        truth, said = _grid(turns, seconds), _grid(found[path], seconds)
        missed += np.sum(truth & ~said) * _GRID_S
        false += np.sum(~truth & said) * _GRID_S
        music_false += np.sum(_grid(music, seconds) & said) * _GRID_S
        speech += np.sum(truth) * _GRID_S
        audio_s += seconds
        for start, end in _merged(turns, SpeechOptions().pause_s):
            middle = (start + end) / 2
            covering = [f for f in found[path] if f[0] <= middle < f[1]]
            if covering:
                starts.append(abs(covering[0][0] - start) * 1000)
                ends.append(abs(covering[0][1] - end) * 1000)
    return {"missed_s": missed, "false_s": false, "music_false_s": music_false,
            "speech_s": speech, "der": (missed + false) / speech,
            "start_ms": (np.median(starts), np.percentile(starts, 90)),
            "end_ms": (np.median(ends), np.percentile(ends, 90)),
            "turns_found": f"{len(starts)}/"
                           f"{sum(len(_merged(t, SpeechOptions().pause_s)) for _, t, _ in made)}",
            "cpu_ms_per_s": 1000 * cpu / audio_s, "audio_s": audio_s}


def agreement(made: list, ours: dict, theirs: dict) -> str:
    """Where two cuts' speech differ, on the 10 ms grid, and their pieces'
    boundaries."""
    differ = audio_s = 0.0
    same_pieces, moved = 0, [0.0]
    for path, _, _ in made:
        seconds = soundfile.info(path).duration
        differ += np.sum(_grid(ours[path], seconds) != _grid(theirs[path], seconds)) * _GRID_S
        audio_s += seconds
        if len(ours[path]) == len(theirs[path]):
            same_pieces += 1
            moved += [abs(a - b) * 1000 for mine, other in zip(ours[path], theirs[path])
                      for a, b in zip(mine, other)]
    return (f"differ on {differ:.2f} s of {audio_s:.0f} s; as many pieces in {same_pieces} of "
            f"{len(made)} meetings, their boundaries at most {max(moved):.1f} ms apart")


def _print_accuracy(name: str, a: dict) -> None:
    print(f"{name:18s} {a['audio_s']:.0f} s of audio, {a['speech_s']:.1f} s of speech: "
          f"missed {a['missed_s']:.2f} s, false {a['false_s']:.2f} s (in music "
          f"{a['music_false_s']:.2f} s), DER {a['der']:.1%}; turns found "
          f"{a['turns_found']}; start error median {a['start_ms'][0]:.0f} ms "
          f"(p90 {a['start_ms'][1]:.0f}), end {a['end_ms'][0]:.0f} ms "
          f"(p90 {a['end_ms'][1]:.0f}); {a['cpu_ms_per_s']:.2f} CPU-ms a second of audio "
          f"({a['cpu_ms_per_s'] * 3.6:.1f} CPU-s an hour)")


def snr_errors(folder: str) -> dict:
    """{mixed SNR: WADA's estimate} of one espeak-ng utterance in white noise."""
    spoken, clean = (os.path.join(folder, name) for name in ("snr-spoken.flac", "snr.flac"))
    speak(" ".join(sentences(3)), spoken)
    _sox(spoken, clean, "silence", 1, 0.005, "-60d", "reverse", "silence", 1, 0.005, "-60d",
         "reverse")
    noise = os.path.join(folder, "snr-noise.flac")
    _sox("-n", "-r", 16000, "-c", 1, "-b", 16, noise, "synth", soundfile.info(clean).duration,
         "whitenoise")
    estimates = {}
    for target in range(0, 31, 5):
        mixed = os.path.join(folder, f"snr{target}.flac")
        volume = np.sqrt(_power(clean) / _power(noise) / 10 ** (target / 10))
        _sox("-m", "-v", 1, clean, "-v", volume, noise, mixed)
        audio, rate = soundfile.read(mixed, dtype="float32")
        estimates[target] = snr_db(audio, rate)
    return estimates


def jobs(made: list, folder: str, repeats: int, copies: int) -> dict:
    """The three jobs' Measured runs, interleaved (module docstring), on a tar
    of `copies` copies of every meeting."""
    corpus = os.path.join(folder, "corpus")
    os.makedirs(corpus, exist_ok=True)
    names = []
    for path, _, _ in made:
        for copy in range(copies):
            name = f"c{copy}-{os.path.basename(path)}"
            shutil.copy(path, os.path.join(corpus, name))
            names.append(name)
    subprocess.run(["tar", "--format=gnu", "-cf", "meetings.tar", *names], cwd=corpus,
                   check=True)
    print(f"jobs' corpus: {len(names)} recordings, "
          f"{os.path.getsize(os.path.join(corpus, 'meetings.tar')) / 1e6:.1f} MB")
    output = os.path.join(folder, "out")
    common = [sys.executable, "-m", "pipelines.tar_to_tfrecord", "--input",
              os.path.join(corpus, "meetings.tar"), "--output", output, "--audio_fields", "flac",
              "--features", "none", "--splits", "train=1", "--direct_num_workers", "1"]
    commands = {"windows": [*common, "--cut", "audio_windows"],
                "speech": [*common, "--cut", "speech"],
                "speech+quality": [*common, "--cut", "speech", "--quality",
                                   ",".join(QUALITY_MEASURES)],
                REFERENCE_JOB: _reference_request(
                    [os.path.join(corpus, name) for name in names], folder, "silero-corpus", {})}
    return interleaved(commands, corpus, output, repeats)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meetings", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--copies", type=int, default=10,
                        help="The jobs' corpus: this many copies of every meeting.")
    parser.add_argument("--workdir", default="")
    args = parser.parse_args(argv)
    folder = args.workdir or tempfile.mkdtemp(prefix="datagen-speech-bench-")
    os.makedirs(folder, exist_ok=True)
    made = _meetings(folder, args.meetings)
    print(f"{len(made)} meetings, {sum(len(t) for _, t, _ in made)} turns")
    found = {}
    for kind in ("silero", "webrtc"):
        found[kind], cpu = our_speech(made, kind)
        _print_accuracy(f"ours, {kind}", accuracy(made, found[kind], cpu))
    reference = reference_speech(made, folder)
    _print_accuracy("silero-vad's own", accuracy(made, reference["spans"], reference["cpu_s"]))
    print(f"ours against silero-vad's own: {agreement(made, found['silero'], reference['spans'])}")
    print("ours against silero-vad's rules on our probabilities: "
          f"{agreement(made, found['silero'], reference['from_our_probabilities'])}")
    estimates = snr_errors(folder)
    print("WADA-SNR: " + ", ".join(f"{t} dB -> {e:.1f}" for t, e in estimates.items()))
    runs = jobs(made, folder, args.repeats, args.copies)
    cpu = {name: statistics.median(r.cpu_seconds for r in measured)
           for name, measured in runs.items()}
    for name, measured in runs.items():
        wall = statistics.median(r.seconds for r in measured)
        peak = max(r.peak_pss for r in measured) / 2**20
        print(f"job {name:16s} wall {wall:6.2f} s, CPU {cpu[name]:6.2f} s "
              f"({cpu[name] / cpu['windows']:.2f}x windows), peak PSS {peak:4.0f} MiB")
    print(f"ours, speech with every measure, written: "
          f"{cpu['speech+quality'] / cpu[REFERENCE_JOB]:.2f}x the CPU of {REFERENCE_JOB}")
    if not args.workdir:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
