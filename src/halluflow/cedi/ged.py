"""Graph Edit Distance between a truth and a predicted scene graph with CEDI's costs (seed 000, the SG grader).

Costs (anchor: context-eval-mllm's grader): node substitution = |attrs1 △ attrs2| + (0 if the names match or are
synonyms else 1); node insertion/deletion = 1 + #attrs; edge substitution = 0 if the predicate sets intersect else
1; edge insertion/deletion = 1. Exact search with networkx `optimize_edit_paths` under a timeout (the anchor uses
`graph_edit_distance(timeout=300)` and silently returns the best-so-far); when the timeout hits we keep the best path
found so far, report its cost as an UPPER BOUND and set `exact: false` instead of passing it off as the distance.

Split (derived from the optimal edit path; G1 = truth, G2 = prediction, so GED = GED_hal + GED_miss exactly):
  GED_hal  (content in the prediction that is not in the truth = hallucination):
           inserted predicted nodes (1 + #attrs), the name part (1) of a substitution whose names differ,
           predicted attributes absent from the matched truth node, inserted predicted edges (1), edge
           substitutions whose predicate sets are disjoint (1: a wrong relation was asserted);
  GED_miss (truth content the prediction lost = coverage): deleted truth nodes (1 + #attrs), truth attributes
           absent from the matched predicted node, deleted truth edges (1).
When several edit paths are optimal, the split is the one of the first optimal path networkx finds (deterministic
for a given node order); the total GED does not depend on that choice.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import networkx as nx

from .scene_graph import SceneGraph, Synonyms


def node_subst_cost(a: dict, b: dict) -> int:
    return len(a["attributes"] ^ b["attributes"]) + (0 if a["name"] == b["name"] else 1)


def node_del_cost(a: dict) -> int:
    return 1 + len(a["attributes"])


node_ins_cost = node_del_cost


def edge_subst_cost(a: dict, b: dict) -> int:
    return 0 if a["predicates"] & b["predicates"] else 1


def edge_del_cost(a: dict) -> int:
    return 1


edge_ins_cost = edge_del_cost

COSTS = dict(
    node_subst_cost=node_subst_cost,
    node_del_cost=node_del_cost,
    node_ins_cost=node_ins_cost,
    edge_subst_cost=edge_subst_cost,
    edge_del_cost=edge_del_cost,
    edge_ins_cost=edge_ins_cost,
)


@dataclass
class GEDResult:
    ged: int
    ged_hal: int
    ged_miss: int
    exact: bool  # False: the timeout hit and `ged` is the best upper bound found
    timeout_s: float
    elapsed_s: float
    truth_nodes: int
    truth_edges: int
    pred_nodes: int
    pred_edges: int
    operations: dict = field(default_factory=dict)  # counts per edit kind (node_ins, attr_hal, ...)

    def as_dict(self, with_timing: bool = False) -> dict:
        d = asdict(self)
        if not with_timing:
            d.pop("elapsed_s")  # wall time would break byte-identical reruns
        return d


def split_path(g1: nx.DiGraph, g2: nx.DiGraph, node_path, edge_path) -> tuple[int, int, dict]:
    """Attribute every unit of an edit path's cost to hallucination or lost coverage (see module docstring)."""
    hal = miss = 0
    ops = dict.fromkeys(
        ["node_ins", "node_del", "node_rename", "attr_hal", "attr_miss", "edge_ins", "edge_del", "edge_wrong"], 0
    )
    for u, v in node_path:
        if u is None:
            hal += node_ins_cost(g2.nodes[v])
            ops["node_ins"] += 1
            ops["attr_hal"] += len(g2.nodes[v]["attributes"])
        elif v is None:
            miss += node_del_cost(g1.nodes[u])
            ops["node_del"] += 1
            ops["attr_miss"] += len(g1.nodes[u]["attributes"])
        else:
            a, b = g1.nodes[u], g2.nodes[v]
            rename = 0 if a["name"] == b["name"] else 1
            extra = len(b["attributes"] - a["attributes"])
            lost = len(a["attributes"] - b["attributes"])
            hal += rename + extra
            miss += lost
            ops["node_rename"] += rename
            ops["attr_hal"] += extra
            ops["attr_miss"] += lost
    for e, f in edge_path:
        if e is None:
            hal += 1
            ops["edge_ins"] += 1
        elif f is None:
            miss += 1
            ops["edge_del"] += 1
        else:
            wrong = edge_subst_cost(g1.edges[e], g2.edges[f])
            hal += wrong
            ops["edge_wrong"] += wrong
    return hal, miss, ops


def graph_ged(g1: nx.DiGraph, g2: nx.DiGraph, timeout: float = 30.0) -> GEDResult:
    """GED of two prepared graphs (nodes: name, attributes; edges: predicates); see the module docstring."""
    start = time.perf_counter()
    best = None
    for node_path, edge_path, cost in nx.optimize_edit_paths(g1, g2, **COSTS, timeout=timeout):
        best = (node_path, edge_path, cost)
    elapsed = time.perf_counter() - start
    # networkx prunes silently once the clock passes the timeout, so a search that ran that long may have been cut.
    exact = elapsed <= timeout
    if best is None:  # timed out before any complete path: the delete-all/insert-all path is a valid bound
        best = ([(u, None) for u in g1] + [(None, v) for v in g2], [(e, None) for e in g1.edges] + [(None, f) for f in g2.edges], None)
        exact = False
    node_path, edge_path, _ = best
    hal, miss, ops = split_path(g1, g2, node_path, edge_path)
    return GEDResult(
        ged=hal + miss,
        ged_hal=hal,
        ged_miss=miss,
        exact=exact,
        timeout_s=float(timeout),
        elapsed_s=round(elapsed, 4),
        truth_nodes=g1.number_of_nodes(),
        truth_edges=g1.number_of_edges(),
        pred_nodes=g2.number_of_nodes(),
        pred_edges=g2.number_of_edges(),
        operations=ops,
    )


def scene_graph_ged(
    truth: SceneGraph, pred: SceneGraph, synonyms: Synonyms | None = None, timeout: float = 30.0
) -> GEDResult:
    syn = synonyms or Synonyms.builtin()
    return graph_ged(truth.to_networkx(syn), pred.to_networkx(syn), timeout=timeout)
