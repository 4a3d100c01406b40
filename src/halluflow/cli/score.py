"""`halluflow score ...`: the scorers (POPE, CHAIR, AMBER, CAOS, GHR) and bootstrap model comparisons."""

from __future__ import annotations

import argparse
import sys

from .command import Command

_POPE_DESCRIPTION = (
    "POPE scores of yes/no answers against POPE label files. Answers are matched to labels by question_id.\n"
    "Parsers: pope (official evaluate.py), exact (exact yes/no match, fixed aggregation), amber (strict\n"
    "'Yes'/'No'), lenient, unihall, affirm, opener, pope_lower, release (the release's own reader: robust to\n"
    "case, whitespace and punctuation; refusals, hedges, other languages and emoji are unknown and EXCLUDED)\n"
    "(docs/failed-answers.md); peer parsers: lmms_eval\n"
    "(lmms-eval's POPE task, its bugs included: yes_ratio counts ground truth, unparsed answers left out of\n"
    "recall), vlmevalkit (VLMEvalKit's YOrN_Extraction and POPE rating, no judge model) and pope_official\n"
    '(evaluate.py, "" read as yes). Undefined ratios (0/0) are null (0 under lmms_eval and vlmevalkit, as they\n'
    "print).\n"
    "A failed record (status failed, or no answer) is never scored: excluded and counted as n_failed. Under\n"
    "halluflow's parsers a blank answer (empty, whitespace or control characters only) is failed too; a peer\n"
    "parser scores it as its peer does. An answer read as neither yes nor no counts as wrong and as n_unknown\n"
    "(excluded instead under release). n_default_rule counts the answers read only by the parser's default rule\n"
    "(POPE: no negation word -> yes), with one line on stderr when not 0 (docs/failed-answers.md). The output's\n"
    "parser_mode says which rule applied."
)


_POPE_EPILOG = """examples:
  halluflow score pope --answers answers.jsonl --labels ../shared/data/pope-rucaibox/coco/coco_pope_popular.json
  halluflow score pope --answers llava.jsonl --labels gqa_pope_seem_random.json --parser vlmevalkit --out m.json
  halluflow score pope --answers a.jsonl --labels l.json --positive no     # 'no' as the positive class (AMBER)
answers: JSONL {"question_id", "answer"} or {"question_id", "text"} (one of the two per file), optional "status"
(ok / failed); labels: JSONL or a JSON array of {"question_id", "image", "text", "label"} (POPE's COCO /
A-OKVQA / GQA files)."""


def _configure_pope(parser: argparse.ArgumentParser) -> None:
    from halluflow.metrics.parsers import NO, PARSERS, YES

    from .argtypes import add_max_failed_argument

    parser.add_argument("--answers", required=True, help="JSONL of {question_id, answer|text[, status]}")
    parser.add_argument("--labels", required=True, help="POPE label file (JSONL or JSON array)")
    parser.add_argument("--parser", default="pope", choices=sorted(PARSERS), help="yes/no parser (default: pope)")
    parser.add_argument("--positive", default=YES, choices=[YES, NO], help="positive class (default: yes)")
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="also write the JSON to this file")


def emit(result: dict, out: str | None) -> None:
    """Print the JSON result; with --out also write it atomically."""
    from halluflow.io import dumps_json, write_text

    text = dumps_json(result)
    if out:
        write_text(out, text)
    print(text, end="")


def _run_pope(args: argparse.Namespace) -> int:
    from halluflow.metrics.parsers import default_rule_line, excludes_unknown
    from halluflow.metrics.pope import score_files

    result = score_files(
        args.answers,
        args.labels,
        parser=args.parser,
        positive=args.positive,
        max_failed_fraction=args.max_failed_fraction,
    )
    emit(result, args.out)
    if result["n_default_rule"]:  # one line saying how many answers only the parser's default rule read
        n_read = result["n"] + (result["n_unknown"] if excludes_unknown(args.parser) else 0)
        line = default_rule_line(
            f"score pope {args.answers}", args.parser, result["n_default_rule"], n_read, result["default_rule_reasons"]
        )
        print(f"halluflow: note: {line}", file=sys.stderr)
    return 0


_CHAIR_DESCRIPTION = "CHAIR_s / CHAIR_i of captions against per-image COCO objects (LisaAnne/Hallucination rules)."


_CHAIR_EPILOG = """examples:
  halluflow score chair --captions captions.jsonl --truth truth.jsonl
  halluflow score chair --captions c.jsonl --truth t.jsonl --synonyms path/to/synonyms.txt --out chair.json
  halluflow score chair --captions c.jsonl --truth t.jsonl --fix-synonym-spaces --per-caption rows.parquet
captions: JSONL {"image_id", "caption"}; truth: JSONL {"image_id", "objects": [COCO categories or synonyms]}.
--synonyms: CHAIR's synonyms.txt format; default: the list shipped with halluflow (derived from CHAIR's)."""


def _configure_chair(parser: argparse.ArgumentParser) -> None:
    from .argtypes import add_max_failed_argument

    parser.add_argument("--captions", required=True, help='JSONL of {"image_id", "caption"}')
    parser.add_argument("--truth", required=True, help='JSONL of {"image_id", "objects": [...]}')
    parser.add_argument(
        "--synonyms", help="a synonyms.txt in CHAIR's format (default: the list shipped with halluflow)"
    )
    parser.add_argument(
        "--fix-synonym-spaces",
        action="store_true",
        help="count ' motor bike' / ' cheesecake' (the original never matches them)",
    )
    parser.add_argument("--per-caption", help="write per-caption rows (mentions, hallucinated objects) to this parquet")
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="also write the JSON to this file")


def _run_chair(args: argparse.Namespace) -> int:
    from halluflow.io import write_parquet
    from halluflow.metrics.chair import load_captions, load_synonyms, load_truth, score_captions
    from halluflow.metrics.parsers import check_failed

    synonyms = load_synonyms(args.synonyms, fix_spaces=args.fix_synonym_spaces)
    captions = load_captions(args.captions)
    check_failed(
        int(captions["failed"].sum()), captions.height, args.max_failed_fraction, f"score chair {args.captions}"
    )
    metrics, rows = score_captions(captions, load_truth(args.truth, synonyms), synonyms)
    if args.per_caption:
        write_parquet(args.per_caption, rows)
    emit(metrics, args.out)
    return 0


_AMBER_DESCRIPTION = "AMBER generative (CHAIR, Cover, Hal, Cog) and discriminative (Acc, P, R, F1) scores, in percent."


_AMBER_EPILOG = """examples:
  halluflow score amber --responses responses.json --annotations ../shared/data/amber/data
  halluflow score amber --responses r.json --annotations DIR --dimension d --out amber.json
  halluflow score amber --responses r.json --annotations DIR --dimension g --similarity glove
  halluflow score amber --responses r.json --annotations DIR --nouns rules   # same numbers on every machine
responses: JSON array [{"id": <1-based AMBER id>, "response": "..."}] (optional "status": ok / failed; a failed or
empty response is left out and counted as n_failed); DIR holds annotations.json, relation.json,
safe_words.txt (and metrics.txt, whose initial counters are used when present).
dimensions: all (a), g = generative, d = all discriminative, de = existence, da = attribute, dr = relation."""


def _configure_amber(parser: argparse.ArgumentParser) -> None:
    from halluflow.metrics.amber import DIMENSIONS

    from .argtypes import add_max_failed_argument

    parser.add_argument("--responses", required=True, help='JSON array [{"id", "response"}]')
    parser.add_argument(
        "--annotations", required=True, help="folder with annotations.json, relation.json, safe_words.txt"
    )
    parser.add_argument("--dimension", default="all", choices=sorted(DIMENSIONS), help="which sections (default all)")
    parser.add_argument(
        "--similarity",
        default="exact",
        help="near-synonym matcher: exact (default) or an embedder backend (glove, minilm)",
    )
    parser.add_argument("--similarity-threshold", type=float, default=0.8, help="cosine threshold (AMBER: 0.8)")
    parser.add_argument(
        "--nouns",
        default="auto",
        choices=("auto", "nltk", "rules"),
        help="generative noun step: nltk = AMBER's (needs nltk + punkt/tagger/WordNet data), rules = "
        "offline rules, auto (default) = nltk when its data is installed",
    )
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="also write the JSON to this file")


def _run_amber(args: argparse.Namespace) -> int:
    from halluflow.metrics.amber import score_files

    scores = score_files(
        args.annotations,
        args.responses,
        dimension=args.dimension,
        similarity=args.similarity,
        similarity_threshold=args.similarity_threshold,
        nouns=args.nouns,
        max_failed_fraction=args.max_failed_fraction,
    )
    emit(scores, args.out)  # refused before anything is printed or written
    if scores.get("n_default_rule"):
        from halluflow.metrics.parsers import default_rule_line

        parts = ("existence", "state", "number", "action", "relation")
        n_read = sum((scores.get(k) or {}).get("n") or 0 for k in parts)
        line = default_rule_line(
            f"score amber {args.responses}", "amber", scores["n_default_rule"], n_read, scores["default_rule_reasons"]
        )
        print(f"halluflow: note: {line}", file=sys.stderr)
    return 0


_CAOS_DESCRIPTION = "CAOS_T / CAOS_X / CAOS_K context-aware object similarities of hallucinated objects (CAOS)."


_CAOS_EPILOG = """examples:
  halluflow score caos --objects objects.jsonl --truth truth.jsonl --frequent coco_frequent.txt --embedder glove
  halluflow score caos --objects captions.jsonl --truth truth.jsonl --frequent f.txt --embedder minilm --k 3
  halluflow score caos --objects o.jsonl --truth t.jsonl --frequent f.txt --embedder table --vectors vec.tsv

--objects lines: {"image_id", "objects": [ordered]} (pre-extracted) or {"image_id", "caption"} (extracted with
the vocabulary matcher: COCO 80 + CHAIR synonyms + the truth and frequent objects). --truth lines:
{"image_id", "objects": [...]} or {"image_id", "truth": [...]}. --frequent: one object per line, most frequent first.
An --objects line may carry "status" (ok / failed): a failed line or a blank caption is left out, counted as n_failed.
Without an oracle every object is judged against the truth: hallucinated = extracted objects not in the truth."""


def _configure_caos(parser: argparse.ArgumentParser) -> None:
    from .argtypes import add_max_failed_argument, positive_int

    parser.add_argument("--objects", required=True, help="JSONL of ordered objects or captions per image_id")
    parser.add_argument("--truth", required=True, help="JSONL of truth objects per image_id")
    parser.add_argument(
        "--frequent",
        default="coco",
        help="training objects, most frequent first: 'coco' (MSCOCO train2014, shipped; default) "
        "or a text file (one per line) / TSV with an 'object' column",
    )
    parser.add_argument("--embedder", default="glove", help="embedder backend: glove, minilm or table")
    parser.add_argument("--vectors", help="TSV word<TAB>v1<TAB>... for --embedder table")
    parser.add_argument(
        "--k", type=positive_int, default=3, help="k of the headline CAOS_K, ≥ 1 (the sweep 1..10 is always given)"
    )
    parser.add_argument(
        "--synonyms",
        default="default",
        help="synonym TSV (synonym, coco_category) for canonical names; 'none' to disable",
    )
    parser.add_argument(
        "--negation",
        choices=("skip", "ignore"),
        default="skip",
        help="captions: leave out objects said to be absent ('no dog') [skip] or read them (CHAIR)",
    )
    parser.add_argument("--no-per-object", action="store_true", help="leave the per_object rows out of the JSON")
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="write the JSON here (atomically) instead of stdout")


def _run_caos(args: argparse.Namespace) -> int:
    from halluflow.caos.scores import score_files
    from halluflow.io import dumps_json, write_text

    result = score_files(
        args.objects,
        args.truth,
        frequent=args.frequent,
        embedder=args.embedder,
        vectors=args.vectors,
        k=args.k,
        synonyms=args.synonyms,
        negation=args.negation,
        per_object=not args.no_per_object,
        max_failed_fraction=args.max_failed_fraction,
    )
    text = dumps_json(result)
    if args.out:
        write_text(args.out, text)
    else:
        sys.stdout.write(text)
    return 0


_COMPARE_DESCRIPTION = (
    "Bootstrap 95% confidence intervals of each model's headline metrics and paired bootstrap "
    "comparisons between models on the queries they share, from the score stage's "
    "scores/<model>/answers.parquet tables (refused, in one line, when the tables answer different queries: other "
    "query ids, or a shared id with another truth or image sha256, as answers of another release do, or answers asked or read "
    "under another task definition: task_hash); or (--metrics) the mean and 95% interval of metrics over "
    "repeated releases of one model (all under one task) (bounded metrics: a logit-scale interval inside their range). A difference "
    "is 'significant' when its interval excludes 0."
)


_COMPARE_EPILOG = """examples:
  halluflow score compare --scores results/ode-demo/scores/*/answers.parquet
  halluflow score compare --scores a.parquet b.parquet --resamples 5000 --seed 1 --out compare.json
  halluflow score compare --metrics results/rel-s*/metrics/tiny-smolvlm.json"""


def _configure_compare(parser) -> None:
    from halluflow.metrics.uncertainty import MAX_RESAMPLES

    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--scores", nargs="+", help="scores/<model>/answers.parquet tables (one per model)")
    src.add_argument("--metrics", nargs="+", help="metrics/<model>.json of one model from several releases")
    parser.add_argument(
        "--resamples",
        default="2000",
        help=f"bootstrap resamples, 1..{MAX_RESAMPLES} (default 2000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--out", help="also write the JSON here")


def _run_compare(args) -> int:
    from halluflow.io import dumps_json, write_json
    from halluflow.metrics.uncertainty import compare_files

    result = compare_files(
        scores=args.scores, metrics=args.metrics, resamples=args.resamples, seed=args.seed, confidence=args.confidence
    )
    if args.out:
        write_json(args.out, result)
    print(dumps_json(result))
    return 0


_GHR_DESCRIPTION = (
    "Generic Hallucination Rate (UniHall/SAMF paper, eq. 22-23) and its risk-weighted form (eq. 31) of answers to UniHall "
    "instances; optionally BHR (rule verifier) and the LLM-judged SHR/GHS."
)


_GHR_EPILOG = """examples:
  halluflow score ghr --instances unihall.json --answers answers.jsonl
  halluflow score ghr --instances unihall.json --answers answers.jsonl --metrics ghr,bhr --tau3 0.6
  halluflow score ghr --instances unihall.json --answers answers.jsonl --similarity trigram --out ghr.json

The JSON names the models that scored it under "judges" (Sim_NLP's embedder: backend, model id, revision)."""


def _configure_ghr(parser) -> None:
    from halluflow.samf.metrics import TAU_DEFAULTS

    from .argtypes import add_max_failed_argument

    parser.add_argument("--instances", required=True, help="UniHall instances: a JSON array (Appendix B.1 schema)")
    parser.add_argument("--answers", required=True, help='JSONL lines {"instance_id", "answer"}')
    for key, value in TAU_DEFAULTS.items():
        parser.add_argument(f"--{key}", type=float, default=value, help=f"GHR threshold {key} (default {value})")
    parser.add_argument(
        "--similarity",
        default="minilm",
        choices=["minilm", "glove", "trigram"],
        help="Sim_NLP for free-form answers: an embedder (minilm, loaded only when needed) or trigram "
        "(character 3-gram cosine, model-free)",
    )
    parser.add_argument(
        "--metrics", default="ghr", help="comma list of ghr,bhr,shr,ghs (shr/ghs use the rule fallback)"
    )
    parser.add_argument(
        "--yon-unparsed",
        default="exclude",
        choices=["exclude", "not_hallucinated"],
        help="a yes/no answer with no yes/no word (another language, an emoji, a refusal): exclude = left out of "
        "GHR and counted as yon_unparsed (default); not_hallucinated = the paper's 'otherwise' branch (h = 0)",
    )
    parser.add_argument("--per-item", action="store_true", help="include one row per answered instance")
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="also write the JSON to this file")


def _run_ghr(args) -> int:
    from halluflow.samf.metrics import score_ghr_files

    result = score_ghr_files(
        args.instances,
        args.answers,
        metrics=args.metrics,
        tau1=args.tau1,
        tau2=args.tau2,
        tau3=args.tau3,
        similarity=args.similarity,
        per_item=args.per_item,
        max_failed_fraction=args.max_failed_fraction,
        yon_unparsed=args.yon_unparsed,
    )
    emit(result, args.out)
    if result["yon_unparsed"]:
        what = "left out of GHR" if args.yon_unparsed == "exclude" else "counted as not hallucinated"
        print(
            f"halluflow: note: score ghr {args.answers}: {result['yon_unparsed']} yes/no answers have no yes/no word "
            f"({what}; --yon-unparsed)",
            file=sys.stderr,
        )
    return 0


_RELEASE_DESCRIPTION = (
    "Any tool's answers to an ODE release (halluflow's answer stage, `answer run --source ode`, `import lmms-eval`,\n"
    "`import vlmevalkit`) scored by the release scorer: POPE-style numbers, hallucination rate and CHAIR-like\n"
    "description scores, overall and per distribution, pair kind, query kind and their crossings\n"
    "(by_distribution_pair_kind_query_type). Answers to part of the release (one distribution's subtask) are\n"
    "scored as they are; the rest is counted as n_unanswered. Answers are read by the reader the release's task\n"
    "declares (manifest.json `task`; default: release) unless --parser overrides it; the JSON's `task` block\n"
    "gives the task used, its hash and every override, also said on stderr."
)


_RELEASE_EPILOG = """examples:
  halluflow import lmms-eval logs/llava/*_samples_halluflow_demo_*.jsonl --out answers.jsonl
  halluflow score release answers.jsonl --release results/ode-demo/release
  halluflow score release answers.jsonl --release REL --parser pope --out metrics.json   # an override, said so
  halluflow score release answers/llava/000.parquet --release REL --scores scored.parquet
answers: JSONL {"query_id" | "question_id", "answer" | "text"[, "status", "model", "task_hash"]} or the answer
stage's parquet."""


def _configure_release(parser) -> None:
    from halluflow.metrics.parsers import NO, PARSERS, YES

    from .argtypes import add_max_failed_argument

    parser.add_argument("answers", help="answers JSONL (import lmms-eval / vlmevalkit, answer run) or parquet")
    parser.add_argument("--release", required=True, help="the release folder the answers answer")
    parser.add_argument(
        "--parser",
        default=None,
        choices=sorted(PARSERS),
        help="yes/no reader (default: the one the release's task declares; another is an override, recorded)",
    )
    parser.add_argument("--positive", default=YES, choices=[YES, NO], help="positive class (default: yes)")
    parser.add_argument(
        "--generative-truth",
        default="detected",
        choices=["detected", "scene"],
        help="descriptions judged against the scene's objects plus the detected ones (default) or the scene's only",
    )
    parser.add_argument("--model", help="model name (default: the answers' own, else their folder's name)")
    add_max_failed_argument(parser)
    parser.add_argument("--scores", help="also write the per-answer table (parquet)")
    parser.add_argument("--out", help="also write the JSON to this file")


def _run_release(args) -> int:
    from halluflow.io import write_parquet
    from halluflow.ode.release_scoring import score_release, summary_lines

    metrics, scored = score_release(
        args.answers,
        args.release,
        parser=args.parser,
        positive=args.positive,
        generative_truth=args.generative_truth,
        model=args.model,
        max_failed_fraction=args.max_failed_fraction,
    )
    if args.scores:
        write_parquet(args.scores, scored)
    emit(metrics, args.out)
    for line in summary_lines(metrics, f"score release {args.answers}"):
        print(f"halluflow: note: {line}", file=sys.stderr)
    return 0


_RELEASE = Command(
    "release",
    "an ODE release's answers from any tool, by distribution x pair kind x query kind (the release scorer)",
    _configure_release,
    _run_release,
    description=_RELEASE_DESCRIPTION,
    epilog=_RELEASE_EPILOG,
)

_POPE = Command(
    "pope",
    "POPE accuracy/precision/recall/F1/yes-ratio of yes/no answers",
    _configure_pope,
    _run_pope,
    description=_POPE_DESCRIPTION,
    epilog=_POPE_EPILOG,
)

_CHAIR = Command(
    "chair",
    "CHAIR_s / CHAIR_i of captions against COCO objects",
    _configure_chair,
    _run_chair,
    description=_CHAIR_DESCRIPTION,
    epilog=_CHAIR_EPILOG,
)

_AMBER = Command(
    "amber",
    "AMBER generative (CHAIR, Cover, Hal, Cog) and discriminative scores",
    _configure_amber,
    _run_amber,
    description=_AMBER_DESCRIPTION,
    epilog=_AMBER_EPILOG,
)

_CAOS = Command(
    "caos",
    "CAOS_T / CAOS_X / CAOS_K context-aware object similarities",
    _configure_caos,
    _run_caos,
    description=_CAOS_DESCRIPTION,
    epilog=_CAOS_EPILOG,
)

_COMPARE = Command(
    "compare",
    "bootstrap confidence intervals per model and paired model comparisons",
    _configure_compare,
    _run_compare,
    description=_COMPARE_DESCRIPTION,
    epilog=_COMPARE_EPILOG,
)

_GHR = Command(
    "ghr",
    "UniHall GHR and risk-weighted GHR of answers",
    _configure_ghr,
    _run_ghr,
    description=_GHR_DESCRIPTION,
    epilog=_GHR_EPILOG,
)

COMMANDS = (
    _POPE,
    _RELEASE,
    _CHAIR,
    _AMBER,
    _CAOS,
    _COMPARE,
    _GHR,
)
