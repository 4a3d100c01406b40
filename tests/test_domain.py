"""Domain releases (`ode.domain`): the concept sub-graph a list, a category table or a neighbourhood keeps."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import shared_data

from halluflow.errors import ConfigError
from halluflow.ode.domain import COCO_SUPERCATEGORIES, derive_category_table, domain_nodes, restrict_graph

NODES = pl.DataFrame(
    {
        "node": ["car", "bus", "truck", "dog", "cat", "road", "sofa", "sky"],
        "type": ["entity"] * 5 + ["environment", "entity", "environment"],
    }
)
EDGES = pl.DataFrame(
    {
        "source": ["bus", "car", "car", "cat", "dog", "dog", "road"],
        "target": ["car", "road", "truck", "sofa", "sofa", "sky", "truck"],
        "weight": [3, 5, 2, 4, 1, 2, 1],
    }
)


def test_concept_list_keeps_linked_environments():
    assert domain_nodes(NODES, EDGES, {"concepts": ["car", "bus"]}) == {"car", "bus", "road"}
    assert domain_nodes(NODES, EDGES, {"concepts": ["car", "bus"], "keep_environments": False}) == {"car", "bus"}


def test_category_table_is_a_transportation_release():
    keep = domain_nodes(NODES, EDGES, {"categories": ["vehicle"]})  # shipped COCO supercategories
    assert keep == {"car", "bus", "truck", "road"}
    nodes, edges = restrict_graph(NODES, EDGES, {"categories": ["vehicle"]})
    assert sorted(nodes["node"]) == ["bus", "car", "road", "truck"]
    assert edges.height == 4 and set(edges["source"]) | set(edges["target"]) <= {"car", "bus", "truck", "road"}


def test_neighbourhood_hops():
    # dog -1- sofa, sky -2- cat
    assert domain_nodes(NODES, EDGES, {"neighbourhood_of": ["dog"], "hops": 1}) == {"dog", "sofa", "sky"}
    assert domain_nodes(NODES, EDGES, {"neighbourhood_of": ["dog"], "hops": 2}) == {"dog", "sofa", "sky", "cat"}


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"concepts": ["unicorn", "car"]}, "ode.domain.concepts': 'unicorn'"),
        ({"categories": ["spaceship"]}, "ode.domain.categories': 'spaceship'"),
        ({"concepts": ["car"]}, "keeps 1 entity concept"),
        ({"neighbourhood_of": ["dog"], "hops": -1}, "ode.domain.hops"),
        ({"colour": "red"}, "unknown key"),
    ],
)
def test_bad_domains_name_the_key(spec, message):
    with pytest.raises(ConfigError, match=message):
        domain_nodes(NODES, EDGES, spec)


def test_shipped_category_table_rederives(tmp_path):
    source = shared_data("coco-categories", "coco_categories.tsv")
    assert derive_category_table(source, tmp_path / "c.tsv") == 80
    assert (tmp_path / "c.tsv").read_bytes() == COCO_SUPERCATEGORIES.read_bytes()
