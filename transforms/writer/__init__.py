"""Building and writing a dataset: examples, splits, shards, the final step, WriteDataset."""
