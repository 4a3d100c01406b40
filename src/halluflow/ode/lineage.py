"""Release lineage and `halluflow release diff` (ODE's point: a benchmark is regenerated, not frozen).

A release may name a parent release (`ode.lineage.parent` in the config): the concept pairs its ancestors used are
excluded from sampling so the child is new, and the manifest records the chain (name, manifest sha256, pair count
and the sorted pair list of every ancestor) with the graph sources' hashes. The pair lists travel in the manifest, so
the chain holds when an ancestor's folder moves or is deleted: only the parent's own folder is read. Each exclusion
pushes Standard further down the co-occurrence ranking; `standard_drift` measures how far (the DATACARD says it).
`release diff A B` says what changed between two releases: concept pairs and concepts added / removed per
distribution, graph edges added / removed / reweighted, query counts by type, query ids in both (and how many of
them name different content), images with the same bytes, and whether B descends from A.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import polars as pl

from ..config_types import Ode
from ..errors import InputError, visible
from ..io import read_parquet

MAX_MANIFEST_BYTES = 256 << 20
"""The largest manifest.json read (256 MiB: a release of a million images lists them in about 150 MiB). A manifest
is read only as a regular file under this cap: a FIFO or a link to /dev/zero in its place is refused at once."""

MANIFEST = "manifest.json"
MAX_ANCESTORS = 1000  # a cycle of parent links (a manifest naming itself) stops here with an error
PARENT_KEY = "config key 'ode.lineage.parent'"


def pair_key(a: str, b: str) -> str:
    """Unordered concept pair as one string ("dog|frisbee"): the same pair whichever object came first."""
    x, y = sorted((str(a), str(b)))
    return f"{x}|{y}"


def _pair_expr(a: str, b: str) -> pl.Expr:
    """`pair_key` as a column expression: the two names sorted, joined by "|"."""
    return pl.concat_str([pl.min_horizontal(a, b), pl.max_horizontal(a, b)], separator="|")


def _scenes(release_dir: Path) -> pl.DataFrame:
    path = release_dir / "scenes.parquet"
    if not path.is_file():
        raise InputError(f"{release_dir}: not a release folder (scenes.parquet missing)")
    df = read_parquet(path)
    missing = {"distribution", "object_a", "object_b"} - set(df.columns)
    if missing:
        raise InputError(f"{path}: lacks column(s) {sorted(missing)}")
    return df.with_columns(_pair_expr("object_a", "object_b").alias("pair"))


def release_pairs(release_dir: str | Path) -> set[str]:
    return set(_scenes(Path(release_dir))["pair"].to_list())


def _ancestor_entry(entry: dict, parent_manifest: Path) -> dict:
    """An ancestor as the parent's manifest lists it, with its pair list. Manifests written before the lists were
    carried name only `n_pairs`: the pairs are then read from the ancestor's folder while it is still there, and a
    moved or deleted one is an error (silently dropping its pairs would let the child reuse them)."""
    if not isinstance(entry, dict):
        raise InputError(f"{parent_manifest}: lineage.ancestors holds {entry!r}, not a release entry")
    if isinstance(entry.get("pairs"), list):
        pairs = sorted(str(p) for p in entry["pairs"])
        if entry.get("n_pairs") not in (None, len(pairs)):
            raise InputError(
                f"{parent_manifest}: ancestor {entry.get('release')!r} lists {len(pairs)} pairs but n_pairs "
                f"{entry['n_pairs']} (an edited manifest?)"
            )
        return {**entry, "pairs": pairs, "n_pairs": len(pairs)}
    folder = Path(str(entry.get("path")))
    if not (folder / "scenes.parquet").is_file():
        raise InputError(
            f"{PARENT_KEY}: ancestor {entry.get('release')!r} is not at {folder} and {parent_manifest} predates "
            "lineage pair lists: put it back there, or rebuild the parent with this version"
        )
    pairs = sorted(release_pairs(folder))
    return {**entry, "pairs": pairs, "n_pairs": len(pairs)}


def _read_manifest(path: Path) -> tuple[object, str]:
    """A manifest and the sha256 of its bytes, read once as a regular file under the release's cap (a FIFO or a
    link to /dev/zero in its place is refused at once), through the JSON decoding guard."""
    from ..io import decode_utf8, loads_json, read_regular_bytes

    data = read_regular_bytes(path, MAX_MANIFEST_BYTES)
    return loads_json(decode_utf8(data, path), str(path)), hashlib.sha256(data).hexdigest()


def lineage(parent_dir: str | Path) -> list[dict]:
    """The chain parent → grandparent → ...: one entry per release (name, path, manifest sha256, n_pairs, pairs),
    the parent read from its folder, its ancestors from its manifest's `lineage`."""
    parent_dir = Path(parent_dir)
    manifest_path = parent_dir / MANIFEST
    if not manifest_path.is_file():
        raise InputError(f"{PARENT_KEY}: {parent_dir} has no {MANIFEST} (not a release folder)")
    manifest, manifest_sha256 = _read_manifest(manifest_path)
    if not isinstance(manifest, dict):
        raise InputError(f"{manifest_path}: not a release manifest (a JSON object)")
    pairs = sorted(release_pairs(parent_dir))
    entry = {
        "release": manifest.get("release"),
        "path": str(parent_dir),
        "manifest_sha256": manifest_sha256,
        "n_pairs": len(pairs),
        "pairs": pairs,
    }
    ancestors = list((manifest.get("lineage") or {}).get("ancestors") or [])
    if len(ancestors) + 1 > MAX_ANCESTORS:
        raise InputError(f"{manifest_path}: lineage longer than {MAX_ANCESTORS} releases (a cycle?)")
    return [entry] + [_ancestor_entry(a, manifest_path) for a in ancestors]


def ancestor_pairs(parent_dir: str | Path) -> set[str]:
    """Every concept pair used by the parent and by each ancestor its manifest lists (from the manifest: wherever
    the ancestors' folders are now)."""
    return {p for entry in lineage(parent_dir) for p in entry["pairs"]}


def standard_drift(
    scenes: pl.DataFrame,
    nodes: pl.DataFrame,
    edges: pl.DataFrame,
    *,
    standard_band: float = 4.0,
    used_before: set[str] = frozenset(),
) -> list[dict]:
    """How far each pair kind's Standard pairs sit from the graph's top band, per pair kind.

    The top band is what Standard draws from without a lineage: the `ceil(standard_band * n)` heaviest pairs of
    the kind (n = the release's Standard pairs of that kind; at least n). Reported: the median co-occurrence of the
    release's Standard pairs and of the band, the median rank of the release's pairs in the graph's descending
    order (1 = heaviest; ties share the best rank), and how many band pairs ancestors used (`used_before`) and so
    could not be drawn again. Pass the graph as sampling saw it (restricted to the release's domain)."""
    kind_of = dict(zip(nodes["node"].to_list(), nodes["type"].to_list()))
    weight: dict[str, int] = {}
    for s, t, w in edges.select("source", "target", "weight").iter_rows():
        if s != t and w and w > 0:
            key = pair_key(s, t)
            weight[key] = max(weight.get(key, 0), int(w))
    out = []
    standard = scenes.filter(pl.col("distribution") == "standard")
    for (kind,), grp in sorted(standard.group_by(["pair_kind"]), key=lambda g: g[0]):
        types = {"entity_entity": ("entity", "entity"), "entity_environment": ("entity", "environment")}.get(kind)
        ranked = sorted(
            (
                (w, key)
                for key, w in weight.items()
                if types and tuple(sorted(kind_of.get(x, "") for x in key.split("|"))) == types
            ),
            key=lambda t: (-t[0], t[1]),
        )
        weights_desc = [w for w, _ in ranked]
        first_rank: dict[int, int] = {}
        for i, w in enumerate(weights_desc):
            first_rank.setdefault(w, i + 1)
        pairs = sorted(set(grp.select(_pair_expr("object_a", "object_b")).to_series().to_list()))
        n = len(pairs)
        band = ranked[: max(n, math.ceil(standard_band * n))]
        mine = [weight.get(p, 0) for p in pairs]
        out.append(
            {
                "pair_kind": kind,
                "n_pairs": n,
                "median_weight": _median(mine),
                "band_size": len(band),
                "band_median_weight": _median([w for w, _ in band]),
                "median_rank": _median([first_rank.get(w, len(ranked) + 1) for w in mine]),
                "band_used_by_ancestors": sum(key in used_before for _, key in band),
            }
        )
    return out


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    v = sorted(values)
    mid = len(v) // 2
    return float(v[mid]) if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def drift_lines(drift: list[dict]) -> list[str]:
    """The DATACARD's sentences for `standard_drift`."""
    lines = []
    for d in drift:
        lines.append(
            f"- Standard {d['pair_kind'].replace('_', '-')}: {d['n_pairs']} pairs, median co-occurrence "
            f"{_num(d['median_weight'])} (median rank {_num(d['median_rank'])}) against "
            f"{_num(d['band_median_weight'])} in the graph's top band of {d['band_size']} pairs; {d['band_used_by_ancestors']} of the band's pairs "
            "were used by ancestors and not drawn again."
        )
    return lines


def _num(x: float | None) -> str:
    if x is None:
        return "n/a"
    return str(int(x)) if float(x).is_integer() else f"{x:.1f}"


def _edges(release_dir: Path) -> pl.DataFrame | None:
    path = release_dir.parent / "graph" / "edges.parquet"
    if not path.is_file():
        return None
    df = read_parquet(path)
    return df.with_columns(_pair_expr("source", "target").alias("edge")).select("edge", "weight")


def diff_releases(a_dir: str | Path, b_dir: str | Path) -> dict:
    """What B adds and removes relative to A (pairs, concepts, graph edges, queries)."""
    a_dir, b_dir = Path(a_dir), Path(b_dir)
    sa, sb = _scenes(a_dir), _scenes(b_dir)
    rows = []
    for dist in sorted(set(sa["distribution"].to_list()) | set(sb["distribution"].to_list())):
        pa = set(sa.filter(pl.col("distribution") == dist)["pair"].to_list())
        pb = set(sb.filter(pl.col("distribution") == dist)["pair"].to_list())
        ca = {c for p in pa for c in p.split("|")}
        cb = {c for p in pb for c in p.split("|")}
        rows.append(
            {
                "distribution": dist,
                "pairs_a": len(pa),
                "pairs_b": len(pb),
                "pairs_shared": len(pa & pb),
                "pairs_added": len(pb - pa),
                "pairs_removed": len(pa - pb),
                "concepts_added": len(cb - ca),
                "concepts_removed": len(ca - cb),
            }
        )
    all_a, all_b = set(sa["pair"].to_list()), set(sb["pair"].to_list())
    out = {
        "a": str(a_dir),
        "b": str(b_dir),
        "by_distribution": rows,
        "pairs": {"shared": sorted(all_a & all_b), "added": sorted(all_b - all_a), "removed": sorted(all_a - all_b)},
        "concepts": {
            "added": sorted({c for p in all_b for c in p.split("|")} - {c for p in all_a for c in p.split("|")}),
            "removed": sorted({c for p in all_a for c in p.split("|")} - {c for p in all_b for c in p.split("|")}),
        },
    }
    ea, eb = _edges(a_dir), _edges(b_dir)
    if ea is not None and eb is not None:
        wa, wb = dict(ea.iter_rows()), dict(eb.iter_rows())
        out["graph"] = {
            "edges_a": len(wa),
            "edges_b": len(wb),
            "added": len(wb.keys() - wa.keys()),
            "removed": len(wa.keys() - wb.keys()),
            "reweighted": sum(1 for e in wa.keys() & wb.keys() if wa[e] != wb[e]),
        }
    else:
        out["graph"] = None
    queries, tables = {}, {}
    for name, folder in (("a", a_dir), ("b", b_dir)):
        path = folder / "queries.parquet"
        if path.is_file():
            tables[name] = read_parquet(path)
            queries[name] = dict(sorted(tables[name].group_by("query_type").len().iter_rows()))
    out["queries"] = queries
    if len(tables) == 2 and all("query_id" in t.columns for t in tables.values()):
        out["query_ids"] = _shared_ids(tables["a"], tables["b"])
    manifests, shas = {}, {}
    for name, folder in (("a", a_dir), ("b", b_dir)):
        manifest = folder / MANIFEST
        if manifest.is_file():
            m, shas[name] = _read_manifest(manifest)
            if not isinstance(m, dict):
                raise InputError(f"{manifest}: not a release manifest (a JSON object)")
            manifests[name] = m
            out[f"release_{name}"] = m.get("release")
            out[f"lineage_{name}"] = [e.get("release") for e in (m.get("lineage") or {}).get("ancestors") or []]
    if len(manifests) == 2:
        a_sha = shas["a"]
        chain = (manifests["b"].get("lineage") or {}).get("ancestors") or []
        out["b_descends_from_a"] = any(e.get("manifest_sha256") == a_sha for e in chain)
        files = [
            {k: v.get("sha256") for k, v in (m.get("files") or {}).items() if k.startswith("images/")}
            for m in (manifests["a"], manifests["b"])
        ]
        out["images_same_bytes"] = len(set(files[0].values()) & set(files[1].values()))
    return out


def _shared_ids(a: pl.DataFrame, b: pl.DataFrame) -> dict:
    """Query ids both releases use, and how many of them name different content (question, truth or image): with
    content-addressed ids that second number is 0 by construction, with positional ones it was not."""
    content = [c for c in ("question", "truth", "image_sha256") if c in a.columns and c in b.columns]
    both = a.select("query_id", *content).join(b.select("query_id", *content), on="query_id", suffix="_b")
    differ = pl.lit(False)
    for c in content:
        differ = differ | pl.col(c).ne_missing(pl.col(f"{c}_b"))
    return {"shared": both.height, "shared_with_different_content": both.filter(differ).height, "compared": content}


def diff_markdown(d: dict) -> str:
    lines = [
        f"# Release diff: {d.get('release_a', d['a'])} → {d.get('release_b', d['b'])}",
        "",
        "| distribution | pairs A | pairs B | shared | added | removed | concepts added | concepts removed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in d["by_distribution"]:
        lines.append(
            f"| {r['distribution']} | {r['pairs_a']} | {r['pairs_b']} | {r['pairs_shared']} | "
            f"{r['pairs_added']} | {r['pairs_removed']} | {r['concepts_added']} | {r['concepts_removed']} |"
        )
    if d.get("graph"):
        g = d["graph"]
        lines += [
            "",
            f"Graph edges: {g['edges_a']} → {g['edges_b']} ({g['added']} added, {g['removed']} removed, "
            f"{g['reweighted']} reweighted).",
        ]
    for side in ("a", "b"):
        if side in d.get("queries", {}):
            counts = ", ".join(f"{k} {v}" for k, v in d["queries"][side].items())
            lines.append(f"Queries {side.upper()}: {counts}.")
    if d.get("query_ids"):
        ids = d["query_ids"]
        lines.append(
            f"Query ids in both: {ids['shared']}, {ids['shared_with_different_content']} of them naming different "
            f"content ({', '.join(ids['compared']) or 'nothing to compare'})."
        )
    if "b_descends_from_a" in d:
        lines.append(
            f"Images with the same bytes in both: {d['images_same_bytes']}. B "
            + (
                "descends from A (A's manifest is in B's lineage)."
                if d["b_descends_from_a"]
                else "does not descend from A."
            )
        )
    return "\n".join(visible(line) for line in lines) + "\n"  # a name from data stays on its line


def lineage_record(
    *,
    name: str,
    seed: int,
    config: dict,
    scenes: pl.DataFrame,
    queries: pl.DataFrame,
    ancestors: list[dict],
    graph: tuple[pl.DataFrame, pl.DataFrame] | None = None,
) -> tuple[dict, dict, list[str]]:
    """The manifest's `lineage` and `ids` sections and the DATACARD's "Ids and lineage" lines of a release.

    `graph` (nodes, edges; restricted to `ode.domain` here, as sampling did) gives the Standard drift; without it the
    drift is not measured and the card says so."""
    from .domain import restrict_graph
    from .queries import check_query_ids, release_identity

    ode = Ode.from_dict(config.get("ode") or {})
    excluded = bool(ancestors) and ode.lineage.exclude_ancestor_pairs
    used = {p for a in ancestors for p in a["pairs"]} if excluded else set()
    drift = None
    if graph is not None:
        nodes, edges = restrict_graph(*graph, ode.domain)
        band = float(ode.sampling.standard_band)
        drift = standard_drift(scenes, nodes, edges, standard_band=band, used_before=used)
    addressed = check_query_ids(queries, name, seed)
    ids = {
        "query_id": "first 16 hex digits of sha256(release identity, image id, image sha256, question)"
        if addressed
        else "first 16 hex digits of sha256(image id, question): the queries table carries no image hashes",
        "release_identity": release_identity(name, seed) if addressed else None,
        "content_addressed": addressed,
    }
    record = {
        "parent": ancestors[0]["release"] if ancestors else None,
        "ancestors": ancestors,
        "ancestor_pairs_excluded": len(used),
        "standard_drift": drift,
    }
    lines = ["## Ids and lineage"]
    lines.append(
        f"Query ids are content-addressed: {ids['query_id']} (release identity {ids['release_identity']!r}); no id is "
        "shared with another release or another image, and `halluflow score compare` refuses to pair answers whose "
        "ids or image hashes differ."
        if addressed
        else f"Query ids are NOT content-addressed ({ids['query_id']}): ids may repeat across releases."
    )
    if ancestors:
        chain = " → ".join(str(a["release"]) for a in ancestors)
        lines.append(
            f"Parent {ancestors[0]['release']} (chain {chain}); "
            + (
                f"{len(used)} concept pairs of the chain were left out of sampling. "
                if excluded
                else "its concept pairs were NOT left out (exclude_ancestor_pairs: false). "
            )
            + "manifest.json lists every ancestor's pairs, so the chain holds wherever their folders are."
        )
    else:
        lines.append("No parent release.")
    if drift is None:
        lines.append("Standard drift from the graph's top band: not measured (no graph given).")
    elif drift:
        lines.append("Standard against the graph's top band (what Standard draws from without a lineage):")
        lines += drift_lines(drift)
    return record, ids, lines + [""]
