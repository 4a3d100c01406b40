"""The one entry of every rule's script (halluflow.workflow.run): a rule's named inputs, outputs, params, wildcards
and threads reach its function as keyword arguments; a name used twice or missing is refused in one line."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
from snakemake.iocontainers import InputFiles, OutputFiles, Params, Wildcards

from halluflow import workflow
from halluflow.errors import ConfigError


def job(rule="demo", inputs=None, outputs=None, params=None, wildcards=None, log=(), threads=2):
    return types.SimpleNamespace(
        rule=rule,
        input=InputFiles(fromdict=inputs or {}),
        output=OutputFiles(fromdict=outputs or {}),
        params=Params(fromdict=params or {}),
        wildcards=Wildcards(fromdict=wildcards or {}),
        log=list(log),
        threads=threads,
    )


def demo(*, table: str, shards: list, out: str, seed: int, model: str, threads: int, level: str = "info"):
    return table, shards, out, seed, model, threads, level


def test_named_entries_become_the_functions_keywords():
    smk = job(
        inputs={"table": "a.parquet", "shards": ["s0", "s1"]},
        outputs={"out": "b.json"},
        params={"seed": 7, "unused": 1},
        wildcards={"model": "tiny"},
    )
    kwargs = workflow.arguments("demo", demo, smk)
    assert demo(**kwargs) == ("a.parquet", ["s0", "s1"], "b.json", 7, "tiny", 2, "info")
    assert "unused" not in kwargs and "log" not in kwargs  # only what the function asks for


def test_a_name_used_twice_in_a_rule_is_refused():
    smk = job(inputs={"model": "m/config.json"}, wildcards={"model": "tiny"})
    with pytest.raises(ConfigError, match="rule 'demo': 'model' is both an input and a wildcard"):
        workflow.arguments("demo", demo, smk)


def test_a_missing_argument_names_the_rule_and_the_function():
    smk = job(inputs={"table": "a"}, outputs={"out": "b"}, wildcards={"model": "m"})
    with pytest.raises(ConfigError, match="rule 'demo' passes no 'shards', which .*demo needs"):
        workflow.arguments("demo", demo, smk)


def test_an_unknown_rule_is_one_line():
    with pytest.raises(ConfigError, match="rule 'nope' has no function in halluflow.workflow.RULES"):
        workflow.function("nope")


def test_every_rule_of_the_workflow_has_a_function_that_imports():
    # Every rule script is scripts/rule.py, so each rule name must be in RULES and point at a real function.
    root = Path(__file__).resolve().parents[1]
    rules = set()
    for smk in sorted((root / "rules").glob("*.smk")):
        text = smk.read_text(encoding="utf-8")
        for block in re.split(r"\n(?=\s*(?:rule|checkpoint) \w+:)", text):
            m = re.match(r"\s*(?:rule|checkpoint) (\w+):", block)
            if m and '"../scripts/rule.py"' in block:
                rules.add(m.group(1))
    assert rules, "no rule uses scripts/rule.py"
    for name in sorted(rules):
        assert callable(workflow.function(name)), name
