"""The model under test as CEDI's examiner and SAMF's fuzzer see it: a VLM `answer(requests)` over a config
`models:` entry.

The model is resolved exactly as the answer stage does (halluflow.answer.ModelUnderTest: `build:` stand-in folders,
the prior's concept graph, stand_in labels, lazy loading). Requests without their own max_new_tokens get the
method's answer length. A failed request answers "" (unjudged / unparsed, never a hallucination) and is counted
and logged, so one flaky server reply does not stop a multi-turn examination or a fuzzing campaign.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from ..progress import get_logger
from .base import VLMRequest

log = get_logger(__name__)


class Evaluatee:
    """Args: spec (a `models:` entry), graph_dir (concept graph for the prior), models_cache (where `build:`
    stand-ins live), max_new_tokens (answer length for requests that carry none), method (names the caller in
    logs, e.g. "cedi" or "samf")."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        graph_dir: str | os.PathLike | None = None,
        models_cache: str | os.PathLike = "resources/models",
        max_new_tokens: int = 64,
        method: str = "eval",
    ):
        from ..answer import ModelUnderTest

        self.model = ModelUnderTest(
            dict(spec), graph_dir=str(graph_dir) if graph_dir else None, models_cache=models_cache
        )
        self.max_new_tokens = int(max_new_tokens)
        self.method = method
        self.failed = 0

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def max_images(self) -> int:
        """Images one request may carry: the backend's (loads it)."""
        return self.model.backend.max_images

    def describe(self):
        return self.model.describe()

    def answer(self, requests: Sequence[VLMRequest]) -> list[str]:
        requests = [
            r if r.max_new_tokens is not None else dataclasses.replace(r, max_new_tokens=self.max_new_tokens)
            for r in requests
        ]
        out = []
        for request, result in zip(requests, self.model.run(requests)):
            if result.error is not None:
                self.failed += 1
                log.warning("%s: request %s to %s failed: %s", self.method, request.request_id, self.name, result.error)
            out.append(result.text or "")
        return out
