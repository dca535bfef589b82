"""Cloud Bigtable: the table's rows read in key ranges, and tables written.

- `table`: which table; `admin`: the launcher's check that it and its families exist;
- `read_config`: what to read and how a row becomes a Sample; `rows`: ReadRows with retries;
- `key_ranges` (Bigtable-free): ranges and their restriction tracker; `source`: the read;
- `sink`: Samples and examples written as rows.
"""

from transforms.sources.bigtable.sink import STAGE, WriteExamplesToBigtable, WriteSamplesToBigtable
from transforms.sources.bigtable.table import BigtableTable

# What a job of Bigtable's takes from here; the reader, ReadBigtableSamples, is
# one of the project's public names (transforms/__init__.py).
__all__ = ["STAGE", "BigtableTable", "WriteExamplesToBigtable", "WriteSamplesToBigtable"]
