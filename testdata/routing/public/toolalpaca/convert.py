#!/usr/bin/env python3
"""Convert ToolAlpaca's evaluation sets into skills and routing cases.

    python3 convert.py TOOLALPACA_CHECKOUT

TOOLALPACA_CHECKOUT is a checkout of github.com/tangqiaoyu/ToolAlpaca; this reads
its data/eval_real.json and data/eval_simulated.json. Output goes next to this file;
re-running it gives the same files.
"""
import json, os, re, shutil, sys, unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from convert import offtopic, skill_name, write_halves, write_skill  # noqa: E402

FILES = ("eval_real.json", "eval_simulated.json")

# A function's own description of fewer words than this is too thin to tell it from
# the functions of other APIs ("Get all fruits", "Create a new dashboard"): it is
# prefixed by its API's short description. Fixed before anything was measured.
THIN = 6

# An action of ToolAlpaca's agent that asks the user for details: no API's function.
ASK = "getDetails"


def words(s):
    """Splits camelCase and snake_case names into words: getFruitByName -> get Fruit By Name."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", s)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", s)


def ascii_(s):
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()


def describe(api, text):
    """The function's description: its text before the parameters, prefixed by the
    API's short description when it is thinner than THIN words."""
    own = " ".join(text.split("Parameters:")[0].split())
    if len(own.split()) >= THIN:
        return own
    short = " ".join(api["Description"].split()).rstrip(".")
    return (short + ". " + own).strip()


def main(root):
    apis = []
    for fn in FILES:
        apis.extend(json.load(open(os.path.join(root, "data", fn))))
    skills, names, taken = [], {}, set()
    for api in sorted(apis, key=lambda a: a["Name"]):
        for fname, text in api["Function_Description"].items():
            if fname == "components":  # the shared schemas, not a function
                continue
            n = skill_name(ascii_(api["Name"]) + " " + words(fname), taken)
            names[(api["Name"], fname)] = n
            skills.append((n, describe(api, text)))
    cases, dropped = {}, 0
    for api in apis:
        for q, answer in zip(api["Instructions"], api["Golden_Answers"]):
            q = " ".join(q.split())
            calls = [a["Action"].replace("[Optional]", "") for a in answer]
            calls = [c for c in calls if c != ASK]
            # A solution calling a function the API's documentation leaves out (the
            # real AviationAPI's weather endpoints) asks for what no skill does.
            if not calls or any((api["Name"], c) not in names for c in calls):
                dropped += 1
                continue
            exp = []
            for c in calls:
                if names[(api["Name"], c)] not in exp:
                    exp.append(names[(api["Name"], c)])
            if q in cases:
                cases[q][1].extend(e for e in exp if e not in cases[q][1])
            else:
                cases[q] = (api["Name"], exp)
    out = HERE
    shutil.rmtree(os.path.join(out, "skills"), ignore_errors=True)
    os.makedirs(os.path.join(out, "skills"))
    for n, d in skills:
        write_skill(out, n, d)
    # Split by API, not by request text: one API's requests repeat templates.
    tune, held = write_halves(out, [(q, e[0] if len(e) == 1 else e) for q, (_, e) in cases.items()],
                              key=lambda q, _: cases[q][0])
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(README % {"apis": len(apis), "skills": len(skills), "tune": len(tune),
                          "held": len(held), "dropped": dropped, "thin": THIN})
    offtopic("toolalpaca", ["gorilla-torchhub", "gorilla-tfhub", "gorilla-huggingface"])


README = """# ToolAlpaca: evaluation APIs

From github.com/tangqiaoyu/ToolAlpaca (data/eval_real.json and
data/eval_simulated.json), Qiaoyu Tang et al., "ToolAlpaca: Generalized Tool Learning
for Language Models with 3000 Simulated Cases", arXiv:2306.05301, 2023. Licensed under
the Apache License 2.0 (LICENSE).

The two evaluation sets describe %(apis)d public APIs of the public-apis list (public
holidays, airports and aviation charts, Chuck Norris jokes, weather, a dictionary,
WolframAlpha, fruit, cat pictures, currency rates, anime, IP reputation, Discord
images, Auth0, the Bible, Superset dashboards, US addresses, ...), each with several
functions. Each function is a skill, so a request must find its function among those
of all the APIs: the API's name and the function's name as the skill's name
(camelCase split into words, accents dropped, lower-cased, other characters as '-'),
and the function's description (its text before the parameters) as its description.
One rule, fixed before anything was measured, for descriptions too thin to tell one
API's function from another's: a description of fewer than %(thin)d words ("Get all
fruits", "Create a new dashboard", or none) is prefixed by the API's short
description from the public-apis list ("Data about all kinds of fruit. Get all
fruits"). Nothing else.

Each instruction of the two sets (a user's request, written with a language model
by the data set's authors, not for this project) is a case expecting the functions
its golden solution calls: when it calls several (a search before the call the
request is about, or two steps the request asks for), any of them counts as right.
ToolAlpaca's getDetails action (asking the user for more) is not a function and is
left out; %(dropped)d requests whose solution calls a function the API's documentation
does not describe are not cases. The training set (data/train_data.json, 400+
APIs) is not used.

%(skills)d skills; %(tune)d tuning cases (tune.jsonl), %(held)d held-out cases
(heldout.jsonl), split by a hash of the API name, so that the requests of one API,
which repeat templates, are all on one side; every skill is in the catalog of both.
Made by convert.py:

    python3 testdata/routing/public/toolalpaca/convert.py TOOLALPACA_CHECKOUT

offtopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the
Gorilla APIBench sets (requests for machine-learning models, from their tuning and
held-out halves respectively): no skill here should take them.
"""


if __name__ == "__main__":
    main(sys.argv[1])
