"""POPE metrics (RUCAIBox/POPE evaluate.py): accuracy, precision, recall, F1, yes-ratio.

Vectorised (polars/numpy) and exact: on any answer file it returns the same floats as a plain port of the
official loop (bench/official_ports.py; property-tested) on the answers it scores. A failed or empty answer is not
scored (docs/failed-answers.md): it is left out and counted as n_failed, where the official script would read "" as
"yes". The peer parsers `lmms_eval` and `vlmevalkit` give the peer's own numbers (bench/peer_ports.py; tested on
mixed answers): they score every answer string, the empty one included, and aggregate as the peer does, bugs and
all; a record that never got an answer is still excluded and counted.
polars and numpy are imported inside the functions so `halluflow score pope --help` starts without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from .parsers import (
    NO,
    PARSERS,
    YES,
    check_failed,
    default_rule_mask,
    default_rule_reasons,
    excludes_unknown,
    failed_mask,
    is_peer,
    parse_answers,
    parser_mode,
)

if TYPE_CHECKING:
    import polars as pl


METRIC_KEYS = ("accuracy", "precision", "recall", "f1", "yes_ratio")
COUNT_KEYS = ("n", "n_failed", "n_unknown", "tp", "fp", "tn", "fn", "pred_yes", "pred_no", "truth_yes", "truth_no")


def _ratio(num: int, den: int) -> float | None:
    # float(a)/float(b) exactly as evaluate.py computes it, so results are bit-identical to the official script.
    return float(num) / float(den) if den else None


def confusion_counts(
    parsed: pl.Series, truth: pl.Series, positive: str = YES, weights: pl.Series | None = None
) -> dict[str, int]:
    """Counts of the confusion matrix; `parsed` is yes/no/null, `truth` yes/no; unknown answers are never right.
    `weights` (row multiplicities) lets callers count distinct (answer, truth) pairs once. One polars pass (no
    numpy: `score pope` never imports it)."""
    if positive not in (YES, NO):
        raise InputError(f"positive class must be 'yes' or 'no', got {positive!r}")
    import polars as pl

    negative = NO if positive == YES else YES
    columns = [parsed.rename("p"), truth.rename("t")]
    if weights is not None:
        columns.append(weights.cast(pl.Int64).rename("w"))
    w = pl.col("w") if weights is not None else pl.lit(1, dtype=pl.Int64)
    p, t = pl.col("p"), pl.col("t")
    pred_pos, pred_neg = (p == positive).fill_null(False), (p == negative).fill_null(False)
    truth_pos = (t == positive).fill_null(False)

    def count(mask: pl.Expr) -> pl.Expr:
        return pl.when(mask).then(w).otherwise(0).sum()

    return (
        pl.DataFrame(columns)
        .select(
            n=pl.col("w").sum() if weights is not None else pl.len().cast(pl.Int64),
            tp=count(pred_pos & truth_pos),
            fp=count(pred_pos & ~truth_pos),
            tn=count(pred_neg & ~truth_pos),
            # every truth-positive that was not answered positive (an unknown answer is a miss)
            fn=count(truth_pos & ~pred_pos),
            n_unknown=count(~(pred_pos | pred_neg)),
            pred_yes=count((p == YES).fill_null(False)),
            pred_no=count((p == NO).fill_null(False)),
            truth_yes=count((t == YES).fill_null(False)),
            truth_no=count((t == NO).fill_null(False)),
            # lmms-eval's recall only counts misses that were answered with the negative word
            fn_answered=count(truth_pos & pred_neg),
        )
        .row(0, named=True)
    )


def _or_zero(num, den):
    # the peers' `num / den if den > 0 else 0`
    return num / den if den > 0 else 0


def metrics_from_counts(c: dict[str, int], aggregation: str = "standard", positive: str = YES) -> dict:
    """The five POPE numbers from confusion counts. `standard`: POPE evaluate.py's ratios, null where undefined.
    `lmms_eval` and `vlmevalkit` aggregate as those harnesses do (their bugs included), 0 where undefined; an empty
    set, on which both crash, has null numbers."""
    tp, fp, tn, fn, n = c["tp"], c["fp"], c["tn"], c["fn"], c["n"]
    if aggregation in ("lmms_eval", "vlmevalkit"):
        precision = _or_zero(tp, tp + fp)
        # lmms-eval's recall only counts misses answered with the negative word; VLMEvalKit's every miss
        recall = _or_zero(tp, tp + (c["fn_answered"] if aggregation == "lmms_eval" else fn))
        f1 = 2 * (precision * recall) / (precision + recall) if precision + recall > 0 else 0
        accuracy = (tp + tn) / n if n else None
        if aggregation == "lmms_eval":  # pope_aggregate_yes_ratio counts the GROUND TRUTH
            yes_ratio = _or_zero(c["truth_yes"], c["truth_yes"] + c["truth_no"]) if n else None
        else:  # VLMEvalKit reports none; the share of answers extracted as Yes
            yes_ratio = c["pred_yes"] / n if n else None
        if not n:
            precision = recall = f1 = None
    elif aggregation in ("standard", "release"):
        if aggregation == "release":
            # the release reader's unknown answers are excluded: out of n, and a miss only when answered negative
            n, fn = n - c["n_unknown"], c["fn_answered"]
        precision = _ratio(tp, tp + fp)
        recall = _ratio(tp, tp + fn)
        if precision is None or recall is None:
            f1 = None
        else:
            # POPE divides by zero here; 0 is the limit (and sklearn's convention).
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        accuracy = (tp + tn) / n if n else None
        yes_ratio = c["pred_yes"] / n if n else None
    else:
        raise InputError(f"unknown aggregation {aggregation!r} (known: standard, release, lmms_eval, vlmevalkit)")
    out = {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1, "yes_ratio": yes_ratio}
    out.update({k: c.get(k, 0) for k in COUNT_KEYS})
    if aggregation == "release":
        out["n"], out["fn"] = n, fn
    out["positive"] = positive
    out["aggregation"] = aggregation
    return out


def aggregation_for(parser: str) -> str:
    # pope_official aggregates as POPE's script, which is the standard one (null where the script crashes); the
    # release reader's unknown answers are excluded ("release")
    if excludes_unknown(parser):
        return "release"
    return parser if parser in ("lmms_eval", "vlmevalkit") else "standard"


def _series(values, name: str) -> "pl.Series":
    import polars as pl

    if isinstance(values, pl.Series):
        return (values if values.dtype == pl.Categorical else values.cast(pl.String)).rename(name)
    # A non-string answer (1, true, ["yes"]) is no answer: never stringified into something a parser reads.
    return pl.Series(name, [v if isinstance(v, str) else None for v in values], dtype=pl.String)


def _distinct_rows(answers: pl.Series, truth: pl.Series, status: pl.Series | None) -> pl.DataFrame:
    """Distinct (answer, truth[, status]) rows with their multiplicities `w`: one group-by on the
    categorical codes (a string group-by is several times slower at 10^6 rows). Every later step (label check,
    failed test, parse, counts) then runs on a few hundred rows instead of a million."""
    import polars as pl

    def codes(s: pl.Series) -> pl.Series:
        return s if s.dtype == pl.Categorical else s.cast(pl.Categorical)

    columns = [codes(answers), codes(truth)] + ([] if status is None else [codes(status)])
    keys = [c.name for c in columns]
    # lazily: the default engine groups 10^6 rows 2-3x faster than DataFrame.group_by's eager settings
    groups = pl.DataFrame(columns).lazy().group_by(keys).agg(w=pl.len()).collect()
    return groups.with_columns(pl.col(keys).cast(pl.String))


def pope_metrics(answers, truth, parser: str = "pope", positive: str = YES, status=None) -> dict:
    """Score answers (strings, aligned with `truth`, a sequence of "yes"/"no") with the named parser.

    Failed answers (parsers.failed_mask: null, `status` other than ok, and under halluflow's own parsers blank) are
    excluded and counted as n_failed; a peer parser scores every string, as its peer does. Vectorised over
    DISTINCT (answer, truth, status) rows: model answers repeat a lot (10^6 POPE answers hold a few hundred
    distinct strings), so each string is checked and parsed once and counted with its multiplicity."""
    import polars as pl

    if parser not in PARSERS:
        raise InputError(f"unknown parser {parser!r} (known: {', '.join(sorted(PARSERS))})")
    if is_peer(parser) and positive != YES:
        raise InputError(f"--parser {parser} scores as its peer does, whose positive class is always yes")
    answers_s, truth_s = _series(answers, "answer"), _series(truth, "truth")
    if len(answers_s) != len(truth_s):
        raise InputError(f"{len(answers_s)} answers but {len(truth_s)} labels")
    status_s = None if status is None else _series(status, "status")
    rows = _distinct_rows(answers_s, truth_s, status_s)
    bad = ~rows["truth"].is_in([YES, NO]).fill_null(False)
    if bad.any():  # locate the first offending label in the full column (error path only)
        value = rows["truth"].filter(bad)[0]
        first = (truth_s.cast(pl.String) == value) if value is not None else truth_s.is_null()
        i = int(first.fill_null(False).arg_max())
        raise InputError(f"label #{i} is {value!r}; labels must be 'yes' or 'no'")
    failed = failed_mask(rows["answer"], rows["status"] if status_s is not None else None, parser=parser)
    n_failed = int(rows["w"].filter(failed).sum())
    rows = rows.filter(~failed)
    parsed = parse_answers(rows["answer"], parser)
    counts = confusion_counts(parsed, rows["truth"], positive, rows["w"])
    counts["n_failed"] = n_failed
    out = metrics_from_counts(counts, aggregation_for(parser), positive)
    # the answers this parser read only by its default rule (POPE's: no negation word → yes), and why
    by_default = rows.filter(default_rule_mask(rows["answer"], parsed, parser))
    out["n_default_rule"] = int(by_default["w"].sum())
    out["default_rule_reasons"] = default_rule_reasons(by_default["answer"], by_default["w"])
    out["parser"] = parser
    out["parser_mode"] = parser_mode(parser)
    return out


# ---------------------------------------------------------------- files
def load_labels(path: str | Path, scoring: bool = False) -> "pl.DataFrame":
    """POPE label file → DataFrame[question_id (str; as read with `scoring`), truth ("yes"/"no")]."""
    from .formats import read_pope_labels

    return read_pope_labels(path, questions=False, scoring=scoring)


def load_answers(path: str | Path, scoring: bool = False) -> "pl.DataFrame":
    """Answer file → DataFrame[question_id (str; as read with `scoring`), answer, status]; the text is in "answer"
    or (LLaVA) "text"."""
    from .formats import read_pope_answers

    return read_pope_answers(path, scoring=scoring)


def align(answers: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """Join by question_id in label order; any label without an answer (or answer without label) is an error.
    Ids of one type (both integers, as read for scoring, or both strings) are compared as they are; otherwise both
    sides are compared as strings ("7" matches 7, as everywhere in halluflow)."""
    import polars as pl

    def in_order(a: pl.DataFrame, b: pl.DataFrame) -> bool:
        ids_a, ids_b = a["question_id"], b["question_id"]
        return ids_a.dtype == ids_b.dtype and a.height == b.height and bool((ids_a == ids_b).all())

    if not in_order(answers, labels):
        answers, labels = (df.with_columns(pl.col("question_id").cast(pl.String)) for df in (answers, labels))
    if in_order(answers, labels):
        return labels.with_columns(answers["answer"], answers["status"])  # the usual case: no join needed
    joined = labels.join(
        answers.with_columns(_answered=pl.lit(True)), on="question_id", how="left", maintain_order="left"
    )
    missing = joined.filter(pl.col("_answered").is_null())
    if missing.height:
        raise InputError(
            f"no answer for question_id {missing['question_id'][0]!r} ({missing.height} labels unanswered)"
        )
    extra = answers.join(labels, on="question_id", how="anti")
    if extra.height:
        raise InputError(f"answer for unknown question_id {extra['question_id'][0]!r} ({extra.height} not in labels)")
    return joined.drop("_answered")


def score_files(
    answers_path, labels_path, parser: str = "pope", positive: str = YES, max_failed_fraction: float | None = None
) -> dict:
    """Score an answer file against a label file; refuses (TooManyFailedError) past `max_failed_fraction`.
    The two files are read at the same time (polars parses without holding the GIL)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        labels = pool.submit(load_labels, labels_path, True)
        joined = align(load_answers(answers_path, True), labels.result())
    out = pope_metrics(joined["answer"], joined["truth"], parser=parser, positive=positive, status=joined["status"])
    check_failed(out["n_failed"], joined.height, max_failed_fraction, f"score pope {answers_path}")
    return out
