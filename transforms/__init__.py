"""beam-datagen's PTransforms, DoFns and the pure functions they wrap, by stage:

- `sources/`: matching input files, reading tar shards, CSV/JSONL listings and Bigtable into Samples;
- `media/` (Beam-free): decoding audio and video, and cutting a Sample into examples;
- `dataset/`: building examples, splitting, writing shards, the final step, `WriteDataset`;
- `tft/`: tf.Transform, fitted on the train split and applied to every example;
- `format/` (Beam-free): what training code imports - sample, spec, encoder, manifest, reader;
- `runner/`: running a job - the local runner, its progress lines, the job's counters;
- `testing/` (Beam-free): synthetic media and the demo corpus, for the demo, tests and benchmarks.
"""
