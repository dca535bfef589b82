"""Which work units are done: receipts while a run writes, the ledger once it is published.

A work unit the default writer has converted leaves a receipt, a `UnitReceipt`,
in the run's temporary folder as soon as its shards are closed:
`<output>/.temp-datagen-<run>/units/<unit>-<attempt>.json`, holding all the final step
needs from it (its tallies, groups, shards and dead letters). The run's
`run.json` beside it records the recipe's fingerprint. The published dataset
keeps every unit's receipt, with the shards' final names, in `units.jsonl`
(the ledger), which the manifest lists.

That is what lets a rerun into the same output do only what is left:

- `--resume` reuses the receipts of an unfinished (killed, failed) run with
  the same recipe, continuing in its folder, and those in the ledger of a
  published dataset with the same recipe; it converts only the units
  without one.
- `--retry_failed` does the same, but converts again every unit whose receipt
  holds a dead letter: the inputs that failed, and what shares their unit.

A receipt is reused only for the planned unit of the same index, inputs
*and* input versions (transforms/sources/file_match.py: a file changed since
it was read is converted again), and a key range only when its receipts tile
it, so the dataset is the one a clean run makes: byte for byte, names and
all. The fingerprint (`recipe_fingerprint`) is over the recorded
flags that shape examples and shards, the source, the feature spec and the
augmentation's corpora (their recordings and file versions); the launcher
refuses a rerun whose fingerprint differs, naming the flags or the corpus that
changed (pipelines/resume.py, which also picks the run's folder).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import uuid
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from transforms.format import manifest
from transforms.media.near_duplicates import NEAR_LANDMARKS
from transforms.recipe.accounting import Kind, parse_tallies
from transforms.recipe.units import WorkUnit
from transforms.runner.counters import counter
from transforms.runner.launcher_steps import OnSmallRecords
from transforms.writer.shard_files import ShardRecord

__all__ = ["CHANGED", "LEDGER", "LEDGER_PART_UNITS", "NEW", "RETRIED", "REUSE", "REUSED", "Reuse",
           "RunFolder", "SkipCommitted", "UnitReceipt", "deciding", "deciding_recipe",
           "ledger_part", "ledger_text", "parse_receipt", "receipt_line", "recipe_fingerprint",
           "reusable", "write_receipt"]

LEDGER = "units.jsonl"
_RECEIPTS = "units"
_RUN_FILE = "run.json"
# Recorded flags that decide whether to publish, not what is written.
_POLICY_FLAGS = ("max_failure_fraction", "allow_empty_splits")


def deciding(options: Mapping[str, Any]) -> dict:
    """Of writing settings (the recipe's `writing`, or a job's recorded flags),
    those that decide a unit's shards and receipt: all but the publishing
    policy. Duplicates warn and fail differ in policy only; off leaves the
    receipts without fingerprints, and drop writes less. With warn or fail, the
    near duplicates' similarity only sorts what the receipts hold: whether they
    hold near fingerprints is what counts, and by which landmarks (signatures
    of two schemes cannot be compared)."""
    deciding = {k: v for k, v in options.items() if k not in _POLICY_FLAGS}
    if deciding.get("near_duplicates"):
        deciding["near_landmarks"] = NEAR_LANDMARKS
    if deciding.get("duplicates") in ("warn", "fail"):
        deciding["duplicates"] = "fingerprinted"
        if deciding.get("near_duplicates"):
            deciding["near_duplicates"] = "fingerprinted"
    return deciding


# Source details that describe the input found, not the recipe (units check inputs).
_SOURCE_FACTS = ("num_files", "input_bytes")
# SkipCommitted's output of reused receipts.
REUSED = "reused"
_LOG = logging.getLogger(__name__)


class UnitReceipt(NamedTuple):
    """What one unit (or, split by the runner, one part of it) came to."""

    unit: int
    span: tuple | None   # the key range read, for splittable units
    inputs: tuple        # the unit's inputs, as planned
    tallies: tuple       # (Tally, n) pairs (transforms/recipe/accounting.py)
    shards: tuple        # ShardRecords of the shards it wrote
    failures: tuple      # its dead letters
    versions: tuple = ()  # (path, version) of the files it read (WorkUnit.versions)
    # (name, records) of what each observer learned of its samples
    # (transforms/recipe/observers.py), for the dataset's checks to join
    observed: tuple = ()
    # (name, accumulator as JSON) of each of the recipe's measures
    # (transforms/recipe/measures/), fed its examples
    measures: tuple = ()

    @property
    def failed(self) -> int:
        return sum(n for tally, n in self.tallies if tally.kind == Kind.FAILED)


def _to_json(value: Any) -> Any:
    """Tuples, bytes and ints as JSON: bytes as {"b64": ...}, tuples as lists."""
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def _from_json(value: Any) -> Any:
    """_to_json's inverse, lists coming back as tuples (dead letters stay dicts)."""
    if isinstance(value, list):
        return tuple(_from_json(v) for v in value)
    if isinstance(value, dict):
        if set(value) == {"b64"}:
            return base64.b64decode(value["b64"])
        return {k: _from_json(v) for k, v in value.items()}
    return value


def receipt_line(receipt: UnitReceipt) -> str:
    """The receipt as one line of JSON. Inputs JSON cannot hold (a test's
    in-memory samples) are written as their repr: such a receipt never
    matches a planned unit again, so it is never reused."""
    return json.dumps(_to_json({**receipt._asdict(), "shards": [tuple(s) for s in receipt.shards]}),
                      sort_keys=True, default=repr)


def parse_receipt(line: str) -> UnitReceipt:
    """receipt_line's inverse; ValueError for a receipt an earlier version
    wrote (its measures were tallies, or it has no observations for the
    dataset's checks: its unit is converted again)."""
    fields = _from_json(json.loads(line))
    if "observed" not in fields:
        raise ValueError("a receipt written before observers fed the dataset's checks")
    fields["shards"] = tuple(ShardRecord(*s) for s in fields["shards"])
    fields["tallies"] = parse_tallies(fields["tallies"])
    return UnitReceipt(**fields)


def write_receipt(temp_dir: str, receipt: UnitReceipt) -> None:
    """Writes `receipt` into the run's folder, once the unit's shards are closed.
    Each attempt at a unit writes its own file: a retried bundle leaves two
    receipts of equal worth, and `reusable` takes one."""
    path = FileSystems.join(temp_dir, _RECEIPTS, f"{receipt.unit:06d}-{uuid.uuid4().hex[:12]}.json")
    with FileSystems.create(path) as f:
        f.write(receipt_line(receipt).encode("utf-8"))


# Units per part of the published ledger: a part's receipts are put in order and
# written by one worker, and the final step joins the parts a part at a time,
# so no step holds more than a part's receipts (each has its groups: 100 units
# of 4,000 ten-second clips keyed by clip are 400k pairs, ~100 MB).
LEDGER_PART_UNITS = 100


def ledger_part(receipt: UnitReceipt) -> int:
    """The part of the ledger the receipt's line is in; parts follow unit order."""
    return receipt.unit // LEDGER_PART_UNITS


def ledger_text(receipts: Iterable[UnitReceipt], final_files: Mapping[str, str]) -> str:
    """The published ledger: a line per receipt, in unit order, its shards'
    `temp` replaced by their path in the dataset (`final_files`: temp -> path)."""
    lines = []
    for receipt in sorted(receipts, key=lambda r: (r.unit, r.span or ())):
        shards = tuple(s._replace(temp=final_files[s.temp]) for s in receipt.shards)
        lines.append(receipt_line(receipt._replace(shards=shards)) + "\n")
    return "".join(lines)


def _ledger_receipts(text: str, output: str) -> Iterator[UnitReceipt]:
    """A ledger's receipts, their shards at their full path under `output`
    (none of an earlier version's ledger: its units are converted again)."""
    for line in text.splitlines():
        try:
            receipt = parse_receipt(line)
        except ValueError:
            return
        yield receipt._replace(shards=tuple(
            s._replace(temp=FileSystems.join(output, s.temp)) for s in receipt.shards))


def deciding_recipe(recipe: Mapping[str, Any]) -> dict:
    """A recipe description (DatasetConfig.describe) without its publishing policy."""
    return {**recipe, "writing": deciding(recipe.get("writing", {}))}


def recipe_fingerprint(recipe: Mapping[str, Any], source: Mapping[str, Any],
                       features: Any) -> str:
    """sha256 (16 hex digits) of what decides a unit's shards: the recipe as it
    describes itself (DatasetConfig.describe: the cut, the augmentation's
    corpora by their versions, the splits, ..., but the publishing policy),
    the source but the input's size, and the feature spec (`features`, its
    JSON): the same from the command line and from Python."""
    deciding = {
        "recipe": deciding_recipe(recipe),
        "source": {k: v for k, v in source.items() if k not in _SOURCE_FACTS},
        "features": features,
    }
    return hashlib.sha256(json.dumps(deciding, sort_keys=True).encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class RunFolder:
    """Where a run writes until it publishes, and the earlier work it may reuse.

    `reuse` are receipt files or patterns (a run folder's `units/*.json`, a
    published ledger) read when the job starts; `retry_failed` converts again
    the units whose receipts hold dead letters.
    """

    temp_dir: str
    reuse: tuple = ()
    retry_failed: bool = False

    @classmethod
    def fresh(cls, output: str) -> "RunFolder":
        return cls(FileSystems.join(output, f"{manifest.TEMP_PREFIX}{uuid.uuid4().hex}"))

    @staticmethod
    def receipts_in(temp_dir: str) -> str:
        """The pattern of the receipts a run wrote in its folder `temp_dir`."""
        return FileSystems.join(temp_dir, _RECEIPTS, "*.json")

    @staticmethod
    def marker_in(temp_dir: str) -> str:
        """The file that marks a run's folder with its recipe (pipelines/resume.py)."""
        return FileSystems.join(temp_dir, _RUN_FILE)


def _tiling(receipts: Sequence[UnitReceipt], span: tuple | None) -> tuple | None:
    """Receipts that cover `span` exactly once (one receipt for a unit read whole,
    None for a unit read whole), or None when they do not."""
    if span is None:
        whole = [r for r in receipts if r.span is None]
        return (whole[0],) if whole else None
    by_start: dict = {}
    for receipt in sorted(receipts, key=lambda r: r.span or ()):
        if receipt.span is not None:
            by_start.setdefault(receipt.span[0], receipt)
    parts, edge = [], span[0]
    while edge != span[1] and edge in by_start:
        parts.append(by_start[edge])
        edge = by_start[edge].span[1]
    return tuple(parts) if parts and edge == span[1] else None


# Why SkipCommitted converts a unit, or that it reuses it: the counters' names.
REUSE, NEW, CHANGED, RETRIED = "units_reused", "units_new", "units_changed", "units_retried"


class Reuse(NamedTuple):
    """What to do with a planned unit: the receipts that stand for it (None:
    convert it), why (REUSE, NEW, CHANGED, RETRIED), and for CHANGED the
    files that changed as (path, version read, version now)."""

    receipts: tuple | None
    reason: str
    changed: tuple = ()


def reusable(unit: WorkUnit, span: tuple | None, candidates: Sequence[tuple[int, UnitReceipt]],
             retry_failed: bool) -> Reuse:
    """Whether a planned unit's earlier receipts stand for it (its key range
    `span`, None for a unit read whole).

    `candidates` are (origin, receipt) pairs of its index, the lowest origin
    first (an unfinished run before the published ledger): the receipts of one
    origin are taken together or not at all, and only those of the unit's
    inputs as they are now (`WorkUnit.versions`). With `retry_failed`, a unit
    whose receipts hold a dead letter is converted again.
    """
    stale = []
    for origin in sorted({o for o, _ in candidates}):
        mine = [r for o, r in candidates if o == origin and r.inputs == unit.inputs]
        parts = _tiling([r for r in mine if r.versions == unit.versions], span)
        if parts is None:
            stale += [r for r in mine if r.versions != unit.versions]
            continue
        if retry_failed and any(r.failed for r in parts):
            return Reuse(None, RETRIED)
        return Reuse(parts, REUSE)
    if not stale:
        return Reuse(None, NEW)
    now = dict(unit.versions)
    return Reuse(None, CHANGED, tuple((path, read, now.get(path)) for path, read
                                      in stale[0].versions if now.get(path) != read))


def _read_receipts(origin: int, pattern: str) -> Iterator[tuple]:
    """(origin, receipt) pairs from a ledger or a run folder's receipt files; a
    receipt file a killed run left half-written is not one."""
    for metadata in FileSystems.match([pattern])[0].metadata_list:
        with FileSystems.open(metadata.path) as f:
            text = f.read().decode("utf-8")
        if metadata.path.endswith(LEDGER):
            output = metadata.path[:-len(LEDGER)].rstrip("/")
            yield from ((origin, r) for r in _ledger_receipts(text, output))
            continue
        try:
            yield origin, parse_receipt(text)
        except (ValueError, TypeError, KeyError):
            continue


@beam.typehints.with_output_types(Any)
class _SkipCommittedFn(beam.DoFn):
    def __init__(self, retry_failed: bool, splittable: bool):
        self._retry_failed = retry_failed
        self._splittable = splittable

    def setup(self):
        self._counters = {reason: counter(reason) for reason in (REUSE, NEW, CHANGED, RETRIED)}

    def process(self, unit, receipts):
        reuse = reusable(unit, self._span(unit), receipts.get(unit.index, ()),
                         self._retry_failed)
        self._counters[reuse.reason].inc()
        for path, read, now in reuse.changed:
            _LOG.warning("unit %d is converted again: %s changed since it was read (%s, now %s)",
                         unit.index, path, read, now or "missing")
        if reuse.receipts is None:
            yield unit
            return
        for receipt in reuse.receipts:
            yield beam.pvalue.TaggedOutput(REUSED, receipt)

    def _span(self, unit):
        # A splittable unit's inputs are its key range (transforms/recipe/units.py).
        return tuple(unit.inputs) if self._splittable else None


class SkipCommitted(OnSmallRecords, beam.PTransform):
    """Planned units -> the units to convert (main output), and under REUSED
    the receipts of earlier work that stand for the others (`reusable`).

    Reads `run.reuse` when the job starts, on a worker.
    """

    def __init__(self, run: RunFolder, splittable: bool):
        super().__init__()
        self._run = run
        self._splittable = splittable

    def expand(self, units):
        receipts = (
            units.pipeline
            | "ReceiptSources" >> beam.Create(list(enumerate(self._run.reuse)))
            | "ReadReceipts" >> beam.FlatMapTuple(_read_receipts)
            | "ByUnit" >> beam.Map(lambda pair: (pair[1].unit, pair))
            | "GroupByUnit" >> beam.GroupByKey())  # (unit index, [(origin, receipt)])
        return units | "SkipCommitted" >> beam.ParDo(
            _SkipCommittedFn(self._run.retry_failed, self._splittable),
            receipts=beam.pvalue.AsDict(receipts)).with_outputs(REUSED, main="units")
