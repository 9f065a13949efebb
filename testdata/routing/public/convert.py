#!/usr/bin/env python3
"""Convert public tool-retrieval data sets into skills (name + description only) and
routing cases, split deterministically into a tuning half and a held-out half.

    python3 convert.py GORILLA_REPO COLT_REPO

GORILLA_REPO is a checkout of github.com/ShishirPatil/gorilla, COLT_REPO of
github.com/quchangle1/COLT. Output goes next to this file. Re-running it gives the
same files.
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
        desc = " ".join(desc.split()) or n.replace("-", " ")
        with open(os.path.join(out, "skills", n + ".md"), "w") as f:
            f.write("---\nname: %s\ndescription: %s\n---\n%s\n" % (n, json.dumps(desc[:1000], ensure_ascii=False), "An entry of a public tool-retrieval data set; see ../README.md."))
    tune, held = [], []
    for q, exp in sorted(cases, key=lambda c: h(c[0])):
        (tune if int(h(q)[:2], 16) % 2 == 0 else held).append({"query": q, "expect": exp})
    for fn, cs in (("tune.jsonl", tune), ("heldout.jsonl", held)):
        with open(os.path.join(out, fn), "w") as f:
            for c in cs:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme % {"skills": len(skills), "tune": len(tune), "held": len(held)})


def gorilla(repo, hub, evalfile, title):
    apis, skills, taken, by = [], [], set(), {}
    for line in open(os.path.join(repo, "data/api", hub)):
        if line.strip():
            a = json.loads(line)
            key = (a["api_name"], a["api_call"])
            if key in by:
                continue
            n = skill_name(a["api_name"], taken)
            by[key] = n
            skills.append((n, a.get("description") or ""))
    cases = []
    for line in open(os.path.join(repo, "data/apibench", evalfile)):
        if not line.strip():
            continue
        e = json.loads(line)
        m = re.search(r"###Instruction:(.*?)(?:\n###|$)", e["code"], re.S)
        a = e["api_data"]
        n = by.get((a["api_name"], a["api_call"]))
        if m and n:
            cases.append((" ".join(m.group(1).split()), n))
    seen, uniq = set(), []
    for q, n in cases:
        if q not in seen:
            seen.add(q)
            uniq.append((q, n))
    return skills, uniq


GORILLA_README = """# Gorilla APIBench: %(title)s

From github.com/ShishirPatil/gorilla (data/api/%(hub)s and data/apibench/%(eval)s),
Apache License 2.0. Each API is a skill: its api_name as the name (lower-cased, other
characters as '-') and its description; nothing else. Each evaluation instruction is a
case expecting its API. The instructions were written by the data set's authors
(self-instruct with a language model), not for this project.

%%(skills)d skills; %%(tune)d tuning cases (tune.jsonl), %%(held)d held-out cases
(heldout.jsonl), split by a hash of the request text. Made by ../convert.py.
"""


def toollens(repo):
    skills, taken, by = [], set(), {}
    for line in open(os.path.join(repo, "datasets/ToolLens/corpus.jsonl")):
        d = json.loads(line)
        t = d["text"]
        tool = re.search(r"tool_name:(.*?), api_name:", t).group(1)
        api = re.search(r"api_name:(.*?), api_description:", t).group(1)
        desc = re.search(r"api_description:(.*?), required_params:", t, re.S).group(1)
        n = skill_name(tool + " " + api, taken)
        by[d["_id"]] = n
        skills.append((n, desc))
    rel = {}
    for line in open(os.path.join(repo, "datasets/ToolLens/qrels/test.tsv")):
        p = line.split()
        if len(p) == 3 and p[2] == "1":
            rel.setdefault(p[0], []).append(by[p[1]])
    queries = {}
    for line in open(os.path.join(repo, "datasets/ToolLens/queries.jsonl")):
        d = json.loads(line)
        if d["_id"] in rel:
            queries[d["_id"]] = " ".join(d["text"].split())
    cases = sorted(((queries[i], sorted(set(rel[i]))) for i in rel if i in queries), key=lambda c: h(c[0]))[:1000]
    return skills, cases


def main():
    g, colt = sys.argv[1], sys.argv[2]
    for hub, ev, title, name in (("torchhub_api.jsonl", "torchhub_eval.json", "TorchHub", "gorilla-torchhub"),
                                 ("tensorflowhub_api.jsonl", "tensorflow_eval.json", "TensorFlow Hub", "gorilla-tfhub"),
                                 ("huggingface_api.jsonl", "huggingface_eval.json", "Hugging Face", "gorilla-huggingface")):
        skills, cases = gorilla(g, hub, ev, title)
        write_set(name, skills, cases, GORILLA_README % {"title": title, "hub": hub, "eval": ev})
    skills, cases = toollens(colt)
    write_set("toollens", skills, cases, """# ToolLens

From github.com/quchangle1/COLT (datasets/ToolLens: corpus.jsonl, queries.jsonl,
qrels/test.tsv), the data set of "Towards Completeness-Oriented Tool Retrieval for
Large Language Models" (Qu et al., CIKM 2024), released for research with the paper's
code; the repository names no license. Its tools are RapidAPI APIs from ToolBench.
Each API is a skill: tool name and API name as the name, the API description as the
description; nothing else. Each request needs several tools: a case's expect lists
them, and routing to any one of them counts as right.

%(skills)d skills; 1,000 requests of the test split sampled by a hash of their text:
%(tune)d tuning cases (tune.jsonl), %(held)d held-out cases (heldout.jsonl). Made by
../convert.py.
""")


if __name__ == "__main__":
    main()
