"""The Sample: a plain dict of field name to value (the WebDataset convention).

Beam-free. `__key__` is the sample's stable id and `__url__` where it came from;
every other entry is a data field (`flac`, `cls`, `json`, or `family:qualifier`
for Bigtable). Sources produce Samples; nothing downstream knows the source.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = ["KEY", "URL", "data_fields", "FieldReader"]

KEY = "__key__"
URL = "__url__"


def data_fields(sample: Mapping[str, Any]) -> list:
    """The sample's data field names (everything but `__key__`, `__url__`, ...)."""
    return [k for k in sample if not k.startswith("__")]


class FieldReader:
    """Reads fields and JSON projections (`json.speaker`) from one sample.

    A projection `field.path.to.value` parses `field` as JSON once per sample.
    A name that is itself a field (`data.flac`-style extensions) wins over a
    projection.
    """

    def __init__(self, sample: Mapping[str, Any]):
        self._sample = sample
        self._parsed: dict = {}

    def get(self, source: str) -> Any:
        """The value at `source`; raises KeyError naming what is missing."""
        if source in self._sample:
            return self._sample[source]
        for field, path in self._projections(source):
            obj = self._json(field)
            for i, part in enumerate(path):
                if not isinstance(obj, dict) or part not in obj:
                    raise KeyError(
                        f"{source!r}: JSON field {field!r} has no "
                        f"{'.'.join(path[:i + 1])!r}")
                obj = obj[part]
            return obj
        raise KeyError(f"{source!r}: no such field (fields: {', '.join(data_fields(self._sample))})")

    def _projections(self, source: str):
        parts = source.split(".")
        for i in range(len(parts) - 1, 0, -1):
            field = ".".join(parts[:i])
            if field in self._sample:
                yield field, parts[i:]
                return

    def _json(self, field: str):
        if field not in self._parsed:
            raw = self._sample[field]
            try:
                self._parsed[field] = json.loads(raw)
            except (ValueError, TypeError) as e:
                raise ValueError(f"field {field!r} is not valid JSON: {e}") from None
        return self._parsed[field]
