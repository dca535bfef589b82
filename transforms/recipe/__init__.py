"""The per-sample recipe, Beam-free: what one sample becomes.

`sample_ops` (where, select, rename, the user's functions), `splits` (the
split plan and the stable hash every split and order key comes from) and
`examples` (a sample run through the recipe into encoded tf.Examples, and its
outcome). The Beam layers (sources, the writer in `transforms/writer/`,
tf.Transform) import these; these import no Beam.
"""
