"""How a flag is declared, once: `flag` with its type, help, example and group.

    flag(flag_group(parser, "splits"), "--split_by", default="__key__",
         help="Group key for splits ...", example="json.speaker", recorded=True)

Everything about a flag is said where it is declared, and the rest is made
from that: Beam's parsing and the job's --help (pipelines/cli.py), the flex
templates' metadata.json (pipelines/template_metadata.py), the manifest's
record of the options (pipelines/dataset_options.py). Besides argparse's own
arguments, a declaration may give:

- `example`: a value for --help and the template, when the help has no "e.g.";
- `regex`: what a template's form accepts, for text of a known shape (types,
  switches and choices get theirs from argparse);
- `label`: the template form's label, when the flag's name in words is not one;
- `recorded`: True for a flag the manifest records, "cut" for one it records
  when there is a --cut.

Types, so that a flex template can set every flag:

A flex template launch passes each parameter as `--name=value`. An argparse
`store_true` flag refuses a value (`--filter_empty=true`: "ignored explicit
argument"), so a template could never turn one on. `SWITCH` keeps the bare
flag working on the command line and also takes true/false:

    parser.add_argument("--filter_empty", **SWITCH, help="...")

    --filter_empty            -> True
    --filter_empty=true       -> True   (what a template passes)
    --filter_empty=false      -> False
"""

from __future__ import annotations

import argparse

from transforms.sources.bigtable import table as bigtable_table

__all__ = ["BIGTABLE_ID", "FUNCTION", "GS_PATH", "SWITCH", "boolean", "flag", "flag_group"]

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def boolean(text: str) -> bool:
    """'true'/'false' (also 1/0, yes/no; any case) -> bool."""
    value = text.strip().lower()
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


# A flag that is off by default, on when given bare, and takes an explicit value.
SWITCH = {"type": boolean, "nargs": "?", "const": True, "default": False}


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


def flag(group, name: str, *, example: str | None = None, regex: str | None = None,
         label: str | None = None, recorded: bool | str = False, **argparse_kwargs):
    """Declares one flag in `group` (a parser or `flag_group`); the module docstring
    says what the keywords beside argparse's are. Returns the argparse action."""
    action = group.add_argument(name, **argparse_kwargs)
    action.example, action.regex, action.label, action.recorded = example, regex, label, recorded
    return action
