"""What WriteDataset can see of the steps before it, in the pipeline's graph.

A PCollection knows the step that produced it, and that step its inputs, so
the writer, given a user's PCollection, walks up to the library's own steps
before it (a reader, CutSamples, BuildExamples: the composites of this
package that return a result with `failures`):

- `unwired_failures`: the dead letters of those steps that the writer was
  not given (neither the PCollection itself nor anything made from it was
  passed as `failures=`): left out, their samples would vanish from the
  accounting, so WriteDataset refuses them at construction unless told to
  drop them;
- `cut_counts`: what each CutSamples upstream says it cut (a sample's key
  and its number of examples), so the writer counts the examples a user's
  step dropped, and the samples it left with none.

Only Beam's public graph is read: `PCollection.producer` and an applied
step's `main_inputs`, `outputs`, `parent`, `transform` and `full_label`.
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

import apache_beam as beam

from transforms.format.dead_letters import FAILURES
from transforms.format.outputs import CUT

__all__ = ["LibraryStep", "cut_counts", "unwired_failures"]

_LIBRARY = "transforms."


class LibraryStep(NamedTuple):
    """A step of this library upstream of the writer, and one of its outputs."""

    label: str       # as the pipeline labels it: 'Cut', 'ReadTarSamples'
    name: str        # its transform's class: 'CutSamples'
    output: beam.PCollection


def _steps_above(pcollections: Iterable[beam.PCollection]) -> Iterator:
    """Every applied step (leaves and their enclosing composites) upstream of
    `pcollections`, each once, nearest first."""
    stack, seen_values, seen_steps = list(pcollections), set(), set()
    while stack:
        value = stack.pop()
        if id(value) in seen_values:
            continue
        seen_values.add(id(value))
        step = getattr(value, "producer", None)
        while step is not None and id(step) not in seen_steps:
            seen_steps.add(id(step))
            yield step
            stack.extend(v for v in step.main_inputs.values()
                         if isinstance(v, beam.PCollection))
            step = step.parent


def _values_above(pcollections: Iterable[beam.PCollection]) -> set:
    """The ids of `pcollections` and of every PCollection they were made from."""
    found = {id(value) for value in pcollections}
    for step in _steps_above(pcollections):
        found.update(id(v) for v in step.main_inputs.values())
    return found


def _library_outputs(data: beam.PCollection, tag: str) -> list:
    """The outputs tagged `tag` of this library's composites upstream of
    `data`, each once, named by the outermost step that gives it, in the
    pipeline's order (the furthest upstream first)."""
    found: dict = {}
    for step in _steps_above([data]):
        transform = step.transform
        output = step.outputs.get(tag)
        if (isinstance(output, beam.PCollection)
                and type(transform).__module__.startswith(_LIBRARY)):
            found[id(output)] = LibraryStep(step.full_label, type(transform).__name__, output)
    return list(found.values())[::-1]


def unwired_failures(data: beam.PCollection, given: Iterable[beam.PCollection]) -> list:
    """The LibrarySteps upstream of `data` whose dead letters are not among
    those `given`, nor any of them made from them."""
    given = list(given)
    wired = _values_above(given)
    return [step for step in _library_outputs(data, FAILURES) if id(step.output) not in wired]


def cut_counts(data: beam.PCollection) -> list:
    """The CutCounts (ExampleResult.cut) of the CutSamples steps
    upstream of `data`."""
    return [step.output for step in _library_outputs(data, CUT)]
