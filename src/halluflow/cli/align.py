"""`halluflow align human`: agreement of metrics with human labels."""

from __future__ import annotations

import argparse
import sys

from .command import Command

_HUMAN_DESCRIPTION = (
    "Agreement of automatic metrics with human hallucination labels: accuracy, recall, F1, Cohen's kappa, Pearson "
    "and Spearman per metric, overall, per risk level and risk-weighted (UniHall Table 4); prints JSON."
)


_HUMAN_EPILOG = """human labels: CSV (or TSV/JSONL/JSON/parquet) with an id column (id, instance_id, question_id,
  query_id, conversation_id or image_id), a label column (human, label, hallucinated, count or score: 0 = no
  hallucination, >0 = hallucinated; counts and scores feed the correlations) and optionally risk (1..5; else the
  metric file's risk / risk_level column, if any).
metrics: one or more files of the same kinds, one row per item with the same id column; every numeric column (in
  CSV/TSV: every column whose cells all read as numbers or are empty) is a metric unless --metric names some; JSON objects may hold the rows under conversations/rows/instances/results
  (so CEDI's grades.json works as it is: one row per conversation).
examples:
  halluflow align human --human labels.csv --metrics results/ode-demo/fuzz/MODEL/standard.parquet \
      --metric ghr --metric bhr --metric ghs --threshold ghs=0.5   (risk levels taken from its risk_level column)
  halluflow align human --human cedi_human.csv --metrics results/demo/cedi/m/grades.json --metric ged_hal \\
      --out results/demo/align/cedi_m.json"""


def _configure_human(parser: argparse.ArgumentParser) -> None:
    from halluflow.align import HUMAN_COLUMNS, ID_COLUMNS

    parser.add_argument("--human", required=True, help="human labels file (one row per item)")
    parser.add_argument("--metrics", required=True, nargs="+", help="metric file(s), one row per item")
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        help="metric column to compare (repeatable); "
        "default: every numeric column that is not an id, risk or bookkeeping column",
    )
    parser.add_argument("--id-column", default=None, help=f"item id column (default: first of {', '.join(ID_COLUMNS)})")
    parser.add_argument(
        "--human-column", default=None, help=f"human label column (default: first of {', '.join(HUMAN_COLUMNS)})"
    )
    parser.add_argument(
        "--risk-column", default=None, help="risk level column (default: risk or risk_level if present)"
    )
    parser.add_argument(
        "--threshold",
        action="append",
        default=[],
        help="decision threshold: a metric value ABOVE it means hallucinated; NUMBER for every metric "
        "or METRIC=NUMBER (repeatable); default 0",
    )
    parser.add_argument(
        "--human-threshold", type=float, default=0.0, help="a human label above this is a hallucination (default 0)"
    )
    parser.add_argument("--random-seed", type=int, default=0, help="seed of the random chance row")
    parser.add_argument("--no-random", action="store_true", help="leave out the random chance row")
    parser.add_argument("--out", default=None, help="also write the JSON here (atomically)")


def _run_human(args: argparse.Namespace) -> int:
    from halluflow.align import align, read_rows
    from halluflow.io import dumps_json, write_json

    human = read_rows(args.human)
    files = {str(p): read_rows(p) for p in args.metrics}
    result = align(
        human,
        files,
        human_source=str(args.human),
        id_column=args.id_column,
        human_column=args.human_column,
        risk_column=args.risk_column,
        metrics=args.metric,
        thresholds=args.threshold,
        human_threshold=args.human_threshold,
        random_seed=None if args.no_random else args.random_seed,
    )
    if args.out:
        write_json(args.out, result)
    sys.stdout.write(dumps_json(result))
    return 0


_HUMAN = Command(
    "human",
    "agreement of metrics with human labels (accuracy, F1, kappa, r, rho)",
    _configure_human,
    _run_human,
    description=_HUMAN_DESCRIPTION,
    epilog=_HUMAN_EPILOG,
)

COMMANDS = (_HUMAN,)
