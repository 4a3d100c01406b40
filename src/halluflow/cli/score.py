"""`halluflow score ...`: the scorers (POPE, CHAIR, AMBER, CAOS, GHR) and bootstrap model comparisons."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Sequence

from .command import Command

_POPE_DESCRIPTION = (
    "POPE scores of yes/no answers against POPE label files. Answers are matched to labels by question_id.\n"
    "Parsers: pope (official evaluate.py), exact (exact yes/no match, fixed aggregation), amber (strict\n"
    "'Yes'/'No'), lenient, unihall, affirm, opener, pope_lower (docs/failed-answers.md); peer parsers: lmms_eval\n"
    "(lmms-eval's POPE task, its bugs included: yes_ratio counts ground truth, unparsed answers left out of\n"
    "recall), vlmevalkit (VLMEvalKit's YOrN_Extraction and POPE rating, no judge model) and pope_official\n"
    '(evaluate.py, "" read as yes). Undefined ratios (0/0) are null (0 under lmms_eval and vlmevalkit, as they\n'
    "print).\n"
    "A failed record (status failed, or no answer) is never scored: excluded and counted as n_failed. Under\n"
    "halluflow's parsers a blank answer (empty, whitespace or control characters only) is failed too; a peer\n"
    "parser scores it as its peer does. An answer read as neither yes nor no counts as wrong and as n_unknown\n"
    "(docs/failed-answers.md). The output's parser_mode says which rule applied."
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
    from halluflow.metrics.pope import score_files

    emit(
        score_files(
            args.answers,
            args.labels,
            parser=args.parser,
            positive=args.positive,
            max_failed_fraction=args.max_failed_fraction,
        ),
        args.out,
    )
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
    from halluflow.errors import InputError
    from halluflow.forked import Forked
    from halluflow.metrics.amber import AmberData, amber_scores, load_responses, make_matcher, read_amber_folder
    from halluflow.metrics.parsers import check_failed

    # A helper process reads the annotation folder (CPython's JSON parsing and our checks) while this one loads
    # polars and reads the responses. Errors are those of load_amber then load_responses, in that order.
    with Forked(read_amber_folder, args.annotations) as folder:
        try:
            responses = load_responses(args.responses, None)  # ids checked from 1 up; the upper end below
        except InputError:
            responses = None
        data = AmberData(*folder.result())  # a bad annotation folder is reported first
    if responses is None or responses["id"].max() > data.n:
        # read again with AMBER's id count: raises the response file's error, naming AMBER's id range
        responses = load_responses(args.responses, data.n)
    matcher = make_matcher(args.similarity, args.similarity_threshold)
    scores = amber_scores(responses, data, args.dimension, matcher, nouns=args.nouns)
    # refused before anything is printed or written
    check_failed(scores["n_failed"], responses.height, args.max_failed_fraction, f"score amber {args.responses}")
    emit(scores, args.out)
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


def _by_image(rows: list[dict], path: str, keys: Sequence[str]) -> dict[str, dict]:
    from halluflow.errors import InputError

    out: dict[str, dict] = {}
    for n, row in enumerate(rows, 1):
        if "image_id" not in row:
            raise InputError(f"{path}: line {n} has no 'image_id'")
        if not any(k in row for k in keys):
            raise InputError(f"{path}: line {n} (image_id {row['image_id']!r}) needs one of {list(keys)}")
        iid = str(row["image_id"])
        for k in ("objects", "truth"):
            if k in row and (not isinstance(row[k], list) or not all(isinstance(o, str) for o in row[k])):
                raise InputError(
                    f"{path}: line {n} (image_id {iid!r}): '{k}' must be a list of object names, "
                    f"got {json.dumps(row[k])[:60]}"
                )
        if iid in out:
            raise InputError(f"{path}: image_id {iid!r} appears twice")
        out[iid] = row
    return out


def _run_caos(args: argparse.Namespace) -> int:
    from halluflow.caos.extract import ExtractedObject, ObjectExtractor, build_vocabulary, tokens
    from halluflow.caos.scores import _r, judge_caption, resolve_frequent, score
    from halluflow.errors import InputError
    from halluflow.io import dumps_json, read_jsonl, write_text
    from halluflow.metrics.parsers import check_failed, is_failed
    from halluflow.models import registry

    objects = _by_image(read_jsonl(args.objects), args.objects, ("objects", "caption"))
    truth = _by_image(read_jsonl(args.truth), args.truth, ("objects", "truth"))
    frequent = resolve_frequent(args.frequent)
    spec: dict = {"backend": args.embedder}
    if args.vectors:
        spec["path"] = args.vectors
    embedder = registry.create("embedder", spec)
    synonyms = {"default": True, "none": False}.get(args.synonyms, args.synonyms)
    truth_lists = {}
    for iid, row in truth.items():
        t = row.get("objects", row.get("truth"))
        if not isinstance(t, list):
            raise InputError(f"{args.truth}: image_id {iid!r}: truth must be a list of object names")
        truth_lists[iid] = [str(x) for x in t]
    vocab = build_vocabulary(
        extra_terms=sorted({x for t in truth_lists.values() for x in t} | set(frequent)), synonyms=synonyms
    )
    extractor = ObjectExtractor(vocab, negation=args.negation)
    captions = []
    n_failed = 0
    for iid, row in objects.items():
        if iid not in truth_lists:
            raise InputError(f"{args.truth}: no truth for image_id {iid!r} (listed in {args.objects})")
        # the shared failed-answer rule: a "status" other than ok, or a blank caption (given objects have none)
        if is_failed(row.get("caption") if "objects" not in row else "objects given", row.get("status")):
            n_failed += 1
            continue
        if "objects" in row:
            if not isinstance(row["objects"], list):
                raise InputError(f"{args.objects}: image_id {iid!r}: 'objects' must be a list")
            names = list(dict.fromkeys(vocab.normalise(str(o)) for o in row["objects"] if tokens(str(o))))
            objs = [ExtractedObject(n, n, i, "given", n in vocab) for i, n in enumerate(names)]
        else:
            objs = extractor.extract(str(row["caption"] or "")).objects
        captions.append(judge_caption(iid, iid, objs, truth_lists[iid], vocab))
    check_failed(n_failed, len(objects), args.max_failed_fraction, f"score caos {args.objects}")
    summary, rows = score(captions, [vocab.normalise(f) for f in frequent], {args.embedder: embedder}, k=args.k)
    result = dict(summary["embedders"][args.embedder])
    result["n_failed"] = n_failed
    result.update(objects=summary["objects"], sequential=summary["sequential"], embedder=embedder.describe().as_dict())
    if not args.no_per_object:
        prefix = f"{args.embedder}_"
        result["per_object"] = [
            {
                "image_id": r["image_id"],
                "position": r["position"],
                "object": r["object"],
                **{
                    k[len(prefix) :]: (_r(v) if isinstance(v, float) else v)
                    for k, v in r.items()
                    if k.startswith(prefix) and not re.search(r"_k\d+$", k)
                },
            }
            for r in rows
            if r["hallucinated"]
        ]
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
    "query ids, or a shared id with another truth or image sha256, as answers of another release do); or (--metrics) the mean and 95% interval of metrics over "
    "repeated releases of one model (bounded metrics: a logit-scale interval inside their range). A difference "
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
    from halluflow.errors import InputError
    from halluflow.io import dumps_json, read_parquet, write_json
    from halluflow.metrics.uncertainty import (
        _model_name,
        compare_models,
        load_releases,
        repeated_releases,
        resample_count,
    )

    resamples = resample_count(args.resamples)
    if not 0 < args.confidence < 1:
        raise InputError(f"--confidence {args.confidence}: expected a number between 0 and 1")
    alpha = 1 - args.confidence
    if args.metrics:
        docs = load_releases(args.metrics)
        result = {
            "confidence": args.confidence,
            "model": docs[0]["model"],
            "releases": args.metrics,
            "metrics": repeated_releases(docs, alpha, sources=list(args.metrics)),
        }
    else:
        tables = {}
        for p in map(Path, args.scores):
            table = read_parquet(p)
            name = _model_name(p, table)
            if name in tables:
                raise InputError(f"--scores {p}: model {name!r} given twice")
            tables[name] = table
        result = compare_models(tables, n_resamples=resamples, seed=args.seed, alpha=alpha)
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
    parser.add_argument("--per-item", action="store_true", help="include one row per answered instance")
    add_max_failed_argument(parser)
    parser.add_argument("--out", help="also write the JSON to this file")


def _run_ghr(args) -> int:
    from halluflow.errors import InputError
    from halluflow.metrics.parsers import check_failed
    from halluflow.samf.metrics import (
        GHRScorer,
        MetricSuite,
        read_answers,
        score_rows,
        similarity_from_config,
        summarize,
    )
    from halluflow.samf.schema import load_instances

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    bad = [m for m in metrics if m not in ("ghr", "bhr", "shr", "ghs")]
    if bad:
        raise InputError(f"--metrics: unknown metric {bad[0]!r}; known: ghr, bhr, shr, ghs")
    if "ghr" not in metrics:
        metrics.insert(0, "ghr")
    instances = load_instances(args.instances)
    answers = read_answers(args.answers, {i["instance_id"] for i in instances})
    check_failed(  # an instance with no answer line counts against the limit too (it was not scored)
        sum(a is None for a in answers.values()),
        len(instances),
        args.max_failed_fraction,
        f"score ghr {args.answers}",
        n_missing=len(instances) - len(answers),
    )
    similarity = similarity_from_config("trigram" if args.similarity == "trigram" else {"backend": args.similarity})
    scorer = GHRScorer(tau1=args.tau1, tau2=args.tau2, tau3=args.tau3, similarity=similarity)
    rows = score_rows(instances, answers, scorer, metrics)
    out = summarize(rows, metrics)
    out["n_instances"] = len(instances)
    out["n_missing"] = len(instances) - len(rows)
    out["thresholds"] = {"tau1": args.tau1, "tau2": args.tau2, "tau3": args.tau3}
    out["similarity"] = args.similarity
    # What scored these numbers (Sim_NLP named with its model; the rule judge and verifier need no model).
    out["judges"] = MetricSuite(scorer, tuple(metrics)).describe()
    if args.per_item:
        out["items"] = rows

    emit(out, args.out)
    return 0


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
    _CHAIR,
    _AMBER,
    _CAOS,
    _COMPARE,
    _GHR,
)
