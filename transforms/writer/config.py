"""Where and how a dataset is written, decided before any work: `DatasetConfig`.

Pickled to workers, so configuration only. WriteDataset (transforms/writer/
write.py, which gives these names to the rest of the project) takes one, or
makes one of its keywords (`keyword_config`); the input's declared classes
join its recipe (`with_declared_classes`); `check_reuse` says whether earlier
work can be reused under it.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from transforms.checks.duplicates import POLICIES
from transforms.format.arguments import (
    ArgumentError,
    ArgumentTypeError,
    check_choice,
    check_fraction,
    check_number,
    check_path,
    said,
)
from transforms.format.plain import plain
from transforms.format.sample import KEY, SOURCE_KEY
from transforms.format.shard_format import COMPRESSIONS, FILE_FORMATS, ShardFormat, compressions_of
from transforms.format.spec import Feature, FeatureSpec, parse_features
from transforms.media.cutting import CutOptions, with_cut_features
from transforms.recipe.examples import ExampleRecipe
from transforms.recipe.measures import Measure
from transforms.recipe.segments import SegmentOptions
from transforms.recipe.splits import SplitPlan
from transforms.recipe.transcripts import TranscriptOptions
from transforms.recipe.units import SHARD_SIZE_BYTES
from transforms.tft.preprocessing import Preprocessing
from transforms.writer.ledger import recipe_fingerprint

__all__ = ["DatasetConfig", "SHUFFLES", "check_reuse", "keyword_config", "with_declared_classes"]

# --shuffle: where examples are written (module docstring).
SHUFFLES = ("none", "global")


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
    """Where and how to write: pickled to workers, so configuration only.

    `num_shards` (shards per split) is the global layout's; the default layout
    rolls shards at `shard_size_bytes`, which also sizes the work units.
    WriteDataset's keywords make one too (`WriteDataset("out", features=...).config`).

    >>> import transforms as dg
    >>> recipe = dg.ExampleRecipe(spec=dg.FeatureSpec.parse("flac:bytes,label=cls:int64"),
    ...                           split_plan=dg.SplitPlan.from_flags("train=0.9,test=0.1",
    ...                                                              "json.speaker"))
    >>> config = dg.DatasetConfig("out", recipe, compression="gzip", shard_size_bytes=64 << 20)
    >>> config.shuffle, len(config.fingerprint)   # the default layout; the recipe's hash
    ('none', 16)
    >>> dg.DatasetConfig("out", recipe, num_shards=8)
    Traceback (most recent call last):
    transforms.format.arguments.ArgumentError: num_shards needs shuffle 'global': ...
    """

    output: str
    recipe: ExampleRecipe
    file_format: str = "tfrecord"
    compression: str = "none"
    shard_size_bytes: int = SHARD_SIZE_BYTES
    num_shards: int = 0
    max_failure_fraction: float = 0.01
    source: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    write_tfrecords: bool = True
    preprocessing: Preprocessing | None = None
    shuffle: str = "none"
    allow_empty_splits: bool = False
    duplicates: str = "warn"   # transforms/checks/duplicates.py POLICIES
    near_duplicates: float = 0.0  # the similarity of a near group's pairs; 0: none looked for
    # How the caller names the parameters its errors and warnings mention: the
    # command line its flags ({"allow_empty_splits": "--allow_empty_splits"});
    # empty for a Python caller, by their names.
    terms: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def command_line(self) -> bool:
        """Whether a job's command line made this config (its errors name flags)."""
        return bool(self.terms)

    def said(self, template: str) -> str:
        """`template`'s {parameters} in the caller's terms (transforms/format/arguments.py)."""
        return said(template, lambda parameter: self.terms.get(parameter, parameter))

    def describe(self) -> dict:
        """The manifest's `recipe` section: the recipe's own description
        (ExampleRecipe.describe), its tf.Transform preprocessing, and how the
        examples are written and published; the same from the command line and
        from Python, so verify and --resume read one record either way."""
        return {**self.recipe.describe(), "preprocessing": plain(self.preprocessing),
                "writing": {"file_format": self.file_format, "compression": self.compression,
                            "shard_size_bytes": self.shard_size_bytes,
                            "shuffle": self.shuffle, "num_shards": self.num_shards,
                            "write_tfrecords": self.write_tfrecords,
                            "duplicates": self.duplicates,
                            "near_duplicates": self.near_duplicates,
                            "max_failure_fraction": self.max_failure_fraction,
                            "allow_empty_splits": self.allow_empty_splits}}

    @property
    def shard_format(self) -> ShardFormat:
        """What the shard files are (transforms/format/shard_format.py)."""
        return ShardFormat(self.file_format, self.compression)

    @property
    def fingerprint(self) -> str:
        """The recipe's fingerprint, recorded in the manifest (ledger.recipe_fingerprint)."""
        return recipe_fingerprint(self.describe(), self.source, self.recipe.spec.to_json())

    def __post_init__(self):
        object.__setattr__(self, "output", check_path("output", self.output))
        if not isinstance(self.recipe, ExampleRecipe):
            raise ArgumentTypeError("recipe", f"must be an ExampleRecipe, got "
                                              f"{type(self.recipe).__name__}")
        check_choice("file_format", self.file_format, FILE_FORMATS)
        check_choice("compression", self.compression, COMPRESSIONS)
        if self.compression not in compressions_of(self.file_format):
            allowed = " or ".join(map(repr, compressions_of(self.file_format)))
            raise ArgumentError("compression", f"must be {allowed} with {{file_format}} "
                                f"{self.file_format!r}")
        check_choice("shuffle", self.shuffle, SHUFFLES)
        check_choice("duplicates", self.duplicates, POLICIES)
        object.__setattr__(self, "max_failure_fraction",
                           check_fraction("max_failure_fraction", self.max_failure_fraction))
        if (isinstance(self.shard_size_bytes, bool)
                or not isinstance(self.shard_size_bytes, int) or self.shard_size_bytes <= 0):
            raise ArgumentError("shard_size_bytes", f"must be a positive int (bytes), got "
                                                    f"{self.shard_size_bytes!r}")
        if not isinstance(self.num_shards, int) or self.num_shards < 0:
            raise ArgumentError("num_shards", f"must be an int >= 0, got {self.num_shards!r}")
        check_fraction("near_duplicates", self.near_duplicates)
        if self.near_duplicates and self.duplicates == "off":
            raise ArgumentError("near_duplicates", "needs {duplicates} warn, fail or drop: it "
                                "says what to do with them")
        fingerprints = {"content_fingerprints": self.duplicates != "off",
                        "near_fingerprints": bool(self.near_duplicates)}
        if any(getattr(self.recipe, name) != value for name, value in fingerprints.items()):
            # The recipe takes the fingerprints the check needs, and only then.
            object.__setattr__(self, "recipe", dataclasses.replace(self.recipe, **fingerprints))
        if self.num_shards and self.shuffle != "global":
            raise ArgumentError("num_shards", "needs {shuffle} 'global': the default writer "
                                "rolls shards at {shard_size_bytes} where the examples are "
                                "built")


def _feature_spec(features: Any) -> FeatureSpec:
    """`features` as a FeatureSpec: one, the --features grammar, or a list of
    its terms or of Features."""
    if isinstance(features, FeatureSpec):
        return features
    if isinstance(features, str):
        return parse_features(features)
    if isinstance(features, (list, tuple)) and features and all(
            isinstance(f, (str, Feature)) for f in features):
        return FeatureSpec(tuple(f if isinstance(f, Feature) else parse_features(f).features[0]
                                 for f in features))
    raise ArgumentTypeError("features", "must be a FeatureSpec, a spec such as "
                                        "'emb:float32[192],label:int64', or a list of its terms; "
                                        f"got {features!r}")


def _field(parameter: str, value: Any, optional: bool = True) -> str:
    if not isinstance(value, str) or not (value or optional):
        raise ArgumentTypeError(parameter, f"must be a field name (str), got {value!r}")
    return value


def keyword_config(output: str | os.PathLike, features: Any, split_by: str,
                    splits: str | Mapping[str, float], split_column: str, stratify_by: str,
                    label_field: str, cut: CutOptions | None, cut_by: CutOptions | None,
                    segments: SegmentOptions | None, text_field: str, text_case: str,
                    text_punctuation: str, drop_transcript: bool, file_format: str,
                    compression: str,
                    shard_size_bytes: int, max_failure_fraction: float,
                    allow_empty_splits: bool, duplicates: str,
                    measures: Sequence[Measure]) -> DatasetConfig:
    """A DatasetConfig from WriteDataset's dataset keywords (its Args say them
    and their defaults); ArgumentError (a ValueError, or a TypeError for a
    wrong type) naming the parameter."""
    if features is None:
        raise ArgumentTypeError("features", "is required: the feature spec, e.g. "
                                            "'emb:float32[192],label:int64'")
    check_number("shard_size_bytes", shard_size_bytes, integer=True, above=0)
    for name, value, kind in (("cut", cut, CutOptions), ("cut_by", cut_by, CutOptions),
                              ("segments", segments, SegmentOptions)):
        if value is not None and not isinstance(value, kind):
            raise ArgumentTypeError(name, f"must be a {kind.__name__}, got {value!r}")
    if cut is not None and cut_by is not None:
        raise ArgumentError("cut", "and {cut_by} exclude each other: cut samples here, or "
                                   "write examples a cut made")
    spec = _feature_spec(features)
    if cut_by is not None:
        spec = FeatureSpec(with_cut_features(spec.features, cut_by))
        # A cut example's group is its recording's, unless told otherwise.
        split_by = SOURCE_KEY if split_by == KEY else split_by
    recipe_spec = FeatureSpec(with_cut_features(spec.features, cut)) if cut else spec
    plan = SplitPlan.from_flags(splits, _field("split_by", split_by, False),
                                _field("split_column", split_column),
                                _field("stratify_by", stratify_by),
                                _field("label_field", label_field), spec=recipe_spec)
    recipe = ExampleRecipe(spec=spec, split_plan=plan, cut=cut or CutOptions(),
                           segments=segments or SegmentOptions(),
                           transcripts=TranscriptOptions(_field("text_field", text_field),
                                                         text_case, text_punctuation,
                                                         drop_transcript),
                           measures=measures)
    return DatasetConfig(output=output, recipe=recipe, file_format=file_format,
                         compression=compression, shard_size_bytes=shard_size_bytes,
                         max_failure_fraction=max_failure_fraction,
                         allow_empty_splits=allow_empty_splits, duplicates=duplicates)


def with_declared_classes(config: DatasetConfig, class_names) -> DatasetConfig:
    """The config whose recipe holds the classes its input declares
    (UnitReader.class_names): its values are held to them as they are
    written, and the dataset publishes them (schema.pbtxt, TFDS)."""
    declared = tuple(sorted((field, tuple(names)) for field, names in class_names.items()))
    if not declared or config.recipe.class_names == declared:
        return config
    return dataclasses.replace(config, recipe=dataclasses.replace(config.recipe,
                                                                  class_names=declared))


def check_reuse(config: DatasetConfig, parameter: str,
                examples_sink: Any = None) -> None:
    """ArgumentError naming `parameter` (what asks to reuse earlier work: a
    RunFolder's `reuse`, --resume) when the config cannot reuse work units'
    shards: the global layout writes no shard before every example is
    shuffled; the copies to drop and a tf.Transform are found (fitted) over
    every unit's samples as they are converted; an examples sink would miss
    the reused units' examples."""
    deciding = [what for what, asked in (
        ("{shuffle} 'global'", config.shuffle == "global"),
        ("{duplicates} 'drop'", config.duplicates == "drop"),
        ("tf.Transform preprocessing", config.preprocessing is not None)) if asked]
    if deciding:
        raise ArgumentError(parameter, config.said(
            f"reuses the shards of work units: not with {' or '.join(deciding)} (decided "
            "over the whole input)"))
    if examples_sink is not None or not config.write_tfrecords:
        raise ArgumentError(parameter, "reuses TFRecord shards: not with an examples sink (an "
                                       "examples table)")
