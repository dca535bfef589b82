"""A source whose work units carry their Samples: for tests of what happens after reading.

    source = memory_source(samples, per_unit=4)
    pipeline | WriteDataset(config, source)

Each unit holds `per_unit` consecutive samples (transforms/sources/units.py); the
reader yields them as they are and counts `samples_read` like a real source.
"""

import functools

from transforms.recipe.units import Source, UnitReader, WorkUnit
from transforms.runner.counters import counter

__all__ = ["MemoryReader", "memory_source"]


class MemoryReader(UnitReader):
    def setup(self, counting=True):
        self._samples = counter("samples_read", counting)

    def read(self, unit, tracker=None):
        for sample in unit.inputs:
            self._samples.inc()
            yield sample


def _planned(units):
    return units


def memory_source(samples, per_unit=8) -> Source:
    chunks = [tuple(samples[i:i + per_unit]) for i in range(0, len(samples), per_unit)]
    units = tuple(WorkUnit(i, chunk, len(chunk)) for i, chunk in enumerate(chunks))
    return Source(functools.partial(_planned, units), MemoryReader())
