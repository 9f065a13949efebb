#!/usr/bin/env python3
"""Convert API-Bank's level-1 and level-2 dialogues into skills and routing cases.

    python3 convert.py API_BANK_DIR

API_BANK_DIR is the api-bank directory of a checkout of
github.com/AlibabaResearch/DAMO-ConvAI. Output goes next to this file; re-running it
gives the same files.
"""
import glob, json, os, re, shutil, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from convert import offtopic, skill_name, write_halves, write_skill  # noqa: E402

# Calls no user asks for: a login the assistant makes on its own, and the search for
# a tool that level-2 dialogues make before the call they are about.
PLUMBING = {"GetUserToken", "ToolSearcher"}


def apis(root):
    """Each API class of apis/*.py with its description: name -> description."""
    out = {}
    for f in sorted(glob.glob(os.path.join(root, "apis", "*.py"))):
        src = open(f).read()
        for m in re.finditer(r"^class (\w+)\(API\):\s*\n\s+description = (['\"])(.*?)\2", src, re.M | re.S):
            out[m.group(1)] = " ".join(m.group(3).split())
    return out


def cases(root, known):
    """A case is what the user said since the last call the assistant made for them,
    expecting the calls it makes next (any of them counts as right)."""
    out = []
    for f in sorted(glob.glob(os.path.join(root, "lv1-lv2-samples", "level-*", "*.jsonl"))):
        said, last = [], None
        for line in open(f):
            if not line.strip():
                continue
            t = json.loads(line)
            if t["role"] == "User":
                said.append(" ".join(t["text"].split()))
            elif t["role"] == "API" and t["api_name"] not in PLUMBING and t["api_name"] in known:
                if said:
                    last = [" ".join(said), [t["api_name"]]]
                    out.append(last)
                    said = []
                elif last is not None and t["api_name"] not in last[1]:
                    last[1].append(t["api_name"])
    # A text of three words or fewer ("Yes please.", "Morning Routine") is an answer
    # to the assistant, not a request; one that names an API ("... in AddAgenda
    # API?") gives the answer away. Neither is a case.
    glued = [a for a in known if re.search(r"[a-z][A-Z]", a)]
    out = [(q, exp) for q, exp in out
           if len(q.split()) > 3 and not any(re.search(r"\b%s\b" % a, q, re.I) for a in glued)]
    seen, uniq = {}, []
    for q, exp in out:
        if q in seen:
            for e in exp:
                if e not in seen[q]:
                    seen[q].append(e)
            continue
        seen[q] = exp
        uniq.append((q, exp))
    return uniq


README = """# API-Bank: level-1 and level-2 dialogues

From github.com/AlibabaResearch/DAMO-ConvAI (api-bank: apis/*.py and
lv1-lv2-samples/), Minghao Li et al., "API-Bank: A Comprehensive Benchmark for
Tool-Augmented LLMs", EMNLP 2023. Licensed under the Apache License 2.0
(api-bank/LICENSE).

Each API an assistant can call (apis/*.py: add an agenda item, set an alarm, book a
hotel, query a stock, record health data, ...) is a skill: its class name as the name
(lower-cased, other characters as '-') and its description; nothing else. GetUserToken
and ToolSearcher are left out: the assistant calls them on its own, no user asks for
them.

The dialogues (level-1-given-desc and level-2-toolsearcher) are conversations between a
user and an assistant that calls the APIs. A case is what the user said since the
assistant's last call for them (their turns joined), expecting the calls the assistant
makes next: any of them counts as right. Texts that several dialogues share are one
case expecting all their calls. A text of three words or fewer ("Yes please.") answers
the assistant rather than asking, and a text naming an API ("... in AddAgenda API?")
gives the answer away: neither is a case. The requests were written for the data set,
by its authors and annotators, not for this project.

%(skills)d skills; %(tune)d tuning cases (tune.jsonl), %(held)d held-out cases
(heldout.jsonl), split by a hash of the API a case expects (its first, when it
expects several), so that the templated requests of one API's dialogues ("delete my
account? My username is user2 ...") are all on one side. Made by convert.py.

offtopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the
Gorilla APIBench sets (requests for machine-learning models, from their tuning and
held-out halves respectively): no skill here should take them.
"""


def main(root):
    known = apis(root)
    cs = cases(root, known)
    used = sorted({e for _, exp in cs for e in exp})
    out = HERE
    shutil.rmtree(os.path.join(out, "skills"), ignore_errors=True)
    os.makedirs(os.path.join(out, "skills"))
    taken, names = set(), {}
    for api in used:
        names[api] = skill_name(api, taken)
        write_skill(out, names[api], known[api])
    # Split by the API a case expects first, not by its text: the dialogues of one
    # API repeat templates ("delete my account? My username is user2 ..."), which a
    # split by text would put on both sides.
    first = {q: exp[0] for q, exp in cs}
    named = [(q, [names[x] for x in exp]) for q, exp in cs]
    tune, held = write_halves(out, [(q, e[0] if len(e) == 1 else e) for q, e in named],
                              key=lambda q, _: first[q])
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(README % {"skills": len(used), "tune": len(tune), "held": len(held)})
    offtopic("apibank", ["gorilla-torchhub", "gorilla-tfhub", "gorilla-huggingface"])


if __name__ == "__main__":
    main(sys.argv[1])
