"""A configuration record as plain, JSON-ready values (Beam-free).

    plain(CutOptions(mode="audio_windows", audio_fields=("flac",)))
    # {"mode": "audio_windows", "audio_fields": ["flac"], "audio": {"sample_rate": 16000, ...}}

What the manifest records of a dataset's recipe is its records described so,
whichever way in made them (the command line, or Python): frozen dataclasses
become dicts of their fields, tuples lists, the rest is kept as it is when
JSON holds it and written as its text otherwise.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["plain"]


def plain(value: Any) -> Any:
    """`value` as JSON-ready values (module docstring)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
