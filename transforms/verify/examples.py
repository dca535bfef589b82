"""One record's media decoded, for the seeded sample of records a verification
decodes (the record against its spec is transforms/format/example_check.py's).

`media_problems` decodes what a record's media should be, for the seeded
sample of records a verification decodes: JPEG frames (Pillow) to their
declared height, width and channels; audio of a cut to the length its
start and end times span at its declared sample rate; and encoded images
and audio kept whole in a `bytes` feature, as the writer checked them before
it wrote them (transforms/media/encoded.py).
"""

from __future__ import annotations

import numpy as np

from transforms.format.example_check import stored_values
from transforms.format.spec import FeatureSpec
from transforms.media.encoded import check_encoded, check_image

__all__ = ["media_problems"]

def media_problems(example, spec: FeatureSpec) -> tuple:
    """(media values decoded, what failed) for a parsed `example` that passed
    `example_problems`."""
    decoded, problems = 0, []
    times = {name: stored_values(example, name, "float") for name in ("start_time", "end_time")
             if name in spec.names}
    for f in spec:
        if f.kind != "bytes" and not f.sample_rate:
            continue
        values = stored_values(example, f.name, f.kind)
        try:
            if f.dtype == "jpeg":
                for image in values:
                    check_image(image, f.shape[-3:])
                    decoded += 1
            elif f.sample_rate:
                decoded += _check_audio_span(f, values, times)
            elif f.dtype == "bytes":
                decoded += sum(check_encoded(v) for v in values)
        except ValueError as e:
            problems.append(f"feature {f.name!r}: {e}")
    return decoded, problems


def _check_audio_span(f, values, times: dict) -> int:
    """A cut's audio (its stored `values`) against its start and end times: 1
    if checked, 0 if the example has no times to check it against."""
    if len(times) < 2 or not times["end_time"] or times["end_time"][0] <= times["start_time"][0]:
        return 0
    start, end = times["start_time"][0], times["end_time"][0]
    # A segment's audio is as long as the segment (float32[*]): count what is stored.
    samples = f.shape[0] if f.shape[0] is not None else len(values)
    spanned = (end - start) * f.sample_rate
    # The times are float32: allow a sample, and their rounding at this magnitude.
    slack = 1 + 2 * f.sample_rate * float(np.spacing(np.float32(max(abs(start), abs(end)))))
    if abs(spanned - samples) > slack:
        raise ValueError(f"{samples} samples, but {start:.4f}-{end:.4f} s at the declared "
                         f"{f.sample_rate} Hz spans {spanned:.1f}")
    return 1
