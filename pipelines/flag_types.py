"""How a flag is declared, once: a `Flag` record in its options class's table.

    class DatasetOptions(FlagTable, PipelineOptions):
        FLAGS = (
            Flag("split_by", "splits", default="__key__", example="json.speaker",
                 recorded=True, help="Group key for splits ..."),
            ...
        )

Everything about a flag is said in its record, and the rest is made from the
tables, never from argparse's own state: Beam's parsing (`FlagTable` declares
the table through Beam's hook for an options class), the job's --help and its
"did you mean" (pipelines/cli.py), the flex templates' metadata.json
(pipelines/template_metadata.py), the manifest's record of the options
(pipelines/dataset_job.py). Besides argparse's type, default and choices, a
record may give:

- `example`: a value for --help and the template, when the help has no "e.g.";
- `regex`: what a template's form accepts, for text of a known shape (types,
  switches and choices get theirs from those);
- `label`: the template form's label, when the flag's name in words is not one;
- `recorded`: True for a flag the manifest records, "cut" for one it records
  when there is a --cut;
- `switch`: a flag that is off by default (below);
- `repeated`: a flag that may be given more than once, each value also a
  comma-separated list (a template gives it once): its values are a list.

Types, so that a flex template can set every flag:

A flex template launch passes each parameter as `--name=value`. An argparse
`store_true` flag refuses a value (`--filter_empty=true`: "ignored explicit
argument"), so a template could never turn one on. A switch keeps the bare
flag working on the command line and also takes true/false:

    Flag("filter_empty", "sample operations", switch=True, help="...")

    --filter_empty            -> True
    --filter_empty=true       -> True   (what a template passes)
    --filter_empty=false      -> False
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable

from transforms.sources.bigtable import table as bigtable_table

__all__ = ["BIGTABLE_ID", "FUNCTION", "Flag", "FlagTable", "GS_PATH", "boolean", "flag_group"]

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def boolean(text: str) -> bool:
    """'true'/'false' (also 1/0, yes/no; any case) -> bool."""
    value = text.strip().lower()
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


# A switch: off by default, on when given bare, and takes an explicit value.
_SWITCH = {"type": boolean, "nargs": "?", "const": True, "default": False}


# A parser that sorts flags into titled groups for --help (pipelines/cli.py) has
# this attribute: title -> its argparse group.
GROUPS_ATTRIBUTE = "datagen_groups"


def flag_group(parser, title: str):
    """Where an options class adds the flags of one group (`input`, `splits`, ...):
    the parser's group of that title when it is building --help, else the
    parser itself (Beam's parser, a template's)."""
    groups = getattr(parser, GROUPS_ATTRIBUTE, None)
    if groups is None:
        return parser
    if title not in groups:
        groups[title] = parser.add_argument_group(title)
    return groups[title]


# Shapes of text that several flags take.
GS_PATH = r"^gs://.+$"
FUNCTION = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
BIGTABLE_ID = f"^{bigtable_table.ID}$"


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag: its name (without dashes), its --help group and what the module
    docstring lists."""

    name: str
    group: str
    help: str = ""
    type: Callable | None = None
    default: Any = None
    choices: tuple | None = None
    switch: bool = False
    example: str | None = None
    regex: str | None = None
    label: str | None = None
    recorded: bool | str = False
    repeated: bool = False
    # The Python parameters it sets, where named otherwise (an ArgumentError names them).
    parameters: tuple = ()

    @property
    def option(self) -> str:
        return f"--{self.name}"

    def help_text(self) -> str:
        """The help --help shows: with the default and, where the help gives none,
        an example."""
        text = self.help
        if self.default not in (None, "", False):
            text += f" Default: {self.default}."
        if self.example and "e.g." not in text:
            text += f" Example: {self.example}."
        return text.replace("%", "%%")

    def declare(self, parser) -> None:
        """Adds the flag to `parser` (Beam's, a template's, or a --help parser, in
        its group there: `flag_group`)."""
        kinds = _SWITCH if self.switch else {"type": self.type, "default": self.default,
                                             "choices": self.choices}
        if self.repeated:
            kinds = {**kinds, "action": "append"}
        flag_group(parser, self.group).add_argument(
            self.option, help=self.help_text(),
            **{k: v for k, v in kinds.items() if v is not None})


class FlagTable:
    """Mixin for a PipelineOptions subclass whose flags are its FLAGS table: Beam
    declares them through its hook for an options class, which it looks up in
    each class's own namespace, so every subclass gets one."""

    FLAGS: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._add_argparse_args = classmethod(_declare_table)


def _declare_table(cls, parser) -> None:
    for flag in cls.FLAGS:
        flag.declare(parser)
