"""audio_windows and window_at: exact sample boundaries, remainders, crops, silence.

Signals are np.arange ramps (sample i has value i), so each window's samples
say exactly where it was cut from; a FLAC fixture is written with soundfile.
"""

import io
import os
import pathlib
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms.media.audio import AudioOptions, decode_audio, stream_audio
from transforms.media.decoded import Audio, MediaError
from transforms.media.windows import (
    AudioTimeline,
    OutsideAudio,
    WindowOptions,
    audio_windows,
    window_at,
)

RATE = 1000


def ramp(n, start=0.0, rate=RATE, dtype=np.float32):
    return Audio(np.arange(n, dtype=dtype), rate, start=start)


def blocks_of(audio, sizes):
    """The audio as consecutive blocks of the given sizes (cycled)."""
    out, i, k = [], 0, 0
    while i < len(audio.samples):
        size = sizes[k % len(sizes)]
        out.append(Audio(audio.samples[i:i + size], audio.sample_rate,
                         start=audio.start + i / audio.sample_rate))
        i, k = i + size, k + 1
    return out


def cut(audio, stats=None, key="k", **options):
    return list(audio_windows([audio], WindowOptions(**options), key=key, stats=stats))


def starts_of(windows):
    """Each window's first source sample (its ramp value)."""
    return [int(w.samples[0]) for w in windows]


def test_grid_windows_are_exact_slices():
    windows = cut(ramp(1000), window_s=0.25)
    assert len(windows) == 4
    for i, w in enumerate(windows):
        np.testing.assert_array_equal(w.samples, np.arange(250 * i, 250 * i + 250))
        assert (w.start, w.end) == (0.25 * i, 0.25 * (i + 1))
        assert w.samples.dtype == np.float32


def test_window_and_hop_are_rounded_to_whole_samples():
    # 0.0333 s at 1 kHz is 33 samples; the hop 0.0166 s is 17: never drifting.
    windows = cut(ramp(1000), window_s=0.0333, hop_s=0.0166, remainder="drop")
    assert starts_of(windows) == list(range(0, 1000 - 33 + 1, 17))
    assert {len(w.samples) for w in windows} == {33}
    assert [w.start for w in windows] == [17 * i / RATE for i in range(len(windows))]


def test_overlap_and_gaps():
    overlap = cut(ramp(1000), window_s=0.4, hop_s=0.1, remainder="drop")
    assert starts_of(overlap) == [0, 100, 200, 300, 400, 500, 600]
    gaps = cut(ramp(1000), window_s=0.1, hop_s=0.3, remainder="drop")
    assert starts_of(gaps) == [0, 300, 600, 900]


def test_pad_and_drop_remainders():
    drop = cut(ramp(1050), window_s=0.25, remainder="drop")
    assert starts_of(drop) == [0, 250, 500, 750]
    pad = cut(ramp(1050), window_s=0.25, remainder="pad")
    assert starts_of(pad) == [0, 250, 500, 750, 1000]
    np.testing.assert_array_equal(pad[-1].samples[:50], np.arange(1000, 1050))
    assert not pad[-1].samples[50:].any() and len(pad[-1].samples) == 250
    assert (pad[-1].start, pad[-1].end) == (1.0, 1.25)


def test_pad_with_overlap_adds_a_window_only_for_an_uncovered_tail():
    # Windows at 0..600 end at 1000 = the end: nothing left to pad.
    assert starts_of(cut(ramp(1000), window_s=0.4, hop_s=0.1)) == [0, 100, 200, 300, 400, 500, 600]
    # 1050 samples: the tail 1000..1050 is in no full window; one padded window holds it.
    windows = cut(ramp(1050), window_s=0.4, hop_s=0.1)
    assert starts_of(windows) == [0, 100, 200, 300, 400, 500, 600, 700]
    np.testing.assert_array_equal(windows[-1].samples[:350], np.arange(700, 1050))


@settings(max_examples=200, deadline=None)
@given(total=st.integers(1, 400), length=st.integers(1, 120), hop=st.integers(1, 150),
       remainder=st.sampled_from(["pad", "drop"]))
def test_grid_invariants(total, length, hop, remainder):
    options = dict(window_s=length / RATE, hop_s=hop / RATE, remainder=remainder)
    if total < length and remainder == "drop":
        with pytest.raises(MediaError):
            cut(ramp(total), **options)
        return
    windows = cut(ramp(total), **options)
    starts = starts_of(windows)
    full = list(range(0, total - length + 1, hop))
    assert starts[:len(full)] == full
    for s, w in zip(starts, windows):
        real = min(length, total - s)
        np.testing.assert_array_equal(w.samples[:real], np.arange(s, s + real))
        assert not w.samples[real:].any() and len(w.samples) == length
    padded = starts[len(full):]
    if remainder == "drop":
        assert not padded
    else:
        assert len(padded) <= 1
        covered = full[-1] + length if full else 0
        # One padded window iff the end is in no full window and a grid start falls before it.
        next_start = full[-1] + hop if full else 0
        assert padded == ([next_start] if covered < total and next_start < total else [])
        if hop <= length:        # with no gaps, every sample is in some window
            assert (starts[-1] + length if starts else 0) >= total


def test_shorter_than_one_window():
    with pytest.raises(MediaError, match="audio of 0.40 s is shorter than one 1.00 s window"):
        cut(ramp(400), window_s=1.0, remainder="drop")
    [window] = cut(ramp(400), window_s=1.0, remainder="pad")
    np.testing.assert_array_equal(window.samples[:400], np.arange(400))
    assert not window.samples[400:].any() and len(window.samples) == 1000
    for remainder in ("pad", "drop"):
        with pytest.raises(MediaError, match="audio of 0.00 s"):
            cut(ramp(0), remainder=remainder)
        with pytest.raises(MediaError, match="no audio"):
            list(audio_windows([], WindowOptions(remainder=remainder), key="k"))


def test_max_windows_stops_reading_the_stream():
    read = []

    def stream():
        for block in blocks_of(ramp(10_000), [100]):
            read.append(block)
            yield block

    windows = list(audio_windows(stream(), WindowOptions(window_s=0.25, max_windows=3), key="k"))
    assert starts_of(windows) == [0, 250, 500]
    assert len(read) == 8          # 750 samples: not one block more


def test_many_small_blocks_give_the_same_windows_as_one_block():
    audio = ramp(5003, start=2.0)
    rng = np.random.default_rng(1)
    sizes = list(rng.integers(1, 300, 50))
    for options in (WindowOptions(window_s=0.25, hop_s=0.1),
                    WindowOptions(window_s=0.1, hop_s=0.33),
                    WindowOptions(window_s=0.3), WindowOptions(window_s=0.2, random_crops=5)):
        one = list(audio_windows([audio], options, key="k"))
        many = list(audio_windows(blocks_of(audio, sizes), options, key="k"))
        assert [(w.start, w.end) for w in many] == [(w.start, w.end) for w in one]
        for a, b in zip(many, one):
            np.testing.assert_array_equal(a.samples, b.samples)
    # Times are on the audio's own timeline.
    assert one[0].start >= 2.0


def test_blocks_must_continue_one_signal():
    a, b = ramp(100), ramp(100, start=0.2)
    with pytest.raises(ValueError, match="do not continue"):
        list(audio_windows([a, b], WindowOptions(window_s=0.05), key="k"))
    with pytest.raises(ValueError, match="do not continue"):
        list(audio_windows([a, ramp(100, start=0.1, rate=2000)], WindowOptions(window_s=0.05),
                           key="k"))


def test_windows_are_read_only():
    for window in cut(ramp(1050), window_s=0.25) + [window_at(ramp(100), 0.05, 0.02)]:
        with pytest.raises(ValueError):
            window.samples[0] = 1


# -- random crops ------------------------------------------------------------------

def crop_starts(key, seed=0, n=8, total=10_000, length=0.5):
    windows = cut(ramp(total), key=key, window_s=length, random_crops=n, seed=seed)
    return starts_of(windows)


def test_random_crops_are_uniform_in_range_sorted_and_exact():
    windows = cut(ramp(10_000), key="spk1/utt1", window_s=0.5, random_crops=200, seed=3)
    starts = starts_of(windows)
    assert len(starts) == 200 and starts == sorted(starts)
    assert min(starts) >= 0 and max(starts) <= 10_000 - 500
    for s, w in zip(starts, windows):
        np.testing.assert_array_equal(w.samples, np.arange(s, s + 500))
        assert w.start == s / RATE
    # Roughly uniform: each half of the range gets a fair share.
    assert 70 < sum(s < 4750 for s in starts) < 130


def test_random_crops_are_deterministic_per_seed_and_key():
    assert crop_starts("a") == crop_starts("a")
    assert crop_starts("a") != crop_starts("b")
    assert crop_starts("a", seed=1) != crop_starts("a", seed=0)


def test_random_crops_are_the_same_in_another_process():
    code = ("from tests.test_audio_windows import crop_starts; "
            "print(crop_starts('a'), crop_starts('b', seed=7))")
    # A fresh interpreter with a different hash seed: nothing may depend on hash().
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"},
                         cwd=pathlib.Path(__file__).parent.parent).stdout
    assert out.strip() == f"{crop_starts('a')} {crop_starts('b', seed=7)}"


def test_random_crops_of_short_audio():
    [window] = cut(ramp(300), window_s=0.5, random_crops=4)
    np.testing.assert_array_equal(window.samples[:300], np.arange(300))
    with pytest.raises(MediaError, match="shorter than one"):
        cut(ramp(300), window_s=0.5, random_crops=4, remainder="drop")


def test_random_crops_with_max_windows():
    assert len(cut(ramp(10_000), window_s=0.5, random_crops=8, max_windows=3)) == 3


# -- silence -----------------------------------------------------------------------

def test_silent_windows_are_dropped_and_counted():
    t = np.arange(4000) / RATE
    signal = (0.5 * np.sin(2 * np.pi * 50 * t)).astype(np.float32)   # -9.03 dBFS RMS
    signal[1000:2000] = 0                                            # digital silence
    signal[2000:3000] *= 0.001                                       # -69 dBFS
    audio = Audio(signal, RATE)
    stats = {}
    windows = cut(audio, stats=stats, window_s=1.0, min_rms_db=-40)
    assert [w.start for w in windows] == [0.0, 3.0] and stats == {"windows_silent": 2}
    # The threshold is on dBFS: a 0.5 sine is 20*log10(0.5/sqrt(2)) = -9.03 dB.
    assert len(cut(audio, window_s=1.0, min_rms_db=-9.0)) == 0
    assert len(cut(audio, window_s=1.0, min_rms_db=-9.1)) == 2
    # int16 full scale is 32767, the decoder's convention.
    ints = Audio(np.rint(signal * 32767).astype(np.int16), RATE)
    stats = {}
    assert [w.start for w in cut(ints, stats=stats, window_s=1.0, min_rms_db=-9.1)] == [0.0, 3.0]
    assert stats == {"windows_silent": 2}
    assert len(cut(ints, window_s=1.0, min_rms_db=-9.0)) == 0


def test_padding_does_not_count_as_silence():
    # 0.1 s of tone in a padded 1 s window: its level is the tone's, not diluted.
    signal = (0.5 * np.sin(2 * np.pi * 50 * np.arange(100) / RATE)).astype(np.float32)
    assert len(cut(Audio(signal, RATE), window_s=1.0, min_rms_db=-10)) == 1


# -- window_at -----------------------------------------------------------------------

@pytest.mark.parametrize("length", [0.2, 0.201])
def test_window_at_is_centred_exactly(length):
    n = round(length * RATE)
    audio = ramp(1000, start=5.0)
    window = window_at(audio, 5.5, length)
    np.testing.assert_array_equal(window.samples, np.arange(500 - n // 2, 500 - n // 2 + n))
    assert window.start == 5.0 + (500 - n // 2) / RATE
    assert window.end == 5.0 + (500 - n // 2 + n) / RATE


def test_window_at_pads_past_either_edge():
    audio = ramp(1000)
    left = window_at(audio, 0.05, 0.2)           # samples -50..150
    np.testing.assert_array_equal(left.samples, np.r_[np.zeros(50), np.arange(150)])
    assert left.start == -0.05
    right = window_at(audio, 0.95, 0.2)          # samples 850..1050
    np.testing.assert_array_equal(right.samples, np.r_[np.arange(850, 1000), np.zeros(50)])
    both = window_at(ramp(100), 0.05, 0.4)       # longer than the audio
    np.testing.assert_array_equal(both.samples, np.r_[np.zeros(150), np.arange(100), np.zeros(150)])
    ints = window_at(ramp(1000, dtype=np.int16), 0.0, 0.2)
    assert ints.samples.dtype == np.int16 and len(ints.samples) == 200


def test_window_at_outside_the_audio():
    with pytest.raises(MediaError, match="lies outside the audio"):
        window_at(ramp(1000), 1.2, 0.2)
    with pytest.raises(MediaError, match="lies outside the audio"):
        window_at(ramp(1000, start=3.0), 2.0, 0.2)


# -- AudioTimeline: window_at over a stream -------------------------------------------

@settings(max_examples=200, deadline=None)
@given(total=st.integers(1, 3000), start=st.sampled_from([0.0, 0.5, 2.25]),
       sizes=st.lists(st.integers(1, 700), min_size=1, max_size=4),
       window=st.sampled_from([0.001, 0.2, 0.201, 1.0, 4.0]),
       centres=st.lists(st.floats(-3.0, 8.0, allow_nan=False), min_size=1, max_size=12))
def test_timeline_windows_are_window_at_on_the_whole_signal(total, start, sizes, window,
                                                             centres):
    audio = ramp(total, start=start)
    timeline = AudioTimeline(blocks_of(audio, sizes))
    for centre in sorted(centres):
        try:
            expected = window_at(audio, centre, window)
        except OutsideAudio:
            with pytest.raises(OutsideAudio):
                timeline.window_at(centre, window)
            continue
        got = timeline.window_at(centre, window)
        assert (got.start, got.end) == (expected.start, expected.end)
        np.testing.assert_array_equal(got.samples, expected.samples)
        assert not got.samples.flags.writeable


def test_timeline_decodes_only_as_far_as_a_window_reaches_and_keeps_little():
    pulled = []

    def blocks():
        for i in range(100):          # 100 s in 1 s blocks
            pulled.append(i)
            yield Audio(np.full(RATE, i, np.float32), RATE, start=float(i))

    timeline = AudioTimeline(blocks())
    assert timeline.window_at(10.0, 1.0).samples[0] == 9 and pulled[-1] == 10
    assert timeline.window_at(50.0, 1.0).samples[-1] == 50 and pulled[-1] == 50
    assert len(timeline._held) <= 3 * RATE
    timeline.window_at(49.5, 1.0)     # slightly back: still held
    with pytest.raises(MediaError, match="must not go back"):
        timeline.window_at(20.0, 1.0)
    timeline.finish()
    assert pulled[-1] == 99


# -- with the decoder --------------------------------------------------------------

def test_streamed_decode_cuts_like_the_whole_decode():
    # 3.7 s of noise at 44.1 kHz stereo, written as FLAC by libsndfile.
    noise = np.random.default_rng(0).uniform(-0.5, 0.5, (round(3.7 * 44100), 2)).astype(np.float32)
    out = io.BytesIO()
    sf.write(out, noise, 44100, format="FLAC")
    data = out.getvalue()
    options = WindowOptions(window_s=1.0, hop_s=0.5)
    decoded = decode_audio(data, AudioOptions(), name="x.flac")
    whole = list(audio_windows([decoded], options, key="k"))
    blocks = stream_audio(data, AudioOptions(), name="x.flac", block_seconds=0.3)
    streamed = list(audio_windows(blocks, options, key="k"))
    assert [w.start for w in streamed] == [w.start for w in whole] == [
        0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    for a, b in zip(streamed, whole):
        np.testing.assert_allclose(a.samples, b.samples, atol=1e-6)


def test_memory_stays_flat_over_a_long_stream():
    # Ten minutes at 16 kHz (38 MB as float32) in 0.5 s blocks, windows dropped
    # as they come: the peak allocation is a few blocks, not the stream.
    def stream():
        block = np.zeros(8000, np.float32)
        for i in range(1200):
            yield Audio(block + 0.1, 16000, start=i * 0.5)

    tracemalloc.start()
    try:
        options = WindowOptions(window_s=1.0, hop_s=0.25)
        count = sum(1 for _ in audio_windows(stream(), options, key="k"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 2397
    assert peak < 1_000_000


def test_invalid_options():
    for kwargs in ({"window_s": 0}, {"hop_s": -1}, {"remainder": "wrap"}, {"max_windows": -1}):
        with pytest.raises(ValueError):
            WindowOptions(**kwargs)
    with pytest.raises(ValueError, match="less than one sample"):
        cut(ramp(100), window_s=0.0001)
