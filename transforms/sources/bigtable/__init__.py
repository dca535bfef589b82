"""Cloud Bigtable: the table's rows read in key ranges, and tables written.

- `table`: which table; `admin`: the launcher's check that it and its families exist;
- `read_config`: what to read and how a row becomes a Sample; `rows`: ReadRows with retries;
- `key_ranges` (Bigtable-free): ranges and their restriction tracker; `source`: the read;
- `sink`: Samples and examples written as rows.
"""

from transforms.format.exports import exports_on_first_use

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
__getattr__, __dir__ = exports_on_first_use(__name__, _EXPORTS)
