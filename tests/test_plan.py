"""`halluflow plan`: counts worked out by hand from the config (scenes x images per scene, questions per image,
models, shards), GPU-seconds from per-item costs, the one-line warnings, and the README's quoted table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from helpers import REPO

from halluflow.errors import ConfigError
from halluflow.plan import merged_config, plan_rows, planning_warnings

BASE = REPO / "config.yaml"


def rows_by_stage(config):
    rows, info = plan_rows(config)
    return {r.stage: r for r in rows}, info


def test_default_config_counts():
    rows, info = rows_by_stage(merged_config([], base=BASE))
    # 4 distributions x 2 pairs per pair kind x 1 variant x 1 image: 8 entity-entity + 8 entity-environment images
    assert rows["synthesis"].images == rows["detection"].images == 16
    assert rows["synthesis"].jobs == 2  # shards.images
    # per entity-entity image: 1 description, 2 "yes" + 2 graph-neighbour "no", 4 attribute, 1 counterfactual
    # object + 2 attribute counterfactuals, 2 entities x (1 + two, three) counts = 18; entity-environment: one
    # entity counted, 15. 8 x 18 + 8 x 15 = 264 requests, 16 of them descriptions.
    for name in ("tiny-smolvlm", "blind-smollm2", "prior"):
        answer = rows[f"answer {name}"]
        assert answer.requests == 264 and answer.jobs == 2
        assert answer.tokens == 248 * 6 + 16 * 24  # answer.max_new_tokens: discriminative 6, generative 24
        assert answer.gpu_s is None  # stand-in / CPU: no GPU time in the demo
    assert info["bound"] is True
    # CEDI: 2 images x 2 history settings x (8 + 8 + 4 rounds of cedi, caption, prompt_only + 12 POPE questions) = 128
    assert rows["cedi tiny-smolvlm"].requests == 128 and "cedi blind-smollm2" not in rows  # skip: [cedi, samf]
    assert planning_warnings(merged_config([], base=BASE)) == []  # the demo scores stand-ins by design


SMALL = {
    "release": "small",
    "gpu": True,
    "ode": {
        "sampling": {
            "sizes": {
                "standard": {"entity_entity": 3, "entity_environment": 1},
                "long_tail": {"entity_entity": 0, "entity_environment": 0},
                "random": {"entity_entity": 0, "entity_environment": 0},
                "fictional": {"entity_entity": 0, "entity_environment": 0},
            },
            "variants": 2,
            "attribute_kinds": [],
        },
        "prompts": {"images_per_scene": 2},
        "queries": {
            "negatives_per_image": 1,
            "strategies": ["graph_neighbour", "random"],
            "count_negatives": ["two"],
            "counterfactual_per_image": 0,
        },
    },
    "synthesis": {"stand_in": {"enabled": False}, "steps": 10, "height": 512, "width": 512, "device": "cuda"},
    "detection": {"stand_in": {"enabled": False}, "device": "cuda"},
    "shards": {"images": 4, "answers": 3},
    "models": [
        {
            "name": "big",
            "backend": "transformers",
            "stand_in": False,
            "args": {"model": "org/vlm-14b", "revision": "main", "device": "cuda"},
        }
    ],
    "caos": {"enabled": False},
    "diagnosis": {"enabled": False},
    "samf": {"enabled": False},
    "report": {"enabled": False},
    "cedi": {
        "images": 3,
        "examiners": ["cedi", "prompt_only"],
        "history": ["with"],
        "max_rounds": 5,
        "prompt_only_rounds": 2,
    },
    "plan": {"gpu": "test"},
}
COSTS = [
    "plan.costs.test={synthesis_step_mp_s: 1, detection_image_s: 2, request_s: 0.5, token_s: 0.1, turn_token_s: 1}"
]


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(SMALL))
    return path


def test_small_override_by_hand(small):
    config = merged_config([str(small)], COSTS, base=BASE)
    rows, info = rows_by_stage(config)
    # standard: 3 entity-entity pairs x 2 variants x 2 images = 12, 1 entity-environment pair -> 4: 16 images
    assert rows["synthesis"].images == 16 and rows["synthesis"].jobs == 4
    # 16 images x 10 steps x 1 pass (no true CFG) x 0.25 megapixel x 1 s; detection 16 x 2 s
    assert rows["synthesis"].gpu_s == pytest.approx(40.0)
    assert rows["detection"].gpu_s == pytest.approx(32.0)
    # per entity-entity image: 1 + (2 yes + 1 no x 2 strategies) + 2 entities x (1 + "two") = 9;
    # entity-environment: 1 + 4 + 2 = 7; no attribute or counterfactual questions. 12 x 9 + 4 x 7 = 136
    answer = rows["answer big"]
    assert answer.requests == 136 and answer.jobs == 3
    assert answer.tokens == 120 * 6 + 16 * 24
    # 14B = twice the 7B reference: 2 x (136 x 0.5 s + 1104 tokens x 0.1 s)
    assert answer.gpu_s == pytest.approx(2 * (136 * 0.5 + 1104 * 0.1))
    # CEDI: 3 images x 1 history x (5 + 2 rounds) = 21 unbatched turns of <= 24 tokens at 1 s a token
    cedi = rows["cedi big"]
    assert (cedi.requests, cedi.tokens) == (21, 21 * 24)
    assert cedi.gpu_s == pytest.approx(2 * (21 * 0.5 + 21 * 24 * 1))
    assert not any(stage.startswith(("caos", "samf")) for stage in rows)
    assert info["gpu"] == "test"


def test_small_override_warns_about_moving_revisions(small, tmp_path):
    warnings = planning_warnings(merged_config([str(small)], COSTS, base=BASE))
    assert len(warnings) == 1
    assert "big (main)" in warnings[0] and "synthesis (default branch)" in warnings[0]
    pinned = tmp_path / "pinned.yaml"
    models = [{**SMALL["models"][0], "args": {**SMALL["models"][0]["args"], "revision": "0123456789" * 4}}]
    pinned.write_text(yaml.safe_dump({"models": models}))
    revisions = ["synthesis.revision=" + "a" * 40, "detection.revision=" + "b" * 40]
    assert planning_warnings(merged_config([str(small), str(pinned)], COSTS + revisions, base=BASE)) == []


def test_standins_outside_the_demo_say_so():
    files = [str(REPO / "configs/ode-paper.yaml"), str(REPO / "configs/offline/ode-paper.yaml")]
    warnings = planning_warnings(merged_config(files, base=BASE))
    assert len(warnings) == 1 and "scores the demo's stand-ins (tiny-smolvlm" in warnings[0]


def test_unknown_gpu_type_names_the_key(small):
    with pytest.raises(ConfigError, match="'plan.gpu': no costs for 'v100'"):
        plan_rows(merged_config([str(small)], ["plan.gpu=v100"], base=BASE))
    partial = ["plan.costs.test={request_s: 1}"]
    with pytest.raises(ConfigError, match=r"'plan.costs.test.synthesis_step_mp_s': missing"):
        plan_rows(merged_config([str(small)], partial, base=BASE))


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "plan", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_cli_prints_the_paper_table_the_readme_quotes():
    proc = cli("--configfile", "configs/ode-paper.yaml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # 8 pair lists x 40 pairs x 2 variants x 6 images; 1,920 x 18 + 1,920 x 15 questions per model
    assert re.search(r"^synthesis\s+32\s+<= 3,840 ", out, re.M)
    assert re.search(r"^answer llava-1\.5-7b\s+8\s+-\s+<= 63,360 ", out, re.M)
    assert "served elsewhere" in out and "total:" in out
    # each priced job's request, from the same rows: caos_score's runtime covers the plan's 78 minutes per model
    assert re.search(r"^  caos_score llava-1\.5-7b: 128 min, 68,512 MB, 4 CPUs$", out, re.M)
    assert re.search(r"^  answer llava-1\.5-7b: 42 min, 25,504 MB, 4 CPUs$", out, re.M)
    readme = (REPO / "README.md").read_text()
    quoted = readme.split("<!-- plan:ode-paper -->", 2)[1].split("```")[1].split("\n", 1)[1]
    assert quoted.rstrip("\n") == out.rstrip("\n")  # the README's table is the command's output, not a retyped one


def test_cli_bad_input_is_one_line(tmp_path):
    for args in (
        ["--configfile", str(tmp_path / "missing.yaml")],
        ["--configfile", "configs/ode-paper.yaml", "--config", "shards.images=x"],
    ):
        proc = cli(*args)
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr


def test_checkpoint_memory_follows_the_model_size():
    """A job's host memory is sized to the checkpoints it loads: 7B > 2B > 135M; no weights, no checkpoint."""
    from halluflow.plan import checkpoint_mb

    seven = checkpoint_mb({"name": "llava-1.5-7b", "backend": "transformers", "args": {"model": "x/llava-1.5-7b-hf"}})
    two = checkpoint_mb({"name": "smolvlm", "backend": "transformers", "args": {"model": "x/SmolVLM-2.2B"}})
    tiny = checkpoint_mb({"name": "blind", "backend": "blind", "args": {"model": "models/smollm2-135m-instruct"}})
    assert seven > 7 * 2048 and seven > two > tiny > 0
    assert checkpoint_mb({"name": "p", "backend": "prior"}) == 0
    assert checkpoint_mb({"name": "s", "backend": "openai", "args": {"model": "x/y-7b"}}) == 0
    assert checkpoint_mb({"name": "t", "backend": "transformers", "stand_in": True}) == 0
    assert checkpoint_mb({"backend": "transformers", "model": "Qwen/Qwen2.5-7B-Instruct"}, llm=True) == seven
