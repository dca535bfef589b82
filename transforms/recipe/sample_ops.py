"""Sample operations (go-tfdata parity): select, rename, filter, user functions.

Beam-free pure functions; `transforms.recipe.examples` runs them inside one DoFn. Each
returns a new dict and never mutates its input. `__key__`, `__url__` and other
`__`-prefixed entries always pass through selection.

Flag grammars:
- `--select 'cls,prefix:json,suffix:.jpg,contains:audio'` keeps the data fields
  named exactly, or by prefix / suffix / substring;
- `--where 'cls=3,json.lang=en'` keeps only samples whose fields have these values
  (numbers compared as numbers: `cls=3` keeps `3.0`);
- `--rename 'flac=audio,cls=label'` renames fields;
- `--sample_fn pkg.mod:fn` (Sample -> Sample or None) and
  `--example_fn pkg.mod:fn` (example dict -> example dict or None).
"""

from __future__ import annotations

import dataclasses
import decimal
import importlib
from typing import Any, Callable, Mapping

from transforms.format.arguments import ArgumentError
from transforms.format.sample import FieldReader, field_text
from transforms.format.text import comma_list

__all__ = [
    "Selection",
    "parse_selection",
    "select_fields",
    "parse_pairs",
    "rename_fields",
    "matches_where",
    "is_empty",
    "load_function",
]

_SELECTORS = ("key", "prefix", "suffix", "contains")


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which data fields to keep: exact keys, prefixes, suffixes, substrings."""

    key: tuple = ()
    prefix: tuple = ()
    suffix: tuple = ()
    contains: tuple = ()

    def keeps(self, field: str) -> bool:
        return (field.startswith("__") or field in self.key
                or any(field.startswith(p) for p in self.prefix)
                or any(field.endswith(s) for s in self.suffix)
                or any(c in field for c in self.contains))


def parse_selection(text: str) -> Selection:
    """The `select` text -> Selection; a bare term is an exact key."""
    found = {s: [] for s in _SELECTORS}
    for term in comma_list(text):
        how, sep, what = term.partition(":")
        if not sep:
            how, what = "key", term
        if how not in found or not what:
            raise ArgumentError("select", f"term {term!r}: use a field name or "
                                          "prefix:/suffix:/contains: followed by text")
        found[how].append(what)
    return Selection(**{k: tuple(v) for k, v in found.items()})


def select_fields(sample: Mapping[str, Any], selection: Selection) -> dict:
    """A new sample holding only the selected data fields (and every `__*__` entry)."""
    return {k: v for k, v in sample.items() if selection.keeps(k)}


def parse_pairs(text: str, parameter: str) -> tuple:
    """'a=b,c=d' -> (('a', 'b'), ('c', 'd')) for `rename` and `where`;
    ArgumentError naming `parameter`."""
    pairs = []
    for term in comma_list(text):
        left, sep, right = term.partition("=")
        if not sep or not left.strip():
            raise ArgumentError(parameter, f"term {term!r} is not name=value")
        pairs.append((left.strip(), right.strip()))
    return tuple(pairs)


def rename_fields(sample: Mapping[str, Any], renames: tuple) -> dict:
    """A new sample with fields renamed; ValueError if a new name is taken."""
    mapping = dict(renames)
    out = {}
    for k, v in sample.items():
        name = mapping.get(k, k)
        if name in out:
            raise ValueError(f"rename {k!r} -> {name!r}: the sample already has {name!r}")
        out[name] = v
    return out


def matches_where(sample: Mapping[str, Any], where: tuple) -> bool:
    """True when every (field, value) of `where` holds: the field's `field_text`
    is the value, or both are numbers and equal (`cls=3` holds for `3`, `03`
    and `3.0`, as an integer feature reads them)."""
    reader = FieldReader(sample)
    for field, expected in where:
        try:
            value = reader.get(field)
        except KeyError:
            return False
        if value is None or not _same(field_text(value), expected):
            return False
    return True


def _same(text: str, expected: str) -> bool:
    if text == expected:
        return True
    try:
        return decimal.Decimal(text) == decimal.Decimal(expected)
    except decimal.InvalidOperation:
        return False


def is_empty(record: Mapping[str, Any]) -> bool:
    """A sample or example with no data: no data fields, or only empty values."""
    for k, v in record.items():
        if k.startswith("__"):
            continue
        if v is None:
            continue
        try:
            if len(v) == 0:
                continue
        except TypeError:
            pass  # a scalar is data
        return False
    return True


def load_function(path: str, parameter: str) -> Callable:
    """Imports `package.module:function`; ArgumentError naming `parameter` if it cannot."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ArgumentError(parameter, f"{path!r} is not module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ArgumentError(parameter, f"{path!r}: cannot import {module_name!r}: {e}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ArgumentError(parameter, f"{path!r}: {module_name!r} has no function {attr!r}")
    return fn
