"""One call path for every model role (halluflow.models.model.Model): a CAOS oracle member, a CEDI examiner's
evaluatee and LLM, and SAMF's visual and text judges all go through the request cache, so a rerun over the same
cache folder reads every answer back and sends nothing to a backend; failures are recorded and never cached; a
backend of the wrong role is refused in one line."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import ScriptedLLM
from PIL import Image

from halluflow.backends.base import VLM, BackendInfo, VLMRequest
from halluflow.caos.scores import Oracle
from halluflow.cedi.examiner import Examiner
from halluflow.cedi.pipeline import build_scenes, vocabulary
from halluflow.cedi.scene_graph import Synonyms
from halluflow.errors import BackendError, ConfigError
from halluflow.models.model import GenerateConfig, Model
from halluflow.samf.judges import TextJudge, VisualJudge, parse_score


class CountingVLM(VLM):
    """Says yes to kites, no to anything else; counts the requests it is sent (a failure for "fail" prompts)."""

    def __init__(self):
        self.sent = []

    def describe(self):
        return BackendInfo("vlm", "counting", "counting", stand_in=True)

    def answer(self, requests):
        self.sent.extend(requests)
        out = []
        for r in requests:
            if "fail" in r.prompt:
                raise BackendError("scripted failure")
            out.append("Yes." if "kite" in r.prompt else f"No, {r.max_new_tokens} tokens. Score: 7")
        return out

    def answer_results(self, requests):
        from halluflow.backends.base import Result

        results = []
        for r in requests:
            try:
                results.append(Result(self.answer([r])[0]))
            except BackendError as exc:
                results.append(Result(None, error=str(exc)))
        return results


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "img.png"
    Image.fromarray(np.full((16, 16, 3), (10, 200, 30), np.uint8)).save(path)
    return str(path)


def test_caos_oracle_rerun_is_all_cache_hits(tmp_path, image):
    items = [("q1", image, "kite"), ("q1", image, "zebra"), ("q2", image, "dog")]

    def run():
        backend = CountingVLM()
        oracle = Oracle([("a", Model("vlm", backend, name="a", cache=tmp_path / "cache"))])
        return backend, oracle.members[0][1], oracle.judge(items)

    backend1, model1, verdicts1 = run()
    assert (len(backend1.sent), model1.hits) == (3, 0)
    backend2, model2, verdicts2 = run()
    assert (len(backend2.sent), model2.sent, model2.hits) == (0, 0, 3)  # second run: all hits, no backend call
    assert verdicts2 == verdicts1 and [v.present for v in verdicts1] == [True, False, False]


def test_cedi_examiner_rerun_is_all_cache_hits_for_the_evaluatee_and_the_llm(tmp_path, ode_release):
    release, graph = ode_release
    settings = {
        "images": 2,
        "examiners": ["cedi", "caption"],
        "history": ["with"],
        "max_rounds": 6,
        "min_end_round": 4,
        "question_writer": "llm",  # the examiner's LLM writes each conversation's context first
        "parser": "rule",
    }
    vocab = vocabulary(graph, Synonyms.builtin())
    scenes = build_scenes(release, graph, 2, 7, vocab)

    def run():
        vlm_backend, llm_backend = CountingVLM(), ScriptedLLM({"scene": '{"objects": []}'})
        vlm = Model("vlm", vlm_backend, name="m", cache=tmp_path / "cache", config=GenerateConfig(max_new_tokens=9))
        llm = Model("llm", llm_backend, name="examiner", cache=tmp_path / "cache")
        rows = Examiner(vocab, settings, llm=llm, seed=7).run(scenes, vlm, "m", ["cedi", "caption"], ["with"])
        return vlm_backend, llm_backend, vlm, llm, rows

    vlm_backend, llm_backend, vlm1, llm1, rows1 = run()
    assert len(vlm_backend.sent) == len(rows1) > 4 and llm_backend.calls == llm1.sent > 0
    assert {r.max_new_tokens for r in vlm_backend.sent} == {9}  # the evaluatee's answer length, from its config
    vlm_backend, llm_backend, vlm2, llm2, rows2 = run()
    assert (len(vlm_backend.sent), llm_backend.calls) == (0, 0)  # second run: no backend call at all
    assert (vlm2.hits, llm2.hits) == (len(rows1), llm1.sent + llm1.hits)  # (a repeated chat hit already in run 1)
    assert [r["answer"] for r in rows2] == [r["answer"] for r in rows1]


def test_samf_judges_rerun_is_all_cache_hits(tmp_path, image):
    prompts = ["Rate the response 'a kite' from 0 to 10.", "Rate the response 'a dog' from 0 to 10."]

    def run():
        vlm_backend, llm_backend = CountingVLM(), ScriptedLLM({"kite": "Score: 9", "dog": "Score: 2"})
        visual = VisualJudge(Model("vlm", vlm_backend, cache=tmp_path / "cache"), max_new_tokens=12)
        text = TextJudge(Model("llm", llm_backend, cache=tmp_path / "cache"))
        scores = [visual.decide(p, parse_score, image) for p in prompts] + [
            text.decide(p, parse_score) for p in prompts
        ]
        return vlm_backend, llm_backend, visual, text, scores

    vlm_backend, llm_backend, visual, text, scores1 = run()
    assert (len(vlm_backend.sent), llm_backend.calls) == (2, 2) and scores1 == [None, 7.0, 9.0, 2.0]
    assert vlm_backend.sent[0].image_path == image and vlm_backend.sent[0].max_new_tokens == 12
    vlm_backend, llm_backend, visual, text, scores2 = run()
    assert (len(vlm_backend.sent), llm_backend.calls) == (0, 0)
    assert (visual.model.hits, text.model.hits) == (2, 2) and scores2 == scores1


def test_failures_are_recorded_retried_and_never_cached(tmp_path):
    backend = CountingVLM()
    model = Model("vlm", backend, name="flaky", cache=tmp_path / "cache", retries=1, method="test")
    out = model.answer([VLMRequest("a", "kite?"), VLMRequest("b", "please fail")])
    assert out == ["Yes.", ""]
    assert model.failures == [{"request_id": "b", "error": "scripted failure"}]
    assert len(backend.sent) == 3  # the failed request was tried twice (retries=1)
    again = Model("vlm", CountingVLM(), name="flaky", cache=tmp_path / "cache")
    again.answer([VLMRequest("a", "kite?"), VLMRequest("b", "please fail")])
    assert (again.hits, again.sent, again.failed) == (1, 1, 1)  # the failure was not cached: asked again


def test_a_request_of_another_image_or_length_is_another_cache_entry(tmp_path, image):
    other = tmp_path / "other.png"
    Image.fromarray(np.zeros((16, 16, 3), np.uint8)).save(other)
    model = Model("vlm", CountingVLM(), cache=tmp_path / "cache")
    model.generate([VLMRequest("a", "dog?", image)])
    model.generate(
        [VLMRequest("a", "dog?", str(other)), VLMRequest("a", "dog?", image)], GenerateConfig(max_new_tokens=3)
    )
    model.generate([VLMRequest("a", "dog?", image)])
    assert (model.sent, model.hits) == (3, 1)


def test_a_backend_of_the_wrong_role_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"does not subclass halluflow\.backends\.base\.LLM"):
        Model("llm", CountingVLM(), name="judge")
    with pytest.raises(ConfigError, match="per call"):
        Model("llm", ScriptedLLM({}), name="judge").generate([[{"role": "user", "content": "hi"}]], GenerateConfig(7))
    assert re.fullmatch(r"[0-9a-f]{64}", Model("vlm", CountingVLM()).key(VLMRequest("a", "q")))
