"""`halluflow graph build`: the weighted concept graph ODE samples from."""

from __future__ import annotations

import json
from pathlib import Path

from .command import Command

_BUILD_DESCRIPTION = (
    "Build the weighted concept graph (nodes, edges, GraphML) from annotations: AMBER annotations.json, "
    "COCO instances JSON, Visual Genome objects.json, a plain table, or a seed folder. Prints a JSON "
    "summary (nodes, edges, top edge)."
)


_BUILD_EPILOG = """examples:
  halluflow graph build --format coco --path instances_val2017.json --out graph/
  halluflow graph build --format table --path objects.tsv --image-column img --object-column objs --out graph/
  # regenerate the shipped seed (resources/graph_seed) from AMBER:
  halluflow graph build --format amber --path ../shared/data/amber/data/annotations.json \\
      --attribute-queries ../shared/data/amber/data/query/query_discriminative-attribute.json \\
      --seed-out resources/graph_seed"""


def _configure_build(parser) -> None:
    from halluflow.ode.graph import FORMATS, WEIGHTINGS

    parser.add_argument("--format", choices=FORMATS, default="seed", help="annotation format (default: seed)")
    parser.add_argument("--path", default=None, help="annotation file (seed: folder; default: the shipped seed)")
    parser.add_argument("--attribute-queries", default=None, help="AMBER attribute queries JSON (state/action pairs)")
    parser.add_argument("--attributes", default=None, help="Visual Genome attributes.json")
    parser.add_argument("--image-column", default="image_id", help="plain table: image id column")
    parser.add_argument("--object-column", default="object", help="plain table: object(s) column")
    parser.add_argument("--separator", default=";", help="plain table: separator of joined objects")
    parser.add_argument("--environments", default=None, help="environment vocabulary (default: shipped list)")
    parser.add_argument(
        "--weighting", choices=WEIGHTINGS, default="images", help="images (paper) or ode_anchor (ODE's released graph)"
    )
    parser.add_argument("--out", default=None, help="folder for nodes.parquet, edges.parquet, graph.graphml")
    parser.add_argument("--seed-out", default=None, help="folder for seed tables nodes.tsv / edges.tsv")


def _run_build(args) -> int:
    from halluflow.io import write_parquet
    from halluflow.ode.graph import build_graph, hallu_graph, write_graph, write_seed

    source = {
        "format": args.format,
        "path": args.path,
        "attribute_queries": args.attribute_queries,
        "attributes": args.attributes,
        "image_column": args.image_column,
        "object_column": args.object_column,
        "separator": args.separator,
    }
    nodes, edges = build_graph(source, args.environments, args.weighting)
    hallu = hallu_graph(source, args.weighting)
    if args.out:
        write_graph(nodes, edges, args.out)
        write_parquet(Path(args.out) / "hallu_edges.parquet", hallu)
    if args.seed_out:
        write_seed(nodes, edges, args.seed_out, hallu)
    top = edges.row(0) if edges.height else None
    print(
        json.dumps(
            {
                "nodes": nodes.height,
                "edges": edges.height,
                "hallu_edges": hallu.height,
                "top_edge": {"source": top[0], "target": top[1], "weight": top[2]} if top else None,
            }
        )
    )
    return 0


_BUILD = Command(
    "build",
    "build the weighted concept graph from AMBER/COCO/VG/table annotations",
    _configure_build,
    _run_build,
    description=_BUILD_DESCRIPTION,
    epilog=_BUILD_EPILOG,
)

COMMANDS = (_BUILD,)
