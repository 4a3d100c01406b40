"""CEDI transcript parser (CEDI paper, grader): transcript → claims → predicted scene graph, SG ΔCon, per-turn judgements.

The paper's grader is an LLM parser (`LLMParser`, strict JSON, validated). The offline default is rule-based over the
concept vocabularies (graph nodes + ODE state/action attributes + predicate synonyms): each turn yields CLAIMS, i.e.
scene-graph elements with a polarity ("object|dog" asserted / denied), from (1) the question's premise, accepted
unless the answer rejects it, (2) the yes/no probe, and (3) objects/attributes/relations mentioned in the answer, with
negation ("there is no cat") flipping the polarity within its sentence; an answer word ("No, the dog is black.")
negates nothing.

SG ΔCon (the paper names it without a formula; our definition): the number of scene-graph elements whose polarity the
evaluatee CHANGES within one conversation (asserted then denied, or denied then asserted, e.g. an attribute "revised
under follow-up pressure"). 0 = self-consistent; it is reported per conversation and averaged per examiner/mode.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..errors import InputError
from ..metrics.parsers import is_failed, parse_yes_no
from ..progress import get_logger
from .scene_graph import SceneGraph, SGObject, SGRelation, Synonyms, normalize

log = get_logger(__name__)

# ---- elements: "object|dog", "attribute|dog|brown", "relation|dog|next to|cat" (strings: they live in parquet) ----


def obj_el(name: str) -> str:
    return f"object|{name}"


def attr_el(name: str, attr: str) -> str:
    return f"attribute|{name}|{attr}"


def rel_el(subj: str, pred: str, obj: str) -> str:
    return f"relation|{subj}|{pred}|{obj}"


def split_el(el: str) -> list[str]:
    parts = el.split("|")
    if (
        parts[0] not in {"object", "attribute", "relation"}
        or len(parts) != {"object": 2, "attribute": 3, "relation": 4}[parts[0]]
    ):
        raise InputError(
            f"malformed scene-graph element {el!r} (expected object|name, attribute|name|attr or relation|s|p|o)"
        )
    return parts


def implied(el: str) -> list[str]:
    """An asserted attribute/relation also asserts its objects."""
    parts = split_el(el)
    if parts[0] == "attribute":
        return [obj_el(parts[1])]
    if parts[0] == "relation":
        return [obj_el(parts[1]), obj_el(parts[3])]
    return []


# ---- answer classification ----------------------------------------------------------------------------------------

_REJECT = re.compile(
    r"\b(there(?:'s| is| are| was| were|'re) (no|not|nothing)|there (isn't|aren't|wasn't|weren't)|(i )?(do not|don't|cannot|can't|can not|"
    r"could not|couldn't) (see|find|spot|identify)|no such|not (present|visible|shown|pictured|depicted|in (the|this) "
    r"(image|picture|photo))|(does|do)(n't| not) (appear|seem|exist|contain|show|include)|(isn't|aren't) any|"
    r"there is nothing|(i )?see nothing|nothing (like that|of the sort)|false premise|not actually)\b"
)
# A refusal asserts nothing: correct on a false premise (the paper's "premise rejection or refusal"), lost coverage
# elsewhere, and its words are not parsed for mentions ("I cannot tell what the cat is doing" does not assert a cat).
_REFUSE = re.compile(
    r"\b((i|we) (cannot|can't|can not|could not|couldn't|am unable to|'m unable to|am not able to|'m not able to) "
    r"(determine|tell|say|answer|know|be sure|verify|confirm|judge|see that|make out)|(cannot|can't|can not) be "
    r"(determined|told|known|seen)|(it is|it's) (not possible|impossible|unclear|hard|difficult) to (tell|determine|"
    r"say|know)|(i|we) (do not|don't) know|(i am|i'm) not (sure|certain)|unable to (determine|tell|answer)|not enough "
    r"(information|detail)|no way to (tell|know)|as an ai)\b"
)
# An answer with neither a vocabulary mention nor a clause a reader would take as an answer ("It is black.",
# "Because it is tired.") is unparseable: counted, never judged (a stand-in model's token noise lands here).
_CLAUSE = re.compile(
    r"\b(it|they|he|she|this|that|these|those|there|i|you|we)(?: (?:is|are|was|were|has|have|looks|seems|appears|"
    r"sits|stands|lies|can|could|would|might|may|will)|'s|'re)\b|^(because|since|so|yes|no)\b"
)
_NEGATORS = {
    "no",
    "not",
    "without",
    "never",
    "neither",
    "nor",
    "none",
    "isn't",
    "aren't",
    "don't",
    "doesn't",
    "can't",
    "cannot",
    "wasn't",
    "weren't",
}


def answer_label(text: str, yes_no: bool) -> str:
    """yes | no | reject | refuse | other | empty. Premise rejection is checked first, then refusal; then the shared
    yes/no parser: `affirm` for yes/no questions (opening word, a negation in the first sentence, an affirmation),
    `opener` (opening word only) for open ones. `turn_claims` further turns an `other` answer that says nothing
    parseable into `unparseable`."""
    if is_failed(text):  # the shared failed-answer rule (blank: whitespace, control or format characters only)
        return "empty"
    t = text.strip().lower().replace("\u2019", "'")
    if _REJECT.search(t):
        return "reject"
    if _REFUSE.search(t):
        return "refuse"
    return parse_yes_no(t, "affirm" if yes_no else "opener") or "other"


# ---- vocabulary ---------------------------------------------------------------------------------------------------


def _inflections(word: str) -> set[str]:
    """run → runs, running; ride → riding; sit → sitting: ODE action words are base forms, answers are not."""
    forms = {word, word + "s", word + "ing", word + "ed"}
    if word.endswith("e") and len(word) > 2:
        forms |= {word[:-1] + "ing", word + "d"}
    if re.search(r"[^aeiou][aeiou][bdgmnprt]$", word):
        forms.add(word + word[-1] + "ing")
    return forms


@dataclass
class Vocabulary:
    objects: set[str] = field(default_factory=set)
    attributes: dict[str, set[str]] = field(default_factory=dict)  # object → its known attribute words
    synonyms: Synonyms = field(default_factory=Synonyms.builtin)
    kinds: dict[str, str] = field(default_factory=dict)  # attribute word → state | action (ODE's two kinds)

    @classmethod
    def from_nodes(cls, rows: Iterable[Mapping[str, Any]], synonyms: Synonyms | None = None) -> "Vocabulary":
        """Rows of graph/nodes.parquet (node, states, actions)."""
        voc = cls(synonyms=synonyms or Synonyms.builtin())
        for i, row in enumerate(rows):
            if not row.get("node"):
                raise InputError(f"graph nodes row {i}: column 'node' missing or empty")
            voc.add(row["node"], row.get("states") or [], kind="state")
            voc.add(row["node"], row.get("actions") or [], kind="action")
        return voc

    def add(self, name: str, attrs: Iterable[str] = (), kind: str | None = None) -> str:
        canon = self.synonyms.object_name(name)
        self.objects.add(canon)
        words = [normalize(a) for a in attrs if normalize(a)]
        self.attributes.setdefault(canon, set()).update(words)
        if kind:
            for w in words:
                self.kinds.setdefault(w, kind)
        return canon

    def kind(self, attr: str) -> str:
        return self.kinds.get(normalize(attr), "state")

    def phrase(self, attr: str) -> str:
        """How a question says an attribute: actions as -ing forms ("the dog is running"), states as they are."""
        a = normalize(attr)
        if self.kind(a) != "action" or a.endswith("ing") or " " in a:
            return a
        if a.endswith("e") and not a.endswith("ee"):
            return a[:-1] + "ing"
        if re.search(r"[^aeiou][aeiou][bdgmnprt]$", a):
            return a + a[-1] + "ing"
        return a + "ing"

    def add_graph(self, graph: SceneGraph) -> None:
        for o in graph.objects:
            self.add(o.name, o.attributes)

    # compiled lazily: the vocabulary grows while a run adds truth graphs
    def _object_forms(self) -> dict[tuple[str, ...], str]:
        forms: dict[tuple[str, ...], str] = {}
        for surface, canon in list(self.synonyms.objects.items()):
            if canon in self.objects:
                forms[tuple(surface.split())] = canon
        for name in self.objects:
            for f in {name, name + "s", name + "es", name[:-1] + "ies" if name.endswith("y") else name}:
                forms[tuple(f.split())] = name
        return forms

    def _attr_forms(self) -> dict[str, str]:
        forms: dict[str, str] = {}
        for attrs in self.attributes.values():
            for a in attrs:
                if " " in a:
                    continue
                for f in _inflections(a):
                    forms.setdefault(f, a)
        for attrs in self.attributes.values():
            for a in attrs:
                forms[a] = a  # an exact attribute beats an inflection of another one
        return forms


@dataclass
class Mention:
    start: int
    end: int
    name: str
    negated: bool


# Concept names that are also function words ("I can see", "it is hot"): a mention counts only after a determiner.
_AMBIGUOUS_NAMES = {"can", "hot", "light", "watch", "fly", "top", "back", "side", "set"}
_DETERMINERS = {
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "one",
    "two",
    "three",
    "some",
    "any",
    "no",
    "of",
    "his",
    "her",
    "their",
    "its",
    "my",
    "your",
    "another",
    "each",
    "every",
}


# Negation scope. A negator negates what follows in its own SENTENCE (split at . ; : ! ? dashes), across commas
# ("there is no cat, dog or frisbee"), but a negator that stands alone in its comma-separated segment is the
# answer word, not a negation: "No, the dog is black." answers the question and then ASSERTS a black dog.
_WORD_OR_BREAK = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[,.;:!?()\u2013\u2014]|(?<!\S)-+(?!\S)")


def _scoped_tokens(text: str) -> tuple[list[str], list[bool], list[int]]:
    """Word tokens; for each, whether it is a negator with scope over later words; and its sentence index."""
    toks: list[str] = []
    sentence: list[int] = []
    segment: list[int] = []
    sent = seg = 0
    for m in _WORD_OR_BREAK.finditer((text or "").lower().replace("\u2019", "'")):
        w = m.group(0)
        if w[0].isalnum():
            toks.append(w)
            sentence.append(sent)
            segment.append(seg)
        else:
            seg += 1
            sent += w != ","
    alone = {g for g in set(segment) if all(t in _NEGATORS for t, s in zip(toks, segment) if s == g)}
    scoping = [t in _NEGATORS and segment[i] not in alone for i, t in enumerate(toks)]
    return toks, scoping, sentence


def extract(text: str, vocab: Vocabulary) -> list[tuple[str, bool]]:
    """Scene-graph elements mentioned in a free-text answer, each with polarity (False when negated; scope: see
    `_scoped_tokens`)."""
    toks, scoping, sentence = _scoped_tokens(text)

    def negated_before(i: int, width: int = 3) -> bool:
        return any(scoping[j] and sentence[j] == sentence[i] for j in range(max(0, i - width), i))

    forms = vocab._object_forms()
    maxlen = max((len(f) for f in forms), default=1)
    mentions: list[Mention] = []
    i = 0
    while i < len(toks):
        for n in range(min(maxlen, len(toks) - i), 0, -1):
            name = forms.get(tuple(toks[i : i + n]))
            if name and n == 1 and name in _AMBIGUOUS_NAMES and (i == 0 or toks[i - 1] not in _DETERMINERS):
                name = None
            if name:
                negated = negated_before(i)
                mentions.append(Mention(i, i + n, name, negated))
                i += n
                break
        else:
            i += 1
    attr_forms = vocab._attr_forms()
    out: list[tuple[str, bool]] = []
    for m in mentions:
        out.append((obj_el(m.name), not m.negated))
        known = vocab.attributes.get(m.name, set())
        before = toks[max(0, m.start - 2) : m.start]
        after = toks[m.end : m.end + 3]
        cands = [(w, m.negated) for w in before]
        if after and after[0] in {"is", "are", "was", "looks", "appears", "seems", "being"}:
            rest = after[1:]
            neg = bool(rest) and rest[0] in {"not", "never"}
            cands += [(w, m.negated or neg) for w in rest if w not in {"not", "very", "quite", "never"}][:1]
        for w, neg in cands:
            a = attr_forms.get(w)
            if a and a in known:
                out.append((attr_el(m.name, a), not neg))
    preds = sorted(vocab.synonyms.predicates.items(), key=lambda kv: -len(kv[0].split()))
    for m1, m2 in zip(mentions, mentions[1:]):
        gap = toks[m1.end : m2.start]
        if len(gap) > 6 or m1.name == m2.name:
            continue
        gap_text = " " + " ".join(gap) + " "
        # a negator in the gap negates the relation only within the second mention's sentence
        gap_neg = any(scoping[j] and sentence[j] == sentence[m2.start] for j in range(m1.end, m2.start))
        for surface, canon in preds:
            if f" {surface} " in gap_text:
                out.append((rel_el(m1.name, canon, m2.name), not (m1.negated or m2.negated or gap_neg)))
                break
    return out


# ---- per-turn claims and judgements ----------------------------------------------------------------------------------


# An answer that justifies ("because it is tired", "it is likely ..."): with an accepted false premise that it never
# restates, the hallucination is the reasoning itself - the paper's error type "other" (e.g. hallucinated reasoning).
_REASONING = re.compile(
    r"\b(because|since|due to|so that|in order to|(this|that) is why|the reason|likely|probably|must be)\b"
)


@dataclass
class TurnClaims:
    label: str
    claims: list[tuple[str, bool]]  # (element, polarity), premise/probe first, then mentions
    restates_premise: bool = False  # the answer itself asserts an element of the question's premise
    reasons: bool = False  # the answer gives a justification (_REASONING)


def turn_claims(answer: str, premise: Sequence[str], probe: str | None, vocab: Vocabulary) -> TurnClaims:
    yes_no = probe is not None
    label = answer_label(answer, yes_no)
    claims: list[tuple[str, bool]] = []
    if label in {"empty", "refuse"}:
        return TurnClaims(label, claims)
    mentions = extract(answer, vocab)
    if label == "other" and not mentions and not _CLAUSE.search((answer or "").strip().lower().replace("\u2019", "'")):
        return TurnClaims("unparseable", claims)
    if premise:
        if label in {"reject"} or (label == "no" and not yes_no):
            claims.append((premise[0], False))  # the first premise element is the one the question hinges on
        else:
            claims += [(el, True) for el in premise]
    if probe is not None:
        if label == "yes":
            claims.append((probe, True))
        elif label in {"no", "reject"}:
            claims.append((probe, False))
    claims += mentions
    # implied objects: asserting "the dog is brown" asserts the dog
    claims += [(o, True) for el, pos in list(claims) if pos for o in implied(el)]
    restates = bool({el for el, pos in mentions if pos} & set(premise))
    reasons = bool(_REASONING.search((answer or "").lower()))
    return TurnClaims(label, claims, restates, reasons)


@dataclass
class TruthView:
    """Canonical truth lookups for judging claims."""

    names: set[str]
    attrs: dict[str, set[str]]
    relations: dict[tuple[str, str], set[str]]
    synonyms: Synonyms | None = None  # names sharing a WordNet synset with a truth name are that object (as in GED)

    def resolve(self, name: str) -> str | None:
        """The truth name a claimed name refers to: itself, or a truth name it is a synonym of; None if absent."""
        if name in self.names:
            return name
        if self.synonyms is None:
            return None
        return next((n for n in sorted(self.names) if self.synonyms.names_match(n, name)), None)

    @classmethod
    def of(cls, graph: SceneGraph, synonyms: Synonyms) -> "TruthView":
        g = graph.to_networkx(synonyms)
        names = {d["name"] for _, d in g.nodes(data=True)}
        attrs: dict[str, set[str]] = {}
        for _, d in g.nodes(data=True):
            attrs.setdefault(d["name"], set()).update(d["attributes"])
        rels: dict[tuple[str, str], set[str]] = {}
        for u, v, d in g.edges(data=True):
            rels.setdefault((g.nodes[u]["name"], g.nodes[v]["name"]), set()).update(d["predicates"])
        return cls(names, attrs, rels, synonyms)

    def contradiction(self, el: str, vocab: Vocabulary) -> str | None:
        """Kind of hallucination an ASSERTED element is (object / attribute / relation), or None if consistent."""
        parts = split_el(el)
        if parts[0] == "object":
            return None if self.resolve(parts[1]) else "object"
        if parts[0] == "attribute":
            claimed, a = parts[1], parts[2]
            name = self.resolve(claimed)
            if name is None:
                return "object"
            # only attributes of that object's own vocabulary (ODE state/action alternatives) can contradict
            known = vocab.attributes.get(claimed, set()) | vocab.attributes.get(name, set())
            return "attribute" if a not in self.attrs.get(name, set()) and a in known else None
        s, p, o = parts[1], parts[2], parts[3]
        s, o = self.resolve(s), self.resolve(o)
        if s is None or o is None:
            return "object"
        truth = self.relations.get((s, o))
        if truth is None:
            truth = self.relations.get((o, s)) if p == "next to" else None  # "next to" is symmetric
        return None if truth is None or p in truth else "relation"

    def definitely_false(self, el: str) -> bool:
        """Whether a PRESUPPOSED element is false of the image, not merely unannotated: an absent object; an attribute
        of an absent object, or of an object whose truth attributes do not include it (only for objects the truth
        describes); a relation with an absent end, or whose pair the truth relates by other predicates."""
        parts = split_el(el)
        if parts[0] == "object":
            return self.resolve(parts[1]) is None
        if parts[0] == "attribute":
            name = self.resolve(parts[1])
            return name is None or (bool(self.attrs.get(name)) and parts[2] not in self.attrs[name])
        s, o = self.resolve(parts[1]), self.resolve(parts[3])
        if s is None or o is None:
            return True
        preds = self.relations.get((s, o), set()) | (
            self.relations.get((o, s), set()) if parts[2] == "next to" else set()
        )
        return bool(preds) and parts[2] not in preds


def judge_turn(
    tc: TurnClaims, truth_label: str | None, false_premise: bool, truth: TruthView, vocab: Vocabulary
) -> tuple[bool | None, str | None]:
    """Rule-based per-turn hallucination: (hallucinated, kind). None when the answer cannot be judged (empty or
    unparseable: counted beside every rate, excluded from it)."""
    if tc.label in {"empty", "unparseable"}:
        return None, None
    if tc.label == "refuse":
        return False, None  # asserts nothing: correct on a false premise, lost coverage (not hallucination) elsewhere
    if false_premise:
        # correct behaviour = reject the premise (or refuse); answering as if it held is the hallucination: of the
        # premise's kind when the answer restates it ("the cat on the desk is black"), "other" when it only reasons
        # about it ("Because it is tired." to "Why is the dog sitting?": hallucinated reasoning)
        if tc.label in {"reject", "no"}:
            return False, None
        if tc.reasons and not tc.restates_premise or not tc.claims:
            return True, "other"
        return True, split_el(tc.claims[0][0])[0]
    for el, pos in tc.claims:
        if pos:
            kind = truth.contradiction(el, vocab)
            if kind:
                return True, kind
    if truth_label in {"yes", "no"} and tc.label == "other":
        return None, None  # a yes/no probe answered with neither, and nothing false asserted: cannot judge
    if truth_label == "no" and tc.label == "yes":
        return True, split_el(tc.claims[0][0])[0] if tc.claims else "object"
    return False, None


# ---- conversation → predicted scene graph, ΔCon ----------------------------------------------------------------------


def predicted_graph(turns: Sequence[Sequence[tuple[str, bool]]], policy: str = "any") -> SceneGraph:
    """`any`: an element asserted in ANY turn is in the prediction (a retracted hallucination still counts);
    `last`: the last polarity per element wins."""
    if policy not in {"any", "last"}:
        raise InputError(f"cedi.grader.claim_policy: {policy!r} is not one of any, last")
    state: dict[str, bool] = {}
    for claims in turns:
        for el, pos in claims:
            state[el] = (state.get(el, False) or pos) if policy == "any" else pos
    positive = sorted(el for el, pos in state.items() if pos)
    names: dict[str, set[str]] = {}
    relations: set[tuple[str, str, str]] = set()
    for el in positive:
        parts = split_el(el)
        if parts[0] == "object":
            names.setdefault(parts[1], set())
        elif parts[0] == "attribute":
            names.setdefault(parts[1], set()).add(parts[2])
        else:
            names.setdefault(parts[1], set())
            names.setdefault(parts[3], set())
            relations.add((parts[1], parts[2], parts[3]))
    ids = {n: f"p{i}" for i, n in enumerate(sorted(names))}
    objects = [SGObject(ids[n], n, tuple(sorted(names[n]))) for n in sorted(names)]
    rels = [SGRelation(ids[s], p, ids[o]) for s, p, o in sorted(relations)]
    return SceneGraph(objects, rels)


def delta_con(turns: Sequence[Sequence[tuple[str, bool]]]) -> int:
    """SG ΔCon: elements whose polarity changes between turns (a turn asserting both ways is ambiguous: skipped)."""
    history: dict[str, list[bool]] = {}
    for claims in turns:
        per_turn: dict[str, set[bool]] = {}
        for el, pos in claims:
            per_turn.setdefault(el, set()).add(pos)
        for el, pols in per_turn.items():
            if len(pols) == 1:
                history.setdefault(el, []).append(next(iter(pols)))
    return sum(1 for pols in history.values() if len(set(pols)) > 1)


# ---- LLM parser (the paper's grader) ------------------------------------------------------------------------------

LLM_PARSER_SYSTEM = (
    "You read a conversation between a user and an assistant about one image. Extract ONLY what the assistant "
    "states or accepts as being in the image, as a scene graph. Reply with JSON only: "
    '{"objects":[{"id":"o1","name":"dog","attributes":["brown"]}],'
    '"relations":[{"subject":"o1","predicate":"next to","object":"o2"}]}'
)


class FailedReply(str):
    """An LLM request that failed (a raised exception: a 503, a timeout, a crashed server; or the backend's recorded
    error): empty text, so every parser treats it as no reply and the caller's rule/template fallback is used, with
    `reason` saying why (recorded on the turn and counted)."""

    reason: str = ""


def failed_reply(reason: str) -> FailedReply:
    out = FailedReply("")
    out.reason = reason
    return out


def _reason(exc: BaseException) -> str:
    from ..secrets import redact

    return redact(f"{type(exc).__name__}: {exc}")[:300]


def safe_chat_batch(llm, batch: Sequence[Sequence[Mapping]]) -> list[str]:
    """One reply per message list; a request that failed gives a `FailedReply` instead of failing the job. Through
    the model layer (`Model.generate`) each request fails alone; a backend's chat_batch that raises fails every
    request of that call. Configuration errors still stop the job."""
    from ..backends.base import EMPTY_ANSWER
    from ..errors import ConfigError

    if not batch:
        return []
    try:
        if hasattr(llm, "generate") and hasattr(llm, "failures"):  # the model layer: per-request errors
            out: list[str] = []
            for r in llm.generate(batch):
                err = getattr(r, "error", None)
                if err is not None and err != EMPTY_ANSWER:
                    out.append(failed_reply(str(err)[:300]))
                else:
                    out.append(r.text if r.text is not None else "")
        else:
            out = list(llm.chat_batch(batch))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the LLM is a recorded failed request, never a failed job
        reason = _reason(exc)
        log.warning("cedi: %d llm request(s) failed: %s", len(batch), reason)
        return [failed_reply(reason) for _ in batch]
    return out + [""] * (len(batch) - len(out))


def failure_of(reply: Any) -> str | None:
    return reply.reason if isinstance(reply, FailedReply) else None


def _parser_messages(transcript: Sequence[tuple[str, str]]) -> list[dict]:
    convo = "\n".join(f"User: {q}\nAssistant: {a}" for q, a in transcript)
    return [{"role": "system", "content": LLM_PARSER_SYSTEM}, {"role": "user", "content": convo}]


def _parsed_graph(reply: str) -> SceneGraph | None:
    data = parse_json_reply(reply)
    if data is None:
        return None
    try:
        return SceneGraph.from_dict(data, source="llm parser reply")
    except InputError:
        return None


def llm_parse(llm, transcript: Sequence[tuple[str, str]]) -> SceneGraph | None:
    """Ask the `llm` backend for the scene graph; None when its reply is not a valid scene graph (caller falls back)."""
    return _parsed_graph(llm.chat(_parser_messages(transcript)))


def llm_parse_batch(
    llm, transcripts: Sequence[Sequence[tuple[str, str]]], failures: list[str | None] | None = None
) -> list[SceneGraph | None]:
    """`llm_parse` for many conversations in one chat_batch (a batched local model or a server sees them at once).
    A failed request gives None (the caller's rule parser stands in) and its reason in `failures` (one per
    transcript, None where the request did not fail)."""
    if not transcripts:
        return []
    replies = safe_chat_batch(llm, [_parser_messages(t) for t in transcripts])
    if failures is not None:
        failures.extend(failure_of(r) for r in replies)
    return [_parsed_graph(r) for r in replies]


LLM_JUDGE_SYSTEM = (
    "You grade one turn of a conversation between a user and an assistant about one image. You get the image's true "
    "scene graph, what the correct answer is when known, the user's question and the assistant's answer. The answer "
    "hallucinates when it states or accepts (also a false premise of the question) an object, attribute or relation "
    "the scene graph does not support, or reasons about something the image cannot show. Reply with JSON only: "
    '{"hallucinated": true, "type": "object", "claims": [{"object": "cat", "present": true}, '
    '{"object": "dog", "attribute": "brown", "present": true}, '
    '{"subject": "dog", "predicate": "on", "object": "sofa", "present": false}]} '
    "with hallucinated true or false (null only when the answer says nothing that can be judged), type one of "
    "object, attribute, relation, other (e.g. hallucinated reasoning) when hallucinated and null otherwise, and "
    "claims = every scene-graph element the answer asserts (present true) or denies (present false)."
)


def graph_text(graph: SceneGraph) -> str:
    """A scene graph as the judge reads it: `dog (brown); park; dog in park`."""
    by_id = {o.id: o.name for o in graph.objects}
    parts = [f"{o.name} ({', '.join(o.attributes)})" if o.attributes else o.name for o in graph.objects]
    parts += [f"{by_id[r.subject]} {r.predicate} {by_id[r.object]}" for r in graph.relations]
    return "; ".join(parts) or "(nothing)"


def judge_messages(truth: SceneGraph, question: str, answer: str, expected: str | None) -> list[dict]:
    user = f"Scene graph: {graph_text(truth)}\n"
    if expected:
        user += f"Correct answer: {expected}\n"
    return [
        {"role": "system", "content": LLM_JUDGE_SYSTEM},
        {"role": "user", "content": f"{user}Question: {question}\nAnswer: {answer}"},
    ]


def expected_answer(truth: str | None, false_premise: bool) -> str | None:
    """What the examiner knows the correct answer is (CEDI's examiner keeps a ground-truth answer per question)."""
    if false_premise:
        return "the question's premise is false; a correct answer rejects it or declines to answer"
    return truth if truth in {"yes", "no"} else None


def claim_element(item: Mapping[str, Any], synonyms: Synonyms) -> str | None:
    """The scene-graph element an LLM reply names as {"object"}, {"object", "attribute"} or {"subject", "predicate",
    "object"} (other keys ignored), with canonical names; None when it is none of these."""
    words = {k: item.get(k) for k in ("subject", "predicate", "object", "attribute")}
    given = {k: v for k, v in words.items() if v is not None}
    if not all(isinstance(v, str) and normalize(v) for v in given.values()):
        return None
    if set(given) == {"subject", "predicate", "object"}:
        s_, p_, o_ = synonyms.object_name(given["subject"]), synonyms.predicate(given["predicate"]), given["object"]
        return rel_el(s_, p_, synonyms.object_name(o_))
    if set(given) == {"object", "attribute"}:
        return attr_el(synonyms.object_name(given["object"]), normalize(given["attribute"]))
    if set(given) == {"object"}:
        return obj_el(synonyms.object_name(given["object"]))
    return None


def parse_judgement(
    reply: str, synonyms: Synonyms, kinds: Sequence[str]
) -> tuple[bool | None, str | None, list[tuple[str, bool]]] | None:
    """(hallucinated, kind, claims) from an LLM judge reply; None when it does not follow the format (the caller
    falls back to the rule judgement and counts it)."""
    data = parse_json_reply(reply)
    if not isinstance(data, dict) or "hallucinated" not in data:
        return None
    hal, kind, raw = data["hallucinated"], data.get("type"), data.get("claims", [])
    if hal is not None and not isinstance(hal, bool):
        return None
    if hal:
        if kind not in kinds:
            return None
    elif kind not in (None, "", "none"):
        return None
    if not isinstance(raw, list):
        return None
    claims: list[tuple[str, bool]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("present"), bool):
            return None
        el = claim_element(item, synonyms)
        if el is None:
            return None
        claims.append((el, item["present"]))
    claims += [(o, True) for el, pos in list(claims) if pos for o in implied(el)]
    return hal, (kind if hal else None), claims


def parse_json_reply(reply: str) -> Any:
    """First JSON object in an LLM reply (models wrap JSON in prose or ``` fences); None if there is none."""
    if not isinstance(reply, str):
        return None
    start = reply.find("{")
    while start != -1:
        try:
            obj, _ = json.JSONDecoder().raw_decode(reply[start:])
            return obj
        except json.JSONDecodeError:
            start = reply.find("{", start + 1)
    return None


__all__ = [
    "Vocabulary",
    "TurnClaims",
    "TruthView",
    "answer_label",
    "extract",
    "turn_claims",
    "judge_turn",
    "predicted_graph",
    "delta_con",
    "llm_parse",
    "llm_parse_batch",
    "judge_messages",
    "expected_answer",
    "parse_judgement",
    "parse_json_reply",
    "obj_el",
    "attr_el",
    "rel_el",
]
