"""SAMF controllers (UniHall/SAMF paper, C.4-C.7): UCB eqs. (7)-(8) by hand, epsilon-greedy exploration rate,
hill-climbing acceptance (16), policy pool/mutation scheme, CentralFuzzController default, 20% pilot split."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import binomtest

from halluflow.errors import InputError
from halluflow.samf import controllers as C
from halluflow.samf.operators import IMAGE_OPERATORS, TEXT_OPERATORS


def _inst(i: int, subtype: str = "existence", qtype: str = "YON") -> dict:
    digits = {"existence": "11", "attribute": "12", "relation": "13"}[subtype]
    return {
        "instance_id": f"{digits}{i:04d}",
        "meta_inf": {"category": "object", "subtype": subtype, "risk_level": 1},
        "source_inf": {"source_dataset": "t", "source_id": str(i)},
        "seed_data": {"type": qtype, "image_path": "x.png", "question": "Is there a cat?", "ground_truth": "Yes"},
    }


# ------------------------------------------------------------------------------------------ UCB, eqs. (7)-(8)
def test_ucb_scores_hand_worked():
    # Three arms after warm-up: mu = (0.5, 0.25, 0.75), pulls n = (2, 1, 4); step t = 3, c = 1.
    # bonus_i = sqrt(ln 4 / n_i): ln 4 = 1.386294 -> (0.832555, 1.177410, 0.588705)
    scores = C.ucb_scores(np.array([0.5, 0.25, 0.75]), np.array([2, 1, 4]), t=3, c=1.0)
    np.testing.assert_allclose(scores, [1.332555, 1.427410, 1.338705], atol=1e-6)
    assert int(np.argmax(scores)) == 1  # the rarely pulled arm wins despite the lowest mean
    # c = 0.5 halves the bonus: (0.916277, 0.838705, 1.044353) -> arm 2 (exploitation)
    assert int(np.argmax(C.ucb_scores(np.array([0.5, 0.25, 0.75]), np.array([2, 1, 4]), t=3, c=0.5))) == 2
    # t = 0: ln(1) = 0, no exploration bonus at all; an unpulled arm is always tried first.
    np.testing.assert_allclose(C.ucb_scores(np.array([0.5, 0.25]), np.array([2, 1]), 0, 1.0), [0.5, 0.25])
    assert np.isinf(C.ucb_scores(np.array([0.9, 0.0]), np.array([3, 0]), 5, 1.0)[1])


def test_running_mean_eq8_hand_worked():
    # Rewards 1, 0, 0.5 on one arm: mu = 1 -> 1 + (0 - 1)/2 = 0.5 -> 0.5 + (0.5 - 0.5)/3 = 0.5; then 1 -> 0.625
    mu = 0.0
    for n, r, expected in ((1, 1.0, 1.0), (2, 0.0, 0.5), (3, 0.5, 0.5), (4, 1.0, 0.625)):
        mu = C.running_mean(mu, n, r)
        assert mu == pytest.approx(expected)


def test_ucb_training_trace_matches_equations():
    """Replay the controller's Phase-2 log against eqs. (7)-(8) computed independently here."""
    rewards = {}

    def reward(policy, batch):
        # A deterministic function of the policy: more and stronger text operators -> more hallucination.
        return rewards.setdefault(policy.key(), min(1.0, sum(lv for _, lv in policy.text_ops) / 10))

    ctl = C.BanditController("ucb", pool_size=6, n_init=1, batch_size=2, steps=10, top_k=3, seed=5)
    res = ctl.train("existence_YON", [_inst(i) for i in range(1, 9)], reward)
    mu = {a["policy"]: rewards[a["policy"]] for a in res.arms}  # after warm-up, mu_i = the one pull (eq. 10)
    n = {a["policy"]: 1 for a in res.arms}
    keys = [a["policy"] for a in res.arms]
    for h in res.history:
        scores = [mu[k] + 1.0 * math.sqrt(math.log(h["step"] + 1) / n[k]) for k in keys]
        assert keys[int(np.argmax(scores))] == h["policy"]
        n[h["policy"]] += 1
        mu[h["policy"]] += (h["reward"] - mu[h["policy"]]) / n[h["policy"]]
        assert h["mu"] == pytest.approx(mu[h["policy"]]) and h["n"] == n[h["policy"]]
    # Phase 3: the top-3 arms by mu get a full evaluation; the best full reward wins.
    top = sorted(range(len(keys)), key=lambda j: (-mu[keys[j]], j))[:3]
    assert {a["arm"] for a in res.arms if "full_reward" in a} == set(top)
    assert res.full_reward == max(rewards[keys[j]] for j in top)
    # Evaluations: K * N_init * B + T * B + k * N (C.8's count).
    assert res.evaluations == 6 * 1 * 2 + 10 * 2 + 3 * 8


# ------------------------------------------------------------------------------------------ epsilon-greedy, eq. (9)
def test_epsilon_greedy_explores_at_rate_epsilon():
    ctl = C.BanditController("epsilon_greedy", epsilon=0.1)
    rng = np.random.default_rng(2024)
    mu, n = np.array([0.1, 0.9, 0.3, 0.2]), np.ones(4, dtype=int)
    draws = [ctl.select(mu, n, t, rng) for t in range(5000)]
    explored = sum(e for _, e in draws)
    assert binomtest(explored, 5000, 0.1).pvalue > 0.01  # consistent with epsilon = 0.1
    assert 0.09 < explored / 5000 < 0.11
    # Exploitation always picks the best arm; exploration is uniform over all K arms (including the best).
    assert all(arm == 1 for arm, e in draws if not e)
    counts = Counter(arm for arm, e in draws if e)
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > explored / 4 * 0.7
    # epsilon = 0 never explores.
    greedy = C.BanditController("epsilon_greedy", epsilon=0.0)
    assert not any(greedy.select(mu, n, t, rng)[1] for t in range(500))


# ------------------------------------------------------------------------------------------ hill climbing, eq. (16)
def test_hill_climb_acceptance_rule():
    assert C.hill_climb_accept(0.5, 0.5) and C.hill_climb_accept(0.75, 0.5) and not C.hill_climb_accept(0.25, 0.5)
    assert C.hill_climb_best(0.4, 0.4) and not C.hill_climb_best(0.39, 0.4)


def test_hill_climb_trace_follows_16():
    def reward(policy, batch):
        # Depends on the policy and on the minibatch, so minibatch and full rewards differ.
        base = sum(lv for _, lv in policy.ops()) / 25
        return min(1.0, base * (0.5 + np.mean([int(i["instance_id"]) % 7 for i in batch]) / 7))

    train = [_inst(i) for i in range(1, 11)]
    res = C.HillClimbController(batch_size=3, steps=12, seed=1).train("existence_YON", train, reward)
    h = res.history
    current, best_full = h[0]["reward"], h[0]["full_reward"]
    best_key = h[0]["policy"]
    for step in h[1:]:
        assert step["accepted"] == (step["reward"] >= current)
        if step["accepted"]:
            assert step["full_reward"] == pytest.approx(reward(C.Policy.from_dict(_parse(step["policy"])), train))
            assert step["best"] == (step["full_reward"] >= best_full)
            if step["best"]:
                best_full, best_key = step["full_reward"], step["policy"]
            current = step["reward"]
        else:
            assert "full_reward" not in step
    assert res.policy.key() == best_key and res.full_reward == best_full
    assert any(not s["accepted"] for s in h[1:]) and any(s["accepted"] for s in h[1:])


def _parse(key: str) -> dict:
    t, i = key[2:].split("|I:")
    ops = lambda s: [[p.split("@")[0], int(p.split("@")[1])] for p in s.split("+") if p]  # noqa: E731
    return {"text_ops": ops(t), "image_ops": ops(i)}


# ------------------------------------------------------------------------------------------ pool and mutation
def test_mutation_scheme():
    rng = np.random.default_rng(0)
    base = C.Policy((("constraint_stack", 3), ("syntactic_complication", 1)), (("multi_image_copy_v1", 5),))
    kinds = Counter()
    for _ in range(3000):
        cand = C.mutate_policy(base, rng)
        assert cand != base and cand.ops()
        t_changed = {n for n, _ in cand.text_ops} != {n for n, _ in base.text_ops} or len(cand.text_ops) != len(
            base.text_ops
        )
        i_changed = {n for n, _ in cand.image_ops} != {n for n, _ in base.image_ops} or len(cand.image_ops) != len(
            base.image_ops
        )
        kinds[(t_changed, i_changed)] += 1
        for name, lv in cand.ops():
            assert 1 <= lv <= 5
            old = dict(base.ops()).get(name)
            if old is not None:
                assert abs(lv - old) <= 1  # levels move by +-1 only
    total = sum(kinds.values())
    assert abs(kinds[(True, False)] / total - 0.5) < 0.04  # text-only edits ~ 0.5
    assert abs(kinds[(False, True)] / total - 0.4) < 0.04  # image-only ~ 0.4
    assert abs(kinds[(True, True)] / total - 0.1) < 0.03  # both ~ 0.1


def test_pool_is_distinct_and_respects_ranges():
    space = C.PolicySpace(text_range=(1, 2), image_range=(0, 1))
    pool = C.build_pool(64, np.random.default_rng(1), space)
    assert len({p.key() for p in pool}) == 64
    for p in pool:
        assert 1 <= len(p.text_ops) <= 2 and len(p.image_ops) <= 1
        assert {n for n, _ in p.text_ops} <= set(TEXT_OPERATORS) and {n for n, _ in p.image_ops} <= set(IMAGE_OPERATORS)
    with pytest.raises(InputError, match="range"):
        C.PolicySpace(text_range=(0, 6))
    with pytest.raises(InputError, match="strategy"):
        C.BanditController("thompson")


def test_policy_roundtrip_and_bad_policy():
    p = C.Policy((("authority_bias_context", 5),), (("background_interference", 2),))
    assert C.Policy.from_dict(p.as_dict()) == p
    assert p.text_level == 5 and p.image_level == 2
    with pytest.raises(InputError, match="bad text operator 'blur'"):
        C.Policy.from_dict({"text_ops": [["blur", 1]]})


# ------------------------------------------------------------------------------------------ controller and split
def test_central_controller_default_is_most_frequent():
    a = C.Policy((("constraint_stack", 2),))
    b = C.Policy((), (("multi_image_copy_v2", 3),))
    ctl = C.CentralFuzzController({"existence_YON": a, "attribute_YON": b, "relation_YON": b})
    assert ctl.default == b
    assert ctl.policy_for("existence_YON") == a and ctl.policy_for("context_VQA") == b
    assert C.CentralFuzzController.from_dict(ctl.as_dict()).as_dict() == ctl.as_dict()
    # A tie is broken by the smaller key, whatever the insertion order.
    assert (
        C.CentralFuzzController({"x_YON": a, "y_YON": b}).default
        == C.CentralFuzzController({"y_YON": b, "x_YON": a}).default
    )


def test_pilot_split_is_20_percent_per_group():
    items = [_inst(i) for i in range(1, 21)] + [_inst(i, "attribute") for i in range(1, 11)] + [_inst(1, "relation")]
    split = C.pilot_split(items, 0.2, seed=3)
    by_group = Counter((i["meta_inf"]["subtype"], split[i["instance_id"]]) for i in items)
    assert by_group[("existence", "train")] == 4 and by_group[("existence", "test")] == 16
    assert by_group[("attribute", "train")] == 2 and by_group[("attribute", "test")] == 8
    assert by_group[("relation", "train")] == 1  # a singleton group still gets a policy
    assert split == C.pilot_split(list(reversed(items)), 0.2, seed=3)  # order-independent
    assert split != C.pilot_split(items, 0.2, seed=4)
