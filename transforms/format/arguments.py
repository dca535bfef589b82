"""Arguments checked before any work, in the caller's terms.

A public constructor refuses a bad argument with an ArgumentError naming its
Python parameter; the command line says the flag that sets the parameter
instead (pipelines/cli.py, through the flag table), so one check serves both:

    ArgumentError("max_failure_fraction", "must be a float in [0, 1], got '0.1'")
    # Python:       max_failure_fraction must be a float in [0, 1], got '0.1'
    # command line: error: --max_failure_fraction must be a float in [0, 1], got '0.1'

A problem may name other parameters as `{name}` (`{frames.size}`): each is
said the same way. A wrong type is an ArgumentTypeError, a TypeError too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable, Sequence

__all__ = ["ArgumentError", "ArgumentTypeError", "check_choice", "check_fraction",
           "check_names", "check_number", "check_path", "said"]


_REFERENCE = re.compile(r"\{([A-Za-z_][\w.]*)\}")


class ArgumentError(ValueError):
    """A bad argument: `parameter` is its name, `problem` what is wrong with it.

    >>> import transforms as dg
    >>> try:
    ...     dg.WriteDataset("out", features="x:int64", max_failure_fraction=2)
    ... except dg.ArgumentError as e:
    ...     print(e.parameter, "|", e)
    max_failure_fraction | max_failure_fraction must be a float in [0, 1], got 2
    """

    def __init__(self, parameter: str, problem: str):
        self.parameter = parameter
        self.problem = problem
        super().__init__(self.said(str))

    def said(self, name_of: Callable[[str], str]) -> str:
        """The message with every parameter called `name_of(parameter)` (a flag)."""
        return f"{name_of(self.parameter)} {said(self.problem, name_of)}"


def said(template: str, name_of: Callable[[str], str] = str) -> str:
    """`template` with each `{parameter}` in it called `name_of(parameter)`: by
    its Python name, or (the command line's) by its flag."""
    return _REFERENCE.sub(lambda m: name_of(m[1]), template)


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong type."""


def check_option_types(options: Any, skip: Sequence[str] = ()) -> None:
    """ArgumentTypeError for a field of the dataclass `options` whose default is
    an options object (`AudioOptions()`, `SpeechOptions()`) and whose value is
    not one of that type: a None or a str there would fail later, far from its
    cause. Fields in `skip` check their own (one that also takes text)."""
    for field in dataclasses.fields(options):
        default = field.default
        if field.name in skip or not dataclasses.is_dataclass(default):
            continue
        value = getattr(options, field.name)
        if not isinstance(value, type(default)):
            name = type(default).__name__
            article = "an" if name[0] in "AEIOU" else "a"
            raise ArgumentTypeError(field.name, f"must be {article} {name}, got {value!r}")


def check_fraction(parameter: str, value: Any) -> float:
    """`value` as a float in [0, 1]; ArgumentError otherwise (text is refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(parameter, f"must be a float in [0, 1], got {value!r}")
    if not 0 <= value <= 1:
        raise ArgumentError(parameter, f"must be a float in [0, 1], got {value!r}")
    return float(value)


def check_number(parameter: str, value: Any, *, integer: bool = False, least: float | None = None,
                 above: float | None = None, optional: bool = False) -> Any:
    """`value` when it is a number (an int with `integer`), at `least` or
    `above` a bound where given, or None with `optional`; text, bools and the
    rest are refused, naming the parameter."""
    if optional and value is None:
        return value
    kinds = (int,) if integer else (int, float)
    what = ("an int" if integer else "a number") + (" or None" if optional else "")
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ArgumentTypeError(parameter, f"must be {what}, got {value!r}")
    if least is not None and not value >= least:
        raise ArgumentError(parameter, f"must be >= {least:g}, got {value!r}")
    if above is not None and not value > above:
        raise ArgumentError(parameter, f"must be above {above:g}, got {value!r}")
    return value


def check_names(parameter: str, value: Any) -> tuple:
    """A tuple or list of field names as a tuple; a str is refused, since it
    would be read as its letters ("flac" as 'f', 'l', 'a', 'c')."""
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not all(
            isinstance(name, str) and name for name in value):
        hint = f"; for one field: ({value!r},)" if isinstance(value, str) else ""
        raise ArgumentTypeError(parameter, f"must be a tuple of field names, got "
                                           f"{value!r}{hint}")
    return tuple(value)


def check_path(parameter: str, value: Any) -> str:
    """A str or os.PathLike path as a str, without a trailing slash."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise ArgumentTypeError(parameter, f"must be a path (str or os.PathLike), got "
                                           f"{value!r}")
    return value.rstrip("/") or "/"


def check_choice(parameter: str, value: Any, choices: Sequence[str]) -> str:
    """`value` when it is one of `choices`; ArgumentError naming them otherwise."""
    if value not in choices:
        raise ArgumentError(parameter, f"{value!r}: expected one of {', '.join(choices)}")
    return value
