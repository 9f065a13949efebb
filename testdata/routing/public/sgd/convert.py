#!/usr/bin/env python3
"""Convert the Schema-Guided Dialogue data set (SGD) into skills (one per service
intent: name and description only) and routing cases, split by a hash of the request
text into a tuning half and a held-out half like ../convert.py's sets.

    python3 convert.py SGD_CHECKOUT

SGD_CHECKOUT is a checkout of github.com/google-research-datasets/dstc8-schema-guided-dialogue.
Output goes next to this file. Re-running it gives the same files.
"""
import collections, json, os, shutil, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from convert import h, offtopic, skill_name  # noqa: E402


def nums(spec):
    """'1-3 5' -> ['001', '002', '003', '005']"""
    out = []
    for part in spec.split():
        lo, _, hi = part.partition("-")
        out += ["%03d" % i for i in range(int(lo), int(hi or lo) + 1)]
    return out


# The dialogue files the set was made from (the copy it was made from lacked the
# others); a full checkout has them all, so the set rebuilds the same.
FILES = {
    "train": nums("1-36 38-51 57 59 61-65 67 69 86-92 95-103 105-116 119-127"),
    "dev": nums("1-14 16 19 20"),
    "test": nums("1-11 13-15 17 18 20 21 24 25 30 32-34"),
}
# Cases drawn per intent for each half.
PER_HALF = 9
# Domains whose services offer the same intent for different things (hair stylists,
# dentists, doctors, therapists): a request says which, so only its own service's
# intent is right.
DISTINCT = {"Services"}


def domain(service):
    return service.split("_")[0]


def schema(repo):
    services = {}
    for split in FILES:
        for s in json.load(open(os.path.join(repo, split, "schema.json"))):
            services.setdefault(s["service_name"], s)
    return services


def sentence(s):
    s = " ".join(s.split())
    return s if s.endswith((".", "!", "?")) else s + "."


def first_requests(repo):
    """Each dialogue's user turns at which a service's active intent first becomes
    non-NONE: the request that starts that intent, with its (service, intent)."""
    out = []
    for split, files in FILES.items():
        for n in files:
            for d in json.load(open(os.path.join(repo, split, "dialogues_%s.json" % n))):
                started = set()
                for t in d["turns"]:
                    if t["speaker"] != "USER":
                        continue
                    new = []
                    for f in t["frames"]:
                        intent = f["state"]["active_intent"]
                        if intent != "NONE" and f["service"] not in started:
                            started.add(f["service"])
                            new.append((f["service"], intent))
                    if len(new) == 1:
                        out.append((" ".join(t["utterance"].split()), new[0]))
    return out


def write(skills, cases):
    """Writes skills/ and the two halves, split by a hash of the request text as
    ../convert.py splits its sets, and returns their sizes."""
    shutil.rmtree(os.path.join(HERE, "skills"), ignore_errors=True)
    os.makedirs(os.path.join(HERE, "skills"))
    for n, desc in skills:
        with open(os.path.join(HERE, "skills", n + ".md"), "w") as f:
            f.write("---\nname: %s\ndescription: %s\n---\n%s\n" % (n, json.dumps(desc, ensure_ascii=False), "An entry of a public intent-retrieval data set; see ../README.md."))
    halves = {"tune.jsonl": [], "heldout.jsonl": []}
    for q, exp in sorted(cases, key=lambda c: h(c[0])):
        halves["tune.jsonl" if int(h(q)[:2], 16) % 2 == 0 else "heldout.jsonl"].append({"query": q, "expect": exp})
    for fn, cs in halves.items():
        with open(os.path.join(HERE, fn), "w") as f:
            for c in cs:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    return {"skills": len(skills), "tune": len(halves["tune.jsonl"]), "held": len(halves["heldout.jsonl"])}


def main(repo):
    services = schema(repo)
    skills, taken, name = [], set(), {}
    for sname in sorted(services):
        s = services[sname]
        for it in sorted(s["intents"], key=lambda i: i["name"]):
            n = skill_name(sname + "-" + it["name"], taken)
            name[(sname, it["name"])] = n
            skills.append((n, sentence(it["description"]) + " " + sentence(s["description"])))

    def right(key):
        """The skills a request starting intent key may go to: its own first, then the
        same-named intents of the other services of its domain."""
        sname, intent = key
        others = []
        if domain(sname) not in DISTINCT:
            others = sorted(name[(o, intent)] for o in services if o != sname and domain(o) == domain(sname) and (o, intent) in name)
        return [name[key]] + others

    by_text = collections.defaultdict(set)
    for q, key in first_requests(repo):
        if q:
            by_text[q].add(key)
    per = collections.defaultdict(list)
    conflicting = 0
    for q, keys in by_text.items():
        if len({frozenset(right(k)) for k in keys}) > 1:
            conflicting += 1
            continue
        per[min(keys)].append(q)
    cases = []
    for key in sorted(per):
        for half in (0, 1):
            qs = sorted((q for q in per[key] if int(h(q)[:2], 16) % 2 == half), key=lambda q: h("sgd" + q))
            for q in qs[:PER_HALF]:
                r = right(key)
                cases.append((q, r[0] if len(r) == 1 else r))
    n = write(skills, cases)
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write(README % n)
    offtopic("sgd", ["gorilla-torchhub", "gorilla-tfhub", "gorilla-huggingface"])
    print("%d skills, %d intents with requests, %d tuning and %d held-out cases, %d texts left out for intents not right for each other"
          % (n["skills"], len(per), n["tune"], n["held"], conflicting))


README = """# Schema-Guided Dialogue (SGD)

From github.com/google-research-datasets/dstc8-schema-guided-dialogue: Abhinav
Rastogi, Xiaoxue Zang, Srinivas Sunkara, Raghav Gupta and Pranav Khaitan, "Towards
Scalable Multi-domain Conversational Agents: The Schema-Guided Dialogue Dataset",
AAAI 2020. Licensed under the Creative Commons Attribution-ShareAlike 4.0 licence
(CC BY-SA 4.0); these files, being adapted from it, are under the same licence. The
requests are copied unchanged but for runs of spaces made one.

SGD's schemas describe 45 services of 20 domains (restaurants, flights, banks,
music, ...), each with one to four intents. Each intent of each service is a skill:
its service and intent names as the name (lower-cased, other characters as '-':
`restaurants-1-reserverestaurant`) and, as the description, the intent's description
followed by the service's, with a full stop added where one is missing; nothing else.

SGD's dialogues were written by crowd workers paraphrasing dialogues generated from
the schemas, and every user turn says, for each service, which intent is active. A
case is a user turn at which a service's intent first becomes active in its
dialogue: the request that starts that intent ("I want to find an apartment with
three bedrooms and baths"), often the dialogue's first turn, sometimes a later one
("Great! I need to arrange a cab to get there."). Turns that start two services'
intents at once are left out, and so are texts that different dialogues label with
intents that do not count as right for each other (see below).

Several services of a domain offer the same intent with near-identical descriptions
(Restaurants_1 and Restaurants_2 both have ReserveRestaurant, Flights_1 to Flights_4
SearchOnewayFlight), and a request rarely says which service it is for: SGD's
dialogues were generated for one service at a time, not for choosing among them. So a
case expects a list: its own service's intent first, then the intents of the same name
in the other services of its domain, any of them counting as right. The exception is
the Services domain, whose four services book hair stylists, dentists, doctors and
therapists: a request says which, so only its own service's intent is right. Intents
of different names are never interchangeable, even where they do the same thing
(Music_1's PlaySong and Music_2's PlayMedia).

The catalog holds every service of SGD's train, dev and test schemas; the cases come
from all three splits' dialogues and are split by a hash of the request text, not by
SGD's splits: SGD's test dialogues are mostly of services that its training dialogues
never use, so its splits would measure different parts of the catalog. Of each
intent's requests, PER_HALF in each half are chosen by a hash of the text, so that
every intent counts about as much; intents that no dialogue's turn starts (the
bookings that follow a search in the same service, such as Trains_1's
GetTrainTickets) are in the catalog but have no cases. The cases come from 137 of
SGD's 181 dialogue files (`convert.py` lists them).

%(skills)d skills; %(tune)d tuning cases (tune.jsonl), %(held)d held-out cases
(heldout.jsonl). Made by convert.py from a checkout of the repository:

    python3 testdata/routing/public/sgd/convert.py SGD_CHECKOUT

offtopic-tune.jsonl and offtopic-heldout.jsonl hold 100 requests each from the
Gorilla APIBench sets beside this one (requests for machine-learning models, from
their tuning and held-out halves respectively): no skill here should take them.
""".replace("PER_HALF", str(PER_HALF))


if __name__ == "__main__":
    main(sys.argv[1])
