"""Language-prior baseline: answers from the ODE concept graph's co-occurrence statistics, never from pixels.

ODE (open-set dynamic evaluation of object hallucination) builds its queries from co-occurrence; this deterministic model answers "yes" exactly when the asked
object co-occurs strongly with the scene's other objects, so it reproduces the hallucination a purely prior-driven
model would make (yes to strong neighbours, no to fictional pairs). Generative: the context plus top neighbours.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from ..errors import InputError
from ..io import read_parquet
from .base import VLM, BackendInfo, VLMRequest

_COUNT_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_GENERATIVE = re.compile(r"\b(describe|description|caption)\b", re.I)


def article(noun: str) -> str:
    """ "a" or "an" by the usual spelling rule (a unicorn, an umbrella, an egg)."""
    lowered = noun.lower()
    if lowered[:1] in "aeio" or (lowered[:1] == "u" and not lowered.startswith(("uni", "use", "usu", "ute", "uti"))):
        return "an"
    return "a"


class LanguagePriorVLM(VLM):
    """Never looks at images (max_images 0). Args:
    graph: folder with nodes.parquet + edges.parquet (data contract of build_graph); the answer stage fills in
           results/<release>/graph when omitted.
    queries: optional queries table (parquet) giving each request's scene objects by query id; without it the
           prior sees only the question text and uses the marginal object frequency.
    threshold: yes when P(target | context object) = weight / frequency(context) ≥ threshold (default 0.1);
           without context, when frequency(target) / max frequency ≥ threshold.
    neighbours: how many top co-occurring objects a generative answer adds (default 3).
    """

    max_images = 0

    def __init__(
        self, graph: str | None = None, queries: str | None = None, threshold: float = 0.1, neighbours: int = 3
    ):

        if graph is None:
            raise InputError(
                "vlm backend 'prior': argument 'graph' (folder with nodes.parquet and edges.parquet) is required"
            )
        folder = Path(graph)
        for name in ("nodes.parquet", "edges.parquet"):
            if not (folder / name).exists():
                raise InputError(f"vlm backend 'prior': {folder / name} not found (run rule build_graph first)")
        nodes = read_parquet(folder / "nodes.parquet")
        edges = read_parquet(folder / "edges.parquet")
        self.graph_dir = str(folder)
        self.threshold = float(threshold)
        self.neighbours = int(neighbours)
        self.frequency = {r["node"]: max(int(r["frequency"] or 0), 1) for r in nodes.iter_rows(named=True)}
        self.attributes = {
            r["node"]: set(r.get("states") or []) | set(r.get("actions") or []) for r in nodes.iter_rows(named=True)
        }
        self.weight: dict[str, dict[str, int]] = {}
        for s, t, w in edges.select("source", "target", "weight").iter_rows():
            self.weight.setdefault(s, {})[t] = int(w)
            self.weight.setdefault(t, {})[s] = int(w)
        self.max_frequency = max(self.frequency.values(), default=1)
        # Longest names first so "traffic light" wins over "light" when parsing free text.
        self._names = sorted(self.frequency, key=lambda n: (-len(n), n))
        self.context: dict[str, dict] = {}
        if queries is not None:
            self.bind_queries(read_parquet(queries))

    def bind_queries(self, table) -> None:
        """Give the prior each query's scene objects (query_id → query_type, target, objects)."""
        for row in table.select("query_id", "query_type", "target", "objects", "question").iter_rows(named=True):
            self.context[str(row["query_id"])] = row

    def describe(self) -> BackendInfo:
        return BackendInfo(
            "vlm",
            "prior",
            f"cooccurrence-prior:{Path(self.graph_dir).name}",
            None,
            False,
            {"image_input": False, "threshold": self.threshold},
        )

    def generation_settings(self, request: VLMRequest) -> dict:
        return {"threshold": self.threshold, "neighbours": self.neighbours}

    def _mentioned(self, text: str) -> str | None:
        lowered = text.lower()
        for name in self._names:
            if re.search(rf"\b{re.escape(name.lower())}s?\b", lowered):
                return name
        return None

    def _exists(self, target: str | None, context: Sequence[str]) -> bool:
        if target is None or target not in self.frequency:
            return False
        others = [c for c in context if c != target and c in self.frequency]
        if not others:
            return self.frequency[target] / self.max_frequency >= self.threshold
        support = max(self.weight.get(target, {}).get(c, 0) / self.frequency[c] for c in others)
        return support >= self.threshold

    def _describe_scene(self, context: Sequence[str]) -> str:
        seen = [c for c in context if c in self.frequency]
        scores: dict[str, int] = {}
        for c in seen:
            for n, w in self.weight.get(c, {}).items():
                if n not in seen:
                    scores[n] = scores.get(n, 0) + w
        extra = [n for n, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: self.neighbours]]
        objects = seen + extra
        if not objects:
            return "I see nothing I can name."
        phrases = [f"{article(o)} {o}" for o in objects]
        listed = phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]
        return f"The picture shows {listed}."

    def _answer_one(self, request: VLMRequest) -> str:
        row = self.context.get(request.request_id)
        question = request.prompt
        if row is not None:
            query_type, target, context = row["query_type"], row["target"], list(row["objects"] or [])
            question = row["question"] or question
        else:
            target = self._mentioned(question)
            context = []
            query_type = "generative" if _GENERATIVE.search(question) else "existence"
        if query_type == "generative":
            return self._describe_scene(context)
        yes = self._exists(target, context)
        if query_type == "attribute" and yes and target is not None:
            words = set(re.findall(r"[a-z]+", question.lower()))
            yes = bool(words & self.attributes.get(target, set()))
        if query_type == "count" or (row is None and re.search(r"\bare there\b", question, re.I)):
            # Prior: scenes hold one of a thing; more than one is answered no.
            counts = [_COUNT_WORDS[w] for w in re.findall(r"[a-z]+", question.lower()) if w in _COUNT_WORDS]
            yes = yes and (not counts or counts[0] == 1)
        return "Yes" if yes else "No"

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        return [self._answer_one(r) for r in requests]
