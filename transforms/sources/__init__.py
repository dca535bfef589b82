"""Reading the inputs: file matching, tar shards, CSV/JSONL listings, Bigtable, work units."""
