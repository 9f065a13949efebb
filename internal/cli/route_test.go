package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/cli"
)

const routingSkills = "../../testdata/routing/skills"

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Skillbus(context.Background(), args, noEnv, &out, &errOut)
	return out.String() + errOut.String() + errString(err), cli.ExitCode(err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRouteOffline(t *testing.T) {
	t.Parallel()
	out, code := run(t, "route", "--skills", routingSkills, "--json", "please summarise the attached PDF")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, k := range []string{"primary", "fallback", "parallel_groups", "threshold", "candidates"} {
		if _, ok := d[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if d["primary"] != "pdf-summarizer" {
		t.Fatalf("primary = %v", d["primary"])
	}
	c := d["candidates"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "source", "score", "components", "selected", "reason"} {
		if _, ok := c[k]; !ok {
			t.Errorf("candidate has no %q: %v", k, c)
		}
	}

	out, code = run(t, "route", "--skills", routingSkills, "--json", "what's the capital of peru")
	if code != 3 || !strings.Contains(out, `"primary": null`) && !strings.Contains(out, `"primary":null`) {
		t.Fatalf("off-topic: exit %d: %s", code, out)
	}
	out, code = run(t, "route", "--skills", routingSkills, "--explain", "--data", `{"query":"deploy the build to staging"}`)
	if code != 0 || !strings.Contains(out, "primary:   deploy-staging") || !strings.Contains(out, "INTENT") {
		t.Fatalf("explain: exit %d: %s", code, out)
	}
	for _, bad := range [][]string{
		{"route", "--skills", routingSkills},
		{"route", "--skills", "/nonexistent", "x"},
		{"route", "--skills", routingSkills, "--weights", "intent=2", "x"},
		{"route", "--skills", routingSkills, "--data", "{not json", "x"},
	} {
		if out, code := run(t, bad...); code != 2 {
			t.Errorf("%v: exit %d: %s", bad, code, out)
		}
	}
}

func TestRouteEval(t *testing.T) {
	t.Parallel()
	out, code := run(t, "route", "eval", "--skills", routingSkills, "--cases", "../../testdata/routing/heldout.jsonl", "--no-examples", "--min-accuracy", "0.9")
	if code != 0 || !strings.Contains(out, "top-1 accuracy") || !strings.Contains(out, "BM25+stemming") {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !regexp.MustCompile(`(?m)^top-1 +\d+ +\d+ +p [<0-9.]`).MatchString(out) || !strings.Contains(out, "only BM25+stemming right") {
		t.Errorf("no request-by-request comparison with BM25+stemming: %s", out)
	}
	out, code = run(t, "route", "eval", "--skills", routingSkills, "--cases", "../../testdata/routing/heldout.jsonl", "--min-accuracy", "0.99")
	if code != 1 || !strings.Contains(out, "below --min-accuracy") {
		t.Fatalf("gate: exit %d: %s", code, out)
	}
	out, code = run(t, "route", "eval", "--skills", routingSkills, "--cases", "../../testdata/routing/heldout.jsonl", "--no-examples", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 {
		t.Fatalf("json: exit %d: %s", code, out)
	}
	var first struct {
		Query   string   `json:"query"`
		Expect  *string  `json:"expect"`
		Primary *string  `json:"primary"`
		Ranked  []string `json:"ranked"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Query == "" || first.Ranked == nil {
		t.Fatalf("first line %s: %v", lines[0], err)
	}
	var last struct {
		Summary struct {
			Top1 float64 `json:"top1"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Summary.Top1 < 0.9 {
		t.Fatalf("summary %s: %v", lines[len(lines)-1], err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "c.jsonl")
	os.WriteFile(bad, []byte(`{"query":"x","expect":"no-such-skill"}`), 0o644)
	if out, code := run(t, "route", "eval", "--skills", routingSkills, "--cases", bad); code != 2 || !strings.Contains(out, "no-such-skill") {
		t.Fatalf("bad case: exit %d: %s", code, out)
	}
}

func TestValidateWarnsWhenExamplesRouteElsewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(body), 0o644)
	}
	write("pdf-summarizer", "---\nname: pdf-summarizer\ndescription: Summarize PDF documents.\nexamples:\n  positive: [\"convert 10 miles to kilometers\"]\n---\nbody\n")
	write("unit-converter", "---\nname: unit-converter\ndescription: Convert miles, kilometers and other units.\n---\nbody\n")
	out, code := run(t, "skills", "validate", dir)
	if code != 0 || !strings.Contains(out, `example "convert 10 miles to kilometers" routes to unit-converter, not to pdf-summarizer`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

// Skills whose triggers are phrases load and route by them, offline.
func TestRoutePhraseTriggers(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/phrasestyle/skills"
	out, code := run(t, "route", "--skills", dir, "--json", "please look at my pull request")
	if code != 0 || !strings.Contains(out, `"primary": "code_review"`) {
		t.Fatalf("exit %d: %s", code, out)
	}
	out, code = run(t, "route", "eval", "--skills", dir, "--cases", "../../testdata/routing/phrasestyle/cases.jsonl", "--min-accuracy", "0.96")
	if code != 0 || !strings.Contains(out, "off-topic rejected  1.000") {
		t.Fatalf("eval: exit %d: %s", code, out)
	}
}

// An unquoted ': ' in a one-line description loads with a warning; an invalid skill
// is skipped with a warning and the rest are routed.
func TestRouteSkipsInvalidSkills(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "SKILL.md"), []byte(body), 0o644)
	}
	const body = "\n---\nFollow the request step by step and report what was done, briefly and clearly.\n"
	write("code-review", "---\nname: code-review\ndescription: Review code: bugs, style and naming"+body)
	write("weather", "---\nname: weather\ndescription: Weather forecast for a city."+body)
	write("broken", "---\nname: broken\ndescription: Broken skill.\ntags:\n\t- tab"+body)
	// Skipped for its error: its warning (the same colon) is not printed.
	write("broken2", "---\nname: broken2\ndescription: Broken too: colon\nmax_retries: many"+body)
	out, code := run(t, "route", "--skills", dir, "review my code for bugs")
	if code != 0 || !strings.Contains(out, "primary:   code-review") ||
		!strings.Contains(out, "warning: skipping an invalid skill: "+filepath.Join(dir, "broken", "SKILL.md")+":5:2: error: invalid YAML") {
		t.Fatalf("exit %d: %s", code, out)
	}
	// The skill read in spite of its unquoted colon is routed, and route says how
	// it was read, with the line and the fix.
	if want := filepath.Join(dir, "code-review", "SKILL.md") + `:3:14: warning: description holds ': '`; !strings.Contains(out, want) || !strings.Contains(out, `quote it: description: "Review code: bugs, style and naming"`) {
		t.Fatalf("no warning %q: %s", want, out)
	}
	if !strings.Contains(out, "skipping an invalid skill: "+filepath.Join(dir, "broken2", "SKILL.md")) || strings.Contains(out, "Broken too: colon\"") {
		t.Fatalf("broken2: skipped, and its warning not printed: %s", out)
	}
	out, code = run(t, "skills", "validate", filepath.Join(dir, "code-review"))
	if code != 0 || !strings.Contains(out, "SKILL.md:3:14: warning: description holds ': '") || !strings.Contains(out, `quote it: description: "Review code: bugs, style and naming"`) {
		t.Fatalf("validate: exit %d: %s", code, out)
	}
	cases := filepath.Join(dir, "cases.jsonl")
	os.WriteFile(cases, []byte(`{"query":"weather forecast for lisbon","expect":"weather"}`+"\n"), 0o644)
	out, code = run(t, "route", "eval", "--skills", dir, "--cases", cases, "--no-examples", "--min-accuracy", "1")
	if code != 0 || !strings.Contains(out, "2 invalid skill file(s) skipped") {
		t.Fatalf("eval: exit %d: %s", code, out)
	}
}

// route fit writes the setting that routes a tuning file best; eval and route use it.
func TestRouteFit(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/phrasestyle/skills"
	out := filepath.Join(t.TempDir(), "weights.yaml")
	got, code := run(t, "route", "fit", "--skills", dir, "--cases", "../../testdata/routing/phrasestyle/cases.jsonl", "--out", out)
	if code != 0 || !strings.Contains(got, "fitted on 25 cases: ") || !strings.Contains(got, "top-1 1.000") {
		t.Fatalf("fit: exit %d: %s", code, got)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "threshold: ") {
		t.Fatalf("weights file %q: %v", b, err)
	}
	if got, code := run(t, "route", "eval", "--skills", dir, "--cases", "../../testdata/routing/phrasestyle/cases.jsonl", "--weights", out, "--min-accuracy", "1"); code != 0 {
		t.Fatalf("eval --weights: exit %d: %s", code, got)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("name: 3\nthreshold: 2\n"), 0o644)
	for _, args := range [][]string{
		{"route", "--skills", dir, "--weights", bad, "x"},
		{"route", "--skills", dir, "--weights", "/nonexistent.yaml", "x"},
		{"route", "fit", "--skills", dir},
	} {
		if got, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d: %s", args, code, got)
		}
	}
}

// A misspelt subcommand of route is routed as a request, as route takes free
// text, but when no skill takes it the command is suggested.
func TestRouteSuggestsAMisspeltSubcommand(t *testing.T) {
	t.Parallel()
	out, code := run(t, "route", "--skills", routingSkills, "evl")
	if code != 3 || !strings.Contains(out, `did you mean "skillbus route eval"`) {
		t.Errorf("exit %d: %s", code, out)
	}
	// A request that a skill takes is not second-guessed, nor a word more
	// than a typo away.
	for _, w := range []string{"summarise", "get", "put", "deal", "e"} {
		if out, code = run(t, "route", "--skills", routingSkills, w); strings.Contains(out, "did you mean") {
			t.Errorf("%s: exit %d: %s", w, code, out)
		}
	}
	// A flag of eval's, given to route: the same hint.
	out, code = run(t, "route", "evl", "--skills", routingSkills, "--cases", "x.jsonl")
	if code != 2 || !strings.Contains(out, `unknown flag: --cases (did you mean "skillbus route eval"?)`) {
		t.Errorf("exit %d: %s", code, out)
	}
}

// TEXT alone is routed as the request a client sends (io.skillbus.request with
// the text in "query"), so a skill whose inputs refuse that data is not chosen,
// as the live router would not choose it.
func TestRouteTextIsAQueryRequest(t *testing.T) {
	t.Parallel()
	out, code := run(t, "route", "--skills", "../../testdata/skills", "greet Ada")
	if code != 3 || !strings.Contains(out, "hello scores") || !strings.Contains(out, "not for this request: its inputs (name, shout) do not take the field query") {
		t.Errorf("exit %d: %s", code, out)
	}
	out, code = run(t, "route", "--skills", "../../testdata/skills", "--data", `{"name":"Ada","text":"greet Ada"}`, "--type", "com.example.greet")
	if code != 0 || !strings.Contains(out, "primary:   hello") {
		t.Errorf("by type: exit %d: %s", code, out)
	}
}

// A skill kept out because it takes its text in another field than query is
// named with that field, and routed as its clients send it with --data; route
// eval --text-field sends --cases the same way.
func TestRouteTextToASkillThatTakesText(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "temp-convert"), 0o755)
	os.WriteFile(filepath.Join(dir, "temp-convert", "SKILL.md"), []byte("---\nname: temp-convert\ndescription: Converts a temperature between Celsius and Fahrenheit.\ntriggers: [celsius, fahrenheit]\n---\n\nReads a number and a unit from the text and converts it.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "temp-convert", "skill.yaml"), []byte("inputs:\n  - name: text\n    type: string\n    required: true\nsteps:\n  - id: echo\n    tool: echo\n    args:\n      text: \"{{ inputs.text }}\"\n"), 0o644)
	out, code := run(t, "route", "--skills", dir, "convert 451 fahrenheit to celsius")
	if code != 3 || !strings.Contains(out, `temp-convert takes its text as "text": --data '{"text": "..."}' routes it as its clients send it`) {
		t.Errorf("exit %d: %s", code, out)
	}
	out, code = run(t, "route", "--skills", dir, "--data", `{"text":"convert 451 fahrenheit to celsius"}`)
	if code != 0 || !strings.Contains(out, "primary:   temp-convert") {
		t.Errorf("--data text: exit %d: %s", code, out)
	}
	cases := filepath.Join(dir, "cases.jsonl")
	os.WriteFile(cases, []byte(`{"query":"convert 451 fahrenheit to celsius","expect":"temp-convert"}`+"\n"), 0o644)
	out, code = run(t, "route", "eval", "--skills", dir, "--cases", cases, "--no-examples")
	if code != 0 || !strings.Contains(out, "temp-convert was recalled but kept out: its inputs (text) do not take the field query") {
		t.Errorf("eval as query: exit %d: %s", code, out)
	}
	out, code = run(t, "route", "eval", "--skills", dir, "--cases", cases, "--no-examples", "--text-field", "text")
	if code != 0 || !strings.Contains(out, "top-1 accuracy      1.000") {
		t.Errorf("eval as text: exit %d: %s", code, out)
	}
}
