"""Language-prior baseline: answers follow co-occurrence counts a human can check in the toy graph below."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import make_graph

from halluflow.backends.base import VLMRequest
from halluflow.backends.prior import article
from halluflow.errors import InputError
from halluflow.models import registry


@pytest.fixture
def prior(tmp_path):
    return registry.create("vlm", {"backend": "prior", "graph": str(make_graph(tmp_path)), "threshold": 0.3})


def test_scene_context_drives_existence(prior):
    prior.bind_queries(
        pl.DataFrame(
            {
                "query_id": ["q1", "q2", "q3", "q4"],
                "query_type": ["existence", "existence", "existence", "count"],
                "target": ["grass", "frisbee", "unicorn", "grass"],
                "objects": [["dog", "grass"], ["dog", "grass"], ["unicorn", "sky"], ["dog", "grass"]],
                "question": ["Is there a grass?", "Is there a frisbee?", "Is there a unicorn?", "Are there two grass?"],
            }
        )
    )
    reqs = [VLMRequest(q, "ignored", None) for q in ["q1", "q2", "q3", "q4"]]
    # grass|dog = 8/10 ≥ .3 yes; frisbee: max(3/10 dog, 1/20 grass) = .3 ≥ .3 yes; unicorn|sky = 0 → no (fictional);
    # count "two" → no.
    assert prior.answer(reqs) == ["Yes", "Yes", "No", "No"]


def test_question_text_only_uses_marginal_frequency(prior):
    out = prior.answer(
        [
            VLMRequest("x", "Is there a cloud in the picture?", None),  # 40/50 ≥ .3
            VLMRequest("y", "Is there a frisbee in the picture?", None),  # 4/50 < .3
            VLMRequest("z", "Is there a spaceship in the picture?", None),  # unknown object
            VLMRequest("w", "Please describe this picture.", None),
        ]
    )
    assert out[:3] == ["Yes", "No", "No"]
    assert out[3] == "I see nothing I can name."


def test_generative_articles():
    assert [article(w) for w in ["egg", "unicorn", "umbrella", "dog", "orange", "user"]] == [
        "an",
        "a",
        "an",
        "a",
        "an",
        "a",
    ]


def test_missing_graph_names_the_file(tmp_path):
    with pytest.raises(InputError, match="nodes.parquet"):
        registry.create("vlm", {"backend": "prior", "graph": str(tmp_path)})
    with pytest.raises(InputError, match="'graph'"):
        registry.create("vlm", {"backend": "prior"})
