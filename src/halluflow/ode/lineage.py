"""Release lineage and `halluflow release diff` (ODE's point: a benchmark is regenerated, not frozen).

A release may name a parent release (`release.parent` in the config): the concept pairs its ancestors used are
excluded from sampling so the child is new, and the manifest records the chain (name, manifest sha256, pair count)
with the graph sources' hashes. `release diff A B` says what changed between two releases: concept pairs and
concepts added / removed per distribution, graph edges added / removed / reweighted, query counts by type.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from ..errors import InputError
from ..io import dumps_json, read_json, read_parquet, write_json, write_text

MANIFEST = "manifest.json"
MAX_ANCESTORS = 1000  # a cycle of parent links (a manifest naming itself) stops here with an error

CLI_DESCRIPTION = (
    "Compare two release folders: concept pairs and concepts added and removed per distribution, "
    "graph edges changed (when each release's graph/ folder sits beside it, as the workflow writes "
    "it), and query counts. Prints a table; --out writes the JSON."
)
CLI_EPILOG = """examples:
  halluflow release diff results/ode-2026-10/release results/ode-2026-11/release
  halluflow release diff A/release B/release --out diff.json --markdown diff.md"""


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


def lineage(parent_dir: str | Path) -> list[dict]:
    """The chain parent → grandparent → ...: one entry per release, read from each manifest's `lineage`."""
    parent_dir = Path(parent_dir)
    manifest_path = parent_dir / MANIFEST
    if not manifest_path.is_file():
        raise InputError(f"config key 'release.parent': {parent_dir} has no {MANIFEST} (not a release folder)")
    manifest = read_json(manifest_path)
    entry = {
        "release": manifest.get("release"),
        "path": str(parent_dir),
        "manifest_sha256": hashlib.sha256(manifest_path.read_bytes()).hexdigest(),
        "n_pairs": len(release_pairs(parent_dir)),
    }
    chain = [entry] + list((manifest.get("lineage") or {}).get("ancestors") or [])
    if len(chain) > MAX_ANCESTORS:
        raise InputError(f"{manifest_path}: lineage longer than {MAX_ANCESTORS} releases (a cycle?)")
    return chain


def ancestor_pairs(parent_dir: str | Path) -> set[str]:
    """Every concept pair used by the parent and the ancestors its manifest lists (those still on disk)."""
    pairs: set[str] = set()
    for entry in lineage(parent_dir):
        path = Path(entry["path"])
        if (path / "scenes.parquet").is_file():
            pairs |= release_pairs(path)
        elif "pairs" in entry:
            pairs |= set(entry["pairs"])
    return pairs


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
    queries = {}
    for name, folder in (("a", a_dir), ("b", b_dir)):
        path = folder / "queries.parquet"
        if path.is_file():
            q = read_parquet(path, columns=["query_type"])
            queries[name] = dict(sorted(q.group_by("query_type").len().iter_rows()))
    out["queries"] = queries
    for name, folder in (("a", a_dir), ("b", b_dir)):
        manifest = folder / MANIFEST
        if manifest.is_file():
            m = read_json(manifest)
            out[f"release_{name}"] = m.get("release")
            out[f"lineage_{name}"] = [e.get("release") for e in (m.get("lineage") or {}).get("ancestors") or []]
    return out


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
    return "\n".join(lines) + "\n"


def configure(parser) -> None:
    parser.add_argument("a", help="the earlier release folder")
    parser.add_argument("b", help="the later release folder")
    parser.add_argument("--out", help="write the full diff (with the pair lists) as JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")


def run(args) -> int:
    d = diff_releases(args.a, args.b)
    if args.out:
        write_json(args.out, d)
    table = diff_markdown(d)
    if args.markdown:
        write_text(args.markdown, table)
    print(table, end="")
    if not args.out:
        print(dumps_json({k: v for k, v in d.items() if k != "pairs"}))
    return 0
