"""Plain helpers the test modules share (paths, peer-data lookup, small hand-made inputs); imported as
`from helpers import X`. Fixtures live only in tests/conftest.py; workflow runs in tests/workflow_utils.py."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from chat_server import ChatServer
from PIL import Image

from halluflow.backends.base import LLM, BackendInfo
from halluflow.io import sha256_bytes, write_parquet
from halluflow.ode.lineage import lineage
from halluflow.ode.release import package_release

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("HALLUFLOW_SHARED", REPO.parent / "shared"))
SHARED_DATA = SHARED / "data"


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data; skips the test when the peer data is not beside the clone."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"peer data {path} not present (clone ../shared beside the repo to run conformance tests)")
    return path


# Stand-in kinds of the VLM families people evaluate (halluflow.backends.tiny_vlms): one per processor layout.
VLM_FAMILIES = ("smolvlm", "llava", "llava_next", "qwen2_vl", "gemma3")


def make_graph(folder):
    """A six-node co-occurrence graph (nodes.parquet, edges.parquet) for the prior VLM."""
    nodes = pl.DataFrame(
        {
            "node": ["dog", "frisbee", "grass", "unicorn", "sky", "cloud"],
            "type": ["entity", "entity", "environment", "entity", "environment", "entity"],
            "frequency": [10, 4, 20, 1, 50, 40],
            "states": [["brown"], [], ["green"], [], [], ["white"]],
            "actions": [["running"], [], [], [], [], []],
        }
    )
    edges = pl.DataFrame(
        {
            "source": ["dog", "dog", "cloud", "frisbee"],
            "target": ["frisbee", "grass", "sky", "grass"],
            "weight": [3, 8, 30, 1],
        }
    )
    write_parquet(folder / "nodes.parquet", nodes)
    write_parquet(folder / "edges.parquet", edges)
    return folder


QUESTIONS = [
    ("Is there a grass in the picture?", "discriminative", "existence", "grass", ["dog", "grass"]),
    ("Is there a frisbee in the picture?", "discriminative", "existence", "frisbee", ["dog", "grass"]),
    ("Is there a unicorn in the picture?", "discriminative", "existence", "unicorn", ["unicorn", "sky"]),
    ("Please describe this picture.", "generative", "generative", None, ["dog"]),
    ("Is there a cloud in the picture?", "discriminative", "existence", "cloud", ["cloud", "sky"]),
    ("Is there a sky in the picture?", "discriminative", "existence", "sky", ["cloud", "sky"]),
]


def make_release(folder, n_images=3):
    """The answer stage's release: QUESTIONS over `n_images` small PNGs; returns the queries table."""
    (folder / "images").mkdir(parents=True)
    for i in range(n_images):
        Image.new("RGB", (32, 24), (60 * i, 20, 200)).save(folder / "images" / f"img{i}.png")
    rows = [
        {
            "query_id": f"q{i:02d}",
            "image_id": f"img{i % n_images}",
            "image": f"images/img{i % n_images}.png",
            "question": q,
            "task": task,
            "query_type": qt,
            "target": target,
            "objects": objects,
        }
        for i, (q, task, qt, target, objects) in enumerate(QUESTIONS)
    ]
    table = pl.DataFrame(rows)
    write_parquet(folder / "queries.parquet", table)
    return table


def make_question_release(folder, questions):
    """One discriminative query per question, each on its own 16x16 PNG; returns the queries table."""
    (folder / "images").mkdir(parents=True)
    rows = []
    for i, q in enumerate(questions):
        Image.new("RGB", (16, 16), (i * 40 % 255, 0, 0)).save(folder / "images" / f"img{i}.png")
        rows.append({"query_id": f"q{i}", "image": f"images/img{i}.png", "question": q, "task": "discriminative"})
    write_parquet(folder / "queries.parquet", pl.DataFrame(rows))
    return pl.DataFrame(rows)


def write_vg(root: Path) -> tuple[Path, Path]:
    """Three VG entries in the official layout (names lists, relationships with subject_id/object_id)."""
    entries = [
        {
            "image_id": 101,
            "objects": [
                {"object_id": 1, "names": ["man"], "attributes": ["tall"]},
                {"object_id": 2, "names": ["horse"], "attributes": ["brown"]},
                {"object_id": 3, "names": ["tree"]},
                {"object_id": 4, "names": ["tree"]},
            ],
            "relationships": [
                {"subject_id": 1, "predicate": "riding", "object_id": 2},
                {"subject_id": 2, "predicate": "near", "object_id": 3},
            ],
        },
        {
            "image_id": 102,
            "objects": [
                {"object_id": 5, "names": ["man"]},
                {"object_id": 6, "names": ["dog"]},
                {"object_id": 7, "names": ["frisbee"], "attributes": ["red"]},
            ],
            "relationships": [{"subject": {"object_id": 5}, "predicate": "holding", "object": {"object_id": 7}}],
        },
        {
            "image_id": 103,
            "objects": [{"object_id": 8, "names": ["horse"]}, {"object_id": 9, "names": ["fence"]}],
            "relationships": [],
        },
    ]
    images = root / "VG_100K"
    images.mkdir(parents=True)
    for i, e in enumerate(entries):  # placeholder pictures, named as VG names its files
        Image.new("RGB", (16, 16), (40 * i, 80, 120)).save(images / f"{e['image_id']}.jpg")
    path = root / "scene_graphs.json"
    path.write_text(json.dumps(entries))
    return path, images


def make_lineage_release(root, name, pairs, edges=None, parent=None):
    """A release folder with scene pairs, a manifest naming `parent` as ancestor, and optional graph edges."""
    rel = root / name / "release"
    rel.mkdir(parents=True)
    pl.DataFrame(
        [{"scene_id": f"s{i}", "distribution": d, "object_a": a, "object_b": b} for i, (d, a, b) in enumerate(pairs)]
    ).write_parquet(rel / "scenes.parquet")
    pl.DataFrame({"query_type": ["existence"] * len(pairs) + ["generative"]}).write_parquet(rel / "queries.parquet")
    manifest = {"release": name, "lineage": {"ancestors": lineage(parent) if parent else []}}
    (rel / "manifest.json").write_text(json.dumps(manifest))
    if edges is not None:
        (root / name / "graph").mkdir()
        pl.DataFrame(edges, schema=["source", "target", "weight"], orient="row").write_parquet(
            root / name / "graph" / "edges.parquet"
        )
    return rel


class ScriptedLLM(LLM):
    """An LLM backend replying from a {caption substring: reply} table, registered like any backend."""

    def __init__(self, replies: dict):
        self.replies, self.calls = replies, 0

    def chat(self, messages: Sequence[dict]) -> str:
        self.calls += 1
        user = messages[-1]["content"]
        return next((r for key, r in self.replies.items() if key in user), "I don't know")

    def describe(self) -> BackendInfo:
        return BackendInfo(role="llm", backend="scripted", model="scripted", stand_in=True)


def png_bytes(colour, size=(12, 10)) -> bytes:
    """A one-colour PNG as bytes."""
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return buf.getvalue()


def write_synthesized_images(root: Path, pngs: dict[str, bytes], scene_ids: list[str], revision=None) -> pl.DataFrame:
    """PNGs under root/images/000/ as the synthesis stage writes them, and their images table (tiny-flux stand-in)."""
    (root / "images" / "000").mkdir(parents=True, exist_ok=True)
    for image_id, data in pngs.items():
        (root / "images" / "000" / f"{image_id}.png").write_bytes(data)
    return pl.DataFrame(
        {
            "image_id": list(pngs),
            "scene_id": scene_ids,
            "path": [f"images/000/{i}.png" for i in pngs],
            "sha256": [sha256_bytes(d) for d in pngs.values()],
            "model": ["tiny-flux"] * len(pngs),
            "revision": [revision] * len(pngs),
            "stand_in": [True] * len(pngs),
        }
    )


def make_packaged_release(tmp_path):
    """A packaged release: two images (dog+frisbee, car+road), yes/no and generative queries."""
    root = tmp_path / "results"
    pngs = {"s1-i00": png_bytes((200, 30, 30)), "s2-i00": png_bytes((30, 30, 200), (16, 9))}
    images = write_synthesized_images(root, pngs, ["s1", "s2"])
    accepted = images.select("image_id", "scene_id", "path").with_columns(
        pl.Series("distribution", ["standard", "fictional"]), pl.lit("entity_entity").alias("pair_kind")
    )
    scenes = accepted.select("scene_id", "distribution", "pair_kind")
    q = [
        ("q1", "s1-i00", "existence", "discriminative", "Is there a dog in the image?", "yes", ["dog", "frisbee"]),
        ("q2", "s1-i00", "existence", "discriminative", "Is there a cat in the image?", "no", ["dog", "frisbee"]),
        ("q3", "s1-i00", "generative", "generative", "Describe this image.", None, ["dog", "frisbee"]),
        ("q4", "s2-i00", "existence", "discriminative", "Is there a car in the image?", "yes", ["car", "road"]),
        ("q5", "s2-i00", "generative", "generative", "Describe this image.", None, ["car", "road"]),
    ]
    queries = pl.DataFrame(
        q, schema=["query_id", "image_id", "query_type", "task", "question", "truth", "objects"], orient="row"
    ).with_columns(
        pl.format("images/{}.png", pl.col("image_id")).alias("image"),
        pl.when(pl.col("image_id") == "s1-i00")
        .then(pl.lit("standard"))
        .otherwise(pl.lit("fictional"))
        .alias("distribution"),
        pl.lit("entity_entity").alias("pair_kind"),
    )
    rel = tmp_path / "rel" / "release"
    package_release(
        rel,
        root=root,
        accepted=accepted,
        queries=queries,
        scenes=scenes,
        images=[images],
        detections=[],
        config={"release": "demo"},
        seed=1,
        name="demo",
    )
    return rel


def make_ode_release(tmp_path) -> tuple[Path, Path]:
    """Three scenes (standard, fictional, long-tail) with one image each, and the scene graph they come from."""
    release, graph = tmp_path / "release", tmp_path / "graph"
    (release / "images").mkdir(parents=True)
    graph.mkdir()
    scenes = pl.DataFrame(
        {
            "scene_id": ["s0", "s1", "s2"],
            "distribution": ["standard", "fictional", "long_tail"],
            "pair_kind": ["entity_environment", "entity_entity", "entity_entity"],
            "object_a": ["dog", "cat", "horse"],
            "object_b": ["beach", "chair", "tree"],
            "attribute_a": ["run", "sleep", None],
            "attribute_a_kind": ["action", "action", None],
            "attribute_a_contrast": ["sit", "jump", None],
            "attribute_b": ["sunny", None, "green"],
            "attribute_b_kind": ["state", None, "state"],
            "attribute_b_contrast": ["gloomy", None, "withered"],
            "cooccurrence": [10, 0, 1],
            "variant": [0, 0, 0],
        }
    )
    rows = []
    for i, s in enumerate(["s0", "s1", "s2"]):
        Image.new("RGB", (8, 8), (i * 60, 0, 0)).save(release / "images" / f"img{i}.png")
        rows.append({"query_id": f"q{i}", "image_id": f"img{i}", "image": f"images/img{i}.png", "scene_id": s})
    write_parquet(release / "scenes.parquet", scenes)
    write_parquet(release / "queries.parquet", pl.DataFrame(rows))
    write_parquet(
        graph / "nodes.parquet",
        pl.DataFrame(
            {
                "node": ["dog", "beach", "cat", "chair", "horse", "tree", "frisbee", "umbrella", "table", "grass"],
                "type": ["entity", "environment"] + ["entity"] * 8,
                "frequency": [5] * 10,
                "states": [
                    ["brown", "black"],
                    ["sunny", "gloomy"],
                    ["white"],
                    ["wooden"],
                    [],
                    ["green", "withered"],
                    [],
                    [],
                    [],
                    [],
                ],
                "actions": [["run", "sit"], [], ["sleep", "jump"], [], ["run"], [], [], [], [], []],
            }
        ),
    )
    write_parquet(
        graph / "edges.parquet",
        pl.DataFrame(
            {
                "source": ["beach", "dog", "beach", "cat", "chair", "horse", "grass"],
                "target": ["umbrella", "frisbee", "dog", "table", "table", "tree", "horse"],
                "weight": [9, 7, 5, 4, 3, 2, 6],
            }
        ),
    )
    return release, graph


# The fault proofs (tests/test_faults.py, tests/test_secrets.py): an HTTP model answering a static POPE set.
# Objects of make_graph's vocabulary; one POPE question each (two answer shards split them by query-id hash).
OBJECTS = ["dog", "frisbee", "grass", "unicorn", "sky", "cloud", "cat", "car"]


RELEASE = "faults"


def write_pope_set(root: Path) -> Path:
    """A POPE-format static set: label JSONL + one small PNG per question (the images really travel as data URLs)."""
    images = root / "images"
    images.mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = []
    for i, obj in enumerate(OBJECTS):
        name = f"img{i}.png"
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8)).save(images / name)
        lines.append(
            json.dumps(
                {
                    "question_id": i,
                    "image": name,
                    "text": f"Is there a {obj} in the image?",
                    "label": "yes" if i % 2 else "no",
                }
            )
        )
    (root / "pope.jsonl").write_text("\n".join(lines) + "\n")
    return root


def api_overlay(workdir: Path, server: ChatServer, name: str = "api", api_key_env: str | None = None, **answer) -> Path:
    """A --configfile that swaps the models under test for one HTTP model answering the static POPE set."""
    overlay = {
        "release": RELEASE,
        "models": [
            {
                "name": name,
                "backend": "openai",
                "stand_in": False,
                "args": {
                    "base_url": server.base_url,
                    "model": "prior-over-http",
                    "api_key_env": api_key_env,
                    "timeout_s": 1.0,  # generous: a loaded CI machine must not time out a normal reply
                    "max_retries": 3,
                    "backoff_s": 0.01,
                    "backoff_max_s": 0.05,
                    "concurrency": 2,
                },
            }
        ],
        "answer": {
            "source": {"kind": "pope", "path": "static/pope.jsonl", "images": "static/images", "annotations": None},
            **answer,
        },
        # Other stages name the default models; they are not part of this proof.
        "samf": {"enabled": False, "models": None},
        "cedi": {"enabled": False, "models": None},
    }
    path = workdir / f"overlay-{name}.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path


def answer_targets(model: str = "api") -> list[str]:
    return [f"results/{RELEASE}/answers/{model}/{shard:03d}.parquet" for shard in range(2)]
