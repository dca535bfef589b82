"""Beam counters, all in one namespace (`datagen`), so tests and dashboards find them."""

from apache_beam.metrics import Metrics

__all__ = ["NAMESPACE", "Counters", "counter"]

NAMESPACE = "datagen"


class _Uncounted:
    def inc(self, n: int = 1) -> None:
        pass


_UNCOUNTED = _Uncounted()


def counter(name: str, counting: bool = True):
    """The `datagen` counter called `name` (create it in a DoFn's setup()).

    With `counting` false, a counter that counts nothing: a light pass over the
    input (stratification, tf.Transform's analysis) reads every sample again,
    and those reads are not the job's.
    """
    return Metrics.counter(NAMESPACE, name) if counting else _UNCOUNTED


class Counters:
    """A DoFn's `datagen` counters by name, each made when first counted (on
    the worker, after setup), so a step passes `inc` to what counts for it."""

    def __init__(self):
        self._made: dict = {}

    def inc(self, name: str, n: int = 1) -> None:
        if name not in self._made:
            self._made[name] = counter(name)
        self._made[name].inc(n)
