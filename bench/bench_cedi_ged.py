"""Time CEDI's scene-graph GED on CEDI-size graphs: the exact MILP solver (HiGHS via scipy) against networkx's exact
tree search, side by side on the same truth/prediction pairs, with each solver's share of proven-exact distances.
Speed is measured here, never asserted in tests.

    python bench/bench_cedi_ged.py [--sizes 8 20] [--pairs 10] [--timeout 10] [--seed 0] [--pairing perturbed]

--pairing perturbed (default): the prediction is the truth perturbed the way an evaluatee errs (objects renamed,
dropped or hallucinated, attributes swapped, relations dropped or invented) - CEDI's case. --pairing unrelated: two
independent random graphs, the worst case for any exact GED (nothing anchors the matching).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from halluflow.cedi.ged import scene_graph_ged
from halluflow.cedi.scene_graph import SceneGraph

NAMES = [
    "dog",
    "cat",
    "tree",
    "sky",
    "car",
    "person",
    "bench",
    "grass",
    "ball",
    "table",
    "window",
    "shirt",
    "road",
    "building",
    "cloud",
    "hat",
    "bag",
    "chair",
    "plate",
    "cup",
    "lamp",
    "sign",
    "pole",
    "wheel",
    "fence",
]
ATTRS = ["red", "big", "sleeping", "wooden", "running", "green", "white", "small", "open", "metal"]
PREDS = ["on", "next to", "in", "under", "holding", "behind", "wearing"]


def random_graph(rng: random.Random, n: int) -> dict:
    """n objects, names drawn WITH replacement (repeated names = instances, the hard case for GED: many equally
    cheap matchings), about 1.2 n relations. Compared with instances="keep", i.e. as given."""
    objects = [
        {"id": f"o{i}", "name": rng.choice(NAMES), "attributes": rng.sample(ATTRS, rng.randint(0, 2))} for i in range(n)
    ]
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    relations = [
        {"subject": f"o{a}", "predicate": rng.choice(PREDS), "object": f"o{b}"}
        for a, b in rng.sample(pairs, min(len(pairs), int(1.2 * n)))
    ]
    return {"objects": objects, "relations": relations}


def perturb(rng: random.Random, truth: dict) -> dict:
    objects = [dict(o, attributes=list(o["attributes"])) for o in truth["objects"]]
    unused = [n for n in NAMES if n not in {o["name"] for o in objects}]
    rng.shuffle(unused)
    for o in objects:
        r = rng.random()
        if r < 0.15 and unused:
            o["name"] = unused.pop()  # wrong object
        elif r < 0.35:
            o["attributes"] = rng.sample(ATTRS, rng.randint(0, 2))  # wrong attributes
    kept = [o for o in objects if rng.random() > 0.15]  # missed objects
    kept += [{"id": f"h{i}", "name": unused.pop(), "attributes": []} for i in range(rng.randint(0, 3)) if unused]
    ids = {o["id"] for o in kept}
    relations = [r for r in truth["relations"] if r["subject"] in ids and r["object"] in ids and rng.random() > 0.2]
    for r in relations:
        if rng.random() < 0.15:
            r["predicate"] = rng.choice(PREDS)
    ordered = [o["id"] for o in kept]
    for _ in range(rng.randint(0, 3)):
        a, b = rng.sample(ordered, 2)
        relations.append({"subject": a, "predicate": rng.choice(PREDS), "object": b})
    rng.shuffle(kept)  # node order must not matter
    return {"objects": kept, "relations": relations}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 20])
    ap.add_argument("--pairs", type=int, default=10, help="random truth/prediction pairs per size")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per GED and solver")
    ap.add_argument("--solvers", nargs="+", default=["milp", "networkx"])
    ap.add_argument("--pairing", choices=["perturbed", "unrelated"], default="perturbed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows, summary = [], []
    for n in args.sizes:
        cases = []
        for _ in range(args.pairs):
            truth = random_graph(rng, n)
            pred = perturb(rng, truth) if args.pairing == "perturbed" else random_graph(rng, n)
            cases.append((SceneGraph.from_dict(truth), SceneGraph.from_dict(pred)))
        per_solver = {}
        for solver in args.solvers:
            times, exact, geds = [], 0, []
            for truth, pred in cases:
                t = time.perf_counter()
                res = scene_graph_ged(truth, pred, timeout=args.timeout, solver=solver, instances="keep")
                times.append(time.perf_counter() - t)
                exact += res.exact
                geds.append(res.ged)
                rows.append(
                    {
                        "nodes": n,
                        "solver": solver,
                        "ged": res.ged,
                        "ged_hal": res.ged_hal,
                        "ged_miss": res.ged_miss,
                        "exact": res.exact,
                        "seconds": round(times[-1], 4),
                    }
                )
            per_solver[solver] = geds
            summary.append(
                {
                    "nodes": n,
                    "solver": solver,
                    "pairs": len(cases),
                    "median_s": round(statistics.median(times), 4),
                    "max_s": round(max(times), 4),
                    "exact_share": round(exact / len(cases), 3),
                    "mean_ged": round(statistics.mean(geds), 2),
                }
            )
        if len(per_solver) == 2:
            a, b = per_solver.values()
            summary[-1]["pairs_where_bound_exceeds_exact"] = sum(1 for x, y in zip(a, b) if y > x)
    print(f"{'nodes':>5} {'solver':>9} {'median s':>9} {'max s':>8} {'exact':>6} {'mean GED':>9}")
    for s in summary:
        print(
            f"{s['nodes']:>5} {s['solver']:>9} {s['median_s']:>9} {s['max_s']:>8} {s['exact_share']:>6} "
            f"{s['mean_ged']:>9}"
        )
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(
                {"summary": summary, "rows": rows, "timeout_s": args.timeout, "pairing": args.pairing}, fh, indent=2
            )


if __name__ == "__main__":
    main()
