"""Flag types and groups the options classes share.

Types, so that a flex template can set every flag.

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

__all__ = ["SWITCH", "boolean", "flag_group"]

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
