"""ODE releases (Tu, Hu, Sang, "ODE: Open-Set Evaluation of Hallucinations in Multimodal Large Language Models"): a
packaged release folder (queries.parquet, images, manifest) answered like any source and scored by
halluflow.ode.scoring with the release's concept graph (rule score, ODE branch: Cog and the by_<column> breakdowns).

Outside the workflow its answers are written as JSONL {query_id, answer} (what `halluflow score ode` reads).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from . import Benchmark, records


class ODERelease(Benchmark):
    name = "ode"
    label = "ODE"
    scores_key = "ode"
    release = True

    @property
    def breakdowns(self) -> tuple[str, ...]:
        from ..ode.scoring import BREAKDOWNS

        return tuple(BREAKDOWNS)

    def inputs(self, source):
        # null path: this run's own release, which the workflow builds (rules.package_release)
        return [f"{source['path']}/manifest.json"] if source.get("path") else []

    def queries(self, source, release=None):
        from ..io import read_parquet

        folder = source.get("path") or release
        path = Path(folder) / "queries.parquet"
        if not path.exists():
            raise InputError(f"{path}: release queries not found (run the ODE stages first)")
        table = read_parquet(path)
        missing = [c for c in ("query_id", "image", "question", "task") if c not in table.columns]
        if missing:
            raise InputError(f"{path}: missing column(s) {', '.join(missing)}")
        return table, Path(source.get("images") or folder)

    def write_answers(self, rows, source, out):
        from ..io import write_jsonl

        write_jsonl(out, records(rows, "query_id", "answer"))

    def score(self, answers_file, answered, source, scoring):
        raise InputError(
            "an ODE release is scored with its concept graph: rule score (halluflow.ode.scoring.run_score) "
            "or `halluflow score ode`"
        )


BENCHMARK = ODERelease()
