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


def amber_evaluate(inference_data: list[dict], ground_truth: list[dict], association: dict, global_safe_words: list,
                   extract_nouns, start: float = 0.001) -> dict:
    """AMBER inference.py main(): counters from metrics.txt (all *_num = `start`), the generative list logic
    (safe_list / ha_list index bookkeeping) and the printed, rounded numbers. `extract_nouns(text)` stands in for
    nltk POS + WordNet; the spaCy similarity loops are left out (our default 'exact' matcher)."""
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
    prefix = {"discriminative-attribute-state": "as", "discriminative-attribute-number": "an",
              "discriminative-attribute-action": "aa", "discriminative-hallucination": "ha"}

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
    out = {"generative": {
        "chair": round(m["chair_score"] / m["chair_num"] * 100, 1),
        "cover": round(m["safe_cover_score"] / m["safe_cover_num"] * 100, 1),
        "hal": round(100 - m["non_hallu_score"] / m["non_hallu_num"] * 100, 1),
        "cog": round(m["hallu_cover_score"] / m["hallu_cover_num"] * 100, 1)}}

    def prf(correct, correct_num, ans_no, ans_no_num, no, no_num, eps=0.0001):
        acc = round(correct / correct_num * 100, 1)
        precision = round(ans_no / ans_no_num * 100, 1)
        recall = round(no / no_num * 100, 1)
        f1 = round(2 * (precision / 100) * (recall / 100) / ((precision / 100) + (recall / 100) + eps) * 100, 1)
        return {"accuracy": acc, "precision": precision, "recall": recall, "f1": f1}

    def one(p, eps=0.0001):
        return prf(m[f"{p}_qa_correct_score"], m[f"{p}_qa_correct_num"], m[f"{p}_qa_ans_no_score"],
                   m[f"{p}_qa_ans_no_num"], m[f"{p}_qa_no_score"], m[f"{p}_qa_no_num"], eps)

    out["overall"] = prf(m["qa_correct_score"], m["qa_correct_num"], m["qa_ans_no_score"], m["qa_ans_no_num"],
                         m["qa_no_score"], m["qa_no_num"])
    out["existence"] = one("ha", 0.001)
    attr = ("as", "an", "aa")
    out["attribute"] = prf(*(sum(m[f"{p}_qa_{k}"] for p in attr) for k in (
        "correct_score", "correct_num", "ans_no_score", "ans_no_num", "no_score", "no_num")))
    out["state"], out["number"], out["action"], out["relation"] = one("as"), one("an"), one("aa"), one("asso")
    return out
