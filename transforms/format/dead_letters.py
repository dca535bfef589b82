"""Dead letters: the record of an input that could not become examples.

Beam-free helpers; every stage that can fail yields
`beam.pvalue.TaggedOutput(FAILURES, dead_letter(...))` instead of raising, so the
job goes on and the totals add up: samples read = samples written + samples
failed + samples filtered.

A record is JSON whatever it names: a url, key or member that is not text (a
file or tar member name in no UTF-8, see transforms/format/sample.py) is written
escaped, and the record's `escaped` lists which of them are.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from transforms.format.arguments import said
from transforms.format.sample import escape_name, is_text

__all__ = ["DUPLICATE_KEY", "DatasetFailed", "EXAMPLE", "FAILURES", "FILE", "MAX_MESSAGE",
           "RowError", "SAMPLE", "SEGMENT",
           "StorageReadError", "check_failure_fraction", "dead_letter", "describe",
           "failure_fraction_problem",
           "failure_line", "failures_jsonl", "sorted_failures"]

FAILURES = "failures"
# What a dead letter stands for: a whole sample, a file that yielded no sample,
# one example a sink refused (its sample is counted as written), or one
# segment of a recording (transforms/recipe/segments.py).
SAMPLE = "sample"
FILE = "file"
EXAMPLE = "example"
SEGMENT = "segment"

MAX_MESSAGE = 2000

# The stage of a sample whose key another sample of the input has too.
DUPLICATE_KEY = "duplicate_key"


class RowError(ValueError):
    """A listing row that cannot be read, the key it names (its dead letter's
    key) and the stage it failed at (the reader's own when None)."""

    def __init__(self, key: str, message: str, stage: str | None = None):
        super().__init__(message)
        self.key = key
        if stage:
            self.stage = stage


class StorageReadError(Exception):
    """Reading input bytes failed: the store's fault, not the data's, so never a
    dead letter; it propagates and the runner retries the bundle."""


def dead_letter(stage: str, error: BaseException | str, *, url: str,
                key: str | None = None, member: str | None = None,
                unit: str = SAMPLE, **extra: Any) -> dict:
    """A JSON-ready failure record naming the input and the reason.

    `stage` is where it failed (`read_tar`, `encode`, ...); `unit` says whether
    it stands for one sample or a whole file.
    """
    if isinstance(error, BaseException):
        error_type, message = type(error).__name__, str(error) or repr(error)
    else:
        error_type, message = "Error", error
    record = {
        "unit": unit,
        "stage": stage,
        "url": url,
        "key": key,
        "member": member,
        "error_type": error_type,
        "message": message[:MAX_MESSAGE],
    }
    record.update(extra)
    escaped = [name for name in ("url", "key", "member")
               if isinstance(record[name], str) and not is_text(record[name])]
    for name in escaped:
        record[name] = escape_name(record[name])
    if escaped:
        record["escaped"] = escaped
    if not is_text(record["message"]):  # an error quoting a name
        record["message"] = escape_name(record["message"])
    return record


def describe(record: Mapping[str, Any]) -> str:
    """One line for logs: where and why."""
    where = record["url"]
    if record.get("key"):
        where += f" key={record['key']}"
    if record.get("member"):
        where += f" member={record['member']}"
    return f"{record['stage']}: {where}: {record['error_type']}: {record['message']}"


class DatasetFailed(RuntimeError):
    """The job produced more dead letters than --max_failure_fraction allows, or
    its splits leak a group."""


def sorted_failures(failures: Iterable[Mapping]) -> list:
    """Dead letters in a stable order: the same file however the runner ordered them."""
    return sorted(failures, key=lambda r: json.dumps(r, sort_keys=True))


def failure_line(record: Mapping) -> str:
    """A dead letter as one line of a JSON-lines file: sorted keys, a newline."""
    return json.dumps(record, sort_keys=True) + "\n"


def failures_jsonl(failures: Iterable[Mapping]) -> str:
    """Dead letters as the text of a JSON-lines file, one sorted-key record a line."""
    return "".join(map(failure_line, failures))


def failure_fraction_problem(failed: int, inputs: int, max_fraction: float,
                             first: Mapping | None, kept_in: str,
                             say: Callable[[str], str] = said, advice: str = "") -> str:
    """The line that refuses a dataset more than `max_fraction` of whose
    `inputs` failed ("" when no more did), saying where the dead letters are
    kept, the `first` of them and the caller's `advice`, in the caller's terms
    (`say`: transforms/format/arguments.py)."""
    if not inputs or failed / inputs <= max_fraction:
        return ""
    problem = say(f"{failed} of {inputs} inputs failed ({failed / inputs:.2%} > "
                  f"{{max_failure_fraction}} {max_fraction:.2%})")
    if first is not None:
        problem += f"; dead letters in {kept_in}; first: {describe(first)}"
    return problem + say(advice)


def check_failure_fraction(*args, **kwargs) -> None:
    """Raises DatasetFailed with `failure_fraction_problem`'s line, if any."""
    problem = failure_fraction_problem(*args, **kwargs)
    if problem:
        raise DatasetFailed(problem)
