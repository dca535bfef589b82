"""Silero VAD's own pipeline, for benchmarks/speech_bench.py: run by the Python of
the venv that benchmark makes (torch and silero-vad), never by the project's.

    python silero_side.py REQUEST.json

REQUEST holds the recordings' paths, `get_speech_timestamps`' options, and
our detector's probabilities of each recording, if it is to compare rules.
Prints, as JSON, for each recording: the speech `get_speech_timestamps`
finds with the package's own model (TorchScript, one torch thread) and the
CPU seconds it took, and the speech its `get_speech_timestamps_from_probs`
finds in our probabilities (the same rules on the same frames: where the two
cuts differ by design).
"""

import json
import sys
import time

import soundfile
import torch
from silero_vad import get_speech_timestamps, get_speech_timestamps_from_probs, load_silero_vad


def _seconds(stamps: list, rate: int) -> list:
    return [(stamp["start"] / rate, stamp["end"] / rate) for stamp in stamps]


def main(request_path: str) -> None:
    with open(request_path) as f:
        request = json.load(f)
    torch.set_num_threads(1)
    model = load_silero_vad()
    options = request["options"]
    found = {"spans": {}, "from_our_probabilities": {}, "cpu_s": 0.0}
    for path in request["paths"]:
        audio, rate = soundfile.read(path, dtype="float32")
        began = time.process_time()
        stamps = get_speech_timestamps(torch.from_numpy(audio), model, sampling_rate=rate,
                                       **options)
        found["cpu_s"] += time.process_time() - began
        found["spans"][path] = _seconds(stamps, rate)
        if path not in request.get("probabilities", {}):
            continue
        stamps = get_speech_timestamps_from_probs(request["probabilities"][path],
                                                  sampling_rate=rate,
                                                  audio_length_samples=len(audio), **options)
        found["from_our_probabilities"][path] = _seconds(stamps, rate)
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1])
