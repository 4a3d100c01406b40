"""What the release's labels mean, for its DATACARD and manifest (`counts.meaning`): how many "no" candidates each
meaning rule removed (make_queries' report, queries/meaning.json), which misspelt graph words the spelling table
corrected or dropped, and, counted from the release's own questions, that no "no" is about something other than a
thing or about an object the prompt implies, and how many "no" questions each strategy kept beside the "yes" ones.
"""

from __future__ import annotations

import polars as pl

from .concepts import Implications, concept, read_concepts


def meaning_record(queries: pl.DataFrame, report: dict | None) -> dict:
    """The manifest's `counts.meaning`: make_queries' report (may be None: a queries table made elsewhere) plus
    what the release's questions themselves show."""
    from .queries import invalid_questions, no_object_questions

    needed = {"query_type", "attribute_kind", "question", "truth", "target", "objects", "strategy"}
    if not needed <= set(queries.columns):  # a hand-made table without the question columns: the report only
        return {**(report or {})}
    lexicon = read_concepts()
    implications = Implications(lexicon)
    no = no_object_questions(queries)
    kinds = [concept(t, lexicon).kind for t in no["target"].to_list()]
    implied = sum(
        1
        for t, objects, kind in zip(no["target"].to_list(), no["objects"].to_list(), kinds)
        if kind == "thing" and t in implications.implied(tuple(objects or ()))
    )
    existence = queries.filter(pl.col("query_type") == "existence")
    return {
        **(report or {}),
        "no_object_questions_by_strategy": dict(sorted(no.group_by("strategy").len().rows())),
        "existence_yes": existence.filter(pl.col("truth") == "yes").height,
        "existence_no": existence.filter(pl.col("truth") == "no").height,
        "no_about_non_things": sum(k != "thing" for k in kinds),
        "no_implied_by_prompt": implied,
        "invalid_questions": invalid_questions(queries).height,
    }


def meaning_card(record: dict) -> list[str]:
    """The DATACARD's section on the meaning of the labels (docs/ode.md, "Labels that mean what they say")."""
    lines = [
        "## What the labels mean",
        'A "no" object (every strategy, counterfactual and spare candidate) is a *thing* (concept lexicon',
        "resources/vocab/concepts.tsv: never stuff such as sky, wall or grass, a scene, a part or an abstract concept)",
        "that the prompt does not imply (no hypernym, hyponym, part or whole of a prompt object, nothing its",
        "environment typically shows), scored below the detector's exclusion threshold. Attribute questions use words",
        "that fit the object's class (resources/vocab/attribute_types.tsv); a counterfactual attribute is another",
        "value of the prompt attribute's exclusive type (a red car: blue, never hiking).",
        "",
    ]
    removed = record.get("no_candidates_removed") or {}
    if removed:
        rules = list(next(iter(removed.values())))
        lines += [
            '"No" candidates each rule removed (over all images; for `fictional`, members of the counterfactual pool',
            "left out per image):",
            "",
            "| strategy | " + " | ".join(rules) + " |",
            "|---|" + "---|" * len(rules),
        ]
        lines += [f"| {s} | " + " | ".join(str(per[r]) for r in rules) + " |" for s, per in removed.items()]
        lines.append("")
    if "counterfactual_attributes_not_asked" in record:
        lines.append(
            f"- counterfactual attribute questions not asked (no other fitting value of the prompt attribute's "
            f"exclusive type): {record['counterfactual_attributes_not_asked']}"
        )
    spelling = record.get("spelling")
    if spelling is not None:
        corrected, dropped = spelling.get("corrected") or {}, spelling.get("dropped") or []
        lines.append(
            f"- misspelt graph words (resources/vocab/spelling.tsv): {len(corrected)} corrected"
            + (f" ({', '.join(f'{w} -> {r}' for w, r in corrected.items())})" if corrected else "")
            + f", {len(dropped)} dropped"
            + (f" ({', '.join(dropped)})" if dropped else "")
        )
    by_strategy = record.get("no_object_questions_by_strategy")
    if by_strategy is None:
        return [*lines, ""]
    lines += [
        '- "no" object questions kept per strategy: '
        + (", ".join(f"{s} {n}" for s, n in by_strategy.items()) or "none")
        + f"; existence questions yes {record.get('existence_yes', 0)} / no {record.get('existence_no', 0)}",
        f'- counted from this release\'s questions: "no" about something other than a thing: '
        f"{record.get('no_about_non_things', 0)}; about an object the prompt implies: "
        f"{record.get('no_implied_by_prompt', 0)}; questions invalid in form or meaning (invalid_questions): "
        f"{record.get('invalid_questions', 0)}",
        "",
    ]
    return lines
