#!/usr/bin/env python3
"""Offline study: would sentence-level vectors of people's turns help hybrid search?

LongMemEval hides its evidence in asides inside long user turns ("... By the way, I come
from a family with 3 sisters"); a turn's one vector is about its main topic. This script
scores a question against every sentence of every turn a person spoke, keeps each turn's
best sentence, and adds that list to the rankings `mnemo eval --dump` wrote, to see what
such a list would change on LongMemEval_S dev (session level) and LoCoMo dev (turn level).
It is a simulation: the list is added to the final scores, after neighbour spread and the
session lift, not fused with the other lists.

    python3 devtools/analysis/sentence_keys.py prepare DIR
    cargo run --release -p mnemo-embedding --example embed_jsonl -- 1 \
        < DIR/sentences.jsonl > DIR/sentences.vec.jsonl
    cargo run --release -p mnemo-embedding --example embed_jsonl -- 8 \
        < DIR/turns.jsonl > DIR/turns.vec.jsonl
    mnemo eval --data ../shared/eval/longmemeval_s.dev.jsonl.gz --k 1,5,10 --json --dump LME.dump
    mnemo eval --data ../shared/eval/locomo.dev.jsonl --k 1,5,10 --json --dump LOCOMO.dump
    python3 devtools/analysis/sentence_keys.py score DIR LME.dump LOCOMO.dump [FIRST.dump]

`prepare` also writes DIR/locomo.first-person.jsonl: the LoCoMo questions about the first
speaker alone, asked by that speaker ("What did Caroline research?" becomes "What did I
research?"). With FIRST.dump (`mnemo eval --data DIR/locomo.first-person.jsonl ... --dump
FIRST.dump`), `score` also shows the list there, made of the asker's own turns only, as an
agent would keep the user's turns apart from others'.
"""

import collections
import gzip
import json
import re
import sys
from pathlib import Path

EVAL = Path(__file__).resolve().parents[2].parent / "shared" / "eval"
LME = EVAL / "longmemeval_s.dev.jsonl.gz"
LOCOMO = EVAL / "locomo.dev.jsonl"

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
FIRST_PERSON = re.compile(r"\b(i|my|me|mine|myself|i'm|i've|i'd)\b", re.I)


def cases(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as lines:
        for line in lines:
            yield json.loads(line)


def spoken_turns(case):
    """Turns a person spoke: LongMemEval's user turns, every LoCoMo turn."""
    for session in case["sessions"]:
        for turn in session["turns"]:
            if turn["role"] != "assistant":
                yield session["session_id"], turn


def sentences(text):
    """A turn's sentences of 12 characters or more, each cut at 1,000 characters (the model reads
    256 tokens); a turn of one sentence is itself."""
    parts = [part.strip()[:1000] for part in SENTENCE_END.split(text) if len(part.strip()) >= 12]
    return parts if len(parts) >= 2 else [text]


PRONOUNS = (("she", "I"), ("her", "my"), ("herself", "myself"), ("he", "I"), ("his", "my"),
            ("him", "me"), ("himself", "myself"))
OBJECT_AFTER = "to|for|with|about|by|from|of|at|on|give|gave|tell|told|help|helped|make|made|inspire|inspired|motivate|motivated"
FIRST_PERSON_VERB = {"is": "am", "does": "do", "has": "have"}


def asked_by(name, question):
    """`question` about `name` as `name` would ask it (rough, for a study: "Caroline's" → "my",
    "did Caroline" → "did I", "to Caroline" → "to me", "she" → "I", "her" → "my")."""
    text = re.sub(rf"\b{name}'s\b", "my", question)
    text = re.sub(rf"\b({OBJECT_AFTER}) {name}\b", r"\1 me", text)
    verbs = "is|was|does|did|has|had|would|will|can|could"
    text = re.sub(rf"\b({verbs}) {name}\b", lambda m: FIRST_PERSON_VERB.get(m.group(1), m.group(1)) + " I", text)
    text = re.sub(rf"\b{name} is\b", "I am", text)
    text = re.sub(rf"\b{name} has\b", "I have", text)
    text = re.sub(rf"\b{name}\b", "I", text)
    for word, replacement in PRONOUNS:
        text = re.sub(rf"\b{word}\b", replacement, text)
        text = re.sub(rf"\b{word.capitalize()}\b", replacement, text)
    return text


def first_person_locomo(path):
    """The LoCoMo cases in `path`, keeping the questions about the first speaker alone, asked by
    them."""
    for case in cases(path):
        first, second = case["meta"]["speakers"]
        asked = []
        for question in case["questions"]:
            text = question["question"]
            if re.search(rf"\b{first}\b", text) and not re.search(rf"\b{second}\b", text):
                asked.append(dict(question, question=asked_by(first, text)))
        yield dict(case, questions=asked)


def prepare(out_dir):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "sentences.jsonl", "w") as sent, open(out_dir / "turns.jsonl", "w") as turns:
        for path in (LME, LOCOMO):
            for case in cases(path):
                for question in case["questions"]:
                    sent.write(json.dumps({"key": "q|" + question["qid"], "text": question["question"]}) + "\n")
                for _, turn in spoken_turns(case):
                    key = f"{case['id']}|{turn['turn_id']}"
                    turns.write(json.dumps({"key": "t|" + key, "text": turn["text"]}) + "\n")
                    for index, text in enumerate(sentences(turn["text"])):
                        sent.write(json.dumps({"key": f"s|{key}|{index}", "text": text}) + "\n")
        with open(out_dir / "locomo.first-person.jsonl", "w") as first:
            for case in first_person_locomo(LOCOMO):
                first.write(json.dumps(case) + "\n")
                for question in case["questions"]:
                    sent.write(json.dumps({"key": "p|" + question["qid"], "text": question["question"]}) + "\n")


def load_vectors(out_dir, first_person=False):
    """Question vectors (the first-person ones with `first_person`), sentence vectors by case,
    and turn vectors."""
    questions, by_case, turn_vectors = {}, collections.defaultdict(list), {}
    for name in ("sentences.vec.jsonl", "turns.vec.jsonl"):
        for line in open(Path(out_dir) / name):
            record = json.loads(line)
            kind, rest = record["key"].split("|", 1)
            if kind == ("p" if first_person else "q"):
                questions[rest] = record["v"]
            elif kind in ("p", "q"):
                continue
            elif kind == "s":
                case, turn, _ = rest.split("|")
                by_case[case].append((turn, record["v"]))
            else:
                case, turn = rest.split("|")
                turn_vectors[(case, turn)] = record["v"]
    return questions, by_case, turn_vectors


def dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def study(dump, data, vectors, asker_only=False):
    """Each dumped question with, per spoken turn, its best sentence's and its own cosine; with
    `asker_only`, only the turns of the case's first speaker."""
    questions, by_case, turn_vectors = vectors
    session_of, spoken_by_asker = {}, set()
    for case in cases(data):
        first = case.get("meta", {}).get("speakers", [None])[0]
        for session in case["sessions"]:
            for turn in session["turns"]:
                session_of[(case["id"], turn["turn_id"])] = session["session_id"]
                if turn.get("speaker") == first:
                    spoken_by_asker.add((case["id"], turn["turn_id"]))
    rows = []
    for line in open(dump):
        row = json.loads(line)
        query = questions[row["qid"]]
        best = {}
        for turn, vector in by_case[row["case"]]:
            if asker_only and (row["case"], turn) not in spoken_by_asker:
                continue
            best[turn] = max(best.get(turn, -1.0), dot(query, vector))
        row["turns"] = [(turn, score, dot(query, turn_vectors[(row["case"], turn)])) for turn, score in best.items()]
        rows.append(row)
    return rows, session_of


def sentence_list(row, margin, gate):
    """The turns whose best sentence beats the turn's own cosine by more than `margin`, by that
    sentence's cosine, best 50; empty for a question not in the first person when `gate`."""
    if gate and not FIRST_PERSON.search(row["question"]):
        return []
    hits = [(turn, best) for turn, best, whole in row["turns"] if best - whole > margin]
    return sorted(hits, key=lambda hit: -hit[1])[:50]


def score(rows, session_of, weight, floor, margin, gate, by_session):
    """recall@10, recall_all@5, recall_all@10 and MRR with the list added at `weight`, its
    scores as shares of the best one's margin over `floor` (as the vector list is fused)."""
    totals = collections.Counter()
    per_category = collections.defaultdict(collections.Counter)
    for row in rows:
        scores = {turn: value for turn, value in row["hybrid"]}
        hits = sentence_list(row, margin, gate) if weight > 0 else []
        if hits:
            top = hits[0][1]
            for turn, value in hits:
                share = (value - floor) / (top - floor) if top > floor else 1.0
                if share > 0:
                    scores[turn] = scores.get(turn, 0.0) + weight * share
        ranked = [turn for turn, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]
        if by_session:
            sessions = []
            for turn in ranked:
                session = session_of[(row["case"], turn)]
                if session not in sessions:
                    sessions.append(session)
            ranked = sessions
        evidence = row["evidence"]
        found = {k: sum(1 for item in evidence if item in ranked[:k]) for k in (5, 10)}
        first = next((index for index, item in enumerate(ranked) if item in evidence), None)
        figures = {
            "recall@10": found[10] / len(evidence),
            "recall_all@5": float(found[5] == len(evidence)),
            "recall_all@10": float(found[10] == len(evidence)),
            "mrr": 1.0 / (first + 1) if first is not None else 0.0,
            "n": 1,
        }
        totals.update(figures)
        per_category[row["category"]].update(figures)
    mean = lambda counter: {key: round(value / counter["n"], 4) for key, value in counter.items() if key != "n"}
    return mean(totals), {category: mean(counter) for category, counter in per_category.items()}


SETTINGS = [
    # (label, weight, floor, margin, first-person gate)
    ("without the list", 0.0, 0.2, -9.0, False),
    ("best sentence, weight 0.5", 0.5, 0.2, -9.0, False),
    ("best sentence, weight 1.0", 1.0, 0.2, -9.0, False),
    ("best sentence, weight 1.5", 1.5, 0.2, -9.0, False),
    ("only where a sentence beats its turn by 0.1, weight 0.5", 0.5, 0.2, 0.1, False),
    ("only where a sentence beats its turn by 0.1, weight 1.5", 1.5, 0.2, 0.1, False),
    ("first-person questions only, weight 1.0", 1.0, 0.2, -9.0, True),
    ("first-person questions only, weight 1.5", 1.5, 0.2, -9.0, True),
]


def main(argv):
    if len(argv) == 3 and argv[1] == "prepare":
        prepare(argv[2])
        return 0
    if len(argv) not in (5, 6) or argv[1] != "score":
        print(__doc__, file=sys.stderr)
        return 2
    vectors = load_vectors(argv[2])
    lme = study(argv[3], LME, vectors)
    locomo = study(argv[4], LOCOMO, vectors)
    print("| setting | LME recall_all@5 | LME recall_all@10 | LoCoMo recall@10 | LoCoMo MRR |")
    print("|---|---|---|---|---|")
    for label, weight, floor, margin, gate in SETTINGS:
        a, _ = score(*lme, weight, floor, margin, gate, True)
        b, _ = score(*locomo, weight, floor, margin, gate, False)
        print(f"| {label} | {a['recall_all@5']} | {a['recall_all@10']} | {b['recall@10']} | {b['mrr']} |")
    for label, weight, floor, margin, gate in (SETTINGS[0], SETTINGS[-1]):
        _, categories = score(*lme, weight, floor, margin, gate, True)
        print(label, {name: (c["recall_all@5"], c["recall_all@10"]) for name, c in sorted(categories.items())})
    if len(argv) == 6:
        asked = study(argv[5], LOCOMO, load_vectors(argv[2], first_person=True), asker_only=True)
        print("| LoCoMo, asked by the first speaker: list of the asker's turns | recall@10 | MRR |")
        print("|---|---|---|")
        for weight in (0.0, 0.5, 1.0, 1.5):
            figures, _ = score(*asked, weight, 0.2, -9.0, True, False)
            print(f"| weight {weight} | {figures['recall@10']} | {figures['mrr']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
