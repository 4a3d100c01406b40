"""Plain, loop-based ports of the anchors' official scorers — the references our vectorised code is checked against.

`pope_evaluate` follows RUCAIBox/POPE evaluate.py line by line (answers and labels zipped by position);
`chair_compute` follows LisaAnne/Hallucination utils/chair.py (caption_to_words + compute_chair), with our
regex tokenizer and rule singularizer standing in for nltk.word_tokenize / pattern.en.singularize (neither is
installable offline), called per token without caching as the original does. Written from the published
behaviour, not copied; used by tests/test_pope.py, tests/test_chair.py and bench/bench_scoring.py.
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
    return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1, "yes_ratio": yes_ratio,
            "tp": TP, "fp": FP, "tn": TN, "fn": FN}


def chair_compute(captions: list[dict], truth: dict, synonyms_path) -> dict:
    """chair.py: `captions` = [{"image_id", "caption"}], `truth` = {image_id: set of COCO categories}."""
    from halluflow.metrics.chair import DOUBLE_WORD_DICT, singularize, tokenize

    # CHAIR.__init__: synonyms parsed with line.strip().split(', ') (leading-space entries kept, as there)
    mscoco_objects = []
    inverse_synonym_dict = {}
    with open(synonyms_path, encoding="utf-8") as fh:
        for line in fh:
            synonyms = line.strip().split(", ")
            mscoco_objects.extend(synonyms)
            for s in synonyms:
                inverse_synonym_dict[s] = synonyms[0]

    def caption_to_words(caption):
        words = tokenize(caption.lower())
        words = [singularize(w) for w in words]
        i = 0
        double_words = []
        while i < len(words):
            double_word = " ".join(words[i:i + 2])
            if double_word in DOUBLE_WORD_DICT:
                double_words.append(DOUBLE_WORD_DICT[double_word])
                i += 2
            else:
                double_words.append(words[i])
                i += 1
        words = double_words
        if ("toilet" in words) & ("seat" in words):
            words = [word for word in words if word != "seat"]
        words = [word for word in words if word in set(mscoco_objects)]
        node_words = []
        for word in words:
            node_words.append(inverse_synonym_dict[word])
        return words, node_words

    num_caps = 0.0
    num_hallucinated_caps = 0.0
    hallucinated_word_count = 0.0
    coco_word_count = 0.0
    for cap in captions:
        gt_objects = truth[cap["image_id"]]
        words, node_words = caption_to_words(cap["caption"])
        hallucinated = False
        for word, node_word in zip(words, node_words):
            if node_word not in gt_objects:
                hallucinated_word_count += 1
                hallucinated = True
        coco_word_count += len(node_words)
        if hallucinated:
            num_hallucinated_caps += 1
        num_caps += 1
    return {"chair_s": num_hallucinated_caps / num_caps, "chair_i": hallucinated_word_count / coco_word_count,
            "n_captions": int(num_caps), "n_mentions": int(coco_word_count),
            "n_hallucinated_mentions": int(hallucinated_word_count),
            "n_hallucinated_captions": int(num_hallucinated_caps)}
