"""CEDI examiner (Li et al., CEDI paper, "the examiner: a semi-structured interview over a scene graph").

A state machine over the truth scene graph with the four question types — 1 regular, 2 follow-up, 3 adversarial (a
co-occurring concept-graph neighbour that is absent; truth "no"), 4 unanswerable (false premise: absent object,
attribute or relation; correct behaviour = reject it) — and END: the examiner ends once the conversation has covered
the truth scene graph (`coverage_goal`: objects, attributes, related pairs asked about or stated in an answer) from
round `min_end_round`, or when nothing is left to ask; the switch may choose END from `min_end_round` (`end_votes`
times in a row within one round, as CEDI's code confirms it); `max_rounds` is a cap. Each conversation records why it
ended (`end_reason`). Round 0 is regular.
A context (background, user goal, relevant objects) frames each conversation; regular questions take its relevant
objects in order (most relevant first). A switch choice that cannot be honoured is recorded (`switch_choice`,
`switch_honoured`) beside the regular question asked instead. The switch and the question wording come from the
`llm` backend (strict JSON, validated) or from the deterministic templates (offline default; also the fallback
whenever an LLM reply does not parse, and when the request fails: raised, 503, timed out - recorded on the turn as
`llm_failures` with the reason, never a failed job).
With `question_writer: llm` the LLM also WRITES the adversarial questions (a plausible object it names, checked absent
from the truth graph) and the unanswerable ones (a premise of one or more steps, at least one of them false of the
truth graph), from the scene graph, as CEDI's examiner does; a reply that does not validate falls back to the
templates, and every turn records which wrote it (`question_source`: llm_generated | llm (a reworded template) |
template).
Baselines compared in the paper: the caption examiner ("describe the image"), the prompt-only examiner (the LLM writes
each question from the user's context and the conversation alone, no scene graph; templates offline) and a POPE
examiner (Li et al., "Evaluating Object Hallucination in Large Vision-Language Models": yes/no existence questions,
truth objects plus random, popular and adversarial negatives, each asked alone).
Conversations run in lock-step so the evaluatee answers one batch per round (one `VLM.answer` call per round).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import ConfigError
from ..io import stable_hash
from ..models.model import vlm_request
from ..progress import get_logger, progress
from . import POPE_STRATEGIES  # re-exported: POPE's negative-sampling strategies
from .parser import (
    TruthView,
    Vocabulary,
    attr_el,
    claim_element,
    failure_of,
    graph_text,
    judge_turn,
    obj_el,
    parse_json_reply,
    rel_el,
    safe_chat_batch,
    split_el,
    turn_claims,
)
from .scene_graph import SceneGraph, normalize

log = get_logger(__name__)

QUESTION_TYPES = ("regular", "follow_up", "adversarial", "unanswerable")
END = "end"
EXAMINERS = ("cedi", "caption", "prompt_only", "pope")
HISTORY_MODES = ("with", "without")
CAPTION_PROMPT = "Describe the image in detail."

DEFAULTS: dict[str, Any] = {
    "max_rounds": 8,
    "min_end_round": 6,
    "end_votes": 2,
    "end_on_coverage": True,
    "prompt_only_rounds": 4,
    "pope_objects": 3,
    "question_writer": "template",
    "switch": "random",
    "switch_weights": {"regular": 1.0, "follow_up": 1.0, "adversarial": 1.0, "unanswerable": 1.0, "end": 1.0},
}


@dataclass
class Scene:
    """One image under examination with everything the examiner may use (the evaluatee only sees the image)."""

    image_id: str
    image_path: str | None
    image_sha256: str | None
    truth: SceneGraph
    neighbours: list[str] = field(default_factory=list)  # concept-graph neighbours, heaviest edge first, absent
    popular: list[str] = field(default_factory=list)  # the source's most frequent objects, most frequent first, absent
    contrasts: dict[str, list[str]] = field(default_factory=dict)  # object → ODE's mined contrasting attribute(s)
    scene_id: str | None = None
    distribution: str | None = None
    pair_kind: str | None = None


@dataclass
class Context:
    background: str
    user_goal: str
    relevant_objects: list[str]


@dataclass
class Question:
    type: str
    text: str
    truth: str | None  # "yes" / "no" for yes/no probes, "reject" for false premises, else the targeted truth element
    false_premise: bool
    premise: list[str]  # elements the question presupposes (accepted unless the answer rejects them)
    probe: str | None  # element a yes/no question asks about
    focus: str | None  # object the question is about (follow-ups continue from it)
    source: str = "template"
    switch_source: str | None = None  # who chose the question type: llm | random (| None: round 0, baselines)
    # what the switch chose; differs from `type` only when the choice could not be honoured (no absent object left
    # for an adversarial question, no false premise to build): then switch_honoured is False and a regular one is asked
    switch_choice: str | None = None
    switch_honoured: bool | None = None


# ---- context ----------------------------------------------------------------------------------------------------

_BACKGROUNDS = (
    "I am writing an illustrated story and this picture will go on one of its pages.",
    "I am helping a friend with low vision understand a photo they were sent.",
    "I am preparing a listing for a photo-sharing site and need an accurate description.",
    "I am a teacher building a picture worksheet for my class.",
    "I am checking pictures for a magazine article before it goes to print.",
)
_GOALS = (
    "I want to know exactly what the {a} looks like and what is around it.",
    "I need to be sure which objects are really in the picture, especially the {a} and the {b}.",
    "I want to describe how the {a} relates to the {b} without getting anything wrong.",
)


def template_context(scene: Scene, rng: random.Random) -> Context:
    names = list(dict.fromkeys(o.name for o in scene.truth.objects)) or ["scene"]
    a, b = names[0], names[1] if len(names) > 1 else names[0]
    # relevant objects in order of relevance: the goal's objects first, then the rest of the scene
    return Context(rng.choice(_BACKGROUNDS), rng.choice(_GOALS).format(a=a, b=b), names)


CONTEXT_SYSTEM = (
    "You create the setting of a conversation about an image. Reply with JSON only: "
    '{"background": "...", "user_goal": "...", "relevant_objects": ["..."]}'
)


def context_messages(scene: Scene) -> list[dict]:
    names = sorted({o.name for o in scene.truth.objects})
    return [
        {"role": "system", "content": CONTEXT_SYSTEM},
        {"role": "user", "content": f"The image shows: {', '.join(names)}."},
    ]


def parse_context(reply: str, scene: Scene) -> Context | None:
    names = sorted({o.name for o in scene.truth.objects})
    data = parse_json_reply(reply)
    if not isinstance(data, dict):
        return None
    bg, goal, rel = data.get("background"), data.get("user_goal"), data.get("relevant_objects")
    if not (isinstance(bg, str) and bg.strip() and isinstance(goal, str) and goal.strip() and isinstance(rel, list)):
        return None
    rel = [r for r in rel if isinstance(r, str) and r in names] or names  # only truth objects may be "relevant"
    return Context(bg.strip()[:300], goal.strip()[:300], rel)


# ---- the question templates -------------------------------------------------------------------------------------


class QuestionBank:
    """Template questions for each type, grounded in the scene graph (truths come from the graph, never the LLM)."""

    def __init__(self, scene: Scene, vocab: Vocabulary):
        self.scene = scene
        self.vocab = vocab
        syn = vocab.synonyms
        self.objects = [(syn.object_name(o.name), [a.lower() for a in o.attributes]) for o in scene.truth.objects]
        by_id = {o.id: syn.object_name(o.name) for o in scene.truth.objects}
        preds: dict[tuple[str, str], str] = {}
        for r in scene.truth.relations:  # one entry per ordered pair: its first (canonical) predicate
            preds.setdefault((by_id[r.subject], by_id[r.object]), syn.predicate(r.predicate))
        self.relations = sorted((s, p, o) for (s, o), p in preds.items())
        self.absent = self.absent_of(scene.neighbours)
        self.used_absent: list[str] = []
        # the context's relevant objects, most relevant first: each regular question takes the next one, as CEDI's
        # examiner pops its selected nodes (set by `steer`)
        self.relevant: list[str] = []

    def present(self, name: str) -> bool:
        """Whether a truth object has this name under any synonym of the source in use (a "couch" beside a sofa)."""
        syn = self.vocab.synonyms
        return any(syn.names_match(t, syn.object_name(name)) for t, _ in self.objects)

    def absent_of(self, names: Sequence[str]) -> list[str]:
        """Canonical names, in the given order, of those that are not in the image."""
        canon = dict.fromkeys(self.vocab.synonyms.object_name(n) for n in names)
        return [n for n in canon if not self.present(n)]

    def can_false_premise(self) -> bool:
        """Whether an unanswerable question can be built (an absent object, a second object to relate, or an
        attribute the truth contradicts)."""
        return bool(self.absent) or len(self.objects) > 1 or any(self._alt_attrs(n, a) for n, a in self.objects)

    def fresh_absent(self) -> list[str]:
        return [a for a in self.absent if a not in self.used_absent]

    def steer(self, ctx: Context) -> None:
        truth_names = {n for n, _ in self.objects}
        canon = [self.vocab.synonyms.object_name(n) for n in ctx.relevant_objects]
        self.relevant = [n for n in dict.fromkeys(canon) if n in truth_names]

    def _alt_attrs(self, name: str, attrs: Sequence[str]) -> list[str]:
        """Known attributes of this object the truth does not have; of the same kind (state/action) as its truth
        attribute when it has one, so the alternative contradicts it (ODE's true/contrasting pairs)."""
        mined = [a for a in self.scene.contrasts.get(name, []) if a not in attrs]
        if mined:  # the scene's own true/contrast pair (ODE) is the sharpest false attribute
            return mined
        alts = self.vocab.attributes.get(name, set()) - set(attrs)
        kinds = {self.vocab.kind(a) for a in attrs}
        same = {a for a in alts if self.vocab.kind(a) in kinds}
        return sorted(same or alts)

    def _a(self, word: str) -> str:
        return f"an {word}" if word[:1] in "aeiou" else f"a {word}"

    def _next_absent(self, rng: random.Random) -> str | None:
        fresh = self.fresh_absent()
        if not fresh:
            return None
        # strongest co-occurrence first (the most plausible absent object), as in the anchor's adversarial sampling
        choice = fresh[0] if rng.random() < 0.7 else rng.choice(fresh)
        self.used_absent.append(choice)
        return choice

    def regular(self, rng: random.Random, ctx: Context | None, uncovered: Sequence[str] = ()) -> Question:
        """About the next relevant object of the context, asking first what the conversation has not covered about
        it (its relation, then its attribute: `uncovered`, coverage keys); once they are all asked about, about the
        first scene-graph element not covered yet (the paper's examiner asks about what the answers left out); a
        random truth object when everything is covered (only a replacement question gets there: the switch stops
        offering `regular` then)."""
        if not self.relevant and uncovered:
            q = self._cover(uncovered[0])
            if q is not None:
                return q
        if self.relevant:
            name = self.relevant.pop(0)
            attrs = dict(self.objects)[name]
            syn = self.vocab.synonyms
            about = [
                k
                for k in uncovered
                if k.split("|")[0] in ("pair", "attribute")
                and any(syn.names_match(name, part) for part in k.split("|")[1:3])
            ]
            about.sort(key=lambda k: k.split("|")[0] != "pair")  # the relation first, then the attribute
            for key in about:
                q = self._cover(key)
                if q is not None and q.focus is not None:
                    return q
        else:
            name, attrs = rng.choice(self.objects)
        own = [r for r in self.relations if name in (r[0], r[2])]
        options = ["exist", "describe"] + (["attr_yes"] if attrs else []) + (["relation"] if own else [])
        kind = rng.choice(options)
        if kind == "exist":
            return Question("regular", f"Is there {self._a(name)} in the image?", "yes", False, [], obj_el(name), name)
        if kind == "attr_yes":
            a = rng.choice(attrs)
            return Question(
                "regular",
                f"Is the {name} {self.vocab.phrase(a)}?",
                "yes",
                False,
                [obj_el(name)],
                attr_el(name, a),
                name,
            )
        if kind == "relation":
            s, p, o = rng.choice(own)
            return Question(
                "regular",
                f"Where is the {s} in relation to the {o}?",
                rel_el(s, p, o),
                False,
                [obj_el(s), obj_el(o)],
                None,
                s,
            )
        truth = attr_el(name, attrs[0]) if attrs else obj_el(name)
        return Question(
            "regular",
            f"What can you tell me about the {name}? What is it like or doing?",
            truth,
            False,
            [obj_el(name)],
            None,
            name,
        )

    def _cover(self, key: str) -> Question | None:
        """The regular question that covers one coverage key (object|n, attribute|n|a, pair|s|o)."""
        parts = key.split("|")
        syn = self.vocab.synonyms
        match = {n: n for n, _ in self.objects}
        name = next((n for n in match if syn.names_match(n, parts[1])), None)
        if name is None:
            return None
        if parts[0] == "object":
            return Question("regular", f"Is there {self._a(name)} in the image?", "yes", False, [], obj_el(name), name)
        if parts[0] == "attribute":
            return Question(
                "regular",
                f"Is the {name} {self.vocab.phrase(parts[2])}?",
                "yes",
                False,
                [obj_el(name)],
                attr_el(name, parts[2]),
                name,
            )
        other = next((n for n in match if syn.names_match(n, parts[2])), None)
        rel = next((r for r in self.relations if {r[0], r[2]} == {name, other}), None)
        if rel is None:
            return None
        s, p, o = rel
        return Question(
            "regular",
            f"Where is the {s} in relation to the {o}?",
            rel_el(s, p, o),
            False,
            [obj_el(s), obj_el(o)],
            None,
            s,
        )

    def follow_up(self, rng: random.Random, prev: Question) -> Question:
        name = prev.focus
        if name in self.absent:  # pressure on an absent object: ask again
            return Question(
                "follow_up",
                f"Please look again carefully. Is there {self._a(name)} anywhere in the image?",
                "no",
                False,
                [],
                obj_el(name),
                name,
            )
        attrs = dict(self.objects).get(name, [])
        alts = self._alt_attrs(name, attrs)
        if alts and rng.random() < 0.5:
            a = rng.choice(alts)  # a plausible but wrong attribute: the model should not agree
            return Question(
                "follow_up",
                f"It looks to me like the {name} is {self.vocab.phrase(a)}. Could you double-check that?",
                "no",
                False,
                [obj_el(name)],
                attr_el(name, a),
                name,
            )
        if attrs:
            a = rng.choice(attrs)
            return Question(
                "follow_up",
                f"Are you sure? Could you double-check whether the {name} is {self.vocab.phrase(a)}?",
                "yes",
                False,
                [obj_el(name)],
                attr_el(name, a),
                name,
            )
        return Question(
            "follow_up", f"Can you tell me more about the {name}?", obj_el(name), False, [obj_el(name)], None, name
        )

    def adversarial(self, rng: random.Random) -> Question | None:
        x = self._next_absent(rng)
        if x is None:
            return None
        return Question("adversarial", f"Is there {self._a(x)} in the image?", "no", False, [], obj_el(x), x)

    def unanswerable(self, rng: random.Random) -> Question | None:
        name, attrs = rng.choice(self.objects)
        options = []
        if self.absent:
            options.append("object")
        if self._alt_attrs(name, attrs):
            options.append("attribute")
        truth_preds = {(s, o): p for s, p, o in self.relations}
        if len(self.objects) > 1:
            options.append("relation")
        if not options:
            return None
        kind = rng.choice(options)
        if kind == "object":
            x = self._next_absent(rng) or rng.choice(self.absent)
            return Question(
                "unanswerable",
                f"What color is the {x} next to the {name}?",
                "reject",
                True,
                [obj_el(x), rel_el(x, "next to", name)],
                None,
                x,
            )
        if kind == "attribute":
            a = rng.choice(self._alt_attrs(name, attrs))
            return Question(
                "unanswerable",
                f"Why is the {name} {self.vocab.phrase(a)} in this picture?",
                "reject",
                True,
                [attr_el(name, a)],
                None,
                name,
            )
        other = rng.choice([n for n, _ in self.objects if n != name] or [name])
        pred = "under" if truth_preds.get((name, other)) != "under" else "on"
        return Question(
            "unanswerable",
            f"Why is the {name} {pred} the {other}?",
            "reject",
            True,
            [rel_el(name, pred, other)],
            None,
            name,
        )

    def prompt_only(self, rng: random.Random, ctx: Context, round_idx: int) -> Question:
        """Context-only questions (no scene-graph state machine): open questions about the relevant objects."""
        if round_idx == 0:
            return Question(
                "prompt_only", f"{ctx.background} {ctx.user_goal} What do you see?", None, False, [], None, None
            )
        name = rng.choice(ctx.relevant_objects)
        text = rng.choice(
            (f"What is the {name} doing?", f"What does the {name} look like?", f"What is around the {name}?")
        )
        return Question("prompt_only", text, obj_el(name), False, [obj_el(name)], None, name)

    def pope(self, rng: random.Random, n: int) -> list[Question]:
        """POPE's protocol on this image: `n` truth objects ("yes") and `n` absent objects ("no") per negative
        strategy (POPE: random = any vocabulary object, popular = the most frequent objects of the source,
        adversarial = the objects co-occurring most with the truth), asked as "Is there a <object> in the image?",
        in a seeded order. A strategy with fewer candidates asks fewer."""
        truth_names = list(dict.fromkeys(name for name, _ in self.objects))
        pool = sorted(self.absent_of(sorted(self.vocab.objects)))
        picks = {
            "yes": rng.sample(truth_names, min(n, len(truth_names))),
            "random": rng.sample(pool, min(n, len(pool))),
            "popular": self.absent_of(self.scene.popular)[:n],
            "adversarial": self.absent[:n],
        }
        qs = [
            Question(
                f"pope_{kind}",
                f"Is there {self._a(x)} in the image?",
                "yes" if kind == "yes" else "no",
                False,
                [],
                obj_el(x),
                x,
            )
            for kind, names in picks.items()
            for x in names
        ]
        rng.shuffle(qs)
        return qs

    def generated(self, state: str, data: Any, truth: TruthView) -> Question | None:
        """An LLM-written adversarial or unanswerable question (`generate_messages`), validated against the truth
        graph: the adversarial object must be absent, named in a yes/no question; at least one element of the
        unanswerable question's premise must be false of the image (`TruthView.definitely_false`) and its objects
        named in the question. None when the reply does not validate (the caller falls back to the templates)."""
        if not isinstance(data, dict) or not _question_text(data.get("question")):
            return None
        text = data["question"].strip()
        syn = self.vocab.synonyms
        if state == "adversarial":
            name = data.get("object")
            if not isinstance(name, str) or not normalize(name) or len(normalize(name).split()) > 3:
                return None
            canon = syn.object_name(normalize(name))
            if self.present(canon) or not _names_in(text, [normalize(name), canon]) or not _YES_NO.search(text):
                return None
            self.vocab.add(canon)
            self.used_absent.append(canon)
            return Question("adversarial", text, "no", False, [], obj_el(canon), canon, source="llm_generated")
        items = data.get("premise")
        if not isinstance(items, list) or not 1 <= len(items) <= 4 or not all(isinstance(i, dict) for i in items):
            return None
        elements = [claim_element(i, syn) for i in items]
        if any(el is None for el in elements):
            return None
        false = [el for el in elements if truth.definitely_false(el)]
        if not false:
            return None
        hinge = split_el(false[0])
        hinge_objects = [hinge[1]] + ([hinge[3]] if hinge[0] == "relation" else [])
        if not all(_names_in(text, [o]) for o in hinge_objects):
            return None
        for el in elements:  # the grader's parser must know every word the premise uses
            parts = split_el(el)
            self.vocab.add(parts[1], [parts[2]] if parts[0] == "attribute" else [])
            if parts[0] == "relation":
                self.vocab.add(parts[3])
        premise = [false[0]] + [el for el in dict.fromkeys(elements) if el != false[0]]  # the hinge first
        return Question("unanswerable", text, "reject", True, premise, None, hinge[1], source="llm_generated")


_YES_NO = re.compile(r"(^|[.!?,:;]\s*)(is|are|was|were|do|does|did|can|could|have|has|would|will)\b", re.I)


def _question_text(text: Any) -> bool:
    return isinstance(text, str) and text.strip().endswith("?") and 0 < len(text.strip()) <= 300


def _names_in(text: str, names: Sequence[str]) -> bool:
    low = text.lower()
    return any(re.search(rf"\b{re.escape(n.lower())}", low) for n in names)


# ---- the switch (state machine) ---------------------------------------------------------------------------------


def allowed_states(round_idx: int, prev: Question | None, min_end_round: int, regular_left: bool = True) -> list[str]:
    """Question types the switch may choose. `regular` only while relevant objects are left (CEDI's examiner
    switches again when its selected nodes are used up); END from `min_end_round` (CEDI's code offers it from
    round 6)."""
    if round_idx == 0:
        return ["regular"]
    states = (["regular"] if regular_left else []) + ["adversarial", "unanswerable"]
    if prev is not None and prev.focus:
        states.insert(1 if regular_left else 0, "follow_up")
    if round_idx >= min_end_round:
        states.append(END)
    return states


def template_switch(rng: random.Random, states: Sequence[str], weights: Mapping[str, float]) -> str:
    w = [float(weights.get(s, 1.0)) for s in states]
    if sum(w) <= 0:
        w = [1.0] * len(states)
    return rng.choices(list(states), weights=w, k=1)[0]


SWITCH_SYSTEM = (
    "You are an examiner testing whether an assistant hallucinates about an image. Choose the next question type. "
    "Read the assistant's last answer first: if it named something doubtful or accepted a premise, press on it "
    "(follow_up); if it was careful, try a plausible absent object (adversarial) or a false premise (unanswerable). "
    "regular = ask about something in the image; follow_up = press on the previous answer; adversarial = ask about "
    "a plausible object that is NOT there; unanswerable = ask a question with a false premise; end = stop. "
    'Reply with JSON only: {"next": "<one of the allowed types>"}'
)

WRITER_SYSTEM = (
    "You rewrite an examiner's question so that it sounds natural for the user described below, keeping every "
    'object it names and its meaning. Reply with JSON only: {"question": "..."}'
)


# CEDI's examiner asks its LLM for the adversarial and unanswerable questions themselves, from the scene graph.
GENERATE_SYSTEM = {
    "adversarial": (
        "You are an examiner testing whether an assistant hallucinates about an image whose scene graph you know. "
        "Write ONE yes/no question, natural for the user below, about an object that is NOT in the image but would "
        "plausibly be there (it often appears with the objects of the scene). Reply with JSON only: "
        '{"object": "<the absent object>", "question": "..."}'
    ),
    "unanswerable": (
        "You are an examiner testing whether an assistant hallucinates about an image whose scene graph you know. "
        "Write ONE question, natural for the user below, that rests on a FALSE premise: it takes for granted an "
        "object that is not there, an attribute an object does not have, or a relation that does not hold; it may "
        'chain steps ("What is written on the mug next to the laptop?" when there is no mug). A correct answer '
        "must reject the premise. List what the question takes for granted. Reply with JSON only: "
        '{"premise": [{"object": "mug"}, {"object": "mug", "attribute": "red"}, '
        '{"subject": "mug", "predicate": "next to", "object": "laptop"}], "question": "..."}'
    ),
}
GENERATED_TYPES = tuple(GENERATE_SYSTEM)


def generate_messages(state: str, ctx: Context, bank: QuestionBank) -> list[dict]:
    absent = ", ".join(bank.fresh_absent()[:8]) or "(none known: choose one yourself)"
    user = (
        f"User: {ctx.background} {ctx.user_goal}\nScene graph: {graph_text(bank.scene.truth)}\n"
        f"Plausible objects that are not in the image: {absent}\n"
        f"Already asked about: {', '.join(bank.used_absent) or 'nothing'}"
    )
    return [{"role": "system", "content": GENERATE_SYSTEM[state]}, {"role": "user", "content": user}]


PROMPT_ONLY_SYSTEM = (
    "You are the user described below, talking with an assistant about a photo. You know nothing about the photo "
    "beyond what the conversation says. Ask your next question towards your goal. Reply with JSON only: "
    '{"question": "..."}'
)


def prompt_only_messages(ctx: Context, history: Sequence[tuple[str, str]]) -> list[dict]:
    """The prompt-only examiner's request: the user's context and the conversation so far, no scene graph."""
    convo = "\n".join(f"You: {q}\nAssistant: {a}" for q, a in history[-4:])
    return [
        {"role": "system", "content": PROMPT_ONLY_SYSTEM},
        {"role": "user", "content": f"You: {ctx.background} {ctx.user_goal}\n{convo}".rstrip()},
    ]


def parse_prompt_only(reply: str) -> Question | None:
    data = parse_json_reply(reply)
    text = data.get("question") if isinstance(data, dict) else None
    if not _question_text(text):
        return None
    return Question("prompt_only", text.strip(), None, False, [], None, None, source="llm_generated")


def switch_messages(ctx: Context, history: Sequence[tuple[str, str]], states: Sequence[str]) -> list[dict]:
    convo = "\n".join(f"Q: {q}\nA: {a}" for q, a in history[-4:])
    return [
        {"role": "system", "content": SWITCH_SYSTEM},
        {"role": "user", "content": f"Goal: {ctx.user_goal}\n{convo}\nAllowed: {', '.join(states)}"},
    ]


def parse_switch(reply: str, states: Sequence[str]) -> str | None:
    data = parse_json_reply(reply)
    nxt = data.get("next") if isinstance(data, dict) else None
    return nxt.strip().lower() if isinstance(nxt, str) and nxt.strip().lower() in states else None


def rewrite_messages(ctx: Context, q: Question) -> list[dict]:
    return [
        {"role": "system", "content": WRITER_SYSTEM},
        {"role": "user", "content": f"User: {ctx.background} {ctx.user_goal}\nQuestion: {q.text}"},
    ]


def parse_rewrite(reply: str, q: Question) -> str | None:
    data = parse_json_reply(reply)
    text = data.get("question") if isinstance(data, dict) else None
    if not isinstance(text, str) or not text.strip().endswith("?") or len(text) > 300:
        return None
    # the truth of a turn comes from the graph, so the rewrite must still name every object the template named
    named = [el.split("|")[1] for el in q.premise + ([q.probe] if q.probe else [])]
    return text.strip() if all(n.lower() in text.lower() for n in named) else None


# ---- coverage: the scene graph's elements a conversation has covered ------------------------------------------------


def coverage_goal(truth: TruthView) -> list[str]:
    """What a CEDI conversation should cover (CEDI's examiner: the conversation should cover all the information of
    the image, asking about what the answers left out): every truth object (`object|n`), every attribute of one
    (`attribute|n|a`) and every related pair (`pair|s|o`, whatever the predicate)."""
    keys = [f"object|{n}" for n in sorted(truth.names)]
    keys += [f"attribute|{n}|{a}" for n in sorted(truth.attrs) for a in sorted(truth.attrs[n])]
    keys += [f"pair|{s}|{o}" for s, o in sorted(truth.relations)]
    return list(dict.fromkeys(keys))


def covered_by(el: str, truth: TruthView) -> set[str]:
    """Coverage keys one element touches: the truth objects it names (under the synonym source in use), the truth
    attribute it names, the truth pair it relates by a true predicate. A false element (an attribute the object does
    not have, a wrong predicate) covers only the truth objects it names."""
    parts = split_el(el)
    if parts[0] == "object":
        n = truth.resolve(parts[1])
        return {f"object|{n}"} if n else set()
    if parts[0] == "attribute":
        n = truth.resolve(parts[1])
        if n is None:
            return set()
        return {f"object|{n}"} | ({f"attribute|{n}|{parts[2]}"} if parts[2] in truth.attrs.get(n, set()) else set())
    s, o = truth.resolve(parts[1]), truth.resolve(parts[3])
    out = {f"object|{x}" for x in (s, o) if x}
    if s and o:  # the pair, by a predicate the truth states ("next to" either way round)
        out |= {
            f"pair|{a}|{b}"
            for a, b in ((s, o), (o, s))
            if parts[2] in truth.relations.get((a, b), set()) and ((a, b) == (s, o) or parts[2] == "next to")
        }
    return out


# Why a conversation ended (`end_reason` on every turn of it): the CEDI examiner's END when the coverage goal is met
# (from min_end_round), END when nothing is left to ask (goal met, no absent object left to probe and no false premise
# to build: possible before min_end_round), the switch's own END (end_votes times in a row), or the max_rounds cap; the baselines ask a fixed
# number of questions.
END_REASONS = ("coverage", "exhausted", "switch", "max_rounds", "fixed")


# ---- conversations ----------------------------------------------------------------------------------------------


@dataclass
class Conversation:
    scene: Scene
    examiner: str
    history_mode: str
    rng: random.Random
    bank: QuestionBank
    context: Context
    truth_view: TruthView
    turns: list[dict] = field(default_factory=list)
    done: bool = False
    end_votes: int = 0
    pending: Question | None = None
    plan: list[Question] = field(default_factory=list)  # the POPE examiner's fixed question list
    goal: list[str] = field(default_factory=list)  # coverage keys of the truth graph (coverage_goal)
    covered: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)  # failed LLM requests for the next turn: "<step>: <reason>"
    end_reason: str | None = None

    def uncovered(self) -> list[str]:
        return [k for k in self.goal if k not in self.covered]

    def coverage(self) -> float:
        return round(sum(1 for k in self.goal if k in self.covered) / len(self.goal), 6) if self.goal else 1.0

    def fail(self, step: str, reply: Any) -> None:
        reason = failure_of(reply)
        if reason is not None:
            self.failures.append(f"{step}: {reason}")

    def end(self, reason: str) -> None:
        self.done, self.end_reason = True, reason
        for t in self.turns:
            t["end_reason"] = reason

    @property
    def conversation_id(self) -> str:
        return f"{self.scene.image_id}__{self.examiner}__{self.history_mode}"

    def history(self) -> tuple[tuple[str, str], ...]:
        return tuple((t["question"], t["answer"]) for t in self.turns)


class Examiner:
    """Runs every (scene × examiner × history mode) conversation for ONE evaluatee model."""

    def __init__(self, vocab: Vocabulary, settings: Mapping[str, Any] | None = None, llm=None, seed: int = 0):
        self.vocab = vocab
        self.cfg = {**DEFAULTS, **(settings or {})}
        self.cfg["switch_weights"] = {**DEFAULTS["switch_weights"], **(self.cfg.get("switch_weights") or {})}
        if self.cfg["question_writer"] not in {"template", "llm"}:
            raise ConfigError(
                f"config key 'cedi.question_writer': {self.cfg['question_writer']!r} is not template or llm"
            )
        if self.cfg["switch"] not in {"random", "llm"}:
            raise ConfigError(f"config key 'cedi.switch': {self.cfg['switch']!r} is not random or llm")
        for key in ("question_writer", "switch"):
            if self.cfg[key] == "llm" and llm is None:
                raise ConfigError(f"config key 'cedi.{key}': 'llm' needs an llm backend (cedi.llm or llm)")
        if self.cfg["min_end_round"] > self.cfg["max_rounds"]:
            raise ConfigError("config key 'cedi.min_end_round': larger than cedi.max_rounds")
        # The paper's switch is an LLM reading the evaluatee's answers; the offline default draws the next type at
        # random (weights in switch_weights), a documented stand-in that needs no capable LLM.
        self.llm_writer = self.cfg["question_writer"] == "llm"
        self.llm_switch = self.cfg["switch"] == "llm"
        self.llm = llm if (self.llm_writer or self.llm_switch) else None
        self.seed = seed

    def _chat(self, batch: list[list[dict]]) -> list[str]:
        """One chat_batch call per examiner step, so a server / batched local LLM sees all conversations at once. A
        request that fails (raises, 503, times out) comes back as a FailedReply: the template / random fallback
        is used and the turn records the failure with its reason (`llm_failures`); the job goes on."""
        return safe_chat_batch(self.llm, batch)

    def _start_all(self, scenes, examiners, history_modes) -> list[Conversation]:
        # The seed ignores the history mode and the model: with the template writer, both modes and every model get
        # the same questions, so differences come from the evaluatee alone.
        # caption: one turn, asked once; POPE: every question asked alone, as POPE does (history "without")
        modes = {"caption": history_modes[:1], "pope": ["without"]}
        keys = [(s, e, m) for s in scenes for e in examiners for m in modes.get(e, history_modes)]
        rngs = [random.Random(int(stable_hash(["cedi", self.seed, s.image_id, e])[:16], 16)) for s, e, _ in keys]
        contexts: list[Context | None] = [None] * len(keys)
        failed: dict[int, str] = {}
        if self.llm_writer:  # the caption and POPE prompts are fixed: only CEDI and prompt-only read a context
            framed = [i for i, (_, e, _) in enumerate(keys) if e in ("cedi", "prompt_only")]
            replies = self._chat([context_messages(keys[i][0]) for i in framed])
            for i, reply in zip(framed, replies):
                contexts[i] = parse_context(reply, keys[i][0])
                if failure_of(reply):
                    failed[i] = f"context: {failure_of(reply)}"
        convos = []
        for i, ((s, e, m), rng, ctx) in enumerate(zip(keys, rngs, contexts)):
            ctx = ctx or template_context(s, rng)
            bank = QuestionBank(s, self.vocab)
            bank.steer(ctx)
            c = Conversation(s, e, m, rng, bank, ctx, TruthView.of(s.truth, self.vocab.synonyms))
            c.goal = coverage_goal(c.truth_view)
            if i in failed:
                c.failures.append(failed[i])
            if e == "pope":
                c.plan = bank.pope(rng, int(self.cfg["pope_objects"]))
            convos.append(c)
        return convos

    def _switch(self, items: list[tuple[Conversation, list[str]]]) -> list[tuple[str, str | None]]:
        """(next state, who chose it) per conversation: the LLM's reply when it parses, else the random draw."""
        ask = [i for i, (_, st) in enumerate(items) if len(st) > 1] if self.llm_switch else []
        replies = dict(
            zip(
                ask, self._chat([switch_messages(items[i][0].context, items[i][0].history(), items[i][1]) for i in ask])
            )
        )
        out = []
        for i, (c, st) in enumerate(items):
            if len(st) == 1:  # round 0 is regular: nobody chooses
                out.append((st[0], None))
                continue
            picked = parse_switch(replies[i], st) if i in replies else None
            if i in replies:
                c.fail("switch", replies[i])
            out.append(
                (picked, "llm") if picked else (template_switch(c.rng, st, self.cfg["switch_weights"]), "random")
            )
        return out

    def _next_questions(self, convos: Sequence[Conversation]) -> list[tuple[Conversation, Question]]:
        """The next question of every active conversation (None → the conversation is over)."""
        out: list[tuple[Conversation, Question]] = []
        to_switch: list[tuple[Conversation, list[str]]] = []
        prompt_only: list[Conversation] = []
        for c in convos:
            r = len(c.turns)
            if c.examiner == "caption":
                if r >= 1:
                    c.end("fixed")
                else:
                    out.append((c, Question("caption", CAPTION_PROMPT, None, False, [], None, None)))
            elif c.examiner == "pope":
                if r >= len(c.plan):
                    c.end("fixed")
                else:
                    out.append((c, c.plan[r]))
            elif c.examiner == "prompt_only":
                if r >= self.cfg["prompt_only_rounds"]:
                    c.end("fixed")
                else:
                    prompt_only.append(c)
            elif r >= self.cfg["max_rounds"]:
                c.end("max_rounds")  # the cap, reported (end_reason), not an END the examiner chose
            elif self.cfg["end_on_coverage"] and r > 0 and not c.uncovered() and r >= self.cfg["min_end_round"]:
                c.end("coverage")  # the scene graph's coverage goal is met: the examiner chooses END
            elif (
                self.cfg["end_on_coverage"]
                and r > 0
                and not c.uncovered()
                and not c.bank.fresh_absent()
                and not c.bank.can_false_premise()
            ):
                c.end("exhausted")  # everything covered, no absent object to probe, no false premise: nothing to ask
            else:
                regular_left = bool(c.bank.relevant) or bool(c.uncovered())
                states = allowed_states(r, c.pending, self.cfg["min_end_round"], regular_left)
                to_switch.append((c, states))
        chosen: list[tuple[Conversation, tuple[str, str | None]]] = []
        # END is confirmed in the SAME round, as in CEDI's code: the switch is asked again and must say END again
        # (end_votes times in a row); any other choice is asked instead. A conversation can so end after
        # min_end_round turns.
        pending = to_switch
        while pending:
            again = []
            for (c, states), pick in zip(pending, self._switch(pending)):
                if pick[0] == END:
                    c.end_votes += 1
                    if c.end_votes >= self.cfg["end_votes"]:
                        c.end("switch")
                    else:
                        again.append((c, states))
                else:
                    c.end_votes = 0
                    chosen.append((c, pick))
            pending = again
        # ONE chat_batch per round for all the LLM writes: the prompt-only examiner's questions, CEDI's adversarial
        # and unanswerable questions (from the scene graph) and the rewording of CEDI's other template questions. A
        # reply that does not validate leaves the template question, not reworded, which says so (question_source).
        llm = self.llm_writer
        gen = [(c, state, source) for c, (state, source) in chosen if llm and state in GENERATED_TYPES]
        templ: list[tuple[Conversation, Question]] = []
        for c, (state, source) in chosen:
            if not (llm and state in GENERATED_TYPES):
                q = self._make(c, state, c.pending)
                q.switch_source = source
                templ.append((c, q))
        asks = [prompt_only_messages(c.context, c.history()) for c in prompt_only] if llm else []
        asks += [generate_messages(state, c.context, c.bank) for c, state, _ in gen]
        asks += [rewrite_messages(c.context, q) for c, q in templ] if llm else []
        replies = self._chat(asks) if llm else [""] * len(asks)
        n_po, n_gen = len(prompt_only), len(gen)
        for c, reply in zip(prompt_only, replies[:n_po] if llm else [""] * n_po):
            c.fail("question_writer", reply)
            out.append((c, parse_prompt_only(reply) or c.bank.prompt_only(c.rng, c.context, len(c.turns))))
        for (c, state, source), reply in zip(gen, replies[n_po : n_po + n_gen]):
            c.fail("question_writer", reply)
            q = c.bank.generated(state, parse_json_reply(reply), c.truth_view)
            if q is None:
                q = self._make(c, state, c.pending)
            else:
                q.switch_choice, q.switch_honoured = state, True
            q.switch_source = source
            out.append((c, q))
        for (c, q), reply in zip(templ, replies[n_po + n_gen :] if llm else [""] * len(templ)):
            c.fail("question_writer", reply)
            text = parse_rewrite(reply, q) if llm else None
            if text:
                q.text, q.source = text, "llm"
            out.append((c, q))
        return out

    def _make(self, c: Conversation, state: str, prev: Question | None) -> Question:
        bank = c.bank
        q = None
        if state == "follow_up" and prev is not None:
            q = bank.follow_up(c.rng, prev)
        elif state == "adversarial":
            q = bank.adversarial(c.rng)
        elif state == "unanswerable":
            q = bank.unanswerable(c.rng)
        honoured = q is not None or state == "regular"
        if q is None:  # regular, or a choice that cannot be honoured (e.g. no absent object left): a regular question
            q = bank.regular(c.rng, c.context, c.uncovered())
            if len(c.turns) == 0:  # round 0 carries the context, as the paper's examiner opens with the user's goal
                q.text = f"{c.context.background} {c.context.user_goal} {q.text}"
        q.switch_choice, q.switch_honoured = state, honoured
        return q

    def run(
        self,
        scenes: Sequence[Scene],
        vlm,
        model: str,
        examiners: Sequence[str] = EXAMINERS,
        history_modes: Sequence[str] = HISTORY_MODES,
        stand_in: bool = False,
    ) -> list[dict]:
        for e in examiners:
            if e not in EXAMINERS:
                raise ConfigError(
                    f"config key 'cedi.examiners': unknown examiner {e!r} (known: {', '.join(EXAMINERS)})"
                )
        for m in history_modes:
            if m not in HISTORY_MODES:
                raise ConfigError(f"config key 'cedi.history': unknown mode {m!r} (known: with, without)")
        convos = self._start_all(scenes, examiners, history_modes)
        pope_turns = (1 + len(POPE_STRATEGIES)) * int(self.cfg["pope_objects"])
        rounds = max(self.cfg["max_rounds"], self.cfg["prompt_only_rounds"], pope_turns, 1)
        for _ in progress(range(rounds), desc=f"cedi {model}"):
            batch = [
                (
                    c,
                    q,
                    vlm_request(
                        stable_hash([c.conversation_id, len(c.turns), q.text])[:16],
                        q.text,
                        c.scene.image_path,
                        image_sha256=c.scene.image_sha256,
                        history=c.history() if c.history_mode == "with" else (),
                    ),
                )
                for c, q in self._next_questions([c for c in convos if not c.done])
            ]
            if not batch:
                break
            answers = vlm.answer([b[2] for b in batch])
            for (c, q, _), ans in zip(batch, answers):
                self._record(c, q, ans or "", model, stand_in)
        for c in convos:  # the last round's conversations: the cap (CEDI) or the baseline's fixed length
            if not c.done:
                c.end("max_rounds" if c.examiner == "cedi" else "fixed")
        return [t for c in convos for t in c.turns]

    def _record(self, c: Conversation, q: Question, answer: str, model: str, stand_in: bool) -> None:
        tc = turn_claims(answer, q.premise, q.probe, self.vocab)
        truth_label = q.truth if q.truth in {"yes", "no"} else None
        hallucinated, kind = judge_turn(tc, truth_label, q.false_premise, c.truth_view, self.vocab)
        asked = list(q.premise) + ([q.probe] if q.probe else []) + ([q.truth] if q.truth and "|" in q.truth else [])
        for el in asked + [el for el, pos in tc.claims if pos]:  # what was asked about and what the answer stated
            c.covered |= covered_by(el, c.truth_view)
        failures, c.failures = c.failures, []
        c.turns.append(
            {
                "conversation_id": c.conversation_id,
                "model": model,
                "image_id": c.scene.image_id,
                "scene_id": c.scene.scene_id,
                "distribution": c.scene.distribution,
                "pair_kind": c.scene.pair_kind,
                "examiner": c.examiner,
                "history": c.history_mode,
                "question_writer": self.cfg["question_writer"],
                "turn": len(c.turns),
                "question_type": q.type,
                "question": q.text,
                "question_source": q.source,
                "switch_source": q.switch_source,
                "switch_choice": q.switch_choice if q.switch_source else None,
                "switch_honoured": q.switch_honoured if q.switch_source else None,
                "answer": answer,
                "answer_label": tc.label,
                "truth": q.truth,
                "false_premise": q.false_premise,
                "premise": list(q.premise),
                "probe": q.probe,
                "hallucinated": hallucinated,
                "hallucination_kind": kind,
                "context_background": c.context.background,
                "context_goal": c.context.user_goal,
                "context_objects": list(c.context.relevant_objects),
                "stand_in": bool(stand_in),
                "coverage": c.coverage(),
                "llm_failures": failures,
                "end_reason": None,  # set on every turn when the conversation ends
            }
        )
        c.pending = q
