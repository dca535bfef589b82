"""Cloud Bigtable: the table's rows read in key ranges, and tables written.

- `table`: which table; `admin`: the launcher's check that it and its families exist;
- `read_config`: what to read and how a row becomes a Sample; `rows`: ReadRows with retries;
- `key_ranges` (Bigtable-free): ranges and their restriction tracker; `source`: the read;
- `sink`: Samples and examples written as rows.
"""
