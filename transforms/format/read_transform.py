"""A published tf.Transform applied as a dataset is read (its manifest's
transform.applied is AT_READ: the shards hold the raw features).

    at_read = TransformAtRead(root, info)
    stored = at_read.stored(wanted)                 # read from the shards as they are
    computed = at_read.computed(serialized, wanted) # the transform's outputs, a batch at a time

The features the transform passes through unchanged are read from the shards
as any other (their declared dtype, decoded): what a materialized dataset
holds of them. The others are its outputs: the raw features it computes them
from are parsed with tf.Transform's own raw feature spec and fed to
`transform_features_layer()`, the layer a Keras model serves with, so a
reader gets what the materialized shards would hold. Only the raw features
the transform does not pass through are fed (tf.Transform supplies the rest
and prunes what needs them), so audio a transform leaves alone is parsed once.
"""

from __future__ import annotations

import tensorflow as tf

from transforms.format.manifest import DatasetInfo
from transforms.format.spec import FeatureSpec

__all__ = ["TransformAtRead"]


class TransformAtRead:
    """The transform published with the dataset at `root`, applied to batches
    of its serialized examples (see the module docstring)."""

    def __init__(self, root: str, info: DatasetInfo):
        import tensorflow_transform as tft  # only datasets built with preprocessing need it

        output = tft.TFTransformOutput(root)
        self._layer = output.transform_features_layer()
        self._info = info
        self._passed_through = frozenset(info.transform["passed_through"])
        self._fed = {name: spec for name, spec in output.raw_feature_spec().items()
                     if name not in self._passed_through}

    def computes(self, wanted: list) -> bool:
        """Whether the transform computes any of `wanted` (else none is fed to it)."""
        return any(name not in self._passed_through for name in wanted)

    def stored(self, wanted: list) -> FeatureSpec | None:
        """The features of `wanted` read from the shards as they are (None when
        the transform computes them all)."""
        features = tuple(f for f in self._info.spec
                         if f.name in wanted and f.name in self._passed_through)
        return FeatureSpec(features) if features else None

    def computed(self, serialized: tf.Tensor, wanted: list) -> dict:
        """The transform's outputs among `wanted` for a batch of serialized examples:
        dense as their shape, variable-length as RaggedTensors (what the reader
        gives a variable-length feature)."""
        outputs = self._layer(tf.io.parse_example(serialized, self._fed))
        return {name: (tf.RaggedTensor.from_sparse(value)
                       if isinstance(value, tf.SparseTensor) else value)
                for name, value in outputs.items()
                if name in wanted and name not in self._passed_through}
