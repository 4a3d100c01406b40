"""Time CEDI's scene-graph GED (exact networkx search with CEDI's costs) as graphs grow, and show where the timeout
turns the exact distance into a flagged upper bound. Speed is measured here, never asserted in tests.

    python bench/bench_cedi_ged.py [--sizes 2 4 6 8 10] [--timeout 10] [--seed 0] [--out bench_cedi_ged.json]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from halluflow.cedi.ged import scene_graph_ged
from halluflow.cedi.scene_graph import SceneGraph

NAMES = ["dog", "cat", "tree", "sky", "car", "person", "bench", "grass", "ball", "table"]
ATTRS = ["red", "big", "sleeping", "wooden", "running", "green"]
PREDS = ["on", "next to", "in", "under", "holding"]


def random_graph(rng: random.Random, n: int) -> SceneGraph:
    objects = [{"id": f"o{i}", "name": rng.choice(NAMES), "attributes": rng.sample(ATTRS, rng.randint(0, 2))}
               for i in range(n)]
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    relations = [{"subject": f"o{a}", "predicate": rng.choice(PREDS), "object": f"o{b}"}
                 for a, b in rng.sample(pairs, min(len(pairs), n))]
    return SceneGraph.from_dict({"objects": objects, "relations": relations})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--pairs", type=int, default=3, help="random truth/prediction pairs per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    for n in args.sizes:
        for _ in range(args.pairs):
            truth, pred = random_graph(rng, n), random_graph(rng, n + 1)
            t = time.perf_counter()
            res = scene_graph_ged(truth, pred, timeout=args.timeout)
            rows.append({"nodes": n, "ged": res.ged, "ged_hal": res.ged_hal, "ged_miss": res.ged_miss,
                         "exact": res.exact, "seconds": round(time.perf_counter() - t, 3)})
            print(json.dumps(rows[-1]))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
