"""Connected components of a graph too large for one worker, in Beam.

`ConnectedComponents` labels every node of an edge list with its component's
smallest node. Labels spread by rounds of two joins, both keyed by node:

1. each node takes the smallest label among its own and its neighbours';
2. each node takes its label's label (pointer jumping: a label reaches
   2^(k + 1) - 2 hops after k rounds, where spreading alone reaches k).

Each round is a fixed part of the pipeline (Beam's graph is built before it
runs), so the rounds are _ROUNDS; the edges whose ends still disagree after
them (none on any graph whose components are within 14 hops of their
smallest node: the near-duplicate graph is stars of band buckets, a few hops
across) are merged by union-find on one worker, and counted
(`components_left_to_one_worker`), so the result is exact whatever the graph.
Only (node, label) records are shuffled.
"""

from __future__ import annotations

from typing import Iterable

import apache_beam as beam

__all__ = ["ConnectedComponents", "union_find"]

# Each round is four shuffles: on the local runner, eight rounds cost a
# near-duplicate job of 64 samples 1-3 s more than three.
_ROUNDS = 3


def union_find(edges: Iterable[tuple]) -> dict:
    """{node: its component's smallest node} of every node of `edges`."""
    parent: dict = {}

    def root(node):
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {node: root(node) for node in parent}


def _smallest_around(node, joined) -> Iterable[tuple]:
    """(node, label) offers: its own label to itself and its neighbours."""
    for label in joined["label"]:
        yield node, label
        for neighbour in joined["edge"]:
            yield neighbour, label


def _jumped(label, joined) -> Iterable[tuple]:
    """(node, its label's label) of every node labelled `label`."""
    own = min(joined["own"], default=label)
    for node in joined["labelled"]:
        yield node, min(own, label)


def _settle(_, joined):
    """Every node's final label: its round's, or, for the few on edges still
    unsettled, their union-find's."""
    unsettled = list(joined["unsettled"])
    if unsettled:
        beam.metrics.Metrics.counter("datagen", "components_left_to_one_worker").inc(
            len(unsettled))
    return union_find(unsettled)


class ConnectedComponents(beam.PTransform):
    """(a, b) edges (nodes comparable, hashable) -> (node, component label)
    of every node, the label its component's smallest node."""

    def expand(self, edges):
        both = edges | "BothWays" >> beam.FlatMap(lambda e: (e, (e[1], e[0])))
        labels = (both
                  | "Nodes" >> beam.Map(lambda e: (e[0], e[0]))
                  | "FirstLabels" >> beam.CombinePerKey(min))
        for round_ in range(_ROUNDS):
            labels = (
                {"label": labels, "edge": both}
                | f"Around{round_}" >> beam.CoGroupByKey()
                | f"Offers{round_}" >> beam.FlatMapTuple(_smallest_around)
                | f"Smallest{round_}" >> beam.CombinePerKey(min))
            labels = (
                {"own": labels,
                 "labelled": labels | f"ByLabel{round_}" >> beam.Map(lambda nl: (nl[1], nl[0]))}
                | f"Jump{round_}" >> beam.CoGroupByKey()
                | f"Jumped{round_}" >> beam.FlatMapTuple(_jumped)
                | f"Settled{round_}" >> beam.CombinePerKey(min))
        # Edges whose ends still disagree, relabelled by their ends' labels.
        ends = (
            {"label": labels, "edge": both}
            | "Ends" >> beam.CoGroupByKey()
            | "EdgeLabels" >> beam.FlatMapTuple(lambda node, joined: (
                ((min(node, other), max(node, other)), label)
                for label in joined["label"] for other in joined["edge"])))
        unsettled = (
            ends
            | "ByEdge" >> beam.GroupByKey()
            | "Disagree" >> beam.FlatMapTuple(lambda _, labels_: (
                [(min(labels_), max(labels_))] if len(set(labels_)) > 1 else []))
            | "OneKey" >> beam.Map(lambda edge: (None, edge)))
        merged = (
            {"unsettled": unsettled,
             "nothing": labels.pipeline | "OneRecord" >> beam.Create([(None, None)])}
            | "Together" >> beam.CoGroupByKey()
            | "UnionFind" >> beam.MapTuple(_settle))

        def final(node_label, merged_labels):
            node, label = node_label
            return node, merged_labels.get(label, label)

        return labels | "Final" >> beam.Map(final, beam.pvalue.AsSingleton(merged))
