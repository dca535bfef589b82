"""`--keep`: which examples stay, as clauses on their measures, each removal counted by clause.

Beam-free. The grammar is one conjunction of comparisons of a scalar
numeric feature (a quality measure, `speech_probability`, `duration_s`) with
a number:

    snr_db >= 15 and clipping < 0.001 and bandwidth_hz >= 6000

An example is kept when every clause holds; one that fails is removed and
counted under the first clause it fails (in the manifest's accounting,
`examples_filtered_per_reason`, as `keep: snr_db >= 15`). A clause naming no
such feature of the recipe is refused before any work.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from typing import Any, Mapping

import numpy as np

from transforms.format.arguments import ArgumentError
from transforms.format.manifest import IN_SHARDS

__all__ = ["Clause", "KeepFilter", "KEEP_PREFIX"]

# The accounting's reason for an example a clause removed: this, then the clause.
KEEP_PREFIX = "keep: "
_OPERATORS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
              "==": operator.eq, "!=": operator.ne}
_CLAUSE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(>=|<=|==|!=|>|<)\s*"
                     r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclasses.dataclass(frozen=True)
class Clause:
    """One comparison: `name` `op` `value`."""

    name: str
    op: str
    value: float

    def holds(self, value: Any) -> bool:
        """Whether `value` meets it as written: a float as the float32 its record
        holds, so that verify, reading the record, judges what the writer judged."""
        if not isinstance(value, (int, np.integer)):
            value = float(np.float32(value))
        return bool(_OPERATORS[self.op](value, self.value))

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.value:g}"


@dataclasses.dataclass(frozen=True)
class KeepFilter:
    """The clauses every kept example meets (none: every example is kept).

    >>> from transforms.recipe.keep import KeepFilter
    >>> keep = KeepFilter.parse("snr_db >= 15 and clipping < 0.001")
    >>> [str(clause) for clause in keep.clauses]
    ['snr_db >= 15', 'clipping < 0.001']
    >>> keep.removed_by({"snr_db": 21.0, "clipping": 0.01})
    'clipping < 0.001'
    """

    clauses: tuple = ()

    @classmethod
    def parse(cls, text: str) -> "KeepFilter":
        """The filter `text` says (the module docstring's grammar); '' keeps all."""
        if not text.strip():
            return cls()
        clauses = []
        for part in re.split(r"\s+and\s+", text.strip()):
            match = _CLAUSE.match(part)
            if not match:
                raise ArgumentError("keep", f"{part.strip()!r} is not 'NAME OP NUMBER' (OP one of "
                                    f"{' '.join(_OPERATORS)}), clauses joined by 'and'")
            name, op, value = match.groups()
            clauses.append(Clause(name, op, float(value)))
        return cls(tuple(clauses))

    @classmethod
    def of_manifest(cls, document: Mapping[str, Any]) -> "KeepFilter":
        """The clauses a dataset's records meet, as its manifest records them:
        those its writer applied, but of a tf.Transform materialized in the
        shards (`--materialize_transform`) only those on the features it
        passed through unchanged."""
        kept = cls.parse(" and ".join(document.get("recipe", {}).get("keep", [])))
        transform = document.get("transform") or {}
        if transform.get("applied") != IN_SHARDS:
            return kept
        unchanged = set(transform.get("passed_through", ()))
        return cls(tuple(c for c in kept.clauses if c.name in unchanged))

    def __bool__(self) -> bool:
        return bool(self.clauses)

    @property
    def names(self) -> tuple:
        return tuple(dict.fromkeys(clause.name for clause in self.clauses))

    def check(self, features: tuple) -> None:
        """ArgumentError unless each clause names a scalar number of `features`."""
        numbers = [f.name for f in features if not f.shape and f.dtype in ("float", "int64")]
        for name in self.names:
            if name not in numbers:
                raise ArgumentError("keep", f"names {name!r}, which the examples do not hold as a "
                                    f"number: one of {', '.join(numbers)} (a quality measure "
                                    "is measured when {quality} names it)")

    def bounds(self) -> dict:
        """{feature: (lowest, highest)} every kept value lies within (None: no
        bound that side), from the clauses that bound it: what schema.pbtxt
        declares as the feature's domain."""
        found: dict = {}
        for clause in self.clauses:
            if clause.op == "!=":
                continue
            low, high = found.get(clause.name, (None, None))
            if clause.op in (">=", ">", "=="):
                low = clause.value if low is None else max(low, clause.value)
            if clause.op in ("<=", "<", "=="):
                high = clause.value if high is None else min(high, clause.value)
            found[clause.name] = (low, high)
        return found

    def removed_by(self, values: Mapping[str, Any]) -> str | None:
        """The first clause an example's `values` fail, as text; None: it is kept."""
        for clause in self.clauses:
            if not clause.holds(values[clause.name]):
                return str(clause)
        return None
