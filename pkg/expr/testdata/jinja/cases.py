# The Jinja2 conformance cases of conformance_test.go, with the section of the
# Jinja2 Template Designer Documentation (3.1) each group follows. Running this
# file renders every case with the real Jinja2 and prints the Go table, so the
# expected outputs are Jinja2's own:
#
#   python3 pkg/expr/testdata/jinja/cases.py > /tmp/table.go.txt
#
# Each case is rendered as "{{ EXPR }}" in a template of its own, so the output
# is text, as Jinja2 gives it.
import json, sys
import jinja2

ENV = {
    "x": 3, "y": -2, "f": 2.5, "zero": 0,
    "s": "héllo wörld", "e": "é", "name": "ada lovelace", "empty": "", "word": "Straße",
    "l": [3, 1, 2], "words": ["b", "A", "c"], "n": None, "t": True,
    "m": {"a": 1, "b": 2},
    "d": {"items": ["i1", "i2"], "keys": "K", "values": "V", "get": "G", "a": 1},
    "users": [{"name": "bo", "age": 30}, {"name": "al", "age": 25}],
    "inputs": {"issue_key": "AAP-1", "items": ["x", "y"], "count": 2},
    "nested": {"a": {"b": {"c": 5}}},
}

GROUPS = [
 ("Expressions › Literals", [
   "'hello'", '"world"', "42", "42.5", "-7", "0.5", "true", "false", "True", "False",
   "[1, 2, 3]|length", "('a', 'b')|join('-')", "{'k': 1}['k']",
   "'a\\tb'|length", "\"q'uote\"", "[]|length", "{}|length",
 ]),
 ("Expressions › Math", [
   "1 + 2", "3 - 5", "2 * 3", "7 / 2", "6 / 2", "7 // 2", "-7 // 2", "7 % 3",
   "-7 % 3", "2 ** 10", "2 ** 3 ** 2", "-2 ** 2", "x * 2 + 1", "(x + 1) * 2",
   "f * 2", "1 + 2.5", "10 / 4", "'ab' * 3", "'a' + 'b'", "x - y", "-x", "+x",
   "- -x", "x // 2 * 2", "2 + 3 * 4", "(2 + 3) * 4", "10 - 2 - 3", "100 / 10 / 5",
 ]),
 ("Expressions › Other Operators (~, in)", [
   "'a' ~ 1", "x ~ '!'", "1 ~ 2", "'v' ~ f", "'a' ~ t", "name ~ ' ' ~ x",
   "'a' ~ 'b' | upper", "x * 2 ~ 'z'", "'a' in ['a', 'b']", "'z' not in 'abc'",
   "2 in l", "'a' in m", "'items' in d", "'ll' in s", "'ö' in s", "not 'q' in s",
 ]),
 ("Expressions › Comparisons", [
   "x == 3", "x != 3", "x > 2", "x >= 3", "x < 3", "x <= 3", "'a' < 'b'",
   "[1, 2] == [1, 2]", "l == [3, 1, 2]", "m == {'a': 1, 'b': 2}", "1 == 1.0",
   "'3' == 3", "n == none", "x | abs == 3", "l | length > 2",
 ]),
 ("Expressions › Logic", [
   "x and true", "not x", "n or 'd'", "empty or 'fallback'", "x > 1 and x < 5",
   "not (x > 1)", "true and false or true", "not x == 3", "zero or x",
   "x and 'yes'", "l and l | length", "not empty",
 ]),
 ("Expressions › If Expression", [
   "'yes' if x > 1 else 'no'", "'yes' if n else 'no'", "'a' if t else 'b' ~ 'c'",
   "x if x > 5 else -x", "'big' if l | length > 2 else 'small'",
 ]),
 ("Variables (attribute and subscript access)", [
   "m.a", "m['a']", "nested.a.b.c", "nested['a']['b'].c", "users[0].name",
   "users[1]['age']", "inputs.issue_key", "inputs['issue_key']", "l[0]", "l[-1]",
   "l[1:] | join(',')", "l[::-1] | join(',')", "m.get('a')", "m.get('z', 'dflt')",
   "m.keys() | list | sort | join(',')", "m.items() | list | length",
   "m.values() | sum", "d.items() | list | length", "d['items'] | join(',')",
   "inputs.count + 1",
 ]),
 ("Filters (precedence: a filter applies to the unary expression before it)", [
   "-x | abs", "- x | abs", "-3 | abs", "2 - x | abs", "y | abs + 1", "1 + y | abs",
   "x * y | abs", "not x | abs", "name | upper | lower", "'a' ~ name | title",
   "l | sort | first", "(l | sort)[1]", "l | sort | join('-') | upper",
   "-f | round", "x | string ~ '!'", "[1, -2] | map('abs') | join(',')",
   "-2 ** 2 | abs", "y | abs ** 2",
 ]),
 ("List of Builtin Tests › defined, undefined, none", [
   "x is defined", "zz is defined", "zz is not defined", "zz is undefined",
   "m.a is defined", "m.zz is defined", "m.zz is not defined", "n is defined",
   "n is none", "x is none", "n is not none", "users[5] is defined",
   "nested.a.q is defined", "not zz is defined", "zz is defined and zz.q",
   "inputs.issue_key is defined", "inputs.nope is defined",
 ]),
 ("List of Builtin Filters › default", [
   "zz | default('d')", "zz | default('d', true)", "empty | default('d')",
   "empty | default('d', true)", "m.zz | default('none here')", "x | default(5)",
   "zz | d('short')", "inputs.nope | default('x')",
 ]),
 ("List of Builtin Filters › strings", [
   "name | upper", "name | title", "name | capitalize", "'  pad ' | trim",
   "name | replace('a', 'o')", "name | replace('a', 'o', 1)", "s | upper",
   "name | truncate(8)", "name | truncate(9, true)", "name | truncate(5, true, '!', 0)",
   "'x' | string", "42 | string | length", "name | list | first", "s | first",
   "s | last", "s | reverse", "e | list | length", "word | lower",
 ]),
 ("List of Builtin Filters › lists", [
   "l | length", "l | count", "l | first", "l | last", "l | sort | join(',')",
   "l | sort(reverse=true) | join(',')", "words | sort | join(',')",
   "words | sort(case_sensitive=true) | join(',')", "l | sum", "l | sum(start=10)",
   "l | min", "l | max", "l | reverse | join(',')", "[1, 2, 1, 3] | unique | join(',')",
   "l | join", "l | join(', ')", "users | map(attribute='name') | join(',')",
   "users | sum(attribute='age')", "users | sort(attribute='age') | map(attribute='name') | join(',')",
   "users | join(',', attribute='name')", "['a', 'b'] | map('upper') | join",
   "l | list | length", "users | first | length", "[1, 'a'] | tojson", "m | tojson",
   "m | tojson(2)", "users | map(attribute='age') | max",
 ]),
 ("List of Builtin Filters › numbers", [
   "'42' | int", "'3.7' | int", "'abc' | int", "3.9 | int", "'2.5' | float",
   "x | float", "-5 | abs", "2.5 | round", "3.5 | round", "2.4 | round",
   "42.55 | round(1)", "42.55 | round(1, 'floor')", "42.55 | round(0, 'ceil')",
   "f | round | int",
 ]),
 ("List of Builtin Filters › length and text (strings are text, not bytes)", [
   "e | length", "s | length", "word | length", "s[:5]", "s[1]", "s[-1]",
   "s[6:]", "s[::-1]", "e ~ e | length", "s | list | length",
   "word[4:]", "s.upper()", "s.split(' ') | first", "s.startswith('hé')",
   "s.replace('ö', 'o')", "s | truncate(8, true, '', 0)",
 ]),
 ("Python Methods", [
   "name.upper()", "name.split(' ') | last", "'a,b'.split(',') | length",
   "name.startswith('ada')", "'-'.join(['a', 'b'])", "name.title()",
   "'  x '.strip()", "name.replace(' ', '_')", "'{} {}'.format(1, 2)",
   "'abc'.find('c')", "name.count('a')", "'%s-%d' % ('a', 3)",
 ]),
]

# Where skillbus deliberately differs from Jinja2, documented in
# docs/authoring.md; these are not in the table above.
DIFFERENT = [
  # Jinja2 gives the dict method (getattr first); skillbus the key.
  "d.items | join(',')", "d.keys", "d.values", "d.get", "inputs.items | join(',')",
]

env = jinja2.Environment()
out = sys.stdout
n = 0
for section, cases in GROUPS:
    out.write("\t// Jinja2 Template Designer Documentation, %s.\n" % section)
    for c in cases:
        try:
            want = env.from_string("{{ " + c + " }}").render(**ENV)
        except Exception as ex:
            sys.stderr.write("Jinja2 fails: %s: %s\n" % (c, ex))
            continue
        out.write("\t{%s, %s},\n" % (json.dumps(c, ensure_ascii=False), json.dumps(want, ensure_ascii=False)))
        n += 1
sys.stderr.write("%d cases\n" % n)
for c in DIFFERENT:
    try:
        sys.stderr.write("differs: %s => %r\n" % (c, env.from_string("{{ " + c + " }}").render(**ENV)))
    except Exception as ex:
        sys.stderr.write("differs: %s => error %s\n" % (c, ex))
