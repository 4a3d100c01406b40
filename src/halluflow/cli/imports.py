"""`halluflow import ...`: read a peer toolkit's outputs (lmms-eval, VLMEvalKit) into halluflow answers."""

from __future__ import annotations

from .command import Command

_LMMS_EVAL_DESCRIPTION = (
    "Read lmms-eval's per-sample outputs (--log_samples JSONL) into halluflow answers JSONL, so halluflow's own "
    "scorers (score pope with the export's pope_labels.jsonl, the release scorer) score any model lmms-eval ran. "
    "The question id is read from the samples' per-sample metrics (query_id from a `release export` task, "
    "question_id from lmms-eval's POPE task) or their doc."
)


_LMMS_EVAL_EPILOG = """examples:
  halluflow import lmms-eval logs/llava/*_samples_halluflow_demo_*.jsonl --out answers.jsonl
  halluflow score release answers.jsonl --release results/ode-demo/release   # as lmms-eval read them, per group
  halluflow score pope --answers answers.jsonl --labels exports/lmms_eval_tasks/halluflow_demo/pope_labels.jsonl"""


def _configure_lmms_eval(parser) -> None:
    parser.add_argument("samples", nargs="+", help="lmms-eval samples files (<date>_samples_<task>.jsonl)")
    parser.add_argument("--out", required=True, help="halluflow answers JSONL to write")
    parser.add_argument("--model", help="model name for the answers (default: the samples' folder name)")


def _run_lmms_eval(args) -> int:
    from halluflow.imports import answer_rows, default_model, write_answers
    from halluflow.imports.lmms_eval import read_samples

    rows, duplicates = answer_rows(
        read_samples(args.samples), args.model or default_model(args.samples[0]), "lmms-eval"
    )
    write_answers(args.out, rows, duplicates, "lmms-eval", args.samples)
    return 0


_VLMEVALKIT_DESCRIPTION = (
    "Read VLMEvalKit's prediction file (<model>_<dataset>.xlsx, or .tsv / .json with PRED_FORMAT=tsv / json, or "
    ".csv) into halluflow answers JSONL, so halluflow's scorers score any model VLMEvalKit ran. Ids: the query_id "
    "column of a `release export --format vlmevalkit` dataset (its task_hash is kept), else VLMEvalKit's index. "
    "xlsx needs openpyxl (pip install 'halluflow[imports]')."
)


_VLMEVALKIT_EPILOG = """examples:
  halluflow import vlmevalkit outputs/llava/llava_halluflow_demo_POPE.xlsx --out answers.jsonl
  halluflow score release answers.jsonl --release results/ode-demo/release
  halluflow score pope --answers answers.jsonl --labels exports/vlmevalkit/pope_labels.jsonl --parser vlmevalkit"""


def _configure_vlmevalkit(parser) -> None:
    parser.add_argument("predictions", help="VLMEvalKit prediction file (.xlsx, .tsv, .csv or .json)")
    parser.add_argument("--out", required=True, help="halluflow answers JSONL to write")
    parser.add_argument("--model", help="model name for the answers (default: the file's folder name)")


def _run_vlmevalkit(args) -> int:
    from halluflow.imports import answer_rows, default_model, write_answers
    from halluflow.imports.vlmevalkit import read_predictions

    records = read_predictions(args.predictions)
    rows, duplicates = answer_rows(records, args.model or default_model(args.predictions), "vlmevalkit")
    write_answers(args.out, rows, duplicates, "vlmevalkit", [args.predictions])
    return 0


_LMMS_EVAL = Command(
    "lmms-eval",
    "lmms-eval --log_samples JSONL -> halluflow answers JSONL (scored by score release / score pope)",
    _configure_lmms_eval,
    _run_lmms_eval,
    description=_LMMS_EVAL_DESCRIPTION,
    epilog=_LMMS_EVAL_EPILOG,
)

_VLMEVALKIT = Command(
    "vlmevalkit",
    "VLMEvalKit prediction xlsx/tsv/csv/json -> halluflow answers JSONL (scored by score release / score pope)",
    _configure_vlmevalkit,
    _run_vlmevalkit,
    description=_VLMEVALKIT_DESCRIPTION,
    epilog=_VLMEVALKIT_EPILOG,
)

COMMANDS = (
    _LMMS_EVAL,
    _VLMEVALKIT,
)
