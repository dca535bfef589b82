"""Beam counters, all in one namespace (`datagen`), so tests and dashboards find them."""

from apache_beam.metrics import Metrics

__all__ = ["NAMESPACE", "counter"]

NAMESPACE = "datagen"


def counter(name: str):
    """The `datagen` counter called `name` (create it in a DoFn's setup())."""
    return Metrics.counter(NAMESPACE, name)
