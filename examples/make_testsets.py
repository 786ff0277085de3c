"""Rebuild the example RAG test sets from ``corpus.jsonl`` (deterministic, standard library only).

    python examples/make_testsets.py

Writes ``rich_testset.jsonl`` (chunks with ids, offsets and scores; passages with offsets),
``ragas_testset.jsonl`` (the same cases with Ragas' plain-string fields) and ``human_labels.csv``.
Chunking is a plain fixed-size splitter that cuts at the last space before ``SIZE`` characters;
ranking is word overlap with the question. Both are deliberately crude: the point is the evaluation.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

HERE = Path(__file__).parent
SIZE = 160
TOP = 4
STOP = frozenset(("a", "an", "and", "the", "of", "to", "in", "on", "is", "it", "its", "do", "does", "i", "how",
                  "what", "my", "for", "with", "at", "be", "by", "or"))

CASES = [
    ("descale", "How do I descale the Orbit kettle?",
     "Fill it with equal parts vinegar and water to the 1 litre mark, leave it an hour, boil once, rinse three "
     "times.",
     "Use vinegar and water, wait an hour, boil and rinse.",
     [("kettle-manual", "fill it with equal parts white vinegar and water up to the 1 litre mark."),
      ("kettle-manual", "Leave the mixture for one hour, then boil it once and rinse the kettle three times "
                        "with fresh water.")]),
    ("blinking-light", "What does a blinking red power light on the kettle mean?",
     "The dry-boil protection switched the heater off; let it cool ten minutes and refill.",
     "The kettle overheated because it was empty; let it cool and refill it.",
     [("kettle-manual", "If the power light blinks red, the dry-boil protection has switched the heater off."),
      ("kettle-manual", "Let the kettle cool for ten minutes, refill it above the minimum line and press the "
                        "switch again.")]),
    ("limescale-warranty", "Does the kettle warranty cover limescale damage?",
     "No, limescale damage is excluded.", "No.",
     [("kettle-warranty", "The warranty does not cover limescale damage")]),
    ("crumb-tray", "How often should I empty the toaster crumb tray?",
     "Once a week.", "Every week.",
     [("toaster-manual", "Empty the crumb tray once a week")]),
    ("warranty-length", "How long is the Orbit kettle warranty?",
     "Two years from the date of purchase.", "Two years.",
     [("kettle-warranty", "two-year limited warranty from the date of purchase")]),
    ("colours", "What colours does the kettle come in?", None, "It comes in white.", []),
]


# Where our (imaginary) annotator's reading differs from "overlaps a reference passage".
OVERRIDES = {
    ("descale", "kettle-manual#0"): (0, "topic_only"),
    ("limescale-warranty", "kettle-warranty#0"): (0, "supports_wrong_answer"),
    ("warranty-length", "kettle-warranty#1"): (1, "partial"),
    ("crumb-tray", "toaster-manual#0"): (0, "topic_only"),
}


def chunk(doc_id: str, text: str, size: int = SIZE) -> list[dict]:
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + 1, end)
            end = cut + 1 if cut > start else end
        out.append({"id": f"{doc_id}#{len(out)}", "text": text[start:end], "doc_id": doc_id, "start": start,
                    "end": end})
        start = end
    return out


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP}


def main() -> None:
    docs = {}
    for line in (HERE / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        docs[obj["_id"]] = obj["text"]
    chunks = [c for doc_id, text in docs.items() for c in chunk(doc_id, text)]
    rich, ragas, labels = [], [], []
    for case_id, question, reference, response, passages in CASES:
        q = words(question)
        scored = sorted(((len(q & words(c["text"])) / (1 + len(words(c["text"]))) ** 0.5, c["id"], c)
                         for c in chunks), key=lambda t: (-t[0], t[1]))[:TOP]
        retrieved = [{**c, "score": round(s, 4)} for s, _, c in scored]
        refs = []
        for doc_id, text in passages:
            start = docs[doc_id].index(text)
            refs.append({"text": text, "doc_id": doc_id, "start": start, "end": start + len(text)})
        gold_ids = sorted({c["id"] for c in chunks for p in refs if c["doc_id"] == p["doc_id"]
                           and min(c["end"], p["end"]) - max(c["start"], p["start"]) >= (p["end"] - p["start"]) / 2})
        rich.append({"id": case_id, "user_input": question, "reference": reference, "response": response,
                     "retrieved_contexts": retrieved, "reference_contexts": refs,
                     "reference_context_ids": gold_ids})
        ragas.append({"id": case_id, "user_input": question, "reference": reference, "response": response,
                      "retrieved_contexts": [c["text"] for c in retrieved],
                      "retrieved_context_ids": [c["id"] for c in retrieved],
                      "reference_contexts": [p["text"] for p in refs], "reference_context_ids": gold_ids})
        for rank, c in enumerate(retrieved, start=1):
            hit = any(c["doc_id"] == p["doc_id"] and min(c["end"], p["end"]) > max(c["start"], p["start"])
                      for p in refs)
            verdict, kind = OVERRIDES.get((case_id, c["id"]), (int(hit), "answer" if hit else "irrelevant"))
            labels.append({"query_id": case_id, "chunk_id": c["id"], "rank": rank, "verdict": verdict,
                           "type": kind})
    for name, rows in (("rich_testset.jsonl", rich), ("ragas_testset.jsonl", ragas)):
        with open(HERE / name, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(HERE / "human_labels.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["query_id", "chunk_id", "rank", "verdict", "type"])
        w.writeheader()
        w.writerows(labels)


if __name__ == "__main__":
    main()
