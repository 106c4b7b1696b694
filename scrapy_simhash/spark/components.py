"""Connected components of a pair DataFrame on Spark: large-star / small-star (Kiveris et al., SoCC 2014).

Each round rewires every vertex's edges towards the smallest label in its neighbourhood; the
graph converges to one star per component centred on the component's smallest vertex, in
O(log^2 n) rounds. "Smallest" is by ``(order, id)`` when an ``order`` DataFrame is given (the
earliest record, e.g. input position then offset, as ``dedupe`` keeps), else by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

MAX_ROUNDS = 200


def clusters(
    pairs: Any,
    *,
    a_col: str = "a",
    b_col: str = "b",
    order: Any = None,
    order_id_col: str = "id",
    order_col: str = "order",
    max_rounds: int = MAX_ROUNDS,
) -> Any:
    """DataFrame[id, cluster]: every id that appears in ``pairs``, with its component's representative.

    The representative is the smallest id, or with ``order`` (a DataFrame of ``order_id_col``
    and ``order_col``, exactly one row per id in ``pairs``, else ValueError) the id with the
    smallest order (ties by id). Ids not in
    any pair are singletons and are not listed. Raises RuntimeError after ``max_rounds``.
    """
    from pyspark.sql.types import StructField, StructType

    spark = pairs.sparkSession
    id_type = pairs.schema[a_col].dataType
    edges = pairs.select(a_col, b_col).rdd.map(tuple)
    if order is not None:
        ranks = order.select(order_id_col, order_col).rdd.map(lambda r: (r[0], (r[1], r[0])))
        ranked = edges.join(ranks).map(lambda kv: (kv[1][0], kv[1][1])).join(ranks).map(lambda kv: kv[1])
        missing = edges.count() - ranked.count()
        if missing:
            raise ValueError(f"order has no row for an id of {missing} pairs: every id in pairs needs one")
        edges = ranked
    else:
        edges = edges.map(lambda e: ((0, e[0]), (0, e[1])))
    edges = edges.filter(lambda e: e[0] != e[1]).map(lambda e: (max(e), min(e))).distinct().cache()
    for _ in range(max_rounds):
        # no distinct of the large-star edges: the small-star step gives the same set from repeated
        # edges (the same smallest neighbour, the same edges again), and its own distinct removes them
        large = edges.flatMap(lambda e: (e, (e[1], e[0]))).groupByKey().flatMap(_large_star)
        small = large.map(lambda e: (max(e), min(e))).groupByKey().flatMap(_small_star).distinct().cache()
        changed = _changed(edges, small)
        edges.unpersist()
        edges = small
        if not changed:
            break
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    members = edges.flatMap(lambda e: ((e[0][1], e[1][1]), (e[1][1], e[1][1]))).distinct()
    schema = StructType([StructField("id", id_type, False), StructField("cluster", id_type, False)])
    return spark.createDataFrame(members, schema)


def _changed(edges: Any, small: Any) -> bool:
    """Whether a round changed the edge set. Both are sets (distinct): no edge of ``small`` missing from
    ``edges`` and as many edges means the same set, so one subtraction (the shuffle that also computes
    and caches ``small``) and two counts of cached RDDs decide it, not a second subtraction."""
    return bool(small.subtract(edges).count()) or small.count() != edges.count()


def _large_star(item: tuple[Any, Iterable[Any]]) -> Iterator[tuple[Any, Any]]:
    """Connect every larger neighbour of u to the smallest of u's closed neighbourhood."""
    u, neighbours = item
    neighbours = list(neighbours)
    smallest = min(min(neighbours), u)
    for v in neighbours:
        if v > u:
            yield v, smallest


def _small_star(item: tuple[Any, Iterable[Any]]) -> Iterator[tuple[Any, Any]]:
    """Connect u and its smaller neighbours to the smallest of them."""
    u, neighbours = item
    neighbours = list(neighbours)
    smallest = min(neighbours)
    for v in neighbours:
        if v != smallest:
            yield v, smallest
    yield u, smallest
