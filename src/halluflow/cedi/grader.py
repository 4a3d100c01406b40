"""CEDI grader (seed 000, "the grader: compare scene graphs, not strings") and the `halluflow sg ged` command.

Turns each transcript into a predicted scene graph (halluflow.cedi.parser), compares it with the truth graph by GED
(halluflow.cedi.ged: GED, GED_hal, GED_miss, exact/upper-bound flag) and reports SG ΔCon and per-turn
hallucination rates by question type and turn index, with and without history (see `grade_transcripts`).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..io import dumps_json
from .ged import scene_graph_ged
from .scene_graph import SceneGraph, Synonyms

CLI_DESCRIPTION = (
    "Graph edit distance between a truth and a predicted scene graph with CEDI's costs; prints JSON "
    "{ged, ged_hal, ged_miss, exact, ...}. exact=false means the timeout hit and ged is an upper bound."
)
CLI_EPILOG = """scene graph JSON: {"objects":[{"id","name","attributes"}],"relations":[{"subject","predicate","object"}]}
examples:
  halluflow sg ged --truth truth_sg.json --pred pred_sg.json
  halluflow sg ged --truth t.json --pred p.json --timeout 300 \\
      --object-synonyms ../shared/data/visual-genome-bottom-up-vocab/objects_vocab.txt"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--truth", required=True, help="truth scene graph JSON")
    parser.add_argument("--pred", required=True, help="predicted scene graph JSON")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds for the exact search; past it the best path so far is reported (exact=false)")
    parser.add_argument("--object-synonyms", default=None,
                        help="vocabulary file, one class per line, comma-separated synonyms (first = canonical)")
    parser.add_argument("--relation-synonyms", default=None, help="same format, for predicates")


def run(args: argparse.Namespace) -> int:
    syn = Synonyms.from_vocab_files(args.object_synonyms, args.relation_synonyms)
    truth = SceneGraph.from_json_file(args.truth)
    pred = SceneGraph.from_json_file(args.pred)
    result = scene_graph_ged(truth, pred, synonyms=syn, timeout=args.timeout)
    sys.stdout.write(dumps_json(result.as_dict(with_timing=True)))
    return 0
