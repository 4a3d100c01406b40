"""`halluflow align human`: metric-human agreement (UniHall's Table 4 statistics; CEDI's grader-human correlation) on
a hand-labelled fixture (tests/fixtures/align). Every expected number is worked out by hand below and cross-checked
with textbook formulas written here (statistics.correlation for Pearson), never with the module's own helpers."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from halluflow.align import align, read_rows
from halluflow.errors import InputError

FIX = Path(__file__).parent / "fixtures" / "align"
HUMAN = [1, 0, 1, 0, 1, 0, 2, 0]  # i1..i8
RISK = [1, 1, 2, 2, 3, 3, 1, 2]
GHR = [1, 0, 0, 1, 1, 0, 1, 0]
GHS = [0.9, 0.2, 0.6, 0.4, 0.7, 0.1, 0.8, 0.3]


def ranks_by_hand(values):
    """Mid-ranks the long way: the rank of v is (#values below v) + (#values equal to v + 1) / 2."""
    return [sum(1 for u in values if u < v) + (sum(1 for u in values if u == v) + 1) / 2 for v in values]


@pytest.fixture(scope="module")
def result():
    return align(
        read_rows(FIX / "labels.csv"),
        {str(FIX / "metrics.jsonl"): read_rows(FIX / "metrics.jsonl")},
        metrics=["ghr", "ghs"],
        thresholds=["ghs=0.5"],
    )


def test_binary_statistics_by_hand(result):
    ghr = result["metrics"]["ghr"]["overall"]
    # human positives i1 i3 i5 i7; ghr positives i1 i4 i5 i7 → tp 3 (i1 i5 i7), fp 1 (i4), fn 1 (i3), tn 3
    assert ghr["confusion"] == {"tp": 3, "fp": 1, "fn": 1, "tn": 3}
    assert (ghr["accuracy"], ghr["recall"], ghr["precision"], ghr["f1"]) == (0.75, 0.75, 0.75, 0.75)
    # kappa: p_o = 6/8; p_e = (4*4 + 4*4) / 64 = 0.5 → (0.75 - 0.5) / 0.5
    assert ghr["kappa"] == 0.5
    # ghs above 0.5 flags exactly i1 i3 i5 i7: perfect agreement
    ghs = result["metrics"]["ghs"]["overall"]
    assert (ghs["accuracy"], ghs["f1"], ghs["kappa"]) == (1.0, 1.0, 1.0)
    assert result["human"]["n_hallucinated"] == 4 and result["unmatched"] == {str(FIX / "metrics.jsonl"): 0}


def test_correlations_by_hand(result):
    # Pearson(human, ghr) = Σ(dh·dg) / sqrt(Σdh² Σdg²) = 1.5 / sqrt(3.875 · 2)
    assert result["metrics"]["ghr"]["overall"]["pearson"] == pytest.approx(1.5 / math.sqrt(3.875 * 2), abs=1e-6)
    assert result["metrics"]["ghr"]["overall"]["pearson"] == pytest.approx(statistics.correlation(HUMAN, GHR), abs=1e-6)
    # Spearman = Pearson of mid-ranks: human zeros share rank 2.5, ones rank 6, the two rank 8
    assert ranks_by_hand(HUMAN) == [6, 2.5, 6, 2.5, 6, 2.5, 8, 2.5]
    rho = statistics.correlation(ranks_by_hand(HUMAN), ranks_by_hand(GHS))
    assert result["metrics"]["ghs"]["overall"]["spearman"] == pytest.approx(rho, abs=1e-6)
    assert result["metrics"]["ghs"]["overall"]["pearson"] == pytest.approx(statistics.correlation(HUMAN, GHS), abs=1e-6)


def test_risk_weighted_and_per_risk_level(result):
    rw = result["metrics"]["ghr"]["risk_weighted"]
    # weights = risk: tp i1(1)+i5(3)+i7(1) = 5, fp i4(2), fn i3(2), tn i2(1)+i6(3)+i8(2) = 6; total 15
    assert rw["confusion"] == {"tp": 5, "fp": 2, "fn": 2, "tn": 6}
    assert rw["accuracy"] == round(11 / 15, 6) and rw["recall"] == round(5 / 7, 6) and rw["f1"] == round(10 / 14, 6)
    # kappa: p_o = 11/15, p_e = (7·7 + 8·8) / 225 → (165 − 113) / (225 − 113) = 52/112
    assert rw["kappa"] == round(52 / 112, 6)
    # weighted Pearson by its definition
    w = RISK
    mh = sum(a * b for a, b in zip(w, HUMAN)) / sum(w)
    mg = sum(a * b for a, b in zip(w, GHR)) / sum(w)
    cov = sum(a * (h - mh) * (g - mg) for a, h, g in zip(w, HUMAN, GHR))
    r = cov / math.sqrt(
        sum(a * (h - mh) ** 2 for a, h in zip(w, HUMAN)) * sum(a * (g - mg) ** 2 for a, g in zip(w, GHR))
    )
    assert rw["pearson"] == pytest.approx(r, abs=1e-6)
    by = result["metrics"]["ghr"]["by_risk"]
    assert sorted(by) == ["1", "2", "3"]
    assert (by["1"]["n"], by["1"]["accuracy"]) == (3, 1.0)  # i1 i2 i7 all agree
    assert (by["2"]["n"], by["2"]["accuracy"], by["2"]["recall"]) == (3, round(1 / 3, 6), 0.0)  # i3 missed, i4 false
    assert by["2"]["kappa"] == round((1 / 3 - 5 / 9) / (1 - 5 / 9), 6)  # p_e = (1·1 + 2·2) / 9


def test_risk_levels_from_the_metric_file():
    labels = [{"instance_id": r["id"], "human": r["human"]} for r in read_rows(FIX / "labels.csv")]
    samf_like = [
        {"instance_id": r["id"], "risk_level": risk, "ghr": r["ghr"]}
        for r, risk in zip(read_rows(FIX / "metrics.jsonl"), RISK)
    ]
    res = align(labels, {"standard.parquet": samf_like}, random_seed=None)
    assert res["human"]["risk_column"] == "standard.parquet:risk_level" and list(res["metrics"]) == ["ghr"]
    assert res["metrics"]["ghr"]["risk_weighted"]["kappa"] == round(52 / 112, 6)  # as with the labels' own risks


def test_random_chance_row_and_auto_metrics():
    res = align(read_rows(FIX / "labels.csv"), {"m.jsonl": read_rows(FIX / "metrics.jsonl")})
    # n_claims is bookkeeping, not a metric; the random row is seeded (same numbers on every run)
    assert sorted(res["metrics"]) == ["ghr", "ghs", "random"]
    again = align(read_rows(FIX / "labels.csv"), {"m.jsonl": read_rows(FIX / "metrics.jsonl")})
    assert res["metrics"]["random"] == again["metrics"]["random"]


def test_csv_metric_file_columns_found_without_metric_option(tmp_path):
    """A metric file in CSV holds text: its numeric columns are found without --metric, the same numbers as JSONL."""
    rows = [json.loads(line) for line in (FIX / "metrics.jsonl").read_text().splitlines() if line.strip()]
    with (tmp_path / "metrics.csv").open("w") as fh:
        fh.write("id,ghr,ghs,n_claims,note,flag\n")
        for r in rows:
            fh.write(f"{r['id']},{r['ghr']},{r['ghs']},{r['n_claims']},free text {r['id']},true\n")
        fh.write("i9,,,,,false\n")  # an empty cell leaves the item out of that metric
    from_csv = align(read_rows(FIX / "labels.csv"), {"m.csv": read_rows(tmp_path / "metrics.csv")}, random_seed=None)
    from_jsonl = align(read_rows(FIX / "labels.csv"), {"m.jsonl": read_rows(FIX / "metrics.jsonl")}, random_seed=None)
    # text and true/false columns are not metrics, n_claims is bookkeeping
    assert sorted(from_csv["metrics"]) == ["ghr", "ghs"]
    assert from_csv["metrics"] == from_jsonl["metrics"]
    assert from_csv["metrics"]["ghr"]["overall"]["kappa"] == 0.5  # worked out by hand in test_binary_statistics


def test_cedi_grades_json_grader_human_correlation(tmp_path):
    grades = {
        "conversations": [
            {
                "conversation_id": f"c{i}",
                "ged": g + 1,
                "ged_hal": g,
                "ged_miss": 1,
                "exact": True,
                "truth_nodes": 4,
                "timeout_s": 30.0,
                "turns": 8,
                "turn_hallucination": {"n": 8, "rate": g / 8},
            }
            for i, g in enumerate([0, 3, 1, 5])
        ]
    }
    (tmp_path / "grades.json").write_text(json.dumps(grades))
    (tmp_path / "human.csv").write_text("conversation_id,count\nc0,0\nc1,2\nc2,1\nc3,4\n")
    res = align(
        read_rows(tmp_path / "human.csv"), {"grades.json": read_rows(tmp_path / "grades.json")}, random_seed=None
    )
    assert sorted(res["metrics"]) == ["ged", "ged_hal", "ged_miss", "turn_hallucination.rate"]
    assert res["metrics"]["ged_hal"]["overall"]["spearman"] == 1.0  # same order: 0 < 1 < 3 < 5 vs 0 < 1 < 2 < 4
    assert res["metrics"]["ged_hal"]["overall"]["pearson"] == pytest.approx(
        statistics.correlation([0, 2, 1, 4], [0, 3, 1, 5]), abs=1e-6
    )
    assert res["metrics"]["ged_miss"]["overall"]["pearson"] is None  # constant: r undefined, not 0


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "halluflow.cli", "align", "human", *args], capture_output=True, text=True
    )


def test_cli_json_and_bad_inputs(tmp_path):
    out = tmp_path / "align.json"
    run = _cli(
        "--human",
        str(FIX / "labels.csv"),
        "--metrics",
        str(FIX / "metrics.jsonl"),
        "--metric",
        "ghr",
        "--out",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    assert printed == json.loads(out.read_text())
    assert printed["metrics"]["ghr"]["overall"]["kappa"] == 0.5 and "random" in printed["metrics"]
    (tmp_path / "bad.csv").write_text("id,human\ni1,maybe\n")
    bad = _cli("--human", str(tmp_path / "bad.csv"), "--metrics", str(FIX / "metrics.jsonl"))
    assert bad.returncode == 1 and "bad.csv" in bad.stderr and "human" in bad.stderr and "Traceback" not in bad.stderr
    with pytest.raises(InputError, match="no 'id' column"):
        align([{"id": "i1", "human": 1}], {"x.json": [{"qid": "i1", "ghr": 1}]})
    with pytest.raises(InputError, match="--metric nope"):
        align(read_rows(FIX / "labels.csv"), {"m": read_rows(FIX / "metrics.jsonl")}, metrics=["nope"])
