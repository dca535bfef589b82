"""Cloud Bigtable: the table's rows read in key ranges, and tables written.

- `table`: which table; `admin`: the launcher's check that it and its families exist;
- `read_config`: what to read and how a row becomes a Sample; `rows`: ReadRows with retries;
- `key_ranges` (Bigtable-free): ranges and their restriction tracker; `source`: the read;
- `sink`: Samples and examples written as rows.
"""

from __future__ import annotations

import importlib
from typing import Any

# What a job of Bigtable's takes from here (the reader, ReadBigtableSamples, is
# one of the project's public names: transforms/__init__.py), each imported on
# first use: the client library is heavy, and the flags' module reads table ids
# from table.py in every job.
_EXPORTS = {
    "STAGE": "transforms.sources.bigtable.sink",
    "BigtableTable": "transforms.sources.bigtable.table",
    "WriteExamplesToBigtable": "transforms.sources.bigtable.sink",
    "WriteSamplesToBigtable": "transforms.sources.bigtable.sink",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
