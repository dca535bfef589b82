"""Real speech and its near copies, made by other tools: espeak-ng speaks
distinct sentences in a few voices, sox stores them as 16 kHz FLAC, and
ffmpeg and sox make the copies a corpus gathers by accident (a lossy
re-encode, a take cut at another start). The near-duplicate tests and
benchmark (tests/test_duplicates.py, benchmarks/duplicates_bench.py) measure
against these; the CLIs are Debian's (`make media-tools` installs them).
"""

from __future__ import annotations

import os
import subprocess
from typing import NamedTuple, Sequence

__all__ = ["COPY_KINDS", "NEAR_COPIES", "Meeting", "NearCopy", "copy_name", "greeting_calls",
           "meeting", "near_copy", "sentences", "speak", "spoken_word"]

# The first Harvard sentences (IEEE 1969): phonetically balanced, no two alike.
_HARVARD = (
    "The birch canoe slid on the smooth planks.", "Glue the sheet to the dark blue background.",
    "It's easy to tell the depth of a well.", "These days a chicken leg is a rare dish.",
    "Rice is often served in round bowls.", "The juice of lemons makes fine punch.",
    "The box was thrown beside the parked truck.", "The hogs were fed chopped corn and garbage.",
    "Four hours of steady work faced us.", "Large size in stockings is hard to sell.",
    "The boy was there when the sun rose.", "A rod is used to catch pink salmon.",
    "The source of the huge river is the clear spring.", "Kick the ball straight and follow "
    "through.", "Help the woman get back to her feet.", "A pot of tea helps to pass the evening.",
    "Smoky fires lack flame and heat.", "The soft cushion broke the man's fall.",
    "The salt breeze came across from the sea.", "The girl at the booth sold fifty bonds.",
    "The small pup gnawed a hole in the sock.", "The fish twisted and turned on the bent hook.",
    "Press the pants and sew a button on the vest.", "The swan dive was far short of perfect.",
    "The beauty of the view stunned the young boy.", "Two blue fish swam in the tank.",
    "Her purse was full of useless trash.", "The colt reared and threw the tall rider.",
    "It snowed, rained, and hailed the same morning.", "Read verse out loud for pleasure.",
)
_VOICES = (("en-us", 45, 160), ("en", 60, 150), ("en-us+f3", 50, 170), ("en+m3", 35, 140))

class NearCopy(NamedTuple):
    """How one kind of near copy is made: `command` a template of `{source}`
    and `{target}`."""

    description: str
    command: tuple


# By the extension of the copy made.
NEAR_COPIES = {
    "mp3": NearCopy("MP3 at 64 kb/s", ("ffmpeg", "-loglevel", "error", "-i", "{source}",
                                       "-b:a", "64k", "{target}")),
    "m4a": NearCopy("AAC at 96 kb/s", ("ffmpeg", "-loglevel", "error", "-i", "{source}",
                                       "-c:a", "aac", "-b:a", "96k", "{target}")),
    "opus": NearCopy("Opus at 24 kb/s", ("ffmpeg", "-loglevel", "error", "-i", "{source}",
                                         "-c:a", "libopus", "-b:a", "24k", "{target}")),
    # Lossless, but no sample is where it was.
    "flac": NearCopy("cut 0.3 s later", ("sox", "{source}", "{target}", "trim", "0.3")),
}


# Every kind of copy the frame-by-frame check is measured on (issue #56): the
# re-encodes and the cut above, and gains from -20 to +6 dB (ffmpeg's volume
# filter, sox with and without dither), silence padded around, speed 2% off.
COPY_KINDS = {
    **NEAR_COPIES,
    "gain-20": NearCopy("sox gain -20 dB", ("sox", "{source}", "{target}", "gain", "-20")),
    "gain-6": NearCopy("ffmpeg volume 0.5 (-6 dB)", ("ffmpeg", "-loglevel", "error", "-i",
                                                     "{source}", "-af", "volume=0.5",
                                                     "{target}")),
    "gain-6-dither": NearCopy("sox gain -6 dB, dithered", ("sox", "{source}", "-b", "16",
                                                           "{target}", "gain", "-6", "dither")),
    "gain+6": NearCopy("sox gain +6 dB (clips)", ("sox", "{source}", "{target}", "gain", "6")),
    "padded": NearCopy("0.7 s and 0.4 s of silence padded", ("sox", "{source}", "{target}",
                                                             "pad", "0.7", "0.4")),
    "faster": NearCopy("2% faster (sox speed)", ("sox", "{source}", "{target}", "speed",
                                                 "1.02")),
    "slower": NearCopy("2% slower (sox speed)", ("sox", "{source}", "{target}", "speed",
                                                 "0.98")),
}


def copy_name(stem: str, kind: str) -> str:
    """The file name of a COPY_KINDS copy of `stem`: its extension the
    codec's (a re-encode) or flac."""
    return f"{stem}_{kind}.{kind if kind in NEAR_COPIES else 'flac'}"


def sentences(count: int) -> list[str]:
    """The first `count` (up to 30) Harvard sentences."""
    if count > len(_HARVARD):
        raise ValueError(f"{count} sentences asked; there are {len(_HARVARD)}")
    return list(_HARVARD[:count])


def speak(text: str, target: str, voice: int = 0) -> None:
    """`text` spoken by espeak-ng in one of its voices, as 16 kHz mono FLAC at
    `target`: the same bytes every run (sox -R: its dither repeatable)."""
    name, pitch, speed = _VOICES[voice % len(_VOICES)]
    wav = target + ".wav"
    subprocess.run(["espeak-ng", "-v", name, "-p", str(pitch), "-s", str(speed), "-w", wav,
                    text], check=True, capture_output=True)
    subprocess.run(["sox", "-R", wav, "-r", "16000", "-c", "1", "-b", "16", target], check=True,
                   capture_output=True)
    os.remove(wav)


def spoken_word(text: str, speed: int, target: str) -> None:
    """`text` spoken by espeak-ng's default voice at `speed` words a minute, as
    16 kHz FLAC at `target`."""
    wav = target + ".wav"
    subprocess.run(["espeak-ng", "-s", str(speed), "-w", wav, text], check=True,
                   capture_output=True)
    subprocess.run(["sox", wav, "-r", "16000", "-b", "16", target], check=True,
                   capture_output=True)
    os.remove(wav)


def near_copy(source: str, target: str, kind: str) -> None:
    """A near copy of the FLAC at `source`, made as COPY_KINDS[kind] says."""
    command = [part.format(source=source, target=target)
               for part in COPY_KINDS[kind].command]
    subprocess.run(command, check=True, capture_output=True)


def greeting_calls(folder: str, count: int, answers: Sequence[str] = ()) -> list[str]:
    """The paths of `count` (up to 120) calls, call0.flac ... in `folder`: one
    greeting (4 s) before a different answer each (a Harvard sentence in one
    of four voices, or the `answers` given, in the first), joined by sox.
    They share most of their landmarks and are not copies of each other."""
    if count > len(answers or _HARVARD * len(_VOICES)):
        raise ValueError(f"{count} calls asked; there are "
                         f"{len(answers or _HARVARD * len(_VOICES))} answers")
    greeting = os.path.join(folder, "greeting.flac")
    speak("Thank you for calling. Please say your answer after the tone.", greeting, voice=1)
    calls = []
    for i in range(count):
        answer = os.path.join(folder, f"answer{i}.flac")
        call = os.path.join(folder, f"call{i}.flac")
        if answers:
            speak(answers[i], answer)
        else:
            speak(_HARVARD[i % len(_HARVARD)], answer, voice=i // len(_HARVARD))
        subprocess.run(["sox", greeting, answer, call], check=True, capture_output=True)
        os.remove(answer)
        calls.append(call)
    os.remove(greeting)
    return calls


class Meeting(NamedTuple):
    """A recording of speech turns and the truth about it: each turn's speech
    (start, end) in seconds, as its RTTM file says too."""

    path: str
    rttm: str
    turns: list


def _seconds(path: str) -> float:
    out = subprocess.run(["soxi", "-D", path], check=True, capture_output=True, text=True)
    return float(out.stdout)


def meeting(folder: str, name: str, texts: Sequence[str], pauses: Sequence[float]) -> Meeting:
    """`texts` spoken in turns (espeak-ng's voices in rotation), `pauses[i]`
    seconds of digital silence before turn i and `pauses[len(texts)]` after
    the last, joined by sox into 16 kHz FLAC at folder/name.flac, with its
    RTTM (folder/name.rttm). espeak-ng's own silence around each turn is
    trimmed first (sox `silence`, at -60 dBFS), so a turn's times are where
    its speech is."""
    parts, turns, at = [], [], 0.0
    for i, text in enumerate(texts):
        pause = os.path.join(folder, f"{name}.pause{i}.flac")
        subprocess.run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16", pause, "trim", "0",
                        str(pauses[i])], check=True, capture_output=True)
        spoken, trimmed = (os.path.join(folder, f"{name}.turn{i}{end}.flac")
                           for end in ("", ".trimmed"))
        speak(text, spoken, voice=i)
        subprocess.run(["sox", "-R", spoken, trimmed, "silence", "1", "0.005", "-60d", "reverse",
                        "silence", "1", "0.005", "-60d", "reverse"], check=True,
                       capture_output=True)
        at += pauses[i]
        length = _seconds(trimmed)
        turns.append((at, at + length))
        at += length
        parts += [pause, trimmed]
        os.remove(spoken)
    tail = os.path.join(folder, f"{name}.tail.flac")
    subprocess.run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16", tail, "trim", "0",
                    str(pauses[len(texts)])], check=True, capture_output=True)
    path = os.path.join(folder, f"{name}.flac")
    subprocess.run(["sox", "-R", *parts, tail, path], check=True, capture_output=True)
    for part in (*parts, tail):
        os.remove(part)
    rttm = os.path.join(folder, f"{name}.rttm")
    with open(rttm, "w") as f:
        for i, (start, end) in enumerate(turns):
            f.write(f"SPEAKER {name} 1 {start:.3f} {end - start:.3f} <NA> <NA> "
                    f"voice{i % len(_VOICES)} <NA> <NA>\n")
    return Meeting(path, rttm, turns)
