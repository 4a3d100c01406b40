"""Every ODE question well formed: hand-written good and bad questions hold `invalid_questions()` and the question,
prompt and export wording to account.

The expectations below are written by hand, one English question at a time (article by sound, mass nouns without
an article and never counted, plurals agreeing, irregular plurals, ODE's virtual nodes never asked); none of them
is computed with the noun lexicon or its rules.
"""

from __future__ import annotations

import polars as pl
import pytest

from halluflow.ode.export import description
from halluflow.ode.graph import Annotations, build_tables
from halluflow.ode.prompts import make_prompts
from halluflow.ode.queries import invalid_questions, make_queries
from halluflow.ode.sampling import SCENE_SCHEMA, sample_scenes

E, CF, C, A = "existence", "counterfactual", "count", "attribute"


def ex(question: str, target: str) -> tuple:
    return (E, None, question, "yes", target)


def count(question: str, target: str) -> tuple:
    return (C, "count", question, "yes", target)


def state(question: str, target: str) -> tuple:
    return (A, "state", question, "yes", target)


def action(question: str, target: str) -> tuple:
    return (A, "action", question, "yes", target)


GOOD = [
    # count nouns: the article by the first sound
    ex("Is there a dog in the picture?", "dog"),
    ex("Is there an apple in the picture?", "apple"),
    ex("Is there a urinal in the picture?", "urinal"),
    ex("Is there an umbrella in the picture?", "umbrella"),
    ex("Is there a uniform in the picture?", "uniform"),
    ex("Is there a utensil in the picture?", "utensil"),
    ex("Is there a utility pole in the picture?", "utility pole"),
    ex("Is there an urn in the picture?", "urn"),
    ex("Is there an umpire in the picture?", "umpire"),
    ex("Is there an undershirt in the picture?", "undershirt"),
    ex("Is there an hour hand in the picture?", "hour hand"),
    ex("Is there an egg in the picture?", "egg"),
    ex("Is there a drawing in the picture?", "drawing"),
    ex("Is there an elephant in the picture?", "elephant"),
    ex("Is there an ottoman in the picture?", "ottoman"),
    ex("Is there an oven in the picture?", "oven"),
    ex("Is there an iphone in the picture?", "iphone"),
    ex("Is there an ipod in the picture?", "ipod"),
    ex("Is there an e-book in the picture?", "e-book"),
    ex("Is there an suv in the picture?", "suv"),
    ex("Is there a tv in the picture?", "tv"),
    ex("Is there a cd in the picture?", "cd"),
    ex("Is there a hat in the picture?", "hat"),
    ex("Is there a horse in the picture?", "horse"),
    ex("Is there a hotel in the picture?", "hotel"),
    ex("Is there a hot dog in the picture?", "hot dog"),
    ex("Is there a yacht in the picture?", "yacht"),
    ex("Is there a person in the picture?", "person"),
    ex("Is there a sheep in the picture?", "sheep"),
    ex("Is there a t-shirt in the picture?", "t-shirt"),
    ex("Is there a tennis racket in the picture?", "tennis racket"),
    ex("Is there an orange in the picture?", "orange"),
    ex("Is there an airplane in the picture?", "airplane"),
    ex("Is there a computer mouse in the picture?", "computer mouse"),
    ex("Is there an individual in the picture?", "individual"),
    ex("Is there a wineglass in the picture?", "wineglass"),
    ex("Is there a cloud in the picture?", "cloud"),
    ex("Is there a beach in the picture?", "beach"),
    ex("Is there a frisbee in the picture?", "frisbee"),
    ex("Is there an antelope in the picture?", "antelope"),
    # names no source lists: the same rules of English
    ex("Is there a one-way sign in the picture?", "one-way sign"),
    ex("Is there a unicorn in the picture?", "unicorn"),
    ex("Is there a eucalyptus in the picture?", "eucalyptus"),
    ex("Is there an hourglass in the picture?", "hourglass"),
    ex("Is there a ukulele in the picture?", "ukulele"),
    ex("Is there an x-ray in the picture?", "x-ray"),
    ex("Is there an igloo in the picture?", "igloo"),
    ex("Is there a unicycle in the picture?", "unicycle"),
    ex("Is there an usher in the picture?", "usher"),
    # mass nouns: no article
    ex("Is there grass in the picture?", "grass"),
    ex("Is there sky in the picture?", "sky"),
    ex("Is there ground in the picture?", "ground"),
    ex("Is there bread in the picture?", "bread"),
    ex("Is there snow in the picture?", "snow"),
    ex("Is there hay in the picture?", "hay"),
    ex("Is there luggage in the picture?", "luggage"),
    ex("Is there rice in the picture?", "rice"),
    ex("Is there water in the picture?", "water"),
    ex("Is there sand in the picture?", "sand"),
    ex("Is there milk in the picture?", "milk"),
    ex("Is there cheese in the picture?", "cheese"),
    ex("Is there money in the picture?", "money"),
    ex("Is there furniture in the picture?", "furniture"),
    ex("Is there traffic in the picture?", "traffic"),
    ex("Is there broccoli in the picture?", "broccoli"),
    ex("Is there hair in the picture?", "hair"),
    ex("Is there toothpaste in the picture?", "toothpaste"),
    ex("Is there paper in the picture?", "paper"),
    ex("Is there ice in the picture?", "ice"),
    ex("Is there coffee in the picture?", "coffee"),
    ex("Is there wine in the picture?", "wine"),
    ex("Is there meat in the picture?", "meat"),
    ex("Is there baggage in the picture?", "baggage"),
    # (stuff such as bamboo and shampoo is asked "yes" only: never a "no" object, tests/test_question_meaning.py)
    ex("Is there bamboo in the picture?", "bamboo"),
    ex("Is there shampoo in the picture?", "shampoo"),
    # plurals: the verb agrees
    ex("Are there jeans in the picture?", "jeans"),
    ex("Are there sunglasses in the picture?", "sunglasses"),
    ex("Are there scissors in the picture?", "scissors"),
    ex("Are there people in the picture?", "people"),
    ex("Are there pants in the picture?", "pants"),
    ex("Are there glasses in the picture?", "glasses"),
    ex("Are there shorts in the picture?", "shorts"),
    ex("Are there cattle in the picture?", "cattle"),
    ex("Are there apples in the picture?", "apples"),
    ex("Are there bananas in the picture?", "bananas"),
    ex("Are there stairs in the picture?", "stairs"),
    ex("Are there skis in the picture?", "skis"),
    ex("Are there chopsticks in the picture?", "chopsticks"),
    ex("Are there clothes in the picture?", "clothes"),
    # counts: count nouns only, plurals by English
    count("Is there one dog?", "dog"),
    count("Are there two dogs?", "dog"),
    count("Are there three people?", "person"),
    count("Are there two sheep?", "sheep"),
    count("Are there two urinals?", "urinal"),
    count("Is there one urinal?", "urinal"),
    count("Is there one umbrella?", "umbrella"),
    count("Are there three umbrellas?", "umbrella"),
    count("Are there two benches?", "bench"),
    count("Are there two knives?", "knife"),
    count("Are there three geese?", "goose"),
    count("Are there two mice?", "mouse"),
    count("Are there two boxes?", "box"),
    count("Are there three cherries?", "cherry"),
    count("Are there two potatoes?", "potato"),
    count("Are there two tomatoes?", "tomato"),
    count("Are there two pianos?", "piano"),
    count("Are there two giraffes?", "giraffe"),
    count("Are there two scarves?", "scarf"),
    count("Are there two shelves?", "shelf"),
    count("Are there two children?", "child"),
    count("Are there two women?", "woman"),
    count("Are there two men?", "man"),
    count("Are there two hot dogs?", "hot dog"),
    count("Are there two tennis rackets?", "tennis racket"),
    count("Are there two computer mice?", "computer mouse"),
    count("Are there two buses?", "bus"),
    count("Are there two glasses?", "glass"),
    count("Are there two leaves?", "leaf"),
    count("Are there two feet?", "foot"),
    count("Are there four deer?", "deer"),
    count("Are there two fish?", "fish"),
    count("Are there two roofs?", "roof"),
    count("Are there two photos?", "photo"),
    count("Are there two policemen?", "policeman"),
    count("Are there two ottomans?", "ottoman"),
    count("Are there two snowmen?", "snowman"),
    count("Are there two t-shirts?", "t-shirt"),
    count("Are there two babies?", "baby"),
    count("Are there two keys?", "key"),
    count("Are there two toys?", "toy"),
    count("Are there two monkeys?", "monkey"),
    count("Are there two mangoes?", "mango"),
    count("Are there two avocados?", "avocado"),
    count("Are there two teeth?", "tooth"),
    count("Are there five aircraft?", "aircraft"),
    count("Are there two wineglasses?", "wineglass"),
    count("Are there two calves?", "calf"),
    count("Are there two hooves?", "hoof"),
    count("Are there two young men?", "young man"),
    # attributes: the verb agrees with a plural
    state("Is the car red?", "car"),
    action("Is the dog swimming?", "dog"),
    state("Is the grass green?", "grass"),
    state("Is the sky overcast?", "sky"),
    state("Are the jeans blue?", "jeans"),
    state("Are the sunglasses black?", "sunglasses"),
    action("Is the person skiing?", "person"),
    state("Is the water calm?", "water"),
    state("Is the umbrella open?", "umbrella"),
    (CF, "state", "Is the urinal white?", "no", "urinal"),
    (CF, "state", "Are the pants wet?", "no", "pants"),
]

BAD = [
    # "a" before a mass noun (the 691 of 3,200 of a paper-size release), "an" before a consonant sound
    ex("Is there a grass in the picture?", "grass"),
    ex("Is there a sky in the picture?", "sky"),
    ex("Is there a ground in the picture?", "ground"),
    ex("Is there a bread in the picture?", "bread"),
    ex("Is there a snow in the picture?", "snow"),
    ex("Is there a tennis in the picture?", "tennis"),
    ex("Is there a luggage in the picture?", "luggage"),
    ex("Is there a rice in the picture?", "rice"),
    ex("Is there a water in the picture?", "water"),
    ex("Is there a sand in the picture?", "sand"),
    ex("Is there a milk in the picture?", "milk"),
    ex("Is there a furniture in the picture?", "furniture"),
    ex("Is there a money in the picture?", "money"),
    ex("Is there a broccoli in the picture?", "broccoli"),
    ex("Is there an ice in the picture?", "ice"),
    ex("Is there a baggage in the picture?", "baggage"),
    (CF, None, "Is there a bamboo in the picture?", "no", "bamboo"),
    (CF, None, "Is there a shampoo in the picture?", "no", "shampoo"),
    ex("Is there an urinal in the picture?", "urinal"),
    ex("Is there a umbrella in the picture?", "umbrella"),
    ex("Is there an uniform in the picture?", "uniform"),
    ex("Is there an utensil in the picture?", "utensil"),
    ex("Is there an utility pole in the picture?", "utility pole"),
    ex("Is there a urn in the picture?", "urn"),
    ex("Is there a umpire in the picture?", "umpire"),
    ex("Is there a egg in the picture?", "egg"),
    ex("Is there a apple in the picture?", "apple"),
    ex("Is there a hour hand in the picture?", "hour hand"),
    ex("Is there an hat in the picture?", "hat"),
    ex("Is there an dog in the picture?", "dog"),
    ex("Is there an one-way sign in the picture?", "one-way sign"),
    ex("Is there an unicorn in the picture?", "unicorn"),
    ex("Is there an eucalyptus in the picture?", "eucalyptus"),
    ex("Is there a hourglass in the picture?", "hourglass"),
    ex("Is there a elephant in the picture?", "elephant"),
    ex("Is there a oven in the picture?", "oven"),
    ex("Is there a ottoman in the picture?", "ottoman"),
    ex("Is there a iphone in the picture?", "iphone"),
    ex("Is there an yacht in the picture?", "yacht"),
    ex("Is there an hotel in the picture?", "hotel"),
    ex("Is there a suv in the picture?", "suv"),
    ex("Is there an tv in the picture?", "tv"),
    # a count noun without its article, a plural in the singular
    ex("Is there dog in the picture?", "dog"),
    ex("Is there umbrella in the picture?", "umbrella"),
    ex("Is there person in the picture?", "person"),
    ex("Is there a jeans in the picture?", "jeans"),
    ex("Is there jeans in the picture?", "jeans"),
    ex("Is there a sunglasses in the picture?", "sunglasses"),
    ex("Is there a people in the picture?", "people"),
    ex("Is there a scissors in the picture?", "scissors"),
    ex("Is there cattle in the picture?", "cattle"),
    ex("Is there apples in the picture?", "apples"),
    ex("Are there grass in the picture?", "grass"),
    ex("Are there dog in the picture?", "dog"),
    ex("Are there a dog in the picture?", "dog"),
    # ODE's virtual nodes and words that are no noun
    ex("Is there a hot in the picture?", "hot"),
    ex("Is there hot in the picture?", "hot"),
    ex("Is there a tire in the picture?", "tire"),
    ex("Is there a drain in the picture?", "drain"),
    (CF, None, "Is there a tire in the picture?", "no", "tire"),
    ex("Is there a jean in the picture?", "jean"),
    ex("Is there a pant in the picture?", "pant"),
    ex("Is there a scissor in the picture?", "scissor"),
    ex("Is there a leave in the picture?", "leave"),
    ex("Is there a yellow in the picture?", "yellow"),
    ex("Is there a she in the picture?", "she"),
    # off the template
    ex("Is there a dog in the picture", "dog"),
    ex("is there a dog in the picture?", "dog"),
    ex("Is there a dog  in the picture?", "dog"),
    ex("Is there a cat in the picture?", "dog"),
    ex("Is there a dog in this image?", "dog"),
    (E, None, "Is there a dog in the picture?", "maybe", "dog"),
    # counts on what cannot be counted, wrong plurals, wrong agreement
    count("Are there three rices?", "rice"),
    count("Are there two rice?", "rice"),
    count("Are there two luggages?", "luggage"),
    count("Is there one luggage?", "luggage"),
    count("Is there one grass?", "grass"),
    count("Are there two grasses?", "grass"),
    count("Are there two skies?", "sky"),
    count("Are there two breads?", "bread"),
    count("Are there three snows?", "snow"),
    count("Are there two jeans?", "jeans"),
    count("Are there two sunglasses?", "sunglasses"),
    count("Is there one hot?", "hot"),
    count("Are there two tires?", "tire"),
    count("Are there two persons?", "person"),
    count("Are there two peoples?", "person"),
    count("Are there two sheeps?", "sheep"),
    count("Are there two mouses?", "mouse"),
    count("Are there two knifes?", "knife"),
    count("Are there two benchs?", "bench"),
    count("Are there two gooses?", "goose"),
    count("Are there two childs?", "child"),
    count("Are there two cherrys?", "cherry"),
    count("Are there two potatos?", "potato"),
    count("Are there two buss?", "bus"),
    count("Are there two leafs?", "leaf"),
    count("Are there two foots?", "foot"),
    count("Are there two womans?", "woman"),
    count("Are there two mans?", "man"),
    count("Are there two tomatos?", "tomato"),
    count("Are there two hot dog?", "hot dog"),
    count("Are there two ottomen?", "ottoman"),
    count("Are there two computer mouses?", "computer mouse"),
    count("Are there one dog?", "dog"),
    count("Is there two dogs?", "dog"),
    count("Are there two dog?", "dog"),
    count("Are there 2 dogs?", "dog"),
    count("Are there zero dogs?", "dog"),
    count("Is there one dogs?", "dog"),
    count("Is there one dog in the picture?", "dog"),
    # attributes
    state("Is the jeans blue?", "jeans"),
    state("Are the car red?", "car"),
    state("Are the grass green?", "grass"),
    action("Is the dog swim?", "dog"),
    state("Is the hot red?", "hot"),
    state("Is the tire black?", "tire"),
    state("Is the car 1?", "car"),
    state("Is the car red in the picture?", "car"),
    action("Does the dog run in the picture?", "dog"),
    state("Is the dog swimming?", "dog"),
]


def _table(rows: list[tuple]) -> pl.DataFrame:
    """A queries table, one image per question (so each count question is its image's only "yes" count)."""
    return pl.DataFrame(
        {
            "query_id": [f"q{i:03d}" for i in range(len(rows))],
            "image_id": [f"img{i:03d}" for i in range(len(rows))],
            "query_type": [r[0] for r in rows],
            "attribute_kind": [r[1] for r in rows],
            "question": [r[2] for r in rows],
            "truth": [r[3] for r in rows],
            "target": [r[4] for r in rows],
        },
        schema={
            "query_id": pl.String,
            "image_id": pl.String,
            "query_type": pl.String,
            "attribute_kind": pl.String,
            "question": pl.String,
            "truth": pl.String,
            "target": pl.String,
        },
    )


def test_at_least_two_hundred_hand_written_questions():
    assert len(GOOD) >= 100 and len(BAD) >= 100 and len(GOOD) + len(BAD) >= 200
    assert len({r[2:] for r in GOOD}) == len(GOOD) and len({r[1:] for r in BAD}) == len(BAD)
    assert not {r[2] for r in GOOD if r[3] == "yes"} & {r[2] for r in BAD if r[3] == "yes" and r[0] == E}


def test_every_good_question_passes():
    bad = invalid_questions(_table(GOOD))
    assert bad.height == 0, bad.select("question", "target", "problem").rows()


def test_every_bad_question_is_flagged():
    table = _table(BAD)
    flagged = set(invalid_questions(table)["query_id"].drop_nulls())
    missed = table.filter(~pl.col("query_id").is_in(list(flagged)))
    assert missed.height == 0, missed.select("question", "target").rows()


# ------------------------------------------------------------------------------------- the templates themselves
# A graph with every noun kind: count nouns by sound (urinal, umbrella, egg, drawing), an invariant plural (sheep),
# an irregular one (person), mass nouns (rice, luggage, grass, sky), a plural (jeans) and ODE's virtual node "hot",
# the strongest neighbour of everything it appears with.
IMAGES = (
    [["urinal", "umbrella", "hot"]] * 6
    + [["rice", "person", "hot"]] * 6
    + [["egg", "drawing", "hot"]] * 6
    + [["jeans", "drawing", "luggage"]] * 3
    + [["sheep", "grass", "sky", "hot"]] * 6
    + [["egg", "sky"]] * 2
    + [["umbrella", "luggage"]] * 2
)
NODES, EDGES = build_tables(Annotations(images=IMAGES), {"grass", "sky"})
EXISTENCE = {
    "urinal": "Is there a urinal in the picture?",
    "umbrella": "Is there an umbrella in the picture?",
    "egg": "Is there an egg in the picture?",
    "drawing": "Is there a drawing in the picture?",
    "sheep": "Is there a sheep in the picture?",
    "person": "Is there a person in the picture?",
    "rice": "Is there rice in the picture?",
    "luggage": "Is there luggage in the picture?",
    "grass": "Is there grass in the picture?",
    "sky": "Is there sky in the picture?",
    "jeans": "Are there jeans in the picture?",
}


def _scene(scene_id, kind, a, b):
    return {
        "scene_id": scene_id,
        "distribution": "standard",
        "pair_kind": kind,
        "object_a": a,
        "object_b": b,
        "attribute_a": None,
        "attribute_a_kind": None,
        "attribute_a_contrast": None,
        "attribute_b": None,
        "attribute_b_kind": None,
        "attribute_b_contrast": None,
        "cooccurrence": 1,
        "variant": 0,
    }


SCENES = pl.DataFrame(
    [
        _scene("s1", "entity_entity", "urinal", "umbrella"),
        _scene("s2", "entity_entity", "rice", "person"),
        _scene("s3", "entity_environment", "sheep", "grass"),
        _scene("s4", "entity_entity", "jeans", "drawing"),
        _scene("s5", "entity_environment", "egg", "sky"),
    ],
    schema=SCENE_SCHEMA,
)
ACCEPTED = pl.DataFrame(
    {
        "image_id": ["s1-i00", "s2-i00", "s3-i00", "s4-i00", "s5-i00"],
        "scene_id": ["s1", "s2", "s3", "s4", "s5"],
        "detected": [[], [], [], [], []],
        # Count questions are asked only where the merged boxes agree with the prompt's count (one): s5's two egg
        # boxes disagree, so s5 gets none; rice (mass), jeans (plural only) and the environments are never counted.
        "count_a": [1, 3, 1, 1, 2],
        "count_b": [1, 1, 1, 1, 0],
    },
    schema_overrides={"detected": pl.List(pl.String)},
)
COUNTS = {
    "s1-i00": [
        ("Is there one urinal?", "yes"),
        ("Are there two urinals?", "no"),
        ("Are there three urinals?", "no"),
        ("Is there one umbrella?", "yes"),
        ("Are there two umbrellas?", "no"),
        ("Are there three umbrellas?", "no"),
    ],
    "s2-i00": [("Is there one person?", "yes"), ("Are there two people?", "no"), ("Are there three people?", "no")],
    "s3-i00": [("Is there one sheep?", "yes"), ("Are there two sheep?", "no"), ("Are there three sheep?", "no")],
    "s4-i00": [
        ("Is there one drawing?", "yes"),
        ("Are there two drawings?", "no"),
        ("Are there three drawings?", "no"),
    ],
    "s5-i00": [],
}


@pytest.fixture(scope="module")
def queries():
    return make_queries(
        ACCEPTED,
        SCENES,
        NODES,
        EDGES,
        seed=3,
        strategies=["graph_neighbour", "popular", "adversarial", "random"],
        negatives_per_image=3,
    )


def test_existence_questions_follow_the_noun_kind(queries):
    ex_rows = queries.filter(pl.col("query_type").is_in([E, CF]) & pl.col("attribute_kind").is_null())
    assert ex_rows.height > 20
    assert set(ex_rows["target"]) <= set(EXISTENCE), set(ex_rows["target"]) - set(EXISTENCE)
    for target, question in zip(ex_rows["target"], ex_rows["question"]):
        assert question == EXISTENCE[target]
    yes = dict(
        queries.filter((pl.col("query_type") == E) & (pl.col("truth") == "yes")).select("question", "image_id").rows()
    )
    assert yes["Is there a urinal in the picture?"] == "s1-i00" and yes["Is there rice in the picture?"] == "s2-i00"
    assert yes["Are there jeans in the picture?"] == "s4-i00" and yes["Is there sky in the picture?"] == "s5-i00"


def test_count_questions_only_for_count_nouns_with_english_plurals(queries):
    for image, expected in COUNTS.items():
        got = queries.filter((pl.col("image_id") == image) & (pl.col("query_type") == C)).select("question", "truth")
        assert sorted(got.rows()) == sorted(expected), image


def test_virtual_nodes_are_never_asked_about(queries):
    # "hot" is every scene's strongest neighbour and the most frequent node: still never a question's object
    assert "hot" not in set(queries["target"].drop_nulls())
    assert not queries["question"].str.contains(r"\bhot\b").any()
    assert invalid_questions(queries).height == 0


def test_sampling_never_draws_a_virtual_node():
    sizes = {d: {"entity_entity": 2, "entity_environment": 1} for d in ("standard", "long_tail", "fictional")}
    scenes = sample_scenes(NODES, EDGES, sizes, seed=5)
    drawn = set(scenes["object_a"]) | set(scenes["object_b"])
    assert "hot" not in drawn and {"urinal", "umbrella"} <= set(NODES["node"])
    # a node the graph itself types `virtual` (ODE's own node type) is left out as well
    typed = NODES.with_columns(
        pl.when(pl.col("node") == "urinal").then(pl.lit("virtual")).otherwise(pl.col("type")).alias("type")
    )

    def drawn_from(nodes):
        # the six heaviest entity pairs: urinal-umbrella is among them unless urinal is left out
        scenes = sample_scenes(nodes, EDGES, {"standard": {"entity_entity": 6}}, seed=5, standard_band=1)
        return set(scenes["object_a"]) | set(scenes["object_b"])

    assert "urinal" in drawn_from(NODES) and "urinal" not in drawn_from(typed)


def test_prompts_and_exports_word_objects_the_same_way():
    prompts = dict(make_prompts(SCENES, seed=1, style_tags=[]).select("scene_id", "prompt").rows())
    assert prompts == {
        "s1": "a urinal and an umbrella",
        "s2": "rice and a person",
        "s3": "a sheep in grass",
        "s4": "jeans and a drawing",
        "s5": "an egg in sky",
    }
    assert description(["drawing", "egg"]) == "The image shows a drawing and an egg."
    assert description(["sheep", "grass"]) == "The image shows a sheep and grass."
    assert description(["jeans", "urinal", "umbrella"]) == "The image shows jeans, a urinal and an umbrella."
    assert description(["umbrella"]) == "The image shows an umbrella."
