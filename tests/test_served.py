"""The `openai` backend against a REAL OpenAI-compatible server: `transformers serve` (transformers' own server)
serving the offline stand-ins on 127.0.0.1 (tests/served.py). Every role that can be served is run through it: the
model under test (images as data URLs), the CEDI LLM parser, the SAMF LLM judge, the CAOS LLM extractor and a CAOS
oracle member; the CEDI LLM question writer runs in the workflow test (configs/openai-server.yaml, at the end).
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from helpers import make_question_release
from served import LLM_ID, VLM_ID
from workflow_utils import REPO, copy_workflow, run_snakemake

from halluflow.answer import answer_shard
from halluflow.errors import BackendError
from halluflow.models import registry
from halluflow.models.model import ModelUnderTest

pytestmark = pytest.mark.slow  # starts a server process and loads two models (~30 s)


def spec(server, model=VLM_ID, **args):
    return {
        "name": "served",
        "backend": "openai",
        "stand_in": True,
        "args": {
            "base_url": server.base_url,
            "model": model,
            "api_key_env": None,
            "timeout_s": 120,
            "max_retries": 1,
            "backoff_s": 0.1,
            "concurrency": 2,
            **args,
        },
    }


QUESTIONS = ["Is there a dog in the image?", "Is there a cat in the image?", "Describe the image."]


def test_model_under_test_answers_over_the_server(served, tmp_path):
    queries = make_question_release(tmp_path / "release", QUESTIONS)
    before = served.requests_for(VLM_ID)
    out, cache = tmp_path / "answers.parquet", tmp_path / "cache"
    stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec(served)), cache, out)
    table = pl.read_parquet(out)
    assert stats["new"] == 3 and (table["status"] == "ok").all(), table["error"].to_list()
    # + 1 probe while the model is not loaded yet: an on-demand server does not list it in GET /models before.
    sent = served.requests_for(VLM_ID) - before
    assert sent == 3 + (before == 0), sent
    # transformers serve answers " word ...": stored stripped, every backend alike.
    assert all(a == a.strip() and a for a in table["answer"]), table["answer"].to_list()
    stats = answer_shard(queries, tmp_path / "release", ModelUnderTest(spec(served)), cache, out)
    assert stats["cache_hits"] == 3 and served.requests_for(VLM_ID) - before == sent


def test_server_specific_rejections_stop_early_and_unserved_ids_fail_in_one_line(served, tmp_path):
    queries = make_question_release(tmp_path / "release", QUESTIONS * 2)
    # transformers serve rejects sampling fields it does not know (vLLM accepts top_k): HTTP 422. A probe request
    # without images, with the same arguments, is rejected alike, so the rest of the shard is recorded as failed
    # without being sent.
    out = tmp_path / "a.parquet"
    stats = answer_shard(
        queries,
        tmp_path / "release",
        ModelUnderTest(spec(served, extra_body={"top_k": 40}, concurrency=1)),
        tmp_path / "cache",
        out,
        settings={"max_failed_fraction": 1.0},
    )
    errors = pl.read_parquet(out).sort("query_id")["error"].to_list()
    assert stats["failed"] == 6 and all("HTTP 422" in e and "top_k" in e for e in errors), errors
    assert (
        sum(e.startswith("not sent: the server rejects every request of this configuration alike") for e in errors) == 5
    )
    with pytest.raises(BackendError) as err:
        answer_shard(
            queries,
            tmp_path / "release",
            ModelUnderTest(spec(served, model="resources/models/typo")),
            tmp_path / "cache",
            tmp_path / "b.parquet",
        )
    message = str(err.value)
    assert "model 'resources/models/typo' is not served by" in message and repr(VLM_ID) in message
    assert "\n" not in message


def test_llm_roles_over_the_server(served, tmp_path):
    from halluflow.caos.extract import ObjectExtractor, Vocabulary
    from halluflow.caos.scores import Oracle
    from halluflow.cedi.parser import llm_parse
    from halluflow.samf.metrics import LLMJudge

    llm = registry.create(
        "llm",
        {
            "backend": "openai",
            "base_url": served.base_url,
            "model": LLM_ID,
            "api_key_env": None,
            "max_tokens": 48,
            "timeout_s": 120,
        },
    )
    before = served.requests_for(LLM_ID)
    # CEDI parser: transcript -> scene graph JSON (None when SmolLM2's reply is not a valid graph: rule fallback).
    graph = llm_parse(llm, [("Describe the image.", "A brown dog catches a frisbee on the grass.")])
    assert graph is None or isinstance(graph.objects, (list, dict))
    # SAMF judge: TRUE/FALSE, or the rule judge ("fallback") when the reply has neither.
    hit, source = LLMJudge(llm).matches_negative("Yes, there is a cat.", ["no"], ["yes"])
    assert isinstance(hit, bool) and source in {"llm", "fallback"}
    # CAOS extractor: vocabulary matches plus whatever objects the LLM's JSON adds.
    vocab = Vocabulary().add_terms(["dog", "frisbee", "grass"], "graph")
    extraction = ObjectExtractor(vocab, llm).extract_many(["A brown dog catches a frisbee on the grass."])[0]
    assert {"dog", "frisbee", "grass"} <= set(extraction.names) and extraction.llm_status in {"ok", "unparsed"}
    assert served.requests_for(LLM_ID) - before == 3 + (before == 0)  # (+ the first use's probe, as above)
    # CAOS oracle member: a served VLM answering yes/no about an out-of-domain object in a real image.
    make_question_release(tmp_path / "release", ["unused"])
    vlm_before = served.requests_for(VLM_ID)
    member = ModelUnderTest(spec(served)).backend
    verdict = Oracle([("served", member)]).judge([("q0", str(tmp_path / "release/images/img0.png"), "kite")])[0]
    assert verdict.yes + verdict.no + verdict.abstain == 1
    assert served.requests_for(VLM_ID) - vlm_before == 1 + (vlm_before == 0)


def test_openai_server_config_offline(served, tmp_path):
    """configs/openai-server.yaml with its offline override: the whole default target, every role over HTTP."""
    workdir = copy_workflow(tmp_path / "wf")
    override = yaml.safe_load((REPO / "configs/offline/openai-server.yaml").read_text())
    assert override["models"][0]["args"]["model"] == VLM_ID and override["llm"]["model"] == LLM_ID
    # The shipped override points at port 8000; this test's server listens on a free port.
    text = (
        (REPO / "configs/offline/openai-server.yaml").read_text().replace("http://127.0.0.1:8000/v1", served.base_url)
    )
    (workdir / "openai-local.yaml").write_text(text)
    vlm_before, llm_before = served.requests_for(VLM_ID), served.requests_for(LLM_ID)
    run_snakemake(
        workdir,
        "--cores",
        "2",
        "--resources",
        "api_calls=1",
        "--configfile",
        "configs/openai-server.yaml",
        "openai-local.yaml",
    )
    out, model = workdir / "results/ode-demo", "tiny-smolvlm-served"
    answers = pl.read_parquet(out / f"answers/{model}/000.parquet")
    assert (answers["status"] == "ok").all() and answers.height > 10
    assert all(a == a.strip() for a in answers["answer"])
    turns = pl.read_parquet(out / f"cedi/{model}/transcripts.parquet")
    assert set(turns["question_writer"]) == {"llm"}
    caos = json.loads((out / f"caos/{model}.json").read_text())
    assert caos["extractor"] == "llm" and caos["oracle"]
    assert (out / f"fuzz/{model}/comparison.json").exists()
    # Every role really went over HTTP: the model under test, CEDI, SAMF and the CAOS oracle ask the served VLM;
    # the CEDI question writer + parser, SAMF judge and CAOS extractor ask the served LLM.
    assert served.requests_for(VLM_ID) - vlm_before > answers.height
    assert served.requests_for(LLM_ID) - llm_before >= 3
