#!/usr/bin/env python3
"""Convert CLINC150 into routing cases against the phrase-trigger catalog
(testdata/routing/phrasestyle/skills), split by CLINC150's own splits.

    python3 convert.py DATA_FULL_JSON

DATA_FULL_JSON is data/data_full.json of github.com/clinc/oos-eval. Output goes next
to this file. Re-running it gives the same files.
"""
import hashlib, json, os, shutil, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOG = os.path.join(HERE, "..", "..", "phrasestyle", "skills")

# The CLINC150 intents a skill of the catalog serves.
SERVED = {
    "weather": "weather_report",
    "exchange_rate": "currency_exchange",
    "translate": "translate_text",
    "measurement_conversion": "unit_converter",
}
# Intents left out of the off-topic requests: a skill could arguably take them.
# change_language asks the assistant to speak another language ("talk to me in
# spanish"), close enough to a translation that neither answer is clearly wrong.
AMBIGUOUS = {"change_language"}
# Requests drawn from each other intent, per half.
PER_INTENT = 2


def h(s):
    return hashlib.sha1(s.encode()).hexdigest()


def norm(q):
    return " ".join(q.split())


def write(name, cases):
    seen, out = set(), []
    for q, exp in cases:
        q = norm(q)
        if q and q not in seen:
            seen.add(q)
            out.append({"query": q, "expect": exp})
    with open(os.path.join(HERE, name), "w") as f:
        for c in out:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    return len(out)


def others(rows):
    """PER_INTENT requests of each intent no skill serves, chosen by a hash of the
    request text."""
    by = {}
    for q, intent in rows:
        if intent not in SERVED and intent not in AMBIGUOUS:
            by.setdefault(intent, []).append(q)
    out = []
    for intent in sorted(by):
        out += sorted(by[intent], key=lambda q: h(intent + q))[:PER_INTENT]
    return out


def main(path):
    d = json.load(open(path))
    tune = [(q, SERVED[i]) for q, i in d["train"] + d["val"] if i in SERVED]
    held = [(q, SERVED[i]) for q, i in d["test"] if i in SERVED]
    off_tune = [q for q, _ in d["oos_train"] + d["oos_val"]] + others(d["val"])
    off_held = [q for q, _ in d["oos_test"]] + others(d["test"])
    n = {
        "tune": write("tune.jsonl", tune),
        "held": write("heldout.jsonl", held),
        "offtune": write("offtopic-tune.jsonl", [(q, None) for q in off_tune]),
        "offheld": write("offtopic-heldout.jsonl", [(q, None) for q in off_held]),
    }
    shutil.rmtree(os.path.join(HERE, "skills"), ignore_errors=True)
    shutil.copytree(CATALOG, os.path.join(HERE, "skills"))
    print(n)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
