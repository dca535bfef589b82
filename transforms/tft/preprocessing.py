"""What the optional tf.Transform stage computes: a user's preprocessing_fn, or built-ins.

Beam-free and TensorFlow-free to import (flags are checked before any heavy
import); the preprocessing_fn it returns imports tensorflow_transform when
tf.Transform traces it. The stage that runs it is `transforms.tft.stage`.

Built-ins, from flags, each on one raw feature, replacing it under its own name
(every other raw feature passes through unchanged):

    --normalize 'gain=zscore,age=0_1'   float32 (x - mean) / std, or (x - min) / (max - min)
    --vocabulary 'speaker,lang'         int64 index in the train vocabulary, -1 if unseen
    --bucketize 'age=4'                 int64 quantile bucket 0..3

A `--preprocessing_fn module:function` is a standard tf.Transform
preprocessing_fn instead: it gets the raw features as their tf.Example kinds
(int64, float32, string; variable-length ones as SparseTensors) and its outputs
are exactly the transformed features. Statistics always come from the train
split only (`ANALYZED_SPLIT`).

Where the transform is applied: by default the shards hold the raw examples
and the fitted transform is published beside them (transform_fn/), which
`dg.load` applies as it reads, as a Keras model's input layer does (TFX's
transform at training time): converting costs one pass, and no shard is read
and written again. `--materialize_transform` (`materialize=True`) writes the
transformed examples into the shards instead, for readers that cannot apply
a transform.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from transforms.format.arguments import ArgumentError
from transforms.format.spec import FeatureSpec
from transforms.format.text import comma_list
from transforms.recipe import sample_ops

__all__ = ["Preprocessing", "ANALYZED_SPLIT", "NORMALIZE_METHODS", "TRANSFORM_FN_DIR",
           "TRANSFORMED_METADATA_DIR", "RAW_METADATA_DIR", "TRANSFORM_DIRS"]

ANALYZED_SPLIT = "train"
NORMALIZE_METHODS = ("zscore", "0_1")
# tf.Transform's standard layout next to the data (tft.TFTransformOutput opens it).
TRANSFORM_FN_DIR = "transform_fn"
TRANSFORMED_METADATA_DIR = "transformed_metadata"
RAW_METADATA_DIR = "metadata"
TRANSFORM_DIRS = (TRANSFORM_FN_DIR, TRANSFORMED_METADATA_DIR, RAW_METADATA_DIR)

_NUMERIC = ("int32", "int64", "float", "double")
_VOCABULARY = ("bytes", "string", "int32", "int64")
# The parameter naming a user's preprocessing_fn (--preprocessing_fn).
_FN = "preprocessing.fn"


def _names(text: str) -> tuple:
    return comma_list(text)


def _bucket_count(feature: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 2:
        raise ArgumentError("preprocessing.bucketize",
                            f"{feature}={text}: the bucket count must be an integer >= 2")
    return n


@dataclasses.dataclass(frozen=True)
class Preprocessing:
    """The preprocessing asked for: a user's function (`fn`, 'module:function', a
    tf.Transform preprocessing_fn), or built-ins (never both), fitted on the
    train split and applied to every split (DatasetConfig.preprocessing, over
    a Source).

    >>> import transforms as dg
    >>> pre = dg.Preprocessing(normalize=(("gain", "zscore"),), vocabulary=("speaker",))
    >>> pre.builtins
    (('normalize', 'gain', 'zscore'), ('vocabulary', 'speaker', 'vocabulary'))
    >>> pre.check(dg.FeatureSpec.parse("gain:float,speaker:string"), ["train", "test"])
    """

    fn: str | None = None       # module:function
    normalize: tuple = ()       # ((feature, method), ...)
    vocabulary: tuple = ()      # (feature, ...)
    bucketize: tuple = ()       # ((feature, buckets), ...)
    materialize: bool = False   # the shards hold the transformed examples, not the raw

    @classmethod
    def from_flags(cls, preprocessing_fn: str = "", normalize: str = "", vocabulary: str = "",
                   bucketize: str = "", materialize: bool = False) -> "Preprocessing | None":
        """The flags' preprocessing, or None when none is asked for."""
        pre = cls(fn=preprocessing_fn.strip() or None,
                  normalize=sample_ops.parse_pairs(normalize, "preprocessing.normalize"),
                  vocabulary=_names(vocabulary),
                  bucketize=tuple((name, _bucket_count(name, n))
                                  for name, n in sample_ops.parse_pairs(
                                      bucketize, "preprocessing.bucketize")),
                  materialize=materialize)
        if pre.fn or pre.builtins:
            return pre
        if materialize:
            raise ArgumentError("preprocessing.materialize",
                                "writes a transform's outputs: give {preprocessing.fn}, "
                                "{preprocessing.normalize}, {preprocessing.vocabulary} or "
                                "{preprocessing.bucketize} too")
        return None

    @property
    def builtins(self) -> tuple:
        """((kind, feature, method), ...) for every built-in, in flag order."""
        return (tuple(("normalize", name, method) for name, method in self.normalize)
                + tuple(("vocabulary", name, "vocabulary") for name in self.vocabulary)
                + tuple(("bucketize", name, n) for name, n in self.bucketize))

    def check(self, spec: FeatureSpec, split_names: list) -> None:
        """ArgumentError naming the parameter (preprocessing.normalize, say) for
        anything that cannot run on this spec and splits.

        Imports the user's preprocessing_fn, so an unimportable one fails here.
        """
        if self.fn and self.builtins:
            raise ArgumentError(_FN, "cannot be combined with {preprocessing.normalize}, "
                                     "{preprocessing.vocabulary} or {preprocessing.bucketize} "
                                     "(put those in your function)")
        if ANALYZED_SPLIT not in split_names:
            raise ArgumentError("splits", f"has only {', '.join(split_names)}, and tf.Transform "
                                          f"analyzes the {ANALYZED_SPLIT!r} split")
        if self.fn:
            sample_ops.load_function(self.fn, _FN)
            return
        by_name = {f.name: f for f in spec}
        seen = set()
        for kind, name, method in self.builtins:
            parameter = f"preprocessing.{kind}"
            feature = by_name.get(name)
            if feature is None:
                raise ArgumentError(parameter, f"{name!r}: no such feature; the spec has "
                                               f"{', '.join(spec.names)}")
            if name in seen:
                raise ArgumentError(parameter, f"{name!r}: the feature already has a built-in "
                                               "transform")
            seen.add(name)
            if kind == "normalize" and method not in NORMALIZE_METHODS:
                raise ArgumentError(parameter, f"{name}={method}: the method must be "
                                               f"{' or '.join(NORMALIZE_METHODS)}")
            allowed = _VOCABULARY if kind == "vocabulary" else _NUMERIC
            if feature.dtype not in allowed:
                raise ArgumentError(parameter, f"{name!r}: a {feature.dtype} feature; "
                                               f"{{{parameter}}} takes {', '.join(allowed)}")

    def passed_through(self, raw_spec: FeatureSpec) -> frozenset:
        """The raw features the preprocessing outputs unchanged: with built-ins all but
        their targets; a user's function is opaque, so none."""
        if self.fn:
            return frozenset()
        return frozenset(raw_spec.names) - {name for _, name, _ in self.builtins}

    def preprocessing_fn(self) -> Callable:
        """The tf.Transform preprocessing_fn: the user's, or one made of the built-ins."""
        if self.fn:
            return sample_ops.load_function(self.fn, _FN)
        return _BuiltinPreprocessing(self.builtins)

    def manifest_section(self, raw_spec: FeatureSpec, transformed_spec: FeatureSpec,
                         applied: str) -> dict:
        """The manifest's `transform` section: what ran, on which split, where its
        output is, where it is `applied` (manifest.AT_READ: the shards hold the
        raw features; IN_SHARDS: its outputs), the raw features it takes, the
        features it gives and those it passes through unchanged."""
        flags = ({"preprocessing_fn": self.fn} if self.fn else
                 {"normalize": dict(self.normalize), "vocabulary": list(self.vocabulary),
                  "bucketize": dict(self.bucketize)})
        return {"analyzed_split": ANALYZED_SPLIT, **flags,
                "applied": applied,
                "transform_fn": TRANSFORM_FN_DIR,
                "transformed_metadata": TRANSFORMED_METADATA_DIR,
                "raw_metadata": RAW_METADATA_DIR,
                "raw_features": raw_spec.to_json(),
                "transformed_features": transformed_spec.to_json(),
                "passed_through": sorted(self.passed_through(raw_spec))}


class _BuiltinPreprocessing:
    """A preprocessing_fn: each named feature replaced by its transform, the rest kept."""

    def __init__(self, builtins: tuple):
        self._builtins = builtins

    def __call__(self, inputs: dict) -> dict:
        import tensorflow as tf
        import tensorflow_transform as tft

        outputs = dict(inputs)
        for _, name, method in self._builtins:
            x = inputs[name]
            if method == "zscore":
                outputs[name] = tft.scale_to_z_score(tf.cast(x, tf.float32))
            elif method == "0_1":
                outputs[name] = tft.scale_to_0_1(tf.cast(x, tf.float32))
            elif method == "vocabulary":
                # The vocabulary file is transform_fn/assets/<feature name>.
                outputs[name] = tft.compute_and_apply_vocabulary(x, vocab_filename=name)
            else:
                outputs[name] = tft.bucketize(x, method)
        return outputs
