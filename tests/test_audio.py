"""decode_audio and stream_audio on real codecs: libsndfile, FFmpeg through PyAV,
and files made by independent encoders (the ffmpeg and sox command-line tools).

Fixtures are generated here: tones as numpy arrays, written to bytes with
soundfile (WAV, FLAC, OGG, MP3) or encoded and muxed with PyAV (mp4, webm, mkv),
or made by `ffmpeg -f lavfi -i sine=...` / `sox -n ... synth` in a temp dir.
"""

import io
import os
import shutil
import subprocess
import tempfile

import av
import numpy as np
import pytest
import soundfile as sf

from transforms.media.audio import AudioOptions, decode_audio, stream_audio
from transforms.media.decoded import MediaError, NoSamples

RATE = 44100
AMPLITUDE = 0.5


def tone(freqs=(440, 440), seconds=1.0, rate=RATE, amplitude=AMPLITUDE):
    """(frames, channels) float32 sines, one frequency per channel."""
    t = np.arange(round(seconds * rate)) / rate
    waves = [amplitude * np.sin(2 * np.pi * f * t) for f in freqs]
    return np.stack(waves, axis=1).astype(np.float32)


def sf_bytes(signal, rate=RATE, format="FLAC", subtype=None):
    """The signal written by libsndfile in memory."""
    out = io.BytesIO()
    sf.write(out, signal, rate, format=format, subtype=subtype)
    return out.getvalue()


def av_bytes(signal=None, rate=48000, container="mp4", codec="aac", video=False, pts_offset=0,
             options=None, path=None):
    """The signal encoded and muxed by FFmpeg through PyAV (and/or a few black video frames),
    in memory or through the file `path`."""
    out = path or io.BytesIO()
    with av.open(out, "w", format=container, options=options or {}) as muxer:
        # Every stream is added before the first packet (which writes the header).
        video_stream = audio_stream = None
        if video:
            video_stream = muxer.add_stream("libvpx" if container == "webm" else "mpeg4", rate=10)
            video_stream.width, video_stream.height, video_stream.pix_fmt = 32, 32, "yuv420p"
        if signal is not None:
            layout = {1: "mono", 2: "stereo"}[signal.shape[1]]
            audio_stream = muxer.add_stream(codec, rate=rate)
            audio_stream.layout = layout
        if video_stream is not None:
            for _ in range(10):
                frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
                muxer.mux(video_stream.encode(frame))
            muxer.mux(video_stream.encode(None))
        if audio_stream is not None:
            planar = np.ascontiguousarray(signal.T)
            for i in range(0, planar.shape[1], 1024):
                # PyAV converts this fltp frame to the encoder's sample format.
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planar[:, i:i + 1024]),
                                                   format="fltp", layout=layout)
                frame.sample_rate, frame.pts = rate, i + pts_offset
                muxer.mux(audio_stream.encode(frame))
            muxer.mux(audio_stream.encode(None))
    if path:
        with open(path, "rb") as f:
            return f.read()
    return out.getvalue()


def peak_hz(samples, rate):
    spectrum = np.abs(np.fft.rfft(samples.astype(np.float64) * np.hanning(len(samples))))
    return np.argmax(spectrum) * rate / len(samples)


def bin_hz(samples, rate):
    return rate / len(samples)


def rms(samples):
    return float(np.sqrt(np.mean(np.square(samples.astype(np.float64)))))


def tool(name):
    """The path of a command-line encoder: missing fails under CI, else skips."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed")
        pytest.skip(f"{name} is not installed")
    return path


def made_by(tmp_path, filename, *args):
    """Runs an encoder whose argument OUT is the output file `filename`; returns its bytes."""
    target = tmp_path / filename
    subprocess.run([str(target) if a == "OUT" else a for a in args], check=True,
                   capture_output=True)
    return target.read_bytes()


# -- codecs ------------------------------------------------------------------------

SOUNDFILE_CASES = [
    # (name, format, subtype, source rate, length tolerance at 16 kHz)
    ("x.wav", "WAV", "PCM_16", RATE, 0),
    ("x.wav", "WAV", "PCM_24", RATE, 0),
    ("x.wav", "WAV", "PCM_32", RATE, 0),
    ("x.wav", "WAV", "FLOAT", RATE, 0),
    ("x.flac", "FLAC", "PCM_16", RATE, 0),
    ("x.flac", "FLAC", "PCM_24", RATE, 0),
    ("x.ogg", "OGG", "VORBIS", RATE, 0),
    ("x.oga", "OGG", "OPUS", 48000, 0),
    ("x.mp3", "MP3", "MPEG_LAYER_III", RATE, 0),
]


@pytest.mark.parametrize("name, fmt, subtype, rate, tolerance", SOUNDFILE_CASES,
                         ids=[f"{c[1]}-{c[2]}" for c in SOUNDFILE_CASES])
def test_libsndfile_formats_decode_to_16k_mono(name, fmt, subtype, rate, tolerance):
    data = sf_bytes(tone(rate=rate), rate, fmt, subtype)
    audio = decode_audio(data, AudioOptions(), name=name)
    x = audio.samples
    assert x.dtype == np.float32 and x.ndim == 1
    assert (audio.sample_rate, audio.source_rate, audio.source_channels, audio.start) == (
        16000, rate, 2, 0.0)
    assert abs(len(x) - 16000) <= tolerance
    assert abs(peak_hz(x, 16000) - 440) <= bin_hz(x, 16000)
    assert rms(x) == pytest.approx(AMPLITUDE / np.sqrt(2), rel=0.1)
    assert np.abs(x).max() <= 1.0


@pytest.mark.parametrize("name, data", [
    ("x.flac", lambda: sf_bytes(tone())),
    ("x.mp4", lambda: av_bytes(tone(rate=48000))),
], ids=["flac", "mp4"])
def test_int16_output_is_float_times_32767(name, data):
    data = data()
    floats = decode_audio(data, AudioOptions(), name=name).samples
    ints = decode_audio(data, AudioOptions(dtype="int16"), name=name).samples
    assert ints.dtype == np.int16
    assert np.abs(ints.astype(np.int32) - floats * 32767).max() <= 1


def test_sample_rate_none_keeps_the_source_rate_and_samples():
    signal = tone(seconds=0.5)
    audio = decode_audio(sf_bytes(signal, format="WAV", subtype="FLOAT"),
                         AudioOptions(sample_rate=None, channel=0), name="x.wav")
    assert audio.sample_rate == RATE
    np.testing.assert_array_equal(audio.samples, signal[:, 0])


def test_channel_pick_and_mix_down():
    data = sf_bytes(tone(freqs=(440, 880)))
    left = decode_audio(data, AudioOptions(channel=0), name="x.flac").samples
    right = decode_audio(data, AudioOptions(channel=1), name="x.flac").samples
    mono = decode_audio(data, AudioOptions(), name="x.flac").samples
    assert abs(peak_hz(left, 16000) - 440) <= 1
    assert abs(peak_hz(right, 16000) - 880) <= 1
    np.testing.assert_allclose(mono, (left + right) / 2, atol=1e-6)
    spectrum = np.abs(np.fft.rfft(mono))
    assert sorted(np.argsort(spectrum)[-2:]) == [440, 880]   # 1 s at 16 kHz: 1 Hz bins


# Each codec makes FFmpeg's decoder produce a different sample format, covering
# planar and packed layouts and the integer scalings.
AV_CODEC_CASES = [
    ("matroska", "pcm_s16le", "x.mkv", "s16"),
    ("matroska", "pcm_s24le", "x.mkv", "s32"),
    ("matroska", "pcm_u8", "x.mkv", "u8"),
    ("matroska", "pcm_f64le", "x.mkv", "dbl"),
    ("matroska", "flac", "x.mkv", "s16"),
    ("mp4", "alac", "x.m4a", "s32p"),
    ("mp4", "aac", "x.mp4", "fltp"),
    ("webm", "libopus", "x.webm", "fltp"),
]


@pytest.mark.parametrize("container, codec, name, sample_format", AV_CODEC_CASES,
                         ids=[c[1] for c in AV_CODEC_CASES])
def test_ffmpeg_sample_formats_and_channels(container, codec, name, sample_format):
    data = av_bytes(tone(freqs=(440, 880), rate=48000), container=container, codec=codec)
    with av.open(io.BytesIO(data)) as probe:
        assert next(probe.decode(audio=0)).format.name == sample_format
    for channel, hz in ((0, 440), (1, 880)):
        audio = decode_audio(data, AudioOptions(sample_rate=None, channel=channel), name=name)
        assert (audio.sample_rate, audio.source_channels) == (48000, 2)
        assert abs(peak_hz(audio.samples, 48000) - hz) <= bin_hz(audio.samples, 48000)
        # Lossless codecs keep the amplitude exactly; u8 has 1/128 steps.
        assert rms(audio.samples) == pytest.approx(AMPLITUDE / np.sqrt(2), rel=0.05)


@pytest.mark.parametrize("container, codec, name", [
    ("mp4", "aac", "x.mp4"), ("webm", "libopus", "x.webm"), ("matroska", "libopus", "x.mkv")])
def test_audio_in_video_containers(container, codec, name):
    data = av_bytes(tone(rate=48000), container=container, codec=codec, video=True)
    audio = decode_audio(data, AudioOptions(), name=name)
    assert (audio.sample_rate, audio.source_rate, audio.source_channels) == (16000, 48000, 2)
    # AAC adds up to two 1024-sample frames of padding at 48 kHz.
    assert 16000 <= len(audio.samples) <= 16000 + 700
    assert abs(peak_hz(audio.samples, 16000) - 440) <= bin_hz(audio.samples, 16000)
    assert rms(audio.samples) == pytest.approx(AMPLITUDE / np.sqrt(2), rel=0.1)


@pytest.mark.parametrize("container, codec, name", [
    ("matroska", "libopus", "x.mkv"), ("mp4", "aac", "x.mp4")])
def test_audio_start_is_on_the_containers_clock(container, codec, name):
    # Video from 0 s, the audio track from 0.5 s: start is counted from the
    # container's start (as transforms.media.video counts Frame.time).
    data = av_bytes(tone(rate=48000), container=container, codec=codec, video=True,
                    pts_offset=24000)
    audio = decode_audio(data, AudioOptions(), name=name)
    # AAC's first frame is its 1024-sample priming, decoded just before 0.5 s.
    assert audio.start == pytest.approx(0.5, abs=1024 / 48000 + 0.002)
    without_video = av_bytes(tone(rate=48000), container=container, codec=codec, pts_offset=24000)
    start = decode_audio(without_video, AudioOptions(), name=name).start
    assert start == pytest.approx(0, abs=0.002)
    blocks = list(stream_audio(data, AudioOptions(), name=name, block_seconds=0.25))
    assert [b.start for b in blocks] == [audio.start + 0.25 * i for i in range(len(blocks))]


def test_unknown_extension_tries_libsndfile_then_ffmpeg():
    flac, mp4 = sf_bytes(tone()), av_bytes(tone(rate=48000))
    for name, data, rate in (("audio", flac, RATE), ("blob.bin", mp4, 48000), ("", flac, RATE),
                             ("flac", flac, RATE), ("cf:mp4", mp4, 48000)):
        assert decode_audio(data, AudioOptions(), name=name).source_rate == rate, name


# -- independent encoders ------------------------------------------------------------

def test_ffmpeg_cli_aac_m4a(tmp_path):
    data = made_by(tmp_path, "x.m4a", tool("ffmpeg"), "-v", "error", "-f", "lavfi",
                   "-i", "sine=frequency=1000:duration=2", "-c:a", "aac", "OUT")
    audio = decode_audio(data, AudioOptions(), name="x.m4a")
    assert abs(peak_hz(audio.samples, 16000) - 1000) <= bin_hz(audio.samples, 16000)
    assert 32000 <= len(audio.samples) <= 32000 + 800
    assert audio.source_rate == 44100 and audio.start == 0.0


def test_ffmpeg_cli_mp4_with_video_and_audio(tmp_path):
    data = made_by(tmp_path, "x.mp4", tool("ffmpeg"), "-v", "error",
                   "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=2",
                   "-f", "lavfi", "-i", "sine=frequency=500:duration=2:sample_rate=48000",
                   "-c:v", "mpeg4", "-c:a", "aac", "-ac", "2", "-shortest", "OUT")
    audio = decode_audio(data, AudioOptions(sample_rate=22050), name="x.mp4")
    assert (audio.sample_rate, audio.source_rate, audio.source_channels) == (22050, 48000, 2)
    assert abs(peak_hz(audio.samples, 22050) - 500) <= bin_hz(audio.samples, 22050)
    assert abs(audio.duration - 2.0) < 0.05


def test_sox_flac(tmp_path):
    data = made_by(tmp_path, "x.flac", tool("sox"), "-V1", "-n", "-r", "22050", "-c", "1",
                   "-b", "16", "OUT", "synth", "2", "sine", "300")
    audio = decode_audio(data, AudioOptions(), name="x.flac")
    assert (audio.source_rate, audio.source_channels, len(audio.samples)) == (22050, 1, 32000)
    assert abs(peak_hz(audio.samples, 16000) - 300) <= 1


def test_a_flac_written_to_a_pipe_decodes_as_the_same_flac_written_to_a_file(tmp_path):
    # A FLAC written where its encoder cannot seek back (ffmpeg to a pipe)
    # leaves its length unknown in the header: libsndfile fails on it, FFmpeg reads it.
    made_by(tmp_path, "file.flac", tool("sox"), "-V1", "-n", "-r", "16000", "-c", "2",
            "-b", "16", "OUT", "synth", "2.5", "sine", "300", "sine", "500")
    subprocess.run(f"{tool('ffmpeg')} -v error -i file.flac -f flac pipe:1 | cat > piped.flac",
                   shell=True, check=True, cwd=tmp_path)
    piped, whole = ((tmp_path / name).read_bytes() for name in ("piped.flac", "file.flac"))
    assert sf.info(io.BytesIO(piped)).frames > 2 ** 62   # libsndfile's "unknown"
    for options in (AudioOptions(), AudioOptions(sample_rate=8000, channel=1, dtype="int16")):
        ours = decode_audio(piped, options, name="piped.flac").samples
        np.testing.assert_array_equal(ours, decode_audio(whole, options, name="x.flac").samples)
        assert len(ours) == options.sample_rate * 2.5
    spans = [np.concatenate([b.samples for b in stream_audio(data, AudioOptions(), name="x.flac",
                                                              span=(1.0, 1.5))])
             for data in (piped, whole)]
    np.testing.assert_array_equal(*spans)


def test_a_span_shorter_than_half_a_sample_holds_none():
    data = sf_bytes(tone(seconds=2.0))   # RATE samples a second
    one = list(stream_audio(data, AudioOptions(sample_rate=None), name="x.flac",
                            span=(1.0, 1.0 + 1 / RATE)))
    assert [len(b.samples) for b in one] == [1]
    with pytest.raises(NoSamples, match="no audio samples in 'x.flac'"):   # not "truncated"
        list(stream_audio(data, AudioOptions(sample_rate=None), name="x.flac",
                          span=(1.0, 1.0 + 0.4 / RATE)))


# -- streaming -----------------------------------------------------------------------

@pytest.mark.parametrize("name, make, options", [
    ("x.flac", lambda: sf_bytes(tone(seconds=3.3)), AudioOptions()),
    ("x.flac", lambda: sf_bytes(tone(seconds=3.3)), AudioOptions(sample_rate=None, channel=1)),
    ("x.wav", lambda: sf_bytes(tone(seconds=3.3), format="WAV"), AudioOptions(dtype="int16")),
    ("x.mp4", lambda: av_bytes(tone(seconds=3.3, rate=48000)), AudioOptions()),
    ("x.webm", lambda: av_bytes(tone(seconds=3.3, rate=48000), container="webm", codec="libopus"),
     AudioOptions(sample_rate=8000, dtype="int16")),
], ids=["flac", "flac-native-rate", "wav-int16", "mp4", "webm-int16"])
@pytest.mark.parametrize("block_seconds", [0.05, 1.0, 10.0])
def test_stream_blocks_concatenate_to_the_whole_decode(name, make, options, block_seconds):
    data = make()
    whole = decode_audio(data, options, name=name)
    blocks = list(stream_audio(data, options, name=name, block_seconds=block_seconds))
    size = round(block_seconds * whole.sample_rate)
    assert all(len(b.samples) == size for b in blocks[:-1]) and 0 < len(blocks[-1].samples) <= size
    assert [b.start for b in blocks] == [whole.start + i * size / whole.sample_rate
                                         for i in range(len(blocks))]
    assert {(b.sample_rate, b.source_rate, b.source_channels, b.samples.dtype) for b in blocks} == {
        (whole.sample_rate, whole.source_rate, whole.source_channels, whole.samples.dtype)}
    streamed = np.concatenate([b.samples for b in blocks])
    assert len(streamed) == len(whole.samples)
    np.testing.assert_allclose(streamed.astype(np.float32), whole.samples.astype(np.float32),
                               atol=1 if whole.samples.dtype == np.int16 else 1e-5)


# -- bad input -----------------------------------------------------------------------

def _noise():
    # Seeded: rare random bytes probe as some other format (FFmpeg once saw lyrics).
    return np.random.default_rng(0).bytes(4096)


def _truncated_flac():
    data = sf_bytes(tone(seconds=2))
    return data[:len(data) // 2]


def _faststart_mp4():
    # The moov header before the media data, as for streaming, so a cut leaves
    # a valid header and short data (faststart needs a real file to rewrite).
    with tempfile.TemporaryDirectory() as tmp:
        return av_bytes(tone(rate=48000), options={"movflags": "faststart"},
                        path=os.path.join(tmp, "x.mp4"))


def _mp4_cut_after_packet(index):
    # Cut exactly at a packet boundary, the data ends cleanly but early: only
    # the sample table's packet count shows that it is short.
    data = _faststart_mp4()
    with av.open(io.BytesIO(data)) as probe:
        packet = list(probe.demux(audio=0))[index]
        return data[:packet.pos + packet.size]


def _video_only_mp4():
    return av_bytes(None, video=True)


def _unknown_codec_mkv():
    # A valid Matroska file whose codec id is changed to one FFmpeg has no decoder for.
    data = av_bytes(tone(rate=48000), container="matroska", codec="libopus")
    assert data.count(b"A_OPUS") == 1
    return data.replace(b"A_OPUS", b"A_QQQQ")


def _empty_wav():
    return sf_bytes(np.zeros((0, 2), np.float32), format="WAV")


BAD = [
    ("x.flac", lambda: b"", "empty member 'x.flac'"),
    ("x.flac", _noise, "cannot decode 'x.flac' as FLAC"),
    ("x.wav", _noise, "cannot decode 'x.wav' as WAV"),
    ("x.mp3", lambda: b"\0" * 4096, "cannot decode 'x.mp3' as MP3"),
    ("x.mp4", _noise, "cannot decode 'x.mp4' as MP4"),
    ("x.webm", _noise, "cannot decode 'x.webm' as WEBM"),
    ("x.bin", _noise, "cannot decode 'x.bin'"),
    ("x.flac", _truncated_flac, "cannot decode 'x.flac' as FLAC"),
    ("x.mp4", lambda: av_bytes(tone(rate=48000))[:-600], "x.mp4"),
    ("x.mp4", lambda: _faststart_mp4()[:5000], "cannot decode 'x.mp4' as MP4"),
    ("x.mp4", lambda: _mp4_cut_after_packet(20), r"as MP4: truncated, 21 of \d+ packets"),
    ("x.flac", lambda: sf_bytes(tone(), format="WAV"), "member 'x.flac' holds WAV data, not FLAC"),
    ("x.wav", lambda: sf_bytes(tone(), format="MP3"), "member 'x.wav' holds MP3 data, not WAV"),
    ("x.mp4", lambda: sf_bytes(tone(rate=48000), 48000, "OGG", "OPUS"),
     "member 'x.mp4' holds ogg data, not MP4"),
    ("x.mp4", _video_only_mp4, "no audio track in 'x.mp4'"),
    ("x.mkv", _unknown_codec_mkv, "unsupported audio codec in 'x.mkv'"),
    ("x.wav", _empty_wav, "no audio samples in 'x.wav'"),
]


@pytest.mark.parametrize("name, make, message", BAD, ids=[f"{b[0]}:{b[2]}" for b in BAD])
def test_bad_input_raises_media_error_with_the_reason(name, make, message):
    data = make()
    with pytest.raises(MediaError, match=message):
        decode_audio(data, AudioOptions(), name=name)
    with pytest.raises(MediaError, match=message):
        list(stream_audio(data, AudioOptions(), name=name, block_seconds=0.1))


@pytest.mark.parametrize("name, make", [
    ("x.flac", lambda: sf_bytes(tone())), ("x.mp4", lambda: av_bytes(tone(rate=48000)))])
def test_missing_channel(name, make):
    with pytest.raises(MediaError, match=f"channel 3 requested but '{name}' has 2 channels"):
        decode_audio(make(), AudioOptions(channel=3), name=name)


@pytest.mark.parametrize("name, make", [
    ("x.flac", lambda: sf_bytes(tone(seconds=0.5))),
    ("x.mp3", lambda: sf_bytes(tone(seconds=0.5), format="MP3")),
    ("x.mp4", lambda: av_bytes(tone(seconds=0.5, rate=48000))),
    ("x.webm", lambda: av_bytes(tone(seconds=0.5, rate=48000), container="webm", codec="libopus")),
])
def test_damaged_bytes_only_ever_raise_media_error(name, make):
    # Cut and byte-flipped variants of a valid file: each decodes or raises
    # MediaError, never another exception type.
    data = make()
    rng = np.random.default_rng(0)
    variants = [data[:cut] for cut in rng.integers(1, len(data), 12)]
    for _ in range(12):
        damaged = np.frombuffer(data, np.uint8).copy()
        damaged[rng.integers(0, len(data), 8)] = rng.integers(0, 256, 8)
        variants.append(damaged.tobytes())
    for variant in variants:
        try:
            decode_audio(variant, AudioOptions(), name=name)
        except MediaError:
            pass


@pytest.mark.parametrize("kwargs", [
    {"sample_rate": 0}, {"sample_rate": 16000.0}, {"channel": "left"}, {"channel": -1},
    {"dtype": "int32"}])
def test_invalid_options(kwargs):
    with pytest.raises(ValueError):
        AudioOptions(**kwargs)
