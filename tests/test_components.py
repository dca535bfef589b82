"""Connected components in Beam (transforms/checks/components.py), against a
union-find of the same edges: a random graph, a chain longer than the
rounds' reach (settled by the union-find of what is left), and a star."""

import random

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from transforms.checks.components import ConnectedComponents, union_find


def test_union_find_labels_by_the_smallest_node():
    assert union_find([(3, 1), (4, 5), (1, 2), (9, 9)]) == {
        1: 1, 2: 1, 3: 1, 4: 4, 5: 4, 9: 9}


def test_components_match_a_union_find(pipeline):
    rng = random.Random(0)
    graphs = {
        "Random": [(rng.randrange(300), rng.randrange(300)) for _ in range(220)],
        # 100 hops, beyond the rounds' reach (14): the rest is settled by a union-find.
        "Chain": [(i + 1, i) for i in range(100)],
        "Star": [(("k", 0), ("k", i)) for i in range(1, 50)],
    }
    for name, edges in graphs.items():
        labels = (pipeline | f"{name}Edges" >> beam.Create(edges)
                  | f"{name}Components" >> ConnectedComponents())
        assert_that(labels, equal_to(sorted(union_find(edges).items())), label=name)
    pipeline.run()
