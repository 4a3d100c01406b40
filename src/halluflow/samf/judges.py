"""The oracles behind the UniHall metric suite ("Unified Hallucination Fuzzing for Multimodal Large Language
Models", Sec. 4.1 and Appendix D): the GPT judge of GHR (eq. 22), SHR (eq. 29) and GHS (eq. 30) built from any
`llm` backend (text only) or any `vlm` backend (it sees the image: eq. 30 conditions on I), the detector that
verifies object existence for SHR (D.3), and Sim_NLP from any `embedder` backend.

A judge call that errors, returns nothing or does not parse is a judge failure: counted here, and the metric
records that its rule fallback decided (never a silent number).
"""

from __future__ import annotations

import re
from typing import Callable, Mapping, Sequence

import numpy as np

from ..backends.base import LLM, VLM
from ..errors import BackendError, ConfigError
from ..io import stable_hash
from ..models.model import GenerateConfig, Model, image_sha256, vlm_request
from ..progress import get_logger

log = get_logger(__name__)

# ---------------------------------------------------------------------------------------------- reply parsing
# A number with its sign: "-3" is minus three (outside the 0..10 scale, so no score), never 3.
_NUMBER = r"([-+\u2212]?\d+(?:\.\d+)?)"
# Formats that state the score explicitly win over any other number in the reply.
_EXPLICIT_SCORE = (
    re.compile(rf"\b(?:score|rating|severity)\s*(?:is|of|=|:)?\s*{_NUMBER}", re.I),
    re.compile(rf"(?<![\w.]){_NUMBER}\s*(?:/|out\s+of)\s*10\b", re.I),
)


def _signed(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def parse_score(reply: str | None, high: float = 10.0) -> float | None:
    """A 0..high judge score from free text, or None when there is none.

    An explicit "Score: 8" / "8/10" / "8 out of 10" wins (the last one, as judges restate the scale before
    answering); otherwise the last number in range, so "On a scale from 0 to 10 ... 8" reads 8, not 0. A score
    outside the scale is a failure (None), never its absolute value: "-3" and "Score: -7" give None, and an explicit
    score out of range is not replaced by another number of the reply."""
    if not reply:
        return None
    for pattern in _EXPLICIT_SCORE:
        stated = [_signed(m.group(1)) for m in pattern.finditer(reply)]
        hits = [h for h in stated if 0 <= h <= high]
        if hits:
            return hits[-1]
        if stated:  # the judge stated a score, outside the scale: a failure
            return None
    numbers = [_signed(m.group(0)) for m in re.finditer(r"(?<![\w.])[-+\u2212]?\d+(?:\.\d+)?(?![\w])", reply)]
    if numbers and numbers[-1] < 0:  # the reply ends on a negative number: a score outside the scale
        return None
    numbers = [n for n in numbers if 0 <= n <= high]
    return numbers[-1] if numbers else None


def parse_true_false(reply: str | None) -> bool | None:
    """The judge's TRUE/FALSE (the last one when it restates the question); None when it gives neither."""
    hits = re.findall(r"\b(true|false)\b", (reply or "").lower())
    return hits[-1] == "true" if hits else None


VERDICT_WORDS = ("entailed", "contradicted", "unsupported", "unverifiable")


def parse_verdict(reply: str | None) -> str | None:
    hits = re.findall(r"\b(entailed|contradicted|unsupported|unverifiable)\b", (reply or "").lower())
    return hits[-1].capitalize() if hits else None


# ---------------------------------------------------------------------------------------------- judges
def _is_factory(backend, method: str) -> bool:
    return callable(backend) and not hasattr(backend, method)


def _loaded(backend, method: str) -> bool:
    if isinstance(backend, Model):
        return backend.loaded
    return backend is not None and not _is_factory(backend, method)


def _built(backend, method: str):
    """`backend`, or what a zero-argument factory returns: judges, detectors and embedders load on first use, so
    a configured one that no job asks (a training job never scores SHR/GHS) costs nothing."""
    return backend() if _is_factory(backend, method) else backend


def backend_record(backend, method: str, spec: Mapping | None = None, role: str = "") -> dict:
    """Which model a judge, verifier, Sim_NLP embedder or detector oracle is: backend, model id, revision and
    stand_in, recorded next to the numbers it produced.

    A built backend describes itself; one never built (no job asked it) is named from its config spec, without
    loading it (`loaded: false`). The spec's `stand_in` flag, or a stand-in marker in the model folder, marks it too;
    a stand-in's record has no revision (the config pins one for the real model it stands in for, never loaded)."""
    from ..models.standins import standin_info

    spec = dict(spec or {})
    args = dict(spec.get("args") or {})
    loaded = _loaded(backend, method)
    if loaded:
        info = backend.describe().as_dict()
    else:
        info = {
            "role": role,
            "backend": spec.get("backend"),
            "model": args.get("model", spec.get("model")),
            "revision": args.get("revision", spec.get("revision")),
            "stand_in": False,
        }
    model = info.get("model")
    marked = isinstance(model, str) and bool(model) and standin_info(model) is not None
    info["stand_in"] = bool(info.get("stand_in") or spec.get("stand_in") or marked)
    if info["stand_in"]:
        info["revision"] = None  # a stand-in never carries a hub revision (BackendInfo's rule, also when unloaded)
    if spec.get("name"):
        info["name"] = spec["name"]
    return {**info, "loaded": loaded}


class Judge:
    """Asks a judge backend one prompt and parses the reply; counts calls and failures for the summary."""

    kind = ""

    def __init__(self, spec: Mapping | None = None) -> None:
        self.asked = 0
        self.failed = 0
        self.spec = spec  # the config spec the backend comes from: names it in summaries before it is loaded

    def _reply(self, prompt: str, image_path: str | None) -> str | None:
        raise NotImplementedError

    def decide(self, prompt: str, parse: Callable[[str | None], object], image_path: str | None = None):
        """parse(reply), or None (a counted failure) when the backend errors, says nothing or does not parse."""
        self.asked += 1
        try:
            reply = self._reply(prompt, image_path)
        except BackendError as exc:
            log.warning("samf judge (%s): request failed: %s", self.kind, exc)
            reply = None
        value = parse(reply) if reply and reply.strip() else None
        if value is None:
            self.failed += 1
        return value

    def stats(self) -> dict:
        return {"kind": self.kind, "asked": self.asked, "failed": self.failed}

    def describe(self) -> dict:
        """stats() and the judge's model (backend_record): what a summary file records about this judge."""
        return {**self.stats(), "model": backend_record(self.model, "", self.spec, self.kind)}


class TextJudge(Judge):
    """The judge as a text `llm` model: it reads the question, answers and response, never the image."""

    kind = "llm"

    def __init__(self, llm: Model | LLM, spec: Mapping | None = None) -> None:
        super().__init__(spec)
        self.model = llm if isinstance(llm, Model) else Model("llm", llm, method="samf judge")

    @property
    def llm(self) -> LLM:
        return self.model.backend

    def _reply(self, prompt, image_path):
        return self.model.chat([{"role": "user", "content": prompt}])


class VisualJudge(Judge):
    """The judge as a `vlm` model: the prompt goes with the instance's image, so the judge can check the
    response against the pixels (GHS(y | I, G, N), eq. 30), not only against the annotated answers."""

    kind = "vlm"

    def __init__(self, vlm: Model | VLM, max_new_tokens: int = 96, spec: Mapping | None = None) -> None:
        super().__init__(spec)
        self.model = vlm if isinstance(vlm, Model) else Model("vlm", vlm, method="samf judge")
        self.max_new_tokens = int(max_new_tokens)

    @property
    def vlm(self) -> VLM:
        return self.model.backend

    def _reply(self, prompt, image_path):
        sha = None if image_path is None else image_sha256(image_path)
        request = vlm_request(f"judge-{stable_hash([prompt, sha])[:16]}", prompt, image_path, image_sha256=sha)
        result = self.model.generate([request], GenerateConfig(max_new_tokens=self.max_new_tokens))[0]
        if result.error is not None:
            raise BackendError(str(result.error))
        return result.text


def as_judge(backend) -> Judge | None:
    """A Judge from a Judge, an `llm` or `vlm` Model, or an `llm` / `vlm` backend; None stays None."""
    if backend is None or isinstance(backend, Judge):
        return backend
    if isinstance(backend, Model):
        return TextJudge(backend) if backend.role == "llm" else VisualJudge(backend)
    if isinstance(backend, LLM):
        return TextJudge(backend)
    if isinstance(backend, VLM):
        return VisualJudge(backend)
    raise ConfigError(f"samf judge: {type(backend).__name__} is neither an llm nor a vlm backend")


# ---------------------------------------------------------------------------------------------- Sim_NLP
class EmbedderSimilarity:
    """Sim_NLP of eq. (22) as the cosine of sentence embeddings from a registry embedder (MiniLM by default).

    `embedder` may be a factory: the model loads on the first call, so yes/no-only runs (whose GHR never asks
    Sim_NLP) do not pay for it. Embeddings are memoised per text: truths and negatives repeat across calls."""

    name = "embedder"

    def __init__(self, embedder, spec: Mapping | None = None):
        self._embedder = embedder
        self.spec = spec
        self._vectors: dict[str, np.ndarray] = {}

    def describe(self) -> dict:
        return {"kind": self.name, "model": backend_record(self._embedder, "embed", self.spec, "embedder")}

    @property
    def embedder(self):
        self._embedder = _built(self._embedder, "embed")
        return self._embedder

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self._vectors})
        if todo:
            vecs = np.asarray(self.embedder.embed(todo), dtype=np.float64)
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            self._vectors.update(zip(todo, vecs))
        return np.stack([self._vectors[t] for t in texts])

    def __call__(self, a: str, bs: Sequence[str]) -> float:
        if not bs:
            return 0.0
        vecs = self._embed([a, *bs])
        return float(np.max(vecs[1:] @ vecs[0]))


# ---------------------------------------------------------------------------------------------- detector oracle
class DetectorOracle:
    """Object existence for SHR (D.3: "object existence is verified using detectors"): the open-vocabulary
    detector is asked for candidate object names; a name found at >= threshold is a visual fact, one not found
    is evidence of absence that contradicts a claim stating it. One detector call per (image, label set)."""

    def __init__(self, detector, threshold: float = 0.3, max_labels: int = 16, spec: Mapping | None = None):
        self._detector, self.threshold, self.max_labels = detector, float(threshold), int(max_labels)
        self.spec = spec
        self._cache: dict[tuple[str, tuple[str, ...]], dict] = {}
        self.calls = 0
        self.failed = 0

    @property
    def detector(self):
        self._detector = _built(self._detector, "detect")
        return self._detector

    def evidence(self, image_path: str, labels: Sequence[str]) -> dict:
        """{"present": [(label, score)], "absent": [label]} for the first max_labels distinct labels."""
        labels = tuple(dict.fromkeys(label for label in labels if label))[: self.max_labels]
        key = (image_path, labels)
        if key not in self._cache:
            if not labels:
                self._cache[key] = {"present": [], "absent": []}
            else:
                from ..io import open_rgb

                self.calls += 1
                image = open_rgb(image_path, "samf detector oracle: image")
                try:
                    boxes = self.detector.detect([image], [list(labels)])[0]
                except (BackendError, ValueError, RuntimeError) as exc:
                    # No evidence rather than a lost job: the rule path and the judge decide without it; counted.
                    self.failed += 1
                    log.warning(
                        "samf detector oracle: %s on %s failed: %s", list(labels), image_path, str(exc).splitlines()[0]
                    )
                    self._cache[key] = {"present": [], "absent": []}
                    return self._cache[key]
                best: dict[str, float] = {}
                for d in boxes:
                    best[d.label] = max(best.get(d.label, 0.0), float(d.score))
                # A label with no box at all is absent whatever the threshold.
                present = [(lab, round(best[lab], 4)) for lab in labels if lab in best and best[lab] >= self.threshold]
                absent = [lab for lab in labels if lab not in best or best[lab] < self.threshold]
                self._cache[key] = {"present": present, "absent": absent}
        return self._cache[key]

    def describe(self) -> dict:
        """The detector's model (not loaded just to be named) with the oracle's settings and counts."""
        info = backend_record(self._detector, "detect", self.spec, "detector")
        return {**info, "threshold": self.threshold, "calls": self.calls, "failed": self.failed}
