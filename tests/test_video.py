"""transforms.media.video, frames and image_sequence on real codecs: H.264/mp4,
VP9/webm, mkv, raw H.264, images.

Fixtures are generated here, mostly with PyAV (`_encode`: numpy RGB frames ->
libx264 / libvpx-vp9 through av.open(..., "w")); `ffmpeg_clip` makes files
with the Debian ffmpeg CLI (lavfi `color`/`testsrc` sources), a second encoder
independent of PyAV's bundled FFmpeg. The colour fixtures show colour k of
COLOURS during second k, so a sampled frame's centre pixel says which second
it came from.
"""

import io
import os
import shutil
import subprocess
import tracemalloc

import av
import numpy as np
import pytest
from PIL import Image

from transforms.media.decoded import MediaError
from transforms.media.frames import FrameOptions
from transforms.media.image_sequence import image_sequence_members, iter_image_sequence
from transforms.media.video import iter_frames, probe_video

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0)]
# A solid colour survives YUV 4:2:0 and JPEG within a few levels; 12 leaves room.
TOLERANCE = 12


def _solid(colour, height=120, width=160):
    image = np.empty((height, width, 3), np.uint8)
    image[:] = colour
    return image


def _colour_frames(seconds=4, rate=25, height=120, width=160):
    """Second k is COLOURS[k % 4]."""
    return [_solid(COLOURS[(i // rate) % len(COLOURS)], height, width)
            for i in range(seconds * rate)]


def _gradient_frames(count, height=120, width=160):
    """Every frame different: a diagonal ramp moving 3 levels a frame, plus a bar."""
    y, x = np.mgrid[0:height, 0:width]
    frames = []
    for i in range(count):
        image = np.stack([(x + y + 3 * i) % 256, (2 * x + i) % 256, (y * 2 + 5 * i) % 256], -1)
        image[:, (i * 2) % width] = 255
        frames.append(image.astype(np.uint8))
    return frames


def _encode(frames, *, fmt="mp4", codec="libx264", rate=25, options=None, path=None):
    """Encode RGB frames with PyAV; `path` for muxers that rewrite the file
    (mp4 +faststart), else in memory. Returns the file's bytes."""
    height, width = frames[0].shape[:2]
    target = path or io.BytesIO()
    mux_options = {"movflags": "+faststart"} if path and fmt == "mp4" else {}
    with av.open(target, "w", format=fmt, options=mux_options) as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = options or {}
        for i, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    if path:
        with open(path, "rb") as f:
            return f.read()
    return target.getvalue()


def _centre(frame):
    image = frame.image if frame.image is not None else _jpeg_pixels(frame.jpeg)
    return image[image.shape[0] // 2, image.shape[1] // 2]


def _jpeg_pixels(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _assert_colour(pixel, colour):
    assert np.abs(pixel.astype(int) - colour).max() <= TOLERANCE, (pixel, colour)


@pytest.fixture(scope="module")
def mp4():
    """H.264 in mp4, 4 s at 25 fps, 160x120, moov at the end (PyAV into memory)."""
    return _encode(_colour_frames())


@pytest.fixture(scope="module")
def colour_videos(mp4):
    vp9_fast = {"deadline": "realtime", "cpu-used": "8"}
    return {
        "mp4": mp4,
        "webm": _encode(_colour_frames(), fmt="webm", codec="libvpx-vp9", options=vp9_fast),
        "mkv": _encode(_colour_frames(), fmt="matroska"),
    }


@pytest.fixture(scope="module")
def gradient_mp4():
    """8 s at 25 fps, every frame different, a keyframe every second (so seeks skip)."""
    return _encode(_gradient_frames(200), options={"g": "25", "keyint_min": "25"})


def _ffmpeg():
    path = shutil.which("ffmpeg")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("the ffmpeg CLI is required in CI (apt-get install ffmpeg)")
        pytest.skip("the ffmpeg CLI is not installed")
    return path


@pytest.fixture(scope="module")
def ffmpeg_clip(tmp_path_factory):
    """Runs the ffmpeg CLI with the given arguments; returns the output file's bytes."""
    directory = tmp_path_factory.mktemp("ffmpeg")

    def make(name, *args):
        out = directory / name
        subprocess.run([_ffmpeg(), "-v", "error", "-y", *args, str(out)], check=True)
        return out.read_bytes()
    return make


# --- sampling ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["mp4", "webm", "mkv"])
def test_fps_sampling_gives_one_frame_per_second_with_its_colour(colour_videos, kind):
    frames = list(iter_frames(colour_videos[kind], FrameOptions(fps=1.0)))
    assert [f.time for f in frames] == pytest.approx([0, 1, 2, 3], abs=1e-6)
    for k, frame in enumerate(frames):
        assert frame.jpeg is not None and frame.image is None
        assert (frame.height, frame.width) == (120, 160)
        assert _jpeg_pixels(frame.jpeg).shape == (120, 160, 3)
        _assert_colour(_centre(frame), COLOURS[k])


def test_num_frames_are_uniform_over_the_duration(mp4):
    frames = list(iter_frames(mp4, FrameOptions(num_frames=3, image_format="raw")))
    # Targets 0, 4/3, 8/3 s; the nearest 25 fps frame is within half a frame.
    assert [f.time for f in frames] == pytest.approx([0, 4 / 3, 8 / 3], abs=0.02 + 1e-6)
    for frame, k in zip(frames, [0, 1, 2]):
        _assert_colour(_centre(frame), COLOURS[k])


def test_explicit_timestamps_give_the_nearest_frames_in_time_order(mp4):
    options = FrameOptions(timestamps=(3.49, 0.2, 2.71, 1.0), image_format="raw")
    frames = list(iter_frames(mp4, options))
    assert [f.time for f in frames] == pytest.approx([0.2, 1.0, 2.72, 3.48], abs=1e-6)
    for frame, k in zip(frames, [0, 1, 2, 3]):
        _assert_colour(_centre(frame), COLOURS[k])


def test_targets_denser_than_frames_never_repeat_a_frame(mp4):
    every = list(iter_frames(mp4, FrameOptions(fps=None, image_format="raw")))
    dense = list(iter_frames(mp4, FrameOptions(fps=60, image_format="raw")))
    close = list(iter_frames(mp4, FrameOptions(timestamps=(1.0, 1.001), image_format="raw")))
    assert len(every) == 100
    assert [f.time for f in dense] == [f.time for f in every]
    assert [f.time for f in close] == pytest.approx([1.0])


def test_sampling_stops_at_the_last_frame():
    # 63 frames at 25 fps: the last is shown from 2.48 to 2.52 s. fps=1 gives
    # 0, 1, 2 (3 is past the end); an explicit 2.6 is a MediaError.
    data = _encode(_colour_frames(seconds=3)[:63])
    assert [f.time for f in iter_frames(data, FrameOptions(fps=1.0))] == pytest.approx([0, 1, 2])
    with pytest.raises(MediaError, match="past the end"):
        list(iter_frames(data, FrameOptions(timestamps=(2.6,))))


def test_seeking_to_far_timestamps_gives_the_frames_of_a_full_decode(gradient_mp4):
    every = list(iter_frames(gradient_mp4, FrameOptions(fps=None, image_format="raw")))
    by_time = {round(f.time, 6): f.image for f in every}
    for options in (FrameOptions(timestamps=(0.49, 3.31, 6.71, 7.91), image_format="raw"),
                    FrameOptions(num_frames=4, image_format="raw"),
                    FrameOptions(fps=0.3, image_format="raw")):
        frames = list(iter_frames(gradient_mp4, options))
        assert frames
        for frame in frames:
            np.testing.assert_array_equal(frame.image, by_time[round(frame.time, 6)])
    times = [f.time for f in iter_frames(gradient_mp4, FrameOptions(
        timestamps=(0.49, 3.31, 6.71, 7.91), image_format="raw"))]
    assert times == pytest.approx([0.48, 3.32, 6.72, 7.92], abs=1e-6)


def test_threaded_and_unthreaded_decoding_give_identical_frames(gradient_mp4):
    def decode(threads):
        return list(iter_frames(gradient_mp4, FrameOptions(fps=None, image_format="raw",
                                                           threads=threads)))
    threaded, unthreaded = decode(0), decode(1)
    assert len(threaded) == len(unthreaded) == 200
    for a, b in zip(threaded, unthreaded):
        assert a.time == b.time
        np.testing.assert_array_equal(a.image, b.image)


def test_raw_and_jpeg_outputs_agree(gradient_mp4):
    raw = list(iter_frames(gradient_mp4, FrameOptions(fps=2, image_format="raw")))
    jpeg = list(iter_frames(gradient_mp4, FrameOptions(fps=2, jpeg_quality=95)))
    assert len(raw) == len(jpeg) == 16
    for r, j in zip(raw, jpeg):
        assert r.time == j.time and (r.height, r.width) == (j.height, j.width)
        diff = np.abs(r.image.astype(int) - _jpeg_pixels(j.jpeg))
        assert diff.mean() < 3, diff.mean()


# --- resizing ------------------------------------------------------------------

@pytest.mark.parametrize("size, bar_pixel", [
    ((100, 200), (50, 10)),    # wider than 4:3: the 133x100 image, bars left and right
    ((200, 100), (10, 50)),    # taller: the 100x75 image, bars top and bottom
])
def test_pad_letterboxes_with_black_and_crop_fills(mp4, size, bar_pixel):
    for image_format in ("raw", "jpeg"):
        pad, crop = (next(iter_frames(mp4, FrameOptions(size=size, resize=resize,
                                                        image_format=image_format)))
                     for resize in ("pad", "crop"))
        for frame in (pad, crop):
            assert (frame.height, frame.width) == size
            image = frame.image if image_format == "raw" else _jpeg_pixels(frame.jpeg)
            assert image.shape == (*size, 3) and image.dtype == np.uint8
            _assert_colour(_centre(frame), COLOURS[0])
        pad_image = pad.image if image_format == "raw" else _jpeg_pixels(pad.jpeg)
        crop_image = crop.image if image_format == "raw" else _jpeg_pixels(crop.jpeg)
        _assert_colour(pad_image[bar_pixel], (0, 0, 0))
        _assert_colour(crop_image[bar_pixel], COLOURS[0])
        if image_format == "raw":       # exact bar geometry, no JPEG ringing
            black = (pad.image == 0).all(-1)
            if size == (100, 200):
                assert black[:, :33].all() and black[:, -34:].all() and not black[:, 34:166].any()
            else:
                assert black[:62].all() and black[-63:].all() and not black[63:137].any()
            assert not (crop.image == 0).all(-1).any()


def test_raw_images_are_c_contiguous_rgb():
    # 100 px rows are 300 bytes, which FFmpeg pads for alignment.
    data = _encode([_solid(COLOURS[1], 50, 100)] * 3)
    for size in (None, (30, 50)):
        for resize in ("pad", "crop"):
            options = FrameOptions(size=size, resize=resize, image_format="raw")
            frame = next(iter_frames(data, options))
            assert frame.image.flags.c_contiguous and frame.image.dtype == np.uint8
            assert frame.image.shape == ((50, 100, 3) if size is None else (30, 50, 3))
            _assert_colour(_centre(frame), COLOURS[1])


def test_crop_keeps_the_centre_of_the_source():
    # Left half red, right half blue; a square centre crop straddles both.
    image = np.zeros((120, 160, 3), np.uint8)
    image[:, :80] = COLOURS[0]
    image[:, 80:] = COLOURS[2]
    data = _encode([image] * 5)
    frame = next(iter_frames(data, FrameOptions(size=(60, 60), resize="crop", image_format="raw")))
    _assert_colour(frame.image[30, 5], COLOURS[0])
    _assert_colour(frame.image[30, 54], COLOURS[2])


# --- other inputs ----------------------------------------------------------------

def test_raw_h264_without_timestamps_or_duration():
    data = _encode(_colour_frames(seconds=2), fmt="h264")
    assert probe_video(data)["duration"] is None
    frames = list(iter_frames(data, FrameOptions(fps=1.0, image_format="raw")))
    assert [f.time for f in frames] == pytest.approx([0, 1])
    _assert_colour(_centre(frames[1]), COLOURS[1])
    # num_frames with no declared duration measures it with a demux pass.
    assert len(list(iter_frames(data, FrameOptions(num_frames=4)))) == 4


def test_probe_reads_the_headers(colour_videos):
    assert probe_video(colour_videos["mp4"]) == {
        "duration": 4.0, "fps": 25.0, "width": 160, "height": 120,
        "has_audio": False, "codec": "h264"}
    webm = probe_video(colour_videos["webm"])
    assert webm["codec"] == "vp9" and webm["duration"] == pytest.approx(4.0)


def test_ffmpeg_cli_colour_concatenation_with_audio(ffmpeg_clip):
    data = ffmpeg_clip(
        "colours.mp4",
        "-f", "lavfi", "-i", "color=c=red:s=320x240:r=30:d=1",
        "-f", "lavfi", "-i", "color=c=0x00FF00:s=320x240:r=30:d=1",
        "-f", "lavfi", "-i", "color=c=blue:s=320x240:r=30:d=1",
        "-f", "lavfi", "-i", "sine=d=3",
        "-filter_complex", "[0][1][2]concat=n=3:v=1[v]", "-map", "[v]", "-map", "3",
        "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac")
    info = probe_video(data)
    assert (info["codec"], info["fps"], info["width"], info["height"], info["has_audio"]) == (
        "h264", 30.0, 320, 240, True)
    assert info["duration"] == pytest.approx(3.0, abs=0.05)
    frames = list(iter_frames(data, FrameOptions(fps=1.0, size=(112, 112), resize="crop")))
    assert [f.time for f in frames] == pytest.approx([0, 1, 2], abs=1e-6)
    for frame, colour in zip(frames, COLOURS[:3]):
        _assert_colour(_centre(frame), colour)


def test_ffmpeg_cli_testsrc_webm(ffmpeg_clip):
    data = ffmpeg_clip("testsrc.webm", "-f", "lavfi", "-i",
                       "testsrc=duration=3:size=320x240:rate=30",
                       "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8")
    assert probe_video(data)["codec"] == "vp9"
    frames = list(iter_frames(data, FrameOptions(num_frames=3, image_format="raw")))
    assert [f.time for f in frames] == pytest.approx([0, 1, 2], abs=1e-6)
    assert all(f.image.shape == (240, 320, 3) for f in frames)
    # testsrc moves: sampled frames differ.
    assert not np.array_equal(frames[0].image, frames[1].image)


def test_ffmpeg_cli_codec_without_decoder_is_a_media_error(ffmpeg_clip):
    # a64_multi (Commodore 64 charsets) exists in FFmpeg only as an encoder.
    data = ffmpeg_clip("a64.mkv", "-f", "lavfi", "-i", "testsrc=d=1:s=320x200:r=5",
                       "-c:v", "a64_multi", "-f", "matroska")
    with pytest.raises(MediaError, match="no decoder"):
        list(iter_frames(data, FrameOptions(), name="c64"))


def test_ffmpeg_cli_mp3_cover_art_is_not_video(ffmpeg_clip):
    # The cover is a one-picture video stream marked as an attached picture.
    data = ffmpeg_clip("song.mp3", "-f", "lavfi", "-i", "sine=d=1",
                       "-f", "lavfi", "-i", "color=c=red:s=64x64:d=1", "-frames:v", "1",
                       "-map", "0", "-map", "1", "-c:a", "libmp3lame", "-c:v", "mjpeg",
                       "-disposition:v", "attached_pic")
    assert len(av.open(io.BytesIO(data)).streams.video) == 1
    with pytest.raises(MediaError, match="no video stream"):
        probe_video(data)


@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_a_rotated_phone_video_comes_out_upright_as_ffmpeg_shows_it(ffmpeg_clip, tmp_path,
                                                                    rotate):
    """A portrait phone video: landscape pixels and a display matrix (the mp4
    `rotate` tag), which FFmpeg's CLI applies when it decodes."""
    landscape = tmp_path / "landscape.mp4"
    landscape.write_bytes(ffmpeg_clip("landscape.mp4", "-f", "lavfi", "-i",
                                      "testsrc=d=1:s=160x96:r=5", "-pix_fmt", "yuv420p",
                                      "-c:v", "libx264"))
    data = ffmpeg_clip(f"r{rotate}.mp4", "-i", str(landscape), "-c", "copy",
                       "-metadata:s:v:0", f"rotate={rotate}")
    (tmp_path / "rotated.mp4").write_bytes(data)
    shown = np.asarray(Image.open(io.BytesIO(ffmpeg_clip(
        f"r{rotate}.png", "-i", str(tmp_path / "rotated.mp4"), "-frames:v", "1"))))
    assert shown.shape == ((96, 160, 3) if rotate == 180 else (160, 96, 3))
    frame = next(iter_frames(data, FrameOptions(fps=1.0, image_format="raw")))
    np.testing.assert_array_equal(frame.image, shown)
    small = next(iter_frames(data, FrameOptions(fps=1.0, size=(40, 40), resize="pad",
                                                image_format="raw")))
    bars = small.image[:, :4] if rotate != 180 else small.image[:4]   # pillarbox or letterbox
    assert small.image.shape == (40, 40, 3) and bars.max() == 0


# --- image sequences ---------------------------------------------------------------

def _png(colour):
    buf = io.BytesIO()
    Image.fromarray(_solid(colour, 60, 80)).save(buf, "PNG")
    return buf.getvalue()


def _jpg(colour):
    buf = io.BytesIO()
    Image.fromarray(_solid(colour, 60, 80)).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def test_a_sideways_camera_photo_is_turned_upright_by_its_exif_orientation(ffmpeg_clip):
    """FFmpeg's JPEG, with an EXIF segment spliced in after its start marker
    saying: turn 90 degrees clockwise to show (orientation 6, a portrait photo)."""
    plain = ffmpeg_clip("frame.jpg", "-f", "lavfi", "-i", "testsrc=d=1:s=80x48:r=1",
                        "-frames:v", "1")
    exif = Image.Exif()
    exif[0x0112] = 6
    segment = exif.tobytes()
    rotated = plain[:2] + b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment + plain[2:]
    stored = np.asarray(Image.open(io.BytesIO(plain)).convert("RGB"))
    frame, = iter_image_sequence([("0001.jpg", rotated)], FrameOptions(fps=None,
                                                                       image_format="raw"), fps=1)
    np.testing.assert_array_equal(frame.image, np.rot90(stored, -1))


def test_image_sequence_members_sorted_by_number():
    sample = {"__key__": "clip", "__url__": "a.tar", "json": b"{}", "thumb.jpg": _jpg(COLOURS[0]),
              "0010.png": _png(COLOURS[3]), "0001.jpg": _jpg(COLOURS[0]),
              "0003.png": _png(COLOURS[2]), "0002.JPG": _jpg(COLOURS[1])}
    members = image_sequence_members(sample)
    assert [name for name, _ in members] == ["0001.jpg", "0002.JPG", "0003.png", "0010.png"]

    every = list(iter_image_sequence(members, FrameOptions(fps=None, image_format="raw"), fps=2))
    assert [f.time for f in every] == pytest.approx([0, 0.5, 1.0, 1.5])
    for frame, colour in zip(every, COLOURS):
        assert (frame.height, frame.width) == (60, 80)
        _assert_colour(_centre(frame), colour)

    one_fps = list(iter_image_sequence(members, FrameOptions(fps=1.0), fps=2))
    assert [f.time for f in one_fps] == pytest.approx([0, 1.0])
    _assert_colour(_centre(one_fps[1]), COLOURS[2])

    # 1.25 lies halfway between frames 2 and 3 (exact in binary): ties go to
    # the earlier frame, the one on screen at that instant.
    picked = list(iter_image_sequence(
        members, FrameOptions(timestamps=(1.6, 0.4, 1.25), size=(30, 30), resize="crop"), fps=2))
    assert [f.time for f in picked] == pytest.approx([0.5, 1.0, 1.5])
    assert [(f.height, f.width) for f in picked] == [(30, 30)] * 3
    _assert_colour(_centre(picked[2]), COLOURS[3])

    with pytest.raises(MediaError, match="past the end"):
        list(iter_image_sequence(members, FrameOptions(timestamps=(2.0,)), fps=2))


@pytest.mark.parametrize("fields", [
    ["frames.0002.png", "frames.0001.png", "frames.10.jpeg"],
    ["frames/0002.png", "frames/0001.png", "frames/10.jpeg"],
    ["frame_2.png", "frame_1.png", "frame_10.jpeg"],
])
def test_image_sequence_prefixes(fields):
    sample = {name: _png((i, i, i)) for i, name in enumerate(fields)}
    sample["mp4"] = b"not an image field"
    assert [name for name, _ in image_sequence_members(sample)] == [fields[1], fields[0], fields[2]]


def test_image_sequence_rules():
    assert image_sequence_members({"__key__": "k", "jpg": b"x", "cam2.jpg": b"x"}) == []
    with pytest.raises(MediaError, match="more than one image sequence"):
        image_sequence_members({"__key__": "k", "a.1.jpg": b"x", "b.2.jpg": b"x"})
    with pytest.raises(MediaError, match="same frame number"):
        image_sequence_members({"__key__": "k", "1.jpg": b"x", "001.png": b"x"})
    members = [("0001.jpg", _jpg(COLOURS[0])), ("0002.jpg", b"not a jpeg")]
    with pytest.raises(MediaError, match="'0002.jpg'"):
        list(iter_image_sequence(members, FrameOptions(fps=None), fps=1))
    with pytest.raises(MediaError, match="empty"):
        list(iter_image_sequence([], FrameOptions(), fps=1))


# --- bad input ---------------------------------------------------------------------

def _audio_only():
    """1 s of AAC in mp4, made with PyAV."""
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=16000)
        t = np.arange(16000) / 16000
        frame = av.AudioFrame.from_ndarray(
            (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None], format="fltp",
            layout="mono")
        frame.sample_rate, frame.pts = 16000, 0
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return buf.getvalue()


@pytest.mark.parametrize("make, reason", [
    (lambda mp4: b"", "empty input"),
    (lambda mp4: np.random.default_rng(0).bytes(1 << 16), "not a readable video"),
    (lambda mp4: mp4[: len(mp4) // 2], "not a readable video"),    # moov atom cut off
    (lambda mp4: _audio_only(), "no video stream"),
])
def test_bad_input_is_a_media_error_naming_the_input(mp4, make, reason):
    with pytest.raises(MediaError, match=f"^clip-7: {reason}"):
        list(iter_frames(make(mp4), FrameOptions(), name="clip-7"))


def test_timestamp_past_the_end_is_a_media_error(mp4):
    with pytest.raises(MediaError, match="timestamp 5 s is past the end"):
        list(iter_frames(mp4, FrameOptions(timestamps=(1.0, 5.0))))


def test_truncated_faststart_mp4_raises_after_the_frames_before_the_cut(tmp_path):
    # +faststart puts the index first, so the cut loses media data, not the index.
    data = _encode(_gradient_frames(100), path=str(tmp_path / "a.mp4"))
    frames = []
    with pytest.raises(MediaError, match=r"frames decoded") as error:
        for frame in iter_frames(data[: len(data) // 2], FrameOptions(fps=None)):
            frames.append(frame)
    assert 10 < len(frames) < 100
    assert f"{len(frames)} yielded" in str(error.value)


@pytest.mark.parametrize("fmt", ["matroska", "webm"])
def test_truncated_matroska_is_caught_by_its_declared_duration(fmt):
    codec = "libx264" if fmt == "matroska" else "libvpx-vp9"
    options = {"deadline": "realtime", "cpu-used": "8"} if fmt == "webm" else {}
    data = _encode(_gradient_frames(100), fmt=fmt, codec=codec, options=options)
    with pytest.raises(MediaError,
                       match=r"truncated: the video stream ends at .* declares 4\.000 s"):
        list(iter_frames(data[: len(data) // 2], FrameOptions(fps=1.0)))


def test_invalid_options_are_value_errors():
    for bad in (dict(fps=0), dict(num_frames=-1), dict(timestamps=(-1,)), dict(size=(0, 10)),
                dict(resize="stretch"), dict(image_format="png"), dict(jpeg_quality=0),
                dict(threads=-1)):
        with pytest.raises(ValueError):
            FrameOptions(**bad)
    assert FrameOptions(timestamps=[1, 2], size=[4, 5]) == FrameOptions(timestamps=(1.0, 2.0),
                                                                         size=(4, 5))


# --- memory --------------------------------------------------------------------------

def _peak_rss_reset() -> bool:
    """Resets the kernel's peak-RSS mark for this process (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_kib(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field))


def test_long_video_is_streamed_in_flat_memory():
    # 60 s at 10 fps, 320x240: decoded frames are 115 KB each, so holding all
    # 600 would cost ~70 MB. tracemalloc sees Python objects and numpy's own
    # allocations but not FFmpeg's buffers (decoded frames, and the arrays PyAV
    # views into them), hence also the peak-RSS check where Linux allows it.
    solids = [_solid(colour, 240, 320) for colour in COLOURS]
    data = _encode([solids[(i // 100) % 4] for i in range(600)], rate=10,
                   options={"preset": "ultrafast"})
    # Warm up FFmpeg and the scaler on a short clip, not on `data`: a decode of
    # the long video would leave its peak in the allocator's free lists.
    list(iter_frames(_encode(solids, rate=10), FrameOptions(fps=1.0, image_format="raw")))
    rss_reset = _peak_rss_reset()
    rss_before = _rss_kib("VmRSS:") if rss_reset else 0
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_frames(data, FrameOptions(fps=1.0, image_format="raw")))
        _, python_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 60
    assert python_peak < 4 << 20, python_peak               # a few 230 KB RGB frames
    if rss_reset:
        assert _rss_kib("VmHWM:") - rss_before < 24 << 10   # KiB
