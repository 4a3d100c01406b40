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


SECTIONS = ("input", "output", "params")


def rule_names(block: str) -> dict[str, set[str]]:
    """The named entries of a rule's input, output and params sections and the wildcards of its outputs, read from
    the rule's text (a name is `key=` one indentation level below its section's header)."""
    names: dict[str, set[str]] = {s: set() for s in (*SECTIONS, "wildcards")}
    lines = block.splitlines()
    for i, line in enumerate(lines):
        head = re.match(r"(\s+)(input|output|params):\s*$", line)
        if not head:
            continue
        indent = len(head.group(1))
        for entry in lines[i + 1 :]:
            if entry.strip() and len(entry) - len(entry.lstrip()) <= indent:
                break
            key = re.match(r"\s+(\w+)=", entry)
            if key and len(entry) - len(entry.lstrip()) == indent + 4:
                names[head.group(2)].add(key.group(1))
            if head.group(2) == "output":
                names["wildcards"] |= set(re.findall(r"\{\{(\w+)\}\}", entry))
    return names


def test_no_rule_uses_a_name_twice_and_each_passes_what_its_function_needs():
    # The entry refuses a name used twice in one rule (an input and a param both called `source`) only when the job
    # runs; read every rule's names here, so a rule file that breaks its function's signature fails at once.
    import inspect

    root = Path(__file__).resolve().parents[1]
    checked = 0
    for smk in sorted((root / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=\s*(?:rule|checkpoint) \w+:)", smk.read_text(encoding="utf-8")):
            m = re.match(r"\s*(?:rule|checkpoint) (\w+):", block)
            if not (m and '"../scripts/rule.py"' in block):
                continue
            names = rule_names(block)
            for a, b in [(a, b) for i, a in enumerate(names) for b in list(names)[i + 1 :]]:
                assert not names[a] & names[b], f"rule {m.group(1)}: {names[a] & names[b]} both {a} and {b}"
            given = set().union(*names.values()) | {"threads", "log"}
            fn = workflow.function(m.group(1))
            needed = {
                n
                for n, p in inspect.signature(fn).parameters.items()
                if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD
            }
            # unpack(...) inputs and **-unpacked params blocks name their keys elsewhere
            if "unpack(" not in block and "**" not in block:
                assert needed <= given, f"rule {m.group(1)} passes no {sorted(needed - given)} to {fn.__name__}"
            checked += 1
    assert checked > 30
