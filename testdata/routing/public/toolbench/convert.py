#!/usr/bin/env python3
"""Convert ToolBench's test queries, as StableToolBench ships them, into skills and
routing cases.

    python3 convert.py STABLETOOLBENCH_CHECKOUT

STABLETOOLBENCH_CHECKOUT is a checkout of github.com/THUNLP-MT/StableToolBench; this
reads the six files of its solvable_queries/test_instruction/ (or of the directory
given, when they are directly in it). Output goes next to this file; re-running it
gives the same files.
"""
import json, os, shutil, sys, unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from convert import offtopic, skill_name, write_halves, write_skill  # noqa: E402

FILES = ("G1_instruction", "G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction")

# A tool's description is cut at the last word boundary before this many characters.
# Fixed before anything was measured.
CUT = 600


def ascii_(s):
    return unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode()


def one_line(s):
    return " ".join((s or "").split())


def describe(tool, categories, apis):
    """"<tool>. <categories>. " then "<api>: <api description>" joined by "; ", the
    description left out when empty or the API's name again; cut at CUT characters
    on a word boundary."""
    parts = []
    for name, desc in apis:
        name, desc = one_line(name), one_line(desc)
        if not desc or desc.lower().rstrip(".") == name.lower():
            parts.append(name)
        else:
            parts.append(name + ": " + desc)
    s = "%s. %s. %s" % (one_line(tool), ", ".join(categories), "; ".join(parts))
    if len(s) > CUT:
        s = s[:CUT + 1].rsplit(" ", 1)[0].rstrip(" ;:,")
    return s


def main(root):
    d = os.path.join(root, "solvable_queries", "test_instruction")
    if not os.path.isdir(d):
        d = root
    queries = []
    for fn in FILES:
        queries.extend(json.load(open(os.path.join(d, fn + ".json"))))
    # Every tool of every query's candidate list, with its categories and its APIs in
    # the order first seen (the files in FILES order); an API seen again keeps its
    # first description.
    cats, apis = {}, {}
    for q in queries:
        for a in q["api_list"]:
            t = a["tool_name"]
            cats.setdefault(t, [])
            if a["category_name"] not in cats[t]:
                cats[t].append(a["category_name"])
            apis.setdefault(t, {}).setdefault(a["api_name"], a.get("api_description") or "")
    taken, names = set(), {}
    for t in sorted(cats):
        names[t] = skill_name(ascii_(t), taken)
    cases, order, dropped = {}, [], 0
    for q in queries:
        text = one_line(q["query"])
        tools = []
        for tool, _ in q["relevant APIs"]:
            if tool not in tools:
                tools.append(tool)
        if not text or not tools:
            dropped += 1
            continue
        if text in cases:
            cases[text].extend(t for t in tools if t not in cases[text])
        else:
            cases[text] = tools
            order.append(text)
    out = HERE
    shutil.rmtree(os.path.join(out, "skills"), ignore_errors=True)
    os.makedirs(os.path.join(out, "skills"))
    for t in sorted(cats):
        write_skill(out, names[t], describe(t, cats[t], apis[t].items()))
    named = []
    for text in order:
        exp = [names[t] for t in cases[text]]
        named.append((text, exp[0] if len(exp) == 1 else exp))
    # Split by the first tool a case expects, not by its text: ToolBench's requests
    # for one tool were generated together and repeat its wording.
    tune, held = write_halves(out, named, key=lambda q, _: cases[q][0])
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(README % {"queries": len(queries), "skills": len(cats), "tune": len(tune),
                          "held": len(held), "dupes": len(queries) - dropped - len(order),
                          "cut": CUT})
    offtopic("toolbench", ["gorilla-torchhub", "gorilla-tfhub", "gorilla-huggingface"])


README = """# ToolBench: test queries, a skill per tool

From github.com/THUNLP-MT/StableToolBench (solvable_queries/test_instruction/:
G1_instruction, G1_category, G1_tool, G2_instruction, G2_category and G3_instruction),
the test queries of ToolBench (Yujia Qin et al., "ToolLLM: Facilitating Large
Language Models to Master 16000+ Real-world APIs", ICLR 2024) as StableToolBench
(Zhicheng Guo et al., 2024) keeps the solvable ones. Licensed under the Apache
License 2.0 (LICENSE).

Each query comes with the APIs of a few RapidAPI tools to choose from (weather,
recipes, sports scores, currency rates, jokes, e-mail checks, ...) and the APIs it
needs. Each tool of all the queries' candidate lists is a skill, so a request must
find its tool among all of them, as in a catalog of web tools: the tool's name as
the skill's name (accents and emoji dropped, lower-cased, other characters as '-',
at most 60 characters, a number added when taken), and one description rule, fixed
before anything was measured: "<tool>. <category>. " followed by the tool's APIs as
"<api>: <api description>" joined by "; " (a description that is empty or the API's
name again is left out), cut at the last word boundary before %(cut)d characters. A
tool listed under two categories names both; an API listed twice keeps its first
description.

Each query (a user's request written with ChatGPT by the data set's authors, not for
this project) is a case expecting the tools of its relevant APIs: when it needs
several, any of them counts as right. A query text that appears more than once is
one case expecting all their tools (%(dupes)d of the %(queries)d queries repeats
one). The other files of StableToolBench (its training data, tool responses and
answers) are not used.

%(skills)d skills; %(tune)d tuning cases (tune.jsonl), %(held)d held-out cases
(heldout.jsonl), split by a hash of the first tool a case expects, so that the
requests generated for one tool, which repeat its wording, are on one side (a
request expecting several tools may expect some of the other side's too); every
skill is in the catalog of both. Made by convert.py, from a checkout:

    python3 testdata/routing/public/toolbench/convert.py STABLETOOLBENCH_CHECKOUT

or from a directory holding the six files (from a bare clone: `git show
HEAD:solvable_queries/test_instruction/G1_instruction.json > DIR/G1_instruction.json`,
and so on).

offtopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the
Gorilla APIBench sets (requests for machine-learning models, from their tuning and
held-out halves respectively): no skill here should take them.
"""


if __name__ == "__main__":
    main(sys.argv[1])
