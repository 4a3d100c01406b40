"""`halluflow release ...`: verify, diff, export, check for contamination, audit and validate ODE releases."""

from __future__ import annotations

from pathlib import Path

from .command import Command

_VERIFY_DESCRIPTION = (
    "Check a release folder against its manifest.json: every listed file must exist with its sha256 "
    "and no unlisted file may be present. Exit 0 when it verifies; otherwise exit 1 and print one "
    "line per problem, naming the file."
)


_VERIFY_EPILOG = """examples:
  halluflow release verify results/ode-demo/release
  halluflow release verify /data/ode-2026-11/release && echo verified"""


def _configure_verify(parser) -> None:
    parser.add_argument("dir", help="release folder (holds manifest.json)")


def _run_verify(args) -> int:
    from halluflow.errors import visible
    from halluflow.ode.release import MANIFEST, read_manifest, verify_release

    problems = verify_release(args.dir)
    for p in problems:
        print(visible(p))  # one line per problem: a file name cannot forge or erase lines
    if problems:
        return 1
    n = len(read_manifest(args.dir)["files"])
    print(visible(f"ok: {n} files match {Path(args.dir) / MANIFEST}"))
    return 0


_DIFF_DESCRIPTION = (
    "Compare two release folders: concept pairs and concepts added and removed per distribution, "
    "graph edges changed (when each release's graph/ folder sits beside it, as the workflow writes "
    "it), query counts, the query ids both use and how many of them name different content, images with the same "
    "bytes, and whether B descends from A. Prints a table; --out writes the JSON."
)


_DIFF_EPILOG = """examples:
  halluflow release diff results/ode-2026-10/release results/ode-2026-11/release
  halluflow release diff A/release B/release --out diff.json --markdown diff.md"""


def _configure_diff(parser) -> None:
    parser.add_argument("a", help="the earlier release folder")
    parser.add_argument("b", help="the later release folder")
    parser.add_argument("--out", help="write the full diff (with the pair lists) as JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")


def _run_diff(args) -> int:
    from halluflow.io import dumps_json, write_json, write_text
    from halluflow.ode.lineage import diff_markdown, diff_releases

    d = diff_releases(args.a, args.b)
    if args.out:
        write_json(args.out, d)
    table = diff_markdown(d)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    if not args.out:
        print(dumps_json({k: v for k, v in d.items() if k != "pairs"}))
    return 0


_EXPORT_DESCRIPTION = (
    "Write a release as training data (llava, sharegpt, dpo; each with LLaMA-Factory's dataset_info.json), as an "
    "lmms-eval task folder (one subtask per distribution and per query kind, grouped under the release) or as a "
    "VLMEvalKit Y/N dataset (TSV + dataset class). Every export holds only truths known by construction and a "
    "DATACARD.md naming its source release (and the model whose answers made the DPO pairs); lmms-eval and "
    "VLMEvalKit exports also write pope_labels.jsonl, so `halluflow import` + `score pope` score their outputs."
)


_EXPORT_EPILOG = """examples:
  halluflow release export results/ode-demo/release --format llava --out exports/llava
  halluflow release export results/ode-demo/release --format dpo \\
      --answers results/ode-demo/scores/tiny-smolvlm/answers.parquet --out exports/dpo
  halluflow release export results/ode-demo/release --format lmms-eval --out exports/lmms_eval_tasks
  halluflow release export results/ode-demo/release --format vlmevalkit --out exports/vlmevalkit"""


def _configure_export(parser) -> None:
    from halluflow.ode.export import FORMATS

    parser.add_argument("release", help="release folder (holds queries.parquet, images/ and manifest.json)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--answers", help="dpo: a model's scores/<model>/answers.parquet (parsed + hallucinated)")
    parser.add_argument(
        "--task", help="name of the lmms-eval task / VLMEvalKit or LLaMA-Factory dataset (default halluflow_<release>)"
    )


def _run_export(args) -> int:
    from halluflow.io import dumps_json
    from halluflow.ode.export import export_release

    result = export_release(args.release, args.format, args.out, answers=args.answers, task=args.task)
    print(dumps_json(result))
    return 0


_CONTAMINATION_DESCRIPTION = (
    "Embed a release's images and a reference folder of real images; report the Fréchet distance, "
    "each release image's nearest reference image, near-duplicates flagged as possible "
    "contamination, and a 2-D projection plot. Without --model a tiny random DINOv2 stand-in is "
    "used (it only detects identical images) and every output says stand_in: true."
)


_CONTAMINATION_EPILOG = """examples:
  halluflow release contamination results/ode-demo/release --reference /data/coco/val2017 --out contamination/
  halluflow release contamination REL --reference REF --model facebook/dinov2-small --threshold 0.9 --out out/"""


def _configure_contamination(parser) -> None:
    parser.add_argument("release", help="release folder (images/ + queries.parquet)")
    parser.add_argument("--reference", required=True, help="folder of real reference images (searched recursively)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--contaminated",
        help="folder of real images in the models' training data: adds ODE's three-way view "
        "(synthetic vs contaminated vs clean reference)",
    )
    parser.add_argument(
        "--model",
        help="image embedder: hub id or local folder (CLIP, SigLIP, DINOv2); default: a tiny random DINOv2 stand-in",
    )
    parser.add_argument("--revision", help="model revision (pin it for a reproducible check)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda[:N] (default auto)")
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="cosine similarity at or above which an image is flagged "
        "(default 0.95; 0.9999 with the stand-in embedder)",
    )


def _run_contamination(args) -> int:
    from halluflow.io import dumps_json
    from halluflow.ode.contamination import check_with_model

    result = check_with_model(
        args.release,
        args.reference,
        args.out,
        model=args.model,
        revision=args.revision,
        device=args.device,
        threshold=args.threshold,
        contaminated_dir=args.contaminated,
    )
    print(dumps_json({k: v for k, v in result.items() if k != "flagged"}))
    return 0


_AUDIT_DESCRIPTION = (
    "Audit the stated truth of every yes/no item of a release. Without --labels: a second detector and the CAOS "
    "VLM-oracle ensemble re-judge every item (disagreements flagged per item and counted per query type x "
    "distribution), and a stratified sample sized for --margin at --confidence is written as one self-contained "
    "HTML page (annotate.html) whose 'save CSV' button downloads the annotator's labels. With --labels: the "
    "label-error rate of that CSV per query type x stated answer (beside RePOPE's rates for POPE), per query type and "
    "overall, with exact finite-population (hypergeometric) intervals that cover the unlabelled items, is written "
    "into the release's DATACARD.md and manifest.json (re-hashed: `release verify` still passes). The second "
    "detector may not be the release's own; oracle members that are models under test need --allow-dependent-oracle."
)


_AUDIT_EPILOG = """examples:
  halluflow release audit results/ode-demo/release                 # -> results/ode-demo/audit/
  halluflow release audit results/ode-demo/release --labels ~/Downloads/labels-ode-demo.csv
  halluflow release audit REL --detector IDEA-Research/grounding-dino-base --oracle qwen2-vl --margin 0.03"""


def _configure_audit(parser) -> None:
    from .argtypes import fraction, positive_int

    parser.add_argument("release", help="release folder (holds manifest.json)")
    parser.add_argument("--out", help="audit folder (default: results/<release>/audit beside the release folder)")
    parser.add_argument(
        "--labels", help="the CSV the annotation page saved: report its label-error rates and record them"
    )
    parser.add_argument(
        "--config",
        help="workflow config: its models: (the oracle), caos.oracle.vote and audit: settings (default: ./config.yaml "
        "when present; options below override its audit: section)",
    )
    parser.add_argument(
        "--detector",
        help="second detector: hub id or folder (default: a tiny random OWLv2 stand-in, allowed only when the "
        "release's own detector was a stand-in); 'none' skips it",
    )
    parser.add_argument("--detector-backend", help="detector backend (default transformers)")
    parser.add_argument(
        "--detector-threshold", type=fraction, help="score for 'present' (default: the release's exclusion threshold)"
    )
    parser.add_argument(
        "--oracle",
        action="append",
        help="oracle member from the config's models: (repeat; default: caos.oracle.members, else every model that "
        "looks at images); 'none' skips the oracle",
    )
    parser.add_argument(
        "--allow-dependent-oracle",
        action="store_true",
        help="let oracle members that are models under test (models:) judge the labels; every output then says so "
        "(default: refused when named, left out of the default oracle)",
    )
    parser.add_argument("--margin", type=fraction, help="half-width of each query type's rate (default 0.025)")
    parser.add_argument("--confidence", type=fraction, help="confidence level (default 0.95)")
    parser.add_argument("--expected-rate", type=fraction, help="expected error rate p of the sample size (default 0.5)")
    parser.add_argument("--seed", type=int, help="sample seed (default: the release's seed)")
    parser.add_argument("--max-side", type=positive_int, default=512, help="largest image side in the page (px)")


def _say(line: str) -> None:
    """One line of output: names and notes taken from data are shown with their control characters visible."""
    from halluflow.errors import visible

    print(visible(line))


def _run_audit(args) -> int:
    from halluflow.ode.audit import apply_labels, default_out, interval_text, notes, percent, rate_rows, run_workflow

    release_dir = Path(args.release)
    out_dir = Path(args.out) if args.out else default_out(release_dir)
    if args.labels:
        record = apply_labels(release_dir, out_dir, args.labels)
        lab = record["labels"]
        for line in notes(record):
            _say(f"WARNING: {line}")
        _say(
            f"label audit of {release_dir}: {lab['labelled']} labelled, {lab['unsure']} unsure, "
            f"{lab.get('unresolved', lab['unsure']) - lab['unsure']} sampled but unlabelled "
            f"({100 * lab['confidence']:g}% exact finite-population intervals)"
        )
        _say(f"  {'query type / stated answer':<28} {'items':>6} {'errors':>13}  {'rate':>6}  interval")
        for name, r, ref in rate_rows(lab):
            repope = f"  (RePOPE, POPE: {percent(ref)})" if ref is not None else ""
            _say(
                f"  {name:<28} {r.get('population', 0):>6} {r['errors']:>6}/{r['labelled']:<6}  "
                f"{percent(r['error_rate']):>6}  {interval_text(r)}{repope}"
            )
        for name, r in lab["by_query_type"].items():
            _say(f"  {name}: {r['errors']}/{r['labelled']} errors, rate {percent(r['error_rate'])} {interval_text(r)}")
        _say(f"recorded in {release_dir / 'DATACARD.md'} and {release_dir / 'manifest.json'}")
        return 0
    from halluflow.config import load_config

    config_path = args.config or ("config.yaml" if Path("config.yaml").is_file() else None)
    config = load_config(config_path) if config_path else {}
    overrides = {
        "detector": args.detector,
        "detector_backend": args.detector_backend,
        "detector_threshold": args.detector_threshold,
        "oracle": [] if args.oracle == ["none"] else args.oracle,
        "allow_dependent_oracle": args.allow_dependent_oracle or None,
        "margin": args.margin,
        "confidence": args.confidence,
        "expected_rate": args.expected_rate,
    }
    summary = run_workflow(release_dir, out_dir, config, overrides, seed=args.seed, max_side=args.max_side)
    _print_audit(summary, out_dir)
    return 0


def _print_audit(summary: dict, out_dir: Path) -> None:
    from halluflow.ode.audit import PAGE

    t = summary["totals"]
    if summary["warning"]:
        _say(f"WARNING: {summary['warning']}")
    for line in ((summary.get("independence") or {}).get("note"), summary.get("human_only")):
        if line:
            _say(f"WARNING: {line}")
    left_out = (summary.get("independence") or {}).get("left_out_dependent") or []
    if left_out:
        _say(
            f"oracle: left out {', '.join(map(str, left_out))} (models under test; --allow-dependent-oracle uses them)"
        )
    _say(
        f"audit of {summary['release']}: {summary['items']} yes/no items; detector disagrees on "
        f"{t['detector_disagrees']} of {t['detector_judged']}, oracle on {t['oracle_disagrees']} of "
        f"{t['oracle_judged']} ({t['oracle_undecided']} undecided); {t['flagged']} flagged"
    )
    for r in summary["by_query_type_distribution"]:
        _say(
            f"  {r['query_type']:<15} {r['distribution']:<10} items {r['items']:>4}  detector {r['detector_disagrees']}"
            f"/{r['detector_judged']}  oracle {r['oracle_disagrees']}/{r['oracle_judged']}  flagged {r['flagged']}"
        )
    s = summary["sample"]
    _say(
        f"sample: {s['size']} items for +/-{100 * s['margin']:g} points at {100 * s['confidence']:g}% per query type "
        f"-> {out_dir / PAGE}"
    )


_VALIDITY_DESCRIPTION = (
    "Validity of an ODE release against a static real-image set (ODE's Fig. 7): for the models both runs answered, "
    "one metric of the existence questions on the concepts the release and the real set share, on each side, and "
    "their difference; across models Spearman's rho and Kendall's tau-b of the two columns with seeded bootstrap "
    "intervals (undefined with fewer than 3 models). ODE is a result folder of a run on the release "
    "(scores/<model>/answers.parquet, metrics/<model>.json), REAL one of a run whose answer.source is POPE or AMBER "
    "(answers/<model>/*.parquet, metrics/<model>.json); --labels is that source's file."
)


_VALIDITY_EPILOG = """examples:
  halluflow release validity results/ode-demo results/pope-demo --labels coco_pope_popular.json
  halluflow release validity results/ode-demo results/amber-run --labels query_all.json \\
      --annotations amber/data/annotations.json --metric f1 --out validity.json"""


def _configure_validity(parser) -> None:
    from halluflow.metrics.parsers import PARSERS
    from halluflow.validity import METRICS

    parser.add_argument("ode", help="result folder of the run on the ODE release (results/<release>)")
    parser.add_argument("real", help="result folder of the run on the static real-image set (POPE or AMBER source)")
    parser.add_argument("--labels", required=True, help="that set's file: POPE label file, or AMBER query file")
    parser.add_argument("--annotations", help="AMBER annotations.json (the truth; AMBER only)")
    parser.add_argument("--release", help="the release folder when not ODE/release (a run on answer.source.path)")
    parser.add_argument("--metric", default="accuracy", choices=METRICS, help="POPE metric compared (default accuracy)")
    parser.add_argument("--parser", choices=sorted(PARSERS), help="real side's parser (default: the one its run used)")
    parser.add_argument("--resamples", default="1000", help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--out", help="also write the JSON here")


def _run_validity(args) -> int:
    from halluflow.io import write_json
    from halluflow.metrics.uncertainty import resample_count
    from halluflow.validity import table, validity

    doc = validity(
        args.ode,
        args.real,
        args.labels,
        annotations=args.annotations,
        release=args.release,
        metric=args.metric,
        parser=args.parser,
        n_resamples=resample_count(args.resamples),
        seed=args.seed,
        confidence=args.confidence,
    )
    if args.out:
        write_json(args.out, doc)
    print(table(doc))
    return 0


_VERIFY = Command(
    "verify",
    "check every file of a release against its manifest.json",
    _configure_verify,
    _run_verify,
    description=_VERIFY_DESCRIPTION,
    epilog=_VERIFY_EPILOG,
)

_DIFF = Command(
    "diff",
    "pairs, concepts, graph edges and queries added/removed between two releases",
    _configure_diff,
    _run_diff,
    description=_DIFF_DESCRIPTION,
    epilog=_DIFF_EPILOG,
)

_EXPORT = Command(
    "export",
    "write a release as llava / sharegpt / dpo training data, an lmms-eval task or a VLMEvalKit dataset",
    _configure_export,
    _run_export,
    description=_EXPORT_DESCRIPTION,
    epilog=_EXPORT_EPILOG,
)

_CONTAMINATION = Command(
    "contamination",
    "Fréchet distance and near-duplicates of a release vs real images",
    _configure_contamination,
    _run_contamination,
    description=_CONTAMINATION_DESCRIPTION,
    epilog=_CONTAMINATION_EPILOG,
)

_AUDIT = Command(
    "audit",
    "re-judge every yes/no item (second detector, VLM oracle); annotation page; label-error rates",
    _configure_audit,
    _run_audit,
    description=_AUDIT_DESCRIPTION,
    epilog=_AUDIT_EPILOG,
)

_VALIDITY = Command(
    "validity",
    "per-model scores on an ODE release vs a real-image set (POPE, AMBER) on shared concepts; rank correlations",
    _configure_validity,
    _run_validity,
    description=_VALIDITY_DESCRIPTION,
    epilog=_VALIDITY_EPILOG,
)

COMMANDS = (
    _VERIFY,
    _DIFF,
    _EXPORT,
    _CONTAMINATION,
    _AUDIT,
    _VALIDITY,
)
