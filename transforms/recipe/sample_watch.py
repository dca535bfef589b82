"""What watches one sample while its examples are built: the sample loop's hooks.

Beam-free. The loop (transforms/recipe/examples.py) calls a sample's
`SampleWatch` at fixed hooks, and each of its watchers takes the ones it
needs:

- `examples(seen)`: its examples' values as they are encoded, a few
  consecutive ones at a time, as columns (a content hash of its media, the
  unit's measures);
- `audio(block)`: the audio its cut decodes, block by block, copies not
  included (the near fingerprint's landmarks, heard without a second
  decode);
- `copy(augmentation)`: each augmented copy's plan (the measures' tallies
  of what augmentation did);
- `finished()`: once its examples are built (a measure that hears audio
  takes what it heard of the sample then); the (kind, digest) fingerprints
  the watchers made of it, which its outcome carries to the duplicate check.

A new thing to learn of a sample is a watcher here, not a field of the
records between steps.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from transforms.media.loudness import ActivePower
from transforms.recipe.fingerprints import ContentHash
from transforms.recipe.measures import Seen, SeenExamples

__all__ = ["Hashed", "Known", "Measured", "SampleWatch", "Tapped", "Watcher", "one_tap"]


def one_tap(*taps: Callable | None) -> Callable | None:
    """One tap feeding each of `taps` that is not None (None: none is)."""
    live = [tap for tap in taps if tap is not None]
    if len(live) < 2:
        return live[0] if live else None
    return lambda block: [tap(block) for tap in live]


class Watcher:
    """One thing learned of a sample; each hook does nothing unless overridden."""

    hears_audio = False

    def examples(self, seen: SeenExamples) -> None:
        """Consecutive examples' values, encoded next."""

    def audio(self, block: Any) -> None:
        """A block of the audio the cut decodes (when `hears_audio`)."""

    def copy(self, split: str, augmentation: Any) -> None:
        """An augmented copy's plan, its examples cut next."""

    def removed(self, seen: Any, reason: str) -> None:
        """An example --keep removed (`reason`, its clause), as a Seen."""

    def finished(self) -> tuple:
        """Its examples are built: the (kind, digest) fingerprints learned of it."""
        return ()


class Known(Watcher):
    """Fingerprints known before any example is built (its stored media's)."""

    def __init__(self, fingerprints: tuple):
        self._fingerprints = fingerprints

    def finished(self) -> tuple:
        return self._fingerprints


class Tapped(Watcher):
    """A tap fed the audio the cut decodes (media/near_duplicates.py's NearTap),
    whose `fingerprints()` are learned."""

    hears_audio = True

    def __init__(self, tap):
        self._tap = tap

    def audio(self, block: Any) -> None:
        self._tap(block)

    def finished(self) -> tuple:
        return self._tap.fingerprints()


class Hashed(Watcher):
    """The `content` fingerprint of the media values of a sample's examples
    (transforms/recipe/fingerprints.py's ContentHash)."""

    def __init__(self, names: Iterable[str]):
        self._hash = ContentHash(names)

    def examples(self, seen: SeenExamples) -> None:
        self._hash.update(seen.columns, seen.count)

    def finished(self) -> tuple:
        return self._hash.fingerprints()


class Measured(Watcher):
    """The unit's measures, (Measure, accumulator) pairs (transforms/recipe/
    measures/), of a sample in `split` under `label`: fed each example and
    each augmented copy's plan; those that hear audio, what was heard of the
    sample's (its peak and active power) once its examples are built."""

    def __init__(self, measured: tuple, split: str, label: str | None):
        self._measured = measured
        self._split, self._label = split, label
        self._hearing = tuple((m, a) for m, a in measured if m.hears_audio)
        self.hears_audio = bool(self._hearing)
        self._power = ActivePower() if self._hearing else None

    def examples(self, seen: SeenExamples) -> None:
        for measure, accumulator in self._measured:
            measure.add_examples(accumulator, seen)

    def audio(self, block: Any) -> None:
        self._power(block)

    def copy(self, split: str, augmentation: Any) -> None:
        for measure, accumulator in self._measured:
            measure.add_copy(accumulator, split, augmentation)

    def removed(self, seen: Any, reason: str) -> None:
        for measure, accumulator in self._measured:
            measure.add_removed(accumulator, seen, reason)

    def finished(self) -> tuple:
        heard = self._power.heard() if self._power is not None else None
        if heard is not None and heard.samples:
            for measure, accumulator in self._hearing:
                measure.heard(accumulator, self._split, self._label, heard)
        return ()


class SampleWatch:
    """A sample's watchers, in `split` under `label`, called at the loop's hooks."""

    def __init__(self, split: str, label: str | None, watchers: Iterable[Watcher]):
        self._split, self._label = split, label
        self._watchers = tuple(watchers)
        self._hearing = tuple(w for w in self._watchers if w.hears_audio)

    def examples(self, columns: dict, count: int) -> None:
        """`count` consecutive examples, their values as `columns` (SeenExamples)."""
        if self._watchers:
            seen = SeenExamples(self._split, self._label, columns, count)
            for watcher in self._watchers:
                watcher.examples(seen)

    @property
    def audio_tap(self) -> Callable[[Any], None] | None:
        """What the cut feeds the audio it decodes: None when no watcher hears it."""
        return one_tap(*(watcher.audio for watcher in self._hearing))

    def copy(self, augmentation: Any) -> None:
        for watcher in self._watchers:
            watcher.copy(self._split, augmentation)

    def removed(self, values: dict, reason: str) -> None:
        """An example --keep removed: its values, and the clause that removed it."""
        seen = Seen(self._split, self._label, values)
        for watcher in self._watchers:
            watcher.removed(seen, reason)

    def finished(self) -> tuple:
        """Tells each watcher its examples are built: what they learned."""
        return tuple(found for watcher in self._watchers for found in watcher.finished())
