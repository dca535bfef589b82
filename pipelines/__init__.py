"""beam-datagen's jobs: one module per pipeline, each runnable as `python -m pipelines.X`."""
