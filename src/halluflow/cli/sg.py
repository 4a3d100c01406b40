"""`halluflow sg ged`: CEDI's graph edit distance between two scene graphs."""

from __future__ import annotations

import argparse
import sys

from .command import Command

_GED_DESCRIPTION = (
    "Graph edit distance between a truth and a predicted scene graph with CEDI's costs, node for node as CEDI's "
    "grader computes it; prints JSON {ged, ged_hal, ged_miss, exact, instances, synonyms, ...} (or writes it with "
    "--out). exact=false means the timeout hit and ged is an upper bound."
)


_GED_EPILOG = """scene graph JSON: {"objects":[{"id","name","attributes"}],"relations":[{"subject","predicate","object"}]}
examples:
  halluflow sg ged --truth truth_sg.json --pred pred_sg.json
  halluflow sg ged --truth t.json --pred p.json --instances merge --out ged.json
  halluflow sg ged --truth t.json --pred p.json --timeout 300 --synonyms visual_genome \\
      --object-synonyms ../shared/data/visual-genome-bottom-up-vocab/objects_vocab.txt"""


def _configure_ged(parser: argparse.ArgumentParser) -> None:
    from halluflow.cedi.scene_graph import NAME_SOURCES

    parser.add_argument("--truth", required=True, help="truth scene graph JSON")
    parser.add_argument("--pred", required=True, help="predicted scene graph JSON")
    from .argtypes import positive_float

    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        help="seconds for the exact search; past it the best path so far is reported (exact=false)",
    )
    parser.add_argument(
        "--solver",
        choices=["milp", "networkx"],
        default="milp",
        help="milp = exact binary linear program on HiGHS (default; proves 20-30 node graphs in well "
        "under a second); networkx = networkx's tree search (the anchor's)",
    )
    parser.add_argument(
        "--instances",
        choices=["keep", "merge"],
        default="keep",
        help="keep = compare the graphs node for node (default, the anchor's GED); merge = one node per object "
        "name on both sides, so instance counts are not scored (for instance-level truth such as COCO's)",
    )
    parser.add_argument(
        "--synonyms",
        choices=list(NAME_SOURCES),
        default="auto",
        help="object-name match: wordnet = names sharing a WordNet noun synset cost 0 (CEDI's grader); "
        "visual_genome = Visual Genome's synonym lists; none = equal names only; auto (default) = wordnet "
        "where installed, else visual_genome where found, else none",
    )
    parser.add_argument(
        "--object-synonyms",
        default=None,
        help="vocabulary file, one class per line, comma-separated synonyms (first = canonical)",
    )
    parser.add_argument("--relation-synonyms", default=None, help="same format, for predicates")
    parser.add_argument("--out", default=None, help="write the JSON here (atomically) instead of stdout")


def _run_ged(args: argparse.Namespace) -> int:
    from halluflow.cedi.ged import scene_graph_ged
    from halluflow.cedi.scene_graph import SceneGraph, Synonyms
    from halluflow.io import dumps_json, write_text

    syn = Synonyms.resolve(args.synonyms, args.object_synonyms, args.relation_synonyms)
    truth = SceneGraph.from_json_file(args.truth)
    pred = SceneGraph.from_json_file(args.pred)
    result = scene_graph_ged(
        truth, pred, synonyms=syn, timeout=args.timeout, solver=args.solver, instances=args.instances
    )
    text = dumps_json({**result.as_dict(with_timing=True), "instances": args.instances, "synonyms": syn.name_source})
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


_GED = Command(
    "ged",
    "graph edit distance between a truth and a predicted scene graph",
    _configure_ged,
    _run_ged,
    description=_GED_DESCRIPTION,
    epilog=_GED_EPILOG,
)

COMMANDS = (_GED,)
