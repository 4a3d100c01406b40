"""Embedders: the REAL GloVe 6B-50d and all-MiniLM-L6-v2 weights load offline; phrase and OOV rules."""

from __future__ import annotations

import numpy as np
import pytest

from halluflow.caos.scores import cosine_matrix
from halluflow.errors import ConfigError, InputError
from halluflow.models import registry


@pytest.fixture(scope="module")
def glove():
    return registry.create("embedder", {"backend": "glove"})


@pytest.fixture(scope="module")
def minilm():
    return registry.create("embedder", {"backend": "minilm"})


def test_glove_real_vectors(glove):
    v = glove.embed(["dog", "puppy", "airplane"])
    assert v.shape == (3, 50)
    sims = cosine_matrix(v, v)
    assert sims[0, 1] > 0.7 > sims[0, 2]  # dog ~ puppy (0.775), far from airplane (0.41)
    assert glove.describe().model == "glove.6B.50d" and glove.describe().stand_in is False


def test_glove_multiword_is_mean_and_case_insensitive(glove):
    hot, dog, phrase, upper, hyphen = glove.embed(["hot", "dog", "hot dog", "Hot Dog", "hot-dog"])
    np.testing.assert_allclose(phrase, (hot + dog) / 2)
    np.testing.assert_array_equal(phrase, upper)
    np.testing.assert_array_equal(phrase, hyphen)


def test_glove_oov_words_are_skipped_and_unknown_phrases_are_zero(glove):
    dog, mixed, unknown = glove.embed(["dog", "dog qqzxv", "qqzxv"])
    np.testing.assert_array_equal(mixed, dog)  # the unknown word is skipped
    assert not unknown.any()
    assert glove.oov(["dog", "dog qqzxv", "qqzxv"]) == [False, False, True]
    assert np.isnan(cosine_matrix(unknown[None], dog[None])).all()


def test_glove_missing_root_names_the_file(tmp_path):
    with pytest.raises(InputError, match="glove_6B_index.parquet"):
        registry.create("embedder", {"backend": "glove", "root": str(tmp_path)})


def test_minilm_real_phrase_embeddings(minilm):
    v = minilm.embed(["dog", "puppy", "airplane", "hot dog"])
    assert v.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = cosine_matrix(v, v)
    assert sims[0, 1] > 0.75 > sims[0, 2]  # dog ~ puppy (0.80), airplane (0.34)
    # a phrase is embedded whole, not as the mean of its words
    hot = minilm.embed(["hot"])[0]
    assert not np.allclose(v[3], (hot + v[0]) / np.linalg.norm(hot + v[0]), atol=1e-3)
    assert minilm.embed([]).shape == (0, 384)
    assert minilm.oov(["qqzxv"]) == [False]


def test_table_embedder_inline_and_tsv(tmp_path):
    t = registry.create("embedder", {"backend": "table", "vectors": {"Dog": [1, 0], "cat": [0, 2]}})
    np.testing.assert_array_equal(t.embed(["dog cat", "bird"]), [[0.5, 1.0], [0.0, 0.0]])
    path = tmp_path / "v.tsv"
    path.write_text("dog\t1\t0\ncat\t0\tx\n")
    with pytest.raises(InputError, match="v.tsv:2: vector values must be numbers"):
        registry.create("embedder", {"backend": "table", "path": str(path)})
    with pytest.raises(ConfigError, match="different lengths"):
        registry.create("embedder", {"backend": "table", "vectors": {"a": [1], "b": [1, 2]}})
    with pytest.raises(ConfigError, match="exactly one of"):
        registry.create("embedder", {"backend": "table"})
