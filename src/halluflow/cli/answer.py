"""`halluflow answer run`: ask one model a benchmark's questions (cached, resumable, retried)."""

from __future__ import annotations

import json
from pathlib import Path

from .command import Command

_ANSWER_DESCRIPTION = (
    "Ask one model every question of a POPE label file, an AMBER query file or an ODE release, with the same\n"
    "request-hash cache, retries and failure recording as the workflow's answer rule. The output is in the format\n"
    "the matching scorer reads: POPE → JSONL {question_id, answer}; AMBER → JSON array [{id, response}];\n"
    "ODE → JSONL {query_id, answer}. A rerun with the same --cache repeats no finished request."
)


_ANSWER_EPILOG = """examples:
  halluflow answer run --source pope --questions coco_pope_popular.json --images val2014/ \\
      --backend openai --arg base_url=http://localhost:8000/v1 --arg model=llava-hf/llava-1.5-7b-hf \\
      --name llava --out llava_popular.jsonl
  halluflow score pope --answers llava_popular.jsonl --labels coco_pope_popular.json
  halluflow answer run --source amber --questions data/query/query_all.json --images AMBER/ \\
      --backend transformers --arg model=HuggingFaceTB/SmolVLM-256M-Instruct --arg device=cuda --out amber.json
  halluflow answer run --source ode --questions results/ode-demo/release --backend blind --out blind.jsonl"""


def _configure_answer(parser) -> None:
    from halluflow.answer import DEFAULT_SETTINGS
    from halluflow.metrics.parsers import DEFAULT_MAX_FAILED_FRACTION
    from halluflow.ode.task import DEFAULT_SUFFIX

    from .argtypes import fraction, positive_int

    parser.add_argument("--source", choices=["pope", "amber", "ode"], required=True, help="kind of question file")
    parser.add_argument(
        "--questions", required=True, help="POPE label file, AMBER query_*.json, or an ODE release folder"
    )
    parser.add_argument("--images", help="folder holding the images (pope/amber; an ODE release holds its own)")
    parser.add_argument("--annotations", help="AMBER annotations.json (fills truth and query types)")
    parser.add_argument("--backend", help="vlm backend: transformers | openai | vllm | blind | prior")
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend argument (repeatable); VALUE is read as YAML, so 8 is a number and true a boolean",
    )
    parser.add_argument("--model-config", help="YAML file with one `models:` entry {name, backend, args, stand_in}")
    parser.add_argument("--name", default=None, help="model name recorded in the outputs (default: the backend name)")
    parser.add_argument("--out", required=True, help="answers file to write (.jsonl, .json or .parquet)")
    parser.add_argument("--cache", default=None, help="request cache folder (default: <out>.cache/)")
    parser.add_argument(
        "--yes-no-suffix",
        default=None,
        help="appended to yes/no questions (default: an ODE release's declared task, else "
        f"{DEFAULT_SUFFIX!r}); another suffix than the release's is an override, recorded",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        help="yes/no answer length (default: the release's task, else 6)",
    )
    parser.add_argument(
        "--max-new-tokens-generative",
        type=positive_int,
        default=None,
        help="description length (default: the release's task, else 24)",
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=DEFAULT_SETTINGS["batch_size"], help="requests per backend call"
    )
    parser.add_argument(
        "--max-failed-fraction",
        type=fraction,
        default=DEFAULT_MAX_FAILED_FRACTION,
        metavar="F",
        help="exit non-zero when more than this share of requests failed (default "
        f"{DEFAULT_MAX_FAILED_FRACTION}); failures are written as status failed either way and "
        "a rerun retries only them",
    )


def _cli_spec(args) -> dict:
    import yaml

    from halluflow.errors import ConfigError
    from halluflow.io import read_text

    if args.model_config:
        path = Path(args.model_config)
        if not path.exists():
            raise ConfigError(f"--model-config {path}: file not found")
        spec = yaml.safe_load(read_text(path))
        if isinstance(spec, dict) and "models" in spec:
            spec = (spec["models"] or [None])[0]
        if not isinstance(spec, dict):
            raise ConfigError(f"--model-config {path}: expected one models entry {{name, backend, args}}")
    elif args.backend:
        spec = {"name": args.name or args.backend, "backend": args.backend, "args": {}}
    else:
        raise ConfigError("give --backend (with --arg KEY=VALUE) or --model-config")
    spec = dict(spec)
    spec.setdefault("name", args.name or spec.get("backend"))
    if args.name:
        spec["name"] = args.name
    extra = {}
    for item in args.arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--arg {item!r}: expected KEY=VALUE")
        extra[key] = yaml.safe_load(value)
    spec["args"] = {**(spec.get("args") or {}), **extra}
    return spec


def _run_answer(args) -> int:
    from halluflow.answer import answer_file
    from halluflow.io import safe_name
    from halluflow.metrics.parsers import check_failed

    spec = _cli_spec(args)
    # The name is a folder of the request cache: "../../x" would put the cache outside it.
    safe_name(str(spec["name"]), "--name" if args.name else "model name")
    out = Path(args.out)
    lengths = {}  # what is not given: the release's declared task (ODE), else the defaults
    if args.max_new_tokens:
        lengths["discriminative"] = args.max_new_tokens
    if args.max_new_tokens_generative:
        lengths["generative"] = args.max_new_tokens_generative
    settings = {"yes_no_suffix": args.yes_no_suffix, "max_new_tokens": lengths, "batch_size": args.batch_size}
    stats, first = answer_file(
        args.source,
        args.questions,
        out,
        spec,
        images=args.images,
        annotations=args.annotations,
        cache=args.cache,
        settings=settings,
    )
    print(json.dumps({"out": str(out), **stats}, sort_keys=True))
    check_failed(
        stats["failed"],
        stats["queries"],
        args.max_failed_fraction,
        f"answer run {out}",
        f"{first}they are written as status failed; the same command again retries only them",
    )
    return 0


_ANSWER = Command(
    "run",
    "ask one model POPE / AMBER / ODE questions (cached, resumable, retried)",
    _configure_answer,
    _run_answer,
    description=_ANSWER_DESCRIPTION,
    epilog=_ANSWER_EPILOG,
)

COMMANDS = (_ANSWER,)
