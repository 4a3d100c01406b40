# Shared helpers of the workflow: config validation, output layout, shard lists, input functions.
# Stage rule files (rules/<stage>.smk) hold rules only; their helpers live here.
import sys
from pathlib import Path

from halluflow.config import validate_config
from halluflow.errors import ConfigError

try:
    validate_config(config)
except ConfigError as _exc:
    # One line naming the key, before any job runs.
    sys.exit(f"halluflow: invalid config: {_exc}")


RELEASE = config["release"]
OUT = f"results/{RELEASE}"
LOGS = f"logs/{RELEASE}"
BENCH = f"benchmarks/{RELEASE}"
MODELS_CACHE = "resources/models"
IMAGE_SHARDS = [f"{i:03d}" for i in range(config["shards"]["images"])]
ANSWER_SHARDS = [f"{i:03d}" for i in range(config["shards"]["answers"])]


wildcard_constraints:
    shard=r"\d{3}",
    release=r"[A-Za-z0-9._-]+",


# Every stage appends a function returning its final targets; `rule all` asks for all of them.
FINAL_TARGETS = []


def get_final_output():
    targets = []
    for fn in FINAL_TARGETS:
        targets.extend(fn())
    return targets


