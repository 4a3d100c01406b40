"""SAMF self-adaptive fuzzing controllers (UniHall/SAMF paper, Appendix C.2-C.8).

Policies over the operator catalog (C.2), the pool construction and policy mutation scheme (C.4.1), UCB and
epsilon-greedy bandits (eqs. 7-9) with warm-up / exploration / top-k full evaluation (eqs. 10-11), the
hill-climbing baseline with acceptance rule (16), the CentralFuzzController of C.7 (eq. 20) and the 20% pilot split.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..config_types import SamfController
from ..errors import InputError
from ..io import stable_hash
from ..progress import progress
from .operators import IMAGE_OPERATORS, LEVELS, TEXT_OPERATORS
from .schema import group_of

Op = tuple[str, int]
Reward = Callable[["Policy", Sequence[dict]], float]


@dataclass(frozen=True)
class Policy:
    """pi_{s,q} = (text operators, image operators) with a level per operator, applied in order."""

    text_ops: tuple[Op, ...] = ()
    image_ops: tuple[Op, ...] = ()

    def ops(self) -> list[Op]:
        return [*self.text_ops, *self.image_ops]

    @property
    def text_level(self) -> int:
        return max((lv for _, lv in self.text_ops), default=0)

    @property
    def image_level(self) -> int:
        return max((lv for _, lv in self.image_ops), default=0)

    def key(self) -> str:
        fmt = lambda ops: "+".join(f"{n}@{lv}" for n, lv in ops)  # noqa: E731
        return f"T:{fmt(self.text_ops)}|I:{fmt(self.image_ops)}"

    def as_dict(self) -> dict:
        return {
            "key": self.key(),
            "text_ops": [[n, lv] for n, lv in self.text_ops],
            "image_ops": [[n, lv] for n, lv in self.image_ops],
            "text_level": self.text_level,
            "image_level": self.image_level,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Policy":
        try:
            text = tuple((str(n), int(lv)) for n, lv in d.get("text_ops", []))
            image = tuple((str(n), int(lv)) for n, lv in d.get("image_ops", []))
        except (TypeError, ValueError):
            raise InputError(f"policy {d!r}: text_ops/image_ops must be lists of [operator, level]") from None
        for n, lv in text:
            if n not in TEXT_OPERATORS or lv not in LEVELS:
                raise InputError(f"policy {d.get('key', d)!r}: bad text operator {n!r} at level {lv}")
        for n, lv in image:
            if n not in IMAGE_OPERATORS or lv not in LEVELS:
                raise InputError(f"policy {d.get('key', d)!r}: bad image operator {n!r} at level {lv}")
        return cls(text, image)


@dataclass(frozen=True)
class PolicySpace:
    """Admissible policies: operator catalogs and operator-count ranges (C.8: text/image ops in [0, 5])."""

    text_catalog: tuple[str, ...] = TEXT_OPERATORS
    image_catalog: tuple[str, ...] = IMAGE_OPERATORS
    text_range: tuple[int, int] = (0, 5)
    image_range: tuple[int, int] = (0, 5)

    def __post_init__(self):
        for name, (lo, hi), catalog in (
            ("text", self.text_range, self.text_catalog),
            ("image", self.image_range, self.image_catalog),
        ):
            if not 0 <= lo <= hi <= len(catalog):
                raise InputError(f"{name} operator count range [{lo}, {hi}] does not fit a catalog of {len(catalog)}")
        if self.text_range[1] + self.image_range[1] == 0:
            raise InputError("the policy space admits no operator at all")


def _random_ops(rng, catalog, lo, hi) -> tuple[Op, ...]:
    n = int(rng.integers(lo, hi + 1))
    names = [catalog[int(i)] for i in rng.permutation(len(catalog))[:n]]
    return tuple((name, int(rng.integers(1, 6))) for name in names)


def random_policy(rng: np.random.Generator, space: PolicySpace = PolicySpace()) -> Policy:
    """RandomPolicy(theta_min, theta_max) of eq. (6); a policy with no operator at all is redrawn."""
    while True:
        p = Policy(
            _random_ops(rng, space.text_catalog, *space.text_range),
            _random_ops(rng, space.image_catalog, *space.image_range),
        )
        if p.ops():
            return p


def _mutate_ops(ops: tuple[Op, ...], rng, catalog, lo, hi) -> tuple[Op, ...]:
    """One add / remove / swap, chosen uniformly among those the count range allows."""
    ops = list(ops)
    unused = [n for n in catalog if n not in {o for o, _ in ops}]
    actions = [
        a for a, ok in (("add", len(ops) < hi and unused), ("remove", len(ops) > lo), ("swap", ops and unused)) if ok
    ]
    if not actions:
        return tuple(ops)
    action = actions[int(rng.integers(0, len(actions)))]
    if action == "add":
        ops.insert(
            int(rng.integers(0, len(ops) + 1)), (unused[int(rng.integers(0, len(unused)))], int(rng.integers(1, 6)))
        )
    elif action == "remove":
        ops.pop(int(rng.integers(0, len(ops))))
    else:
        i = int(rng.integers(0, len(ops)))
        ops[i] = (unused[int(rng.integers(0, len(unused)))], ops[i][1])
    return tuple(ops)


def _mutate_level(ops: tuple[Op, ...], i: int, rng) -> tuple[Op, ...]:
    name, lv = ops[i]
    steps = [d for d in (-1, 1) if 1 <= lv + d <= 5]
    ops = list(ops)
    ops[i] = (name, lv + steps[int(rng.integers(0, len(steps)))])
    return tuple(ops)


# C.4.1 probabilities: which operator set to mutate, and the independent level mutation.
P_TEXT, P_IMAGE, P_BOTH = 0.5, 0.4, 0.1
P_LEVEL = 0.5


def mutate_policy(
    base: Policy, rng: np.random.Generator, space: PolicySpace = PolicySpace(), max_tries: int = 20
) -> Policy:
    """pi_candidate = Mutate(pi_base): text (0.5) / image (0.4) / both (0.1) operator edits, then with
    probability 0.5 one operator's level moves by +-1 within 1..5. Redrawn if empty or unchanged."""
    for _ in range(max_tries):
        text, image = base.text_ops, base.image_ops
        u = rng.random()
        if u < P_TEXT or u >= P_TEXT + P_IMAGE:
            text = _mutate_ops(text, rng, space.text_catalog, *space.text_range)
        if u >= P_TEXT:
            image = _mutate_ops(image, rng, space.image_catalog, *space.image_range)
        if rng.random() < P_LEVEL and (text or image):
            i = int(rng.integers(0, len(text) + len(image)))
            if i < len(text):
                text = _mutate_level(text, i, rng)
            else:
                image = _mutate_level(image, i - len(text), rng)
        cand = Policy(text, image)
        if cand.ops() and cand != base:
            return cand
    return random_policy(rng, space)


P_MUTATE_EXISTING = 0.6


def build_pool(k: int, rng: np.random.Generator, space: PolicySpace = PolicySpace()) -> list[Policy]:
    """P_0 of eq. (6): K distinct policies; each new one is, with probability 0.6, a mutation of a pool member."""
    if k < 1:
        raise InputError(f"pool size K must be >= 1, got {k}")
    pool = [random_policy(rng, space)]
    seen = {pool[0].key()}
    tries = 0
    while len(pool) < k:
        tries += 1
        if tries > 200 * k:
            raise InputError(f"could not draw {k} distinct policies from this policy space")
        if rng.random() < P_MUTATE_EXISTING:
            cand = mutate_policy(pool[int(rng.integers(0, len(pool)))], rng, space)
        else:
            cand = random_policy(rng, space)
        if cand.key() not in seen:
            seen.add(cand.key())
            pool.append(cand)
    return pool


# ---------------------------------------------------------------------------------------------- bandits
def ucb_scores(mu: np.ndarray, n: np.ndarray, t: int, c: float) -> np.ndarray:
    """Eq. (7): mu_i + c sqrt(ln(t+1) / n_i); an arm never pulled scores +inf."""
    mu, n = np.asarray(mu, float), np.asarray(n, float)
    with np.errstate(divide="ignore"):
        bonus = c * np.sqrt(math.log(t + 1) / n)
    return np.where(n > 0, mu + np.nan_to_num(bonus, nan=0.0), np.inf)


def running_mean(mu: float, n_after: int, reward: float) -> float:
    """Eq. (8): mu(t+1) = mu(t) + (r - mu(t)) / n(t+1)."""
    return mu + (reward - mu) / n_after


@dataclass
class TrainResult:
    group: str
    method: str
    policy: Policy
    full_reward: float
    history: list[dict] = field(default_factory=list)
    arms: list[dict] = field(default_factory=list)
    n_train: int = 0
    evaluations: int = 0

    def as_dict(self) -> dict:
        return {
            "group": self.group,
            "method": self.method,
            "policy": self.policy.as_dict(),
            "full_reward": self.full_reward,
            "n_train": self.n_train,
            "evaluations": self.evaluations,
            "history": self.history,
            "arms": self.arms,
        }


class _CountingReward:
    """Counts the instance evaluations a controller spends (C.8's complexity is in these units)."""

    def __init__(self, fn: Reward):
        self.fn, self.evaluations = fn, 0

    def __call__(self, policy: Policy, batch: Sequence[dict]) -> float:
        self.evaluations += len(batch)
        return float(self.fn(policy, batch))

    def many(self, jobs: Sequence[tuple[Policy, Sequence[dict]]]) -> list[float]:
        """Independent (policy, batch) evaluations at once: a reward with `many` (PolicyEvaluator) sends them to the
        model as one batch (C.4.4's parallel pulls); the result equals evaluating them one by one."""
        self.evaluations += sum(len(b) for _, b in jobs)
        if hasattr(self.fn, "many"):
            return [float(r) for r in self.fn.many(jobs)]
        return [float(self.fn(p, b)) for p, b in jobs]


def _minibatch(rng, train: Sequence[dict], b: int) -> list[dict]:
    idx = rng.choice(len(train), size=min(b, len(train)), replace=False)
    return [train[int(i)] for i in sorted(idx)]


@dataclass
class BanditController:
    """Multi-armed bandit over a pool of K policies (C.4): strategy "ucb" (eq. 7) or "epsilon_greedy" (eq. 9)."""

    strategy: str = "ucb"
    pool_size: int = 1024
    c: float = 1.0
    epsilon: float = 0.1
    n_init: int = 1
    batch_size: int = 4
    steps: int = 16
    top_k: int = 3
    seed: int = 0
    space: PolicySpace = field(default_factory=PolicySpace)

    def __post_init__(self):
        if self.strategy not in ("ucb", "epsilon_greedy"):
            raise InputError(f"bandit strategy {self.strategy!r}; known: ucb, epsilon_greedy")

    def select(self, mu: np.ndarray, n: np.ndarray, t: int, rng: np.random.Generator) -> tuple[int, bool]:
        """Arm to pull at Phase-2 step t (0-based) and whether it was an exploration draw."""
        if self.strategy == "ucb":
            return int(np.argmax(ucb_scores(mu, n, t, self.c))), False
        if rng.random() < self.epsilon:
            return int(rng.integers(0, len(mu))), True
        return int(np.argmax(mu)), False

    def train(self, group: str, train: Sequence[dict], reward: Reward) -> TrainResult:
        if not train:
            raise InputError(f"group {group}: no training instances")
        rng = np.random.default_rng(int(stable_hash(["samf-bandit", self.seed, group])[:16], 16))
        counted = _CountingReward(reward)
        pool = build_pool(self.pool_size, rng, self.space)
        k = len(pool)
        mu, n = np.zeros(k), np.zeros(k, dtype=int)
        history: list[dict] = []
        # Phase 1 (eq. 10): N_init pulls per arm, each on a fresh minibatch of size B. The pulls do not depend on
        # each other, so they are drawn first and evaluated together (chunks keep memory and progress in check).
        jobs = [(i, _minibatch(rng, train, self.batch_size)) for i in range(k) for _ in range(self.n_init)]
        chunk = 64
        for start in progress(range(0, len(jobs), chunk), desc=f"{group} warm-up", total=-(-len(jobs) // chunk)):
            part = jobs[start : start + chunk]
            for (i, _), r in zip(part, counted.many([(pool[i], batch) for i, batch in part])):
                n[i] += 1
                mu[i] = running_mean(mu[i], n[i], r)
        # Phase 2: T bandit steps with the incremental mean of eq. (8).
        for t in range(self.steps):
            i, explored = self.select(mu, n, t, rng)
            r = counted(pool[i], _minibatch(rng, train, self.batch_size))
            n[i] += 1
            mu[i] = running_mean(mu[i], n[i], r)
            history.append(
                {
                    "step": t,
                    "arm": i,
                    "policy": pool[i].key(),
                    "reward": r,
                    "mu": float(mu[i]),
                    "n": int(n[i]),
                    "explored": explored,
                }
            )
        # Phase 3 (eq. 11): the top-k arms by mu are evaluated on the whole training set.
        order = sorted(range(k), key=lambda j: (-mu[j], j))[: self.top_k]
        full = dict(zip(order, counted.many([(pool[j], list(train)) for j in order])))
        best = max(order, key=lambda j: (full[j], -order.index(j)))
        arms = [
            {
                "arm": j,
                "policy": pool[j].key(),
                "mu": float(mu[j]),
                "n": int(n[j]),
                **({"full_reward": full[j]} if j in full else {}),
            }
            for j in range(k)
        ]
        return TrainResult(
            group, f"bandit_{self.strategy}", pool[best], full[best], history, arms, len(train), counted.evaluations
        )


# ---------------------------------------------------------------------------------------------- hill climbing
def hill_climb_accept(r_candidate: float, r_current: float) -> bool:
    """Step 3 of C.5.1: accept when R_minibatch(candidate) >= R_minibatch(current)."""
    return r_candidate >= r_current


def hill_climb_best(r_full_candidate: float, r_full_best: float) -> bool:
    """Eq. (16): an accepted candidate becomes pi_best when R_full(candidate) >= R_full(best)."""
    return r_full_candidate >= r_full_best


@dataclass
class HillClimbController:
    """Heuristic baseline of C.5: one current policy, greedy acceptance of local mutations.

    R_minibatch(current) is the score the current policy had when it was evaluated (C.5 keeps no statistics
    beyond that), so candidate and current are compared across different minibatches, as in the paper."""

    batch_size: int = 4
    steps: int = 16
    seed: int = 0
    space: PolicySpace = field(default_factory=PolicySpace)

    def train(self, group: str, train: Sequence[dict], reward: Reward) -> TrainResult:
        if not train:
            raise InputError(f"group {group}: no training instances")
        rng = np.random.default_rng(int(stable_hash(["samf-hill", self.seed, group])[:16], 16))
        counted = _CountingReward(reward)
        current = best = random_policy(rng, self.space)
        r_current = counted(current, _minibatch(rng, train, self.batch_size))  # eq. (14)
        r_best_full = counted(current, list(train))  # eq. (15)
        history = [
            {
                "step": 0,
                "policy": current.key(),
                "reward": r_current,
                "accepted": True,
                "full_reward": r_best_full,
                "best": True,
            }
        ]
        for t in range(1, self.steps + 1):
            cand = mutate_policy(current, rng, self.space)
            r = counted(cand, _minibatch(rng, train, self.batch_size))
            entry = {"step": t, "policy": cand.key(), "reward": r, "accepted": hill_climb_accept(r, r_current)}
            if entry["accepted"]:
                full = counted(cand, list(train))
                entry["full_reward"] = full
                entry["best"] = hill_climb_best(full, r_best_full)
                if entry["best"]:
                    best, r_best_full = cand, full
                current, r_current = cand, r
            history.append(entry)
        return TrainResult(group, "hill_climb", best, r_best_full, history, [], len(train), counted.evaluations)


def policy_space(cfg: Mapping[str, Any] | SamfController) -> PolicySpace:
    """The admissible policies of a `samf.controller` config block (operator-count ranges)."""
    cfg = SamfController.from_dict(cfg)
    return PolicySpace(text_range=cfg.text_ops_range, image_range=cfg.image_ops_range)


def make_controller(cfg: Mapping[str, Any] | SamfController, seed: int):
    """Build the controller named in the `samf.controller` config block (a partial block gets the schema's
    defaults)."""
    cfg = SamfController.from_dict(cfg)
    method = cfg.method
    space = policy_space(cfg)
    if method == "hill_climb":
        return HillClimbController(batch_size=cfg.batch_size, steps=cfg.steps, seed=seed, space=space)
    if method not in ("ucb", "epsilon_greedy"):
        raise InputError(f"samf.controller.method {method!r}; known: ucb, epsilon_greedy, hill_climb")
    return BanditController(
        strategy=method,
        pool_size=cfg.pool_size,
        c=cfg.c,
        epsilon=cfg.epsilon,
        n_init=cfg.n_init,
        batch_size=cfg.batch_size,
        steps=cfg.steps,
        top_k=cfg.top_k,
        seed=seed,
        space=space,
    )


# ---------------------------------------------------------------------------------------------- central controller
class CentralFuzzController:
    """Eq. (20): the learnt policy of a (subtype, question type) group, else the most frequent learnt policy."""

    def __init__(self, policies: dict[str, Policy]):
        if not policies:
            raise InputError("CentralFuzzController needs at least one learnt policy")
        self.policies = dict(sorted(policies.items()))
        counts = Counter(p.key() for p in self.policies.values())
        # Ties between equally frequent policies go to the smallest key, so the default is deterministic.
        default_key = min(counts, key=lambda k: (-counts[k], k))
        self.default = next(p for p in self.policies.values() if p.key() == default_key)

    def policy_for(self, group: str) -> Policy:
        return self.policies.get(group, self.default)

    def policy_for_instance(self, instance: dict) -> Policy:
        return self.policy_for(group_of(instance))

    def as_dict(self) -> dict:
        return {"default": self.default.as_dict(), "groups": {g: p.as_dict() for g, p in self.policies.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "CentralFuzzController":
        if "groups" not in d:
            raise InputError("controller JSON has no 'groups'")
        return cls({g: Policy.from_dict(p) for g, p in d["groups"].items()})


# ---------------------------------------------------------------------------------------------- pilot split
def pilot_split(instances: Sequence[dict], ratio: float = 0.2, seed: int = 0) -> dict[str, str]:
    """instance_id -> "train" | "test": a `ratio` pilot subset of every group trains the controller (Sec. 3.3).

    At least one instance of a group trains it and, when the group has two or more, at least one is kept for test."""
    if not 0 < ratio < 1:
        raise InputError(f"pilot ratio {ratio} must be in (0, 1)")
    groups: dict[str, list[str]] = {}
    for inst in instances:
        groups.setdefault(group_of(inst), []).append(inst["instance_id"])
    split: dict[str, str] = {}
    for group, ids in sorted(groups.items()):
        ids = sorted(ids)
        rng = np.random.default_rng(int(stable_hash(["samf-split", seed, group])[:16], 16))
        order = [ids[int(i)] for i in rng.permutation(len(ids))]
        n_train = len(ids) if len(ids) == 1 else min(len(ids) - 1, max(1, round(ratio * len(ids))))
        for j, iid in enumerate(order):
            split[iid] = "train" if j < n_train else "test"
    return split
