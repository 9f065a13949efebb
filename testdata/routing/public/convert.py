#!/usr/bin/env python3
"""Convert public tool-retrieval data sets into skills (name + description only) and
routing cases, split deterministically into a tuning half and a held-out half.

    python3 convert.py GORILLA_REPO

GORILLA_REPO is a checkout of github.com/ShishirPatil/gorilla. Output goes next to
this file. Re-running it gives the same files.
"""
import hashlib, json, os, re, shutil, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def skill_name(s, taken):
    n = re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:60].strip("-") or "tool"
    base, i = n, 2
    while n in taken:
        n = f"{base}-{i}"
        i += 1
    taken.add(n)
    return n


def h(s):
    return hashlib.sha1(s.encode()).hexdigest()


def write_set(name, skills, cases, readme):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "skills"))
    for n, desc in skills:
        write_skill(out, n, desc)
    tune, held = write_halves(out, cases)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme % {"skills": len(skills), "tune": len(tune), "held": len(held)})


def write_skill(out, n, desc):
    """Writes out/skills/n.md: a skill of a name and a description, nothing else."""
    desc = " ".join(desc.split()) or n.replace("-", " ")
    with open(os.path.join(out, "skills", n + ".md"), "w") as f:
        f.write("---\nname: %s\ndescription: %s\n---\n%s\n" % (n, json.dumps(desc[:1000], ensure_ascii=False), "An entry of a public tool-retrieval data set; see ../README.md."))


def write_halves(out, cases, key=lambda q, exp: q):
    """Splits cases, (query, expect) pairs, by a hash of key(query, expect) into
    out/tune.jsonl and out/heldout.jsonl, and returns the two halves."""
    tune, held = [], []
    for q, exp in sorted(cases, key=lambda c: h(c[0])):
        (tune if int(h(key(q, exp))[:2], 16) % 2 == 0 else held).append({"query": q, "expect": exp})
    for fn, cs in (("tune.jsonl", tune), ("heldout.jsonl", held)):
        with open(os.path.join(out, fn), "w") as f:
            for c in cs:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    return tune, held


def instruction(code):
    """The request of an APIBench entry: its evaluation files write it after
    '###Instruction:', its training files as the 'Instruction' of a dict's text."""
    m = re.search(r"###Instruction:(.*?)(?:\n###|$)", code, re.S) or \
        re.search(r"'Instruction':\s*(.*?),\s*'Output'", code, re.S)
    return " ".join(m.group(1).split()) if m else ""


def model_loaded(call):
    """What an APIBench call loads, as (repository, model): a tfhub.dev URL's publisher
    and path, version included; torch.hub.load's repository and model (its model=
    argument or its second string); or every id the call names in a from_pretrained,
    a model= argument or a pipeline's second argument, in order, joined by spaces (a
    pipeline with another VAE is another model); ("", "") if none."""
    q = "['\"]([^'\"]+)['\"]"
    m = re.search(r"tfhub\.dev/([^/'\"]+)/([^'\"]+?)/?['\"]", call)
    if m:
        return m.group(1), m.group(2)
    repo = re.search(r"torch\.hub\.load\(\s*(?:repo_or_dir\s*=\s*)?" + q, call)
    if repo:
        m = re.search(r"\bmodel\s*=\s*" + q, call) or \
            re.search(r"torch\.hub\.load\(\s*(?:repo_or_dir\s*=\s*)?['\"][^'\"]*['\"]\s*,\s*" + q, call)
        return repo.group(1), (m.group(1) if m else "")
    ids = []
    for m in re.finditer(r"from_pretrained\(\s*['\"]?([^'\"()\s,]+)"
                         r"|\bmodel\s*=\s*(?:" + q + r"|([\w.-]+/[\w.-]+))"
                         r"|\bpipeline\(\s*['\"][^'\"]+['\"]\s*,\s*" + q, call):
        i = next(g for g in m.groups() if g)
        if i not in ids:
            ids.append(i)
    return "", " ".join(ids)


def gorilla(repo, hub, evalfile, title, trainfile=None, by_call=False):
    """An APIBench hub's APIs as skills. With by_call, as for TorchHub and TF Hub,
    whose api_names are families or placeholders (TorchHub names 14 of its models
    torch.hub.load, four Densenet; TF Hub 39 model_id), an API is named as its hub
    names the model its call loads: TorchHub's model, TF Hub's model path and version.
    Otherwise, as for Hugging Face, whose api_names are the hub's model ids already,
    by its api_name. Skills whose names would be the same are numbered."""
    apis, skills, taken, by = [], [], set(), {}
    for line in open(os.path.join(repo, "data/api", hub)):
        if line.strip():
            a = json.loads(line)
            key = (a["api_name"], a["api_call"])
            if key not in by:
                by[key] = None
                apis.append(a)
    loads = {}
    for a in apis:
        name = a["api_name"]
        if by_call:
            name = model_loaded(a["api_call"])[1] or name
        n = skill_name(name, taken)
        by[(a["api_name"], a["api_call"])] = n
        skills.append((n, a.get("description") or ""))
        model = model_loaded(a["api_call"])
        if model[1]:
            loads.setdefault(model, []).append(n)
    # Entries that load the same model (TF Hub lists one model under several
    # api_names, by hub.load and by hub.KerasLayer) are one API to whoever asks for
    # it, as they are to APIBench's own measure, which compares the calls: a request
    # for one is answered right by any of them.
    same = {n: sorted(ns) for ns in loads.values() if len(ns) > 1 for n in ns}
    def read(f):
        cases, seen = [], set()
        for line in open(os.path.join(repo, "data/apibench", f)):
            if not line.strip():
                continue
            e = json.loads(line)
            q, a = instruction(e["code"]), e["api_data"]
            n = by.get((a["api_name"], a["api_call"]))
            if q and n and q not in seen:
                seen.add(q)
                cases.append((q, same.get(n, n)))
        return cases

    cases = read(evalfile)
    more = []
    if trainfile and os.path.exists(os.path.join(repo, "data/apibench", trainfile)):
        have = {q for q, _ in cases}
        more = [c for c in read(trainfile) if c[0] not in have]
    return skills, cases, more


def write_more(name, more):
    """Requests of the data set's training split: held out as well, since nothing here
    is tuned on them, and eight times as many as the evaluation split's held-out half."""
    with open(os.path.join(HERE, name, "heldout-train.jsonl"), "w") as f:
        for q, n in more:
            f.write(json.dumps({"query": q, "expect": n}, ensure_ascii=False) + "\n")


GORILLA_README = """# Gorilla APIBench: %(title)s

From github.com/ShishirPatil/gorilla (data/api/%(hub)s and data/apibench/%(eval)s),
Apache License 2.0. Each API is a skill: %(naming)s, lower-cased, other characters
as '-' (names that would be the same are numbered); and its description; nothing
else. Each evaluation instruction is a case expecting its API, or any of the APIs
whose api_call loads the same model (the data set lists some models several times,
under several names and descriptions, and its own measure compares the calls). The
instructions were written by the data set's authors (self-instruct with a language
model), not for this project.

%%(skills)d skills; %%(tune)d tuning cases (tune.jsonl), %%(held)d held-out cases
(heldout.jsonl), split by a hash of the request text. Made by ../convert.py.
"""


def bfcl_live(repo):
    """BFCL's live categories: requests users contributed, each with the functions
    offered beside it and the one the answer calls. Every function named in them is a
    skill (the same name offered with other wording keeps its commonest description)."""
    data = os.path.join(repo, "berkeley-function-call-leaderboard/bfcl_eval/data")
    descs, cases = {}, []
    for cat in ("live_simple", "live_multiple"):
        answers = {}
        for line in open(os.path.join(data, "possible_answer", "BFCL_v4_%s.json" % cat)):
            a = json.loads(line)
            answers[a["id"]] = [next(iter(g)) for g in a["ground_truth"]]
        for line in open(os.path.join(data, "BFCL_v4_%s.json" % cat)):
            d = json.loads(line)
            for fn in d["function"]:
                descs.setdefault(fn["name"], {}).setdefault(" ".join(fn["description"].split()), 0)
                descs[fn["name"]][" ".join(fn["description"].split())] += 1
            q = " ".join(" ".join(m["content"] for m in d["question"][0] if m["role"] == "user").split())
            gt = answers[d["id"]]
            if q and len(set(gt)) == 1:
                cases.append((q, gt[0]))
    skills, taken, by = [], set(), {}
    for fname in sorted(descs):
        desc = sorted(descs[fname].items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))[0][0]
        n = skill_name(fname, taken)
        by[fname] = n
        skills.append((n, desc))
    seen, uniq = set(), []
    for q, f in cases:
        if q not in seen:
            seen.add(q)
            uniq.append((q, by[f]))
    return skills, uniq


def offtopic(name, sources, n=100):
    """Requests of other data sets, from another domain, that no skill of name's
    catalog should take: each half draws on the same half of its sources, so the
    held-out off-topic requests are never seen while tuning."""
    for half in ("tune", "heldout"):
        qs = []
        for s in sources:
            for line in open(os.path.join(HERE, s, half + ".jsonl")):
                qs.append(json.loads(line)["query"])
        qs = sorted(set(qs), key=lambda q: h(name + q))[:n]
        with open(os.path.join(HERE, name, "offtopic-" + half + ".jsonl"), "w") as f:
            for q in qs:
                f.write(json.dumps({"query": q, "expect": None}, ensure_ascii=False) + "\n")


MORE_README = """
heldout-train.jsonl holds the %(n)d requests of data/apibench/%(train)s (the data set's
training split: instructions written the same way, for the same APIs) that the
evaluation split does not hold. Nothing in this project was chosen on them: they are
held out too, and their number makes them the set's steadiest measure.
"""


BFCL_README = """# Berkeley Function Calling Leaderboard: live requests

From github.com/ShishirPatil/gorilla
(berkeley-function-call-leaderboard/bfcl_eval/data: BFCL_v4_live_simple.json,
BFCL_v4_live_multiple.json and their possible_answer files), Apache License 2.0.
The live categories hold requests that users contributed to the leaderboard, each with
the functions offered beside it and the function its answer calls. Every function
named there is a skill: its name (lower-cased, other characters as '-') and its
description (a name offered with other wordings keeps its commonest one); nothing
else. Each request (its user turns) is a case expecting the function its answer
calls; requests whose answer calls several functions are left out.

%(skills)d skills; %(tune)d tuning cases (tune.jsonl), %(held)d held-out cases
(heldout.jsonl), split by a hash of the request text. Made by ../convert.py.

offtopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the
Gorilla APIBench sets beside this one (requests for machine-learning models, from
their tuning and held-out halves respectively): no skill here should take them.
"""


def main():
    g = sys.argv[1]
    gorillas = []
    for hub, ev, tr, title, name in (("torchhub_api.jsonl", "torchhub_eval.json", "torchhub_train.json", "TorchHub", "gorilla-torchhub"),
                                     ("tensorflowhub_api.jsonl", "tensorflow_eval.json", None, "TensorFlow Hub", "gorilla-tfhub"),
                                     ("huggingface_api.jsonl", "huggingface_eval.json", None, "Hugging Face", "gorilla-huggingface")):
        skills, cases, more = gorilla(g, hub, ev, title, tr, by_call=name != "gorilla-huggingface")
        naming = ("its api_name as the name (the hub's model id)" if name == "gorilla-huggingface" else
                  "named as the hub names the model its api_call loads (%s), or by its api_name "
                  "where the call names none" % ("the torch.hub.load model" if name == "gorilla-torchhub"
                                                  else "the tfhub.dev model path and version"))
        write_set(name, skills, cases, GORILLA_README % {"title": title, "hub": hub, "eval": ev, "naming": naming})
        if more:
            write_more(name, more)
            with open(os.path.join(HERE, name, "README.md"), "a") as f:
                f.write(MORE_README % {"train": tr, "n": len(more)})
        gorillas.append(name)
    skills, cases = bfcl_live(g)
    write_set("bfcl-live", skills, cases, BFCL_README)
    for name in gorillas:
        offtopic(name, ["bfcl-live"])
        with open(os.path.join(HERE, name, "README.md"), "a") as f:
            f.write("\nofftopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the\n"
                    "bfcl-live set (requests users made of everyday APIs, from its tuning and held-out\n"
                    "halves respectively): no skill here should take them.\n")
    offtopic("bfcl-live", gorillas)


if __name__ == "__main__":
    main()
