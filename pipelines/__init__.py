"""beam-datagen's jobs: one module per pipeline, each runnable as `python -m pipelines.X`.

Beam is imported here first, without the optional bridges no job uses
(transforms/runner/beam_import.py): a third of every job's start-up."""

from transforms.runner.beam_import import import_beam_lean

import_beam_lean()
