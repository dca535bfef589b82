"""beam-datagen's PTransforms, DoFns and the pure functions they wrap.

Modules that the training side imports (`spec`, `manifest`, `reader`,
`example_encoder`, `sample`) do not import apache_beam.
"""
