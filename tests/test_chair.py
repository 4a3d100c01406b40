"""CHAIR: halluflow's vectorised scorer against an oracle that shares no code with it.

The oracle (bench/official_ports.py) is a port of LisaAnne/Hallucination utils/chair.py running nltk's own word
tokenizer and pattern's own singularize (compiled from the installed pattern3 package); it imports nothing from
halluflow. Also: every special case of chair.py, hand-computed scores, the shipped synonym/rule resources, and
mutation checks showing a broken tokenizer or singularizer is caught."""

from __future__ import annotations

import json
import random
import re
import sys
from unittest import mock

import polars as pl
import pytest
from helpers import REPO, shared_data
from hypothesis import example, given, settings
from hypothesis import strategies as st

from halluflow.cli import main
from halluflow.errors import InputError
from halluflow.metrics import chair as chair_module
from halluflow.metrics import singular, treebank
from halluflow.metrics.chair import DOUBLE_WORD_DICT, caption_mentions, chair_scores, derive_resources, load_synonyms
from halluflow.metrics.singular import singularize, singularize_cached
from halluflow.metrics.treebank import tokenize

sys.path.insert(0, str(REPO / "bench"))
from official_ports import ChairPort, chair_compute, nltk_word_tokenize, pattern_singularize


@pytest.fixture(scope="module")
def special():
    return json.loads(shared_data("chair-lisaanne-hallucination", "chair_special_cases.json").read_text())


@pytest.fixture(scope="module")
def syn_path():
    return shared_data("chair-lisaanne-hallucination", "synonyms.txt")


@pytest.fixture(scope="module")
def syn():
    return load_synonyms()  # the shipped table


@pytest.fixture(scope="module")
def word_tokenize():
    pytest.importorskip("nltk", reason="nltk (dev extra) is the reference tokenizer")
    # untrained Punkt: its trained English model adds an abbreviation list that halluflow does not ship
    return nltk_word_tokenize(trained=False)[0]


@pytest.fixture(scope="module")
def pattern():
    fn = pattern_singularize()
    if fn is None:
        pytest.skip("pattern3 not installed (setup.sh installs it with --no-deps): no reference singularizer")
    return fn


@pytest.fixture(scope="module")
def word_list(syn_path):
    """Every word of CHAIR's and AMBER's vocabularies, plus regular and irregular plural shapes of each."""
    words = set(re.findall(r"[a-z][a-z'-]*", syn_path.read_text().lower()))
    words |= {w for w in json.loads(shared_data("amber", "data", "relation.json").read_text())}
    words |= {
        "zombies",
        "bogies",
        "species",
        "news",
        "mothers-in-law",
        "dogs'",
        "analyses",
        "theses",
        "octopi",
        "slice",
        "knives",
        "leaves",
        "wolves",
        "cookies",
        "pies",
        "ties",
        "glasses",
        "buses",
        "axes",
    }
    shapes = set()
    for w in words:
        shapes |= {
            w,
            w + "s",
            w + "es",
            (w[:-1] + "ies") if w.endswith("y") else w,
            (w[:-1] + "ves") if w.endswith("f") else w,
        }
    return sorted(shapes)


def _singular_mismatches(words, reference):
    return [(w, singularize(w), reference(w)) for w in words if singularize(w) != reference(w)]


def test_singularizer_equals_pattern(word_list, pattern):
    assert len(word_list) > 2000
    assert _singular_mismatches(word_list, pattern) == []


@pytest.mark.parametrize(
    "word, expected",
    [
        ("glass", "glas"),
        ("glasses", "glass"),
        ("bus", "bu"),
        ("buses", "bus"),
        ("ties", "ty"),
        ("people", "person"),
        ("women", "woman"),
        ("children", "child"),
        ("knives", "knife"),
        ("mice", "mouse"),
        ("skis", "ski"),
        ("benches", "bench"),
        ("potatoes", "potato"),
        ("giraffes", "giraffe"),
        ("sheep", "sheep"),
        ("cookies", "cookies"),
        ("ears", "ears"),
        ("mothers-in-law", "mother-in-law"),
        ("dogs'", "dog's"),
        ("boxes", "box"),
        ("teeth", "tooth"),
        ("zombies", "zombie"),
        ("bogies", "bogy"),
    ],
)
def test_singularizer_quirks(word, expected, pattern):
    # the reference itself gives CHAIR's quirks ("bus" → "bu", "glass" → "glas", "ties" → "ty"), and so do we
    assert pattern(word) == expected == singularize(word)


_CAPTION_WORDS = [
    "a",
    "the",
    "man",
    "men",
    "dog",
    "dogs",
    "hot",
    "baby",
    "adult",
    "bird",
    "passenger",
    "train",
    "track",
    "toilet",
    "seat",
    "wine",
    "glass",
    "glasses",
    "bus",
    "buses",
    "teddy",
    "bear",
    "bears",
    "home",
    "plate",
    "pizza",
    "tables",
    "people",
    "stop",
    "sign",
    "traffic",
    "light",
    "cell",
    "phone",
    "t-shirt",
    "dog/cat",
    "3",
    "2.5",
    "u.s.",
    "no.",
    "a.",
    "e.g.",
    "cannot",
    "it's",
    "dog's",
    "dogs'",
    "isn't",
    "(",
    ")",
    "[",
    ",",
    ",",
    ".",
    ".",
    "...",
    ";",
    ":",
    "!",
    "?",
    '"',
    "'",
    "--",
    "&",
    "'dog'",
    '"cat"',
    "(dog)",
    "dog,",
    "dog.",
    "cat.)",
    "dog!",
    "car;",
    "bus:",
    "motor",
    "bike",
]
_captions = st.lists(st.sampled_from(_CAPTION_WORDS), max_size=16).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(_captions)
def test_tokenizer_equals_nltk(word_tokenize, caption):
    assert tokenize(caption) == word_tokenize(caption)


def test_tokenizer_equals_nltk_on_random_captions(word_tokenize):
    """The vectorised path (all captions in one frame) on 5,000 seeded random captions."""
    rnd = random.Random(1)
    caps = [" ".join(rnd.choice(_CAPTION_WORDS) for _ in range(rnd.randint(0, 16))) for _ in range(5_000)]
    ours = treebank.token_frame(pl.Series(caps)).group_by("doc", maintain_order=True).agg("tok")
    by_doc = dict(zip(ours["doc"].to_list(), ours["tok"].to_list()))
    assert [(c, by_doc.get(i, [])) for i, c in enumerate(caps) if by_doc.get(i, []) != word_tokenize(c)] == []


def _mention_mismatches(captions, syn_path, word_tokenize, pattern):
    port = ChairPort(syn_path, word_tokenize, pattern)
    syn = load_synonyms()
    return [
        (c, ours, ref)
        for c in captions
        if (ours := [cat for _, cat in caption_mentions(c, syn)]) != (ref := port.caption_to_words(c)[1])
    ]


_PROBES = [
    "A man and two dogs on a bench.",
    "Two buses. A wine glass, three wine glasses and a glass.",
    "A hot, dog and a hot dog",
    "the seat of the toilet. a seat",
    "A dog/cat on a t-shirt; zombies.",
    "Two men's ties and a bow tie.",
]


def test_probe_captions_equal_port(syn_path, word_tokenize, pattern):
    assert _mention_mismatches(_PROBES, syn_path, word_tokenize, pattern) == []


def test_oracle_catches_a_broken_singularizer(syn_path, word_list, word_tokenize, pattern, monkeypatch):
    """Mutation check: drop the "(bus)es$" rule from halluflow's singularizer; both comparisons must fail."""
    rules = [r for r in singular._RULES if r[0].pattern != r"(?i)(bus)es$"]
    assert len(rules) == len(singular._RULES) - 1
    monkeypatch.setattr(singular, "_RULES", rules)
    singularize_cached.cache_clear()
    try:
        assert ("buses", "buse", "bus") in _singular_mismatches(word_list, pattern)
        assert _mention_mismatches(_PROBES, syn_path, word_tokenize, pattern)
    finally:
        monkeypatch.undo()
        singularize_cached.cache_clear()


def test_oracle_catches_a_broken_tokenizer(syn_path, word_tokenize, pattern, monkeypatch):
    """Mutation check: halluflow's tokenizer without nltk's final-period rule, or splitting on '/', must fail (the
    plain-text short cut switched off, so the rules see every probe); so must a short cut that drops punctuation."""
    monkeypatch.setattr(treebank, "_PLAIN_CHARS", r"[^\s\S]")  # matches nothing: every text takes the rules
    monkeypatch.setattr(treebank, "_PUNCTUATION", [r for r in treebank._PUNCTUATION if "\\s*$" not in r[0]])
    assert tokenize("a dog.") != word_tokenize("a dog.")
    assert _mention_mismatches(_PROBES, syn_path, word_tokenize, pattern)
    monkeypatch.undo()
    monkeypatch.setattr(treebank, "_PLAIN_CHARS", r"[^\s\S]")
    monkeypatch.setattr(treebank, "_PARENS_AND_DASHES", treebank._PARENS_AND_DASHES + [("/", " ")])
    assert _mention_mismatches(_PROBES, syn_path, word_tokenize, pattern)
    monkeypatch.undo()
    monkeypatch.setattr(treebank, "_PLAIN_TOKEN", r"[A-Za-z-]+")
    assert tokenize("a dog, a cat.") != word_tokenize("a dog, a cat.")


# Pieces that build plain texts and the near misses the short cut must send to the rules.
_PLAIN_PIECES = list("abXY -,.\n\t") + ["dog", "Cannot", "gonna", "wanna ", "xy.", "a.", "..", "--", "'", "5", "é", '"']


_plain_texts = st.lists(st.sampled_from(_PLAIN_PIECES), max_size=24).flatmap(
    lambda pieces: st.sampled_from(["", " "]).map(lambda sep: sep.join(pieces))
)


@settings(max_examples=300, deadline=None)
@given(_plain_texts)
def test_plain_short_cut_equals_nltk(word_tokenize, text):
    """Texts the short cut takes get nltk's own tokens."""
    if pl.select(treebank.is_plain(pl.lit(text))).item():
        assert tokenize(text) == word_tokenize(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(_plain_texts, max_size=6))
@example(["a. dog", "ab. c", "x.y", "dog ,cat", "dog,,cat", "He cannot go", "wanna go", "b--c", "a -. b", "", "Dr. X."])
def test_plain_short_cut_equals_the_rules(texts):
    """The plain-text short cut gives exactly the tokens of the full rules, on texts it takes and texts it refuses."""
    series = pl.Series(texts, dtype=pl.String)
    assert treebank.token_frame(series).equals(treebank.token_frame(series, plain_short_cut=False))


def test_double_word_dict_matches_chair_py(special, syn_path, word_tokenize, pattern):
    # the shipped rule lists rebuild chair.py's double_word_dict (as built by the independent port)
    port = ChairPort(syn_path, word_tokenize, pattern)
    assert DOUBLE_WORD_DICT == port.double_word_dict == special["double_word_dict"]


def test_shipped_synonyms_equal_chair_py_parsing(syn_path):
    assert load_synonyms() == load_synonyms(syn_path) and len(load_synonyms()) == 403
    assert load_synonyms(fix_spaces=True) == load_synonyms(syn_path, fix_spaces=True)
    assert len(set(load_synonyms().values())) == 80


def test_shipped_resources_rederive_byte_identical(syn_path, tmp_path):
    from halluflow.metrics.chair import RULES_JSON, SYNONYMS_TSV

    special = shared_data("chair-lisaanne-hallucination", "chair_special_cases.json")
    assert derive_resources(syn_path, special, tmp_path) == 403
    assert (tmp_path / SYNONYMS_TSV.name).read_bytes() == SYNONYMS_TSV.read_bytes()
    assert (tmp_path / RULES_JSON.name).read_bytes() == RULES_JSON.read_bytes()


def test_score_chair_needs_no_shared_folder(tmp_path, monkeypatch, capsys):
    """A user's install has no ../shared: the shipped synonym list is enough."""
    monkeypatch.setenv("HALLUFLOW_SHARED", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    caps = tmp_path / "c.jsonl"
    caps.write_text('{"image_id": 1, "caption": "A man with two dogs and a frisbee."}\n')
    truth = tmp_path / "t.jsonl"
    truth.write_text('{"image_id": 1, "objects": ["person", "dog"]}\n')
    assert main(["score", "chair", "--captions", str(caps), "--truth", str(truth)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["n_mentions"], out["n_hallucinated_mentions"], out["chair_s"]) == (3, 1, 1.0)


def _cats(caption, syn):
    return [c for _, c in caption_mentions(caption, syn)]


def test_every_special_case(special, syn, syn_path):
    # each double word merges; its mapping decides the category (or none)
    for pair, merged in special["double_word_dict"].items():
        if pair.count(" ") > 1:  # 'stove top oven' can never match a two-token window: stove + oven fire
            assert _cats(f"a {pair}", syn) == ["oven", "oven"]
            continue
        text = "wine glass" if pair == "wine glas" else pair  # 'glas' is what singularize makes of 'glass'
        got = _cats(f"there is a {text} here", syn)
        assert got == ([syn[merged]] if merged in syn else []), pair
    # baby/adult + animal: never 'person'; passenger + vehicle: never 'person'
    assert _cats("a baby elephant", syn) == ["elephant"] and _cats("a passenger jet", syn) == ["airplane"]
    assert _cats("the baby", syn) == ["person"]
    # toilet present → every 'seat' dropped; otherwise 'seat' is a chair
    assert _cats("the seat of the toilet", syn) == ["toilet"] and _cats("a seat", syn) == ["chair"]
    assert _cats("a toilet seat and a seat", syn) == ["toilet"]
    # quirks: ' motor bike' / ' cheesecake' never match; 'iPhone' never matches; 'home plate'/'train track' eat train
    assert _cats("a motor bike and a cheesecake and an iphone", syn) == []
    assert _cats("a motor bike and a cheesecake", load_synonyms(syn_path, fix_spaces=True)) == ["motorcycle", "cake"]
    assert _cats("the train track near home plate", syn) == []
    # 'glass' → 'glas' (merged by the 'wine glas' override), 'glasses' → 'glass' (merged by 'wine glass')
    assert _cats("a wine glass and two wine glasses", syn) == ["wine glass", "wine glass"]
    assert _cats("a glass and glasses", syn) == []
    assert _cats("Two dogs, a dog's bowl and 3 hot dogs.", syn) == ["dog", "dog", "bowl", "hot dog"]


def test_hand_computed_scores(syn):
    caps = pl.DataFrame(
        {
            "image_id": ["1", "1", "2"],
            "caption": ["A man and a dog on a bench.", "A cat, a cat and a man.", "Nothing here."],
        }
    )
    truth = {"1": ["dog", "person", "bench"], "2": []}
    m, rows = chair_scores(caps, truth, syn)
    # caption 1: 3 mentions, 0 hallucinated; caption 2: cat, cat (hallucinated x2), man → 2 of 3; caption 3: none
    assert m == {
        "chair_s": 1 / 3,
        "chair_i": 2 / 6,
        "n_captions": 3,
        "n_mentions": 6,
        "n_hallucinated_mentions": 2,
        "n_hallucinated_captions": 1,
    }
    assert rows["hallucinated_objects"].to_list() == [[], ["cat", "cat"], []]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_captions, min_size=1, max_size=25),
    st.lists(
        st.sampled_from(
            [
                "person",
                "dog",
                "hot dog",
                "bird",
                "train",
                "toilet",
                "chair",
                "wine glass",
                "bus",
                "teddy bear",
                "pizza",
                "dining table",
            ]
        ),
        max_size=5,
    ),
)
def test_vectorised_equals_port(syn_path, word_tokenize, pattern, captions, truth_objects):
    """Also across caption chunks: chunks of 4 here (25,000 by default), so a chunk boundary falls inside most
    examples."""
    caps = [{"image_id": str(i % 3), "caption": c} for i, c in enumerate(captions)]
    truth = {str(i): sorted(set(truth_objects[i:])) for i in range(3)}
    with mock.patch.object(chair_module, "CAPTION_CHUNK", 4):
        m, rows = chair_scores(pl.DataFrame(caps), truth, load_synonyms())
    ref = chair_compute(caps, {k: set(v) for k, v in truth.items()}, syn_path, word_tokenize, pattern)
    assert rows["mentioned"].to_list() == ref.pop("mentions")
    assert m == ref


def test_cli_and_errors(tmp_path, capsys, syn_path):
    caps = tmp_path / "c.jsonl"
    caps.write_text('{"image_id": 7, "caption": "Two dogs and a frisbee."}\n')
    truth = tmp_path / "t.jsonl"
    truth.write_text('{"image_id": 7, "objects": ["dog"]}\n')
    assert (
        main(
            [
                "score",
                "chair",
                "--captions",
                str(caps),
                "--truth",
                str(truth),
                "--synonyms",
                str(syn_path),
                "--per-caption",
                str(tmp_path / "rows.parquet"),
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["chair_s"] == 1.0 and out["chair_i"] == 0.5
    assert pl.read_parquet(tmp_path / "rows.parquet")["hallucinated_objects"].to_list() == [["frisbee"]]
    truth.write_text('{"image_id": 8, "objects": ["dog"]}\n')
    assert main(["score", "chair", "--captions", str(caps), "--truth", str(truth), "--synonyms", str(syn_path)]) == 1
    assert "no truth objects for image_id '7'" in capsys.readouterr().err
    with pytest.raises(InputError, match="synonyms file .* not found"):
        load_synonyms(tmp_path / "nope.txt")


def test_shipped_resources_are_package_data():
    import fnmatch

    from halluflow.metrics.chair import DATA_DIR

    tomllib = pytest.importorskip("tomllib", reason="Python 3.11+ reads pyproject.toml")

    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["halluflow"]
    pkg = DATA_DIR.parents[1]
    for f in DATA_DIR.iterdir():
        assert any(fnmatch.fnmatch(str(f.relative_to(pkg)), g) for g in globs), f


@pytest.mark.parametrize("key", ["text", "answer", "response"])
def test_captions_under_another_key_are_named_not_read_as_failed(tmp_path, capsys, key):
    """Captions under a key CHAIR does not read were every answer "failed" (past --max-failed-fraction); now one
    line names the key it expects, and CAOS's reader says the same for its --objects file."""
    (tmp_path / "c.jsonl").write_text(
        "".join(json.dumps({"image_id": i, key: "A dog on a sofa."}) + "\n" for i in ("1", "2"))
    )
    (tmp_path / "t.jsonl").write_text('{"image_id": "1", "objects": ["dog"]}\n{"image_id": "2", "objects": ["cat"]}\n')
    truth = str(tmp_path / "t.jsonl")
    assert main(["score", "chair", "--captions", str(tmp_path / "c.jsonl"), "--truth", truth]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"halluflow: error: {tmp_path / 'c.jsonl'}: records have no 'caption' (expected {{image_id, caption}})"
    ]
    assert main(["score", "caos", "--objects", str(tmp_path / "c.jsonl"), "--truth", truth]) == 1
    assert "(image_id '1') needs one of ['objects', 'caption']" in capsys.readouterr().err
