"""Bootstrap intervals and paired comparisons (`halluflow score compare`), checked against a plain resampling loop."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from halluflow.cli import main
from halluflow.metrics.uncertainty import across_releases, compare_models, model_intervals, paired_difference


def _scores(truth, parsed, model="m", hallucinated=None, status=None):
    n = len(truth)
    return pl.DataFrame(
        {
            "query_id": [f"q{i:04d}" for i in range(n)],
            "model": [model] * n,
            "truth": truth,
            "parsed": parsed,
            "status": status or ["ok"] * n,
            "hallucinated": hallucinated
            if hallucinated is not None
            else [None if p is None else p != t for t, p in zip(truth, parsed)],
        }
    )


def _random_scores(n, accuracy, seed, model="m", truth_seed=None):
    """n answers at the given accuracy; `truth_seed` draws the truths apart from the answers, so two models can
    answer the same queries (as every model of one release does)."""
    rng = np.random.default_rng(seed)
    truth = (rng if truth_seed is None else np.random.default_rng(truth_seed)).choice(["yes", "no"], n).tolist()
    right = rng.random(n) < accuracy
    parsed = [t if r else ("no" if t == "yes" else "yes") for t, r in zip(truth, right)]
    return _scores(truth, parsed, model=model)


def test_point_values_are_popes_formulas_by_hand():
    # TP=3, FP=1, TN=2, FN=2 -> accuracy 5/8, precision 3/4, recall 3/5, F1 2/3; one failed, one unread excluded.
    truth = ["yes"] * 5 + ["no"] * 3 + ["yes", "no"]
    parsed = ["yes"] * 3 + ["no"] * 2 + ["yes"] + ["no"] * 2 + ["yes", None]
    status = ["ok"] * 8 + ["failed", "ok"]
    out = model_intervals(_scores(truth, parsed, status=status), n_resamples=200)
    assert out["accuracy"]["value"] == pytest.approx(5 / 8)
    assert out["precision"]["value"] == pytest.approx(3 / 4)
    assert out["recall"]["value"] == pytest.approx(3 / 5)
    assert out["f1"]["value"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert out["accuracy"]["n"] == 8
    assert (out["n_failed"], out["n_unknown"]) == (1, 1)
    assert out["accuracy"]["ci_low"] <= 5 / 8 <= out["accuracy"]["ci_high"]


def test_interval_matches_a_plain_index_resampling_bootstrap():
    df = _random_scores(400, 0.8, seed=3)
    ours = model_intervals(df, n_resamples=4000, seed=1)["accuracy"]
    correct = (df["truth"] == df["parsed"]).to_numpy()
    rng = np.random.default_rng(7)
    loop = [correct[rng.integers(0, len(correct), len(correct))].mean() for _ in range(4000)]
    lo, hi = np.quantile(loop, [0.025, 0.975])
    # Two Monte Carlo estimates of the same percentiles: equal up to resampling noise (~0.005 here).
    assert ours["ci_low"] == pytest.approx(lo, abs=0.01)
    assert ours["ci_high"] == pytest.approx(hi, abs=0.01)
    # And the normal approximation sqrt(p(1-p)/n) gives the same width.
    p = correct.mean()
    assert ours["ci_high"] - ours["ci_low"] == pytest.approx(2 * 1.96 * np.sqrt(p * (1 - p) / 400), rel=0.15)


def test_two_identical_models_are_not_significantly_different():
    a = _random_scores(300, 0.7, seed=5, model="a")
    b = a.with_columns(pl.lit("b").alias("model"))
    diff = paired_difference(a, b, n_resamples=500)
    for key in ("accuracy", "f1", "hallucination_rate"):
        assert diff[key]["difference"] == 0
        assert diff[key]["significant"] is False
        assert diff[key]["ci_low"] == diff[key]["ci_high"] == 0


def test_a_clearly_better_model_is_significant_and_a_close_one_is_not():
    good = _random_scores(500, 0.9, seed=1, model="good")
    truth = good["truth"].to_list()
    flip = np.random.default_rng(2).random(500) < 0.35
    bad_parsed = [("no" if p == "yes" else "yes") if f else p for p, f in zip(good["parsed"].to_list(), flip)]
    bad = _scores(truth, bad_parsed, model="bad")
    d = paired_difference(good, bad, n_resamples=1000)["accuracy"]
    assert d["significant"] is True and d["ci_low"] > 0
    close = [("no" if p == "yes" else "yes") if i == 0 else p for i, p in enumerate(good["parsed"].to_list())]
    d2 = paired_difference(good, _scores(truth, close, model="close"), n_resamples=1000)["accuracy"]
    assert d2["difference"] == pytest.approx(1 / 500)
    assert d2["significant"] is False


def test_across_releases_is_a_student_t_interval():
    out = across_releases([0.70, 0.74, 0.72])
    # mean 0.72, s = 0.02, t(0.975, 2) = 4.3027 -> half width 4.3027 * 0.02 / sqrt(3) = 0.04968
    assert out["mean"] == pytest.approx(0.72)
    assert out["ci_high"] - out["mean"] == pytest.approx(0.049683, abs=1e-5)
    assert across_releases([None, 0.5])["n_releases"] == 1


def test_cli_compare_writes_models_and_pairs(tmp_path, capsys):
    paths = []
    for name, acc, seed in (("m1", 0.9, 1), ("m2", 0.6, 2)):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "answers.parquet"
        _random_scores(200, acc, seed, model=name, truth_seed=0).write_parquet(path)
        paths.append(str(path))
    assert main(["score", "compare", "--scores", *paths, "--resamples", "300", "--out", str(tmp_path / "c.json")]) == 0
    result = json.loads((tmp_path / "c.json").read_text())
    assert set(result["models"]) == {"m1", "m2"}
    assert result["comparisons"][0]["a"] == "m1" and result["comparisons"][0]["metrics"]["accuracy"]["significant"]
    assert main(["score", "compare", "--scores", paths[0], "--resamples", "0"]) == 1
    assert "--resamples 0" in capsys.readouterr().err


def test_compare_models_all_failed_gives_no_number():
    df = _scores(["yes", "no"], [None, None], status=["failed", "failed"])
    out = compare_models({"x": df}, n_resamples=50)["models"]["x"]
    assert out["accuracy"]["value"] is None and out["n_failed"] == 2


def _release(tmp_path, name, model, chair_s, f1=0.8):
    path = tmp_path / name / "metrics" / f"{model}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"model": model, "pope": {"f1": f1}, "generative": {"chair_s": chair_s}}))
    return str(path)


def test_bounded_metrics_over_releases_stay_inside_their_range():
    # Two releases, CHAIR_s 0.3 and 0.9: mean 0.6, s = 0.4243, t(0.975, 1) = 12.706 -> the plain interval is
    # 0.6 ± 3.81 = [-3.21, 4.41], outside [0, 1]. On the logit scale: logits -0.8473 and 2.1972, mean 0.6750,
    # s = 2.1528, half width 12.706 * 2.1528 / sqrt(2) = 19.342 -> expit(-18.667) .. expit(20.017).
    plain = across_releases([0.3, 0.9])
    assert plain["ci_low"] == pytest.approx(-3.2119, abs=1e-3) and plain["ci_high"] == pytest.approx(4.4119, abs=1e-3)
    out = across_releases([0.3, 0.9], low=0, high=1)
    assert out["mean"] == pytest.approx(0.6)
    assert out["ci_low"] == pytest.approx(1 / (1 + np.exp(18.667)), rel=1e-3)
    assert out["ci_high"] == pytest.approx(1 / (1 + np.exp(-20.017)), abs=1e-9)
    assert 0 <= out["ci_low"] < 0.3 and 0.9 < out["ci_high"] <= 1
    # A percent metric keeps inside [0, 100]; identical releases give a zero-width interval at their value.
    pct = across_releases([0.0, 4.0, 2.0], low=0, high=100)
    assert 0 <= pct["ci_low"] <= pct["ci_high"] <= 100
    same = across_releases([0.25, 0.25, 0.25], low=0, high=1)
    assert same["ci_low"] == same["ci_high"] == 0.25


def test_cli_compare_metrics_pools_one_model_once(tmp_path, capsys):
    a = _release(tmp_path, "rel-s1", "m", 0.3)
    b = _release(tmp_path, "rel-s2", "m", 0.9, f1=0.7)
    assert main(["score", "compare", "--metrics", a, b, "--out", str(tmp_path / "r.json")]) == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["model"] == "m" and set(result["metrics"]) == {"pope.f1", "generative.chair_s"}
    chair = result["metrics"]["generative.chair_s"]
    assert chair["mean"] == pytest.approx(0.6) and 0 <= chair["ci_low"] and chair["ci_high"] <= 1
    assert chair["interval"].startswith("student-t on the logit")
    capsys.readouterr()
    # the same file twice, a copy of one release, and two models: refused, one line each
    other = _release(tmp_path, "rel-s3", "other", 0.5)
    copy = tmp_path / "copy.json"
    copy.write_text(open(a).read())
    for argv, message in (
        ([a, a], "the same file as"),
        ([a, str(copy)], "identical to"),
        ([a, other], "the files score different models (m in"),
    ):
        assert main(["score", "compare", "--metrics", *argv]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    # a value outside its catalogue range names the file
    bad = _release(tmp_path, "rel-s4", "m", 30.0)
    assert main(["score", "compare", "--metrics", a, bad]) == 1
    assert "generative.chair_s: 30 is outside the range [0, 1]" in capsys.readouterr().err
