"""The sample-to-example conversion as Beam steps of their own, for a pipeline
that adds steps between cutting, building and writing: `CutSamples` (example
dicts), `BuildExamples` (encoded examples, written nowhere). WriteDataset runs
the same conversion where it writes."""
