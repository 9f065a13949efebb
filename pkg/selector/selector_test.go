package selector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

func newSel(t testing.TB, cfg selector.Config, skills ...*skill.Skill) *selector.Selector {
	t.Helper()
	x := selector.New(cfg)
	x.Sync(skills)
	return x
}

// publicSkills loads the n skills of a public set's directory.
func publicSkills(t *testing.T, dir string, n int) []*skill.Skill {
	t.Helper()
	cat, ds := skill.Discover(dir + "skills")
	if ds.HasErrors() || len(cat.Skills) != n {
		t.Fatalf("%s: %d skills, want %d; %v", dir, len(cat.Skills), n, ds)
	}
	return cat.Skills
}

// readCasesFile reads a cases file.
func readCasesFile(t *testing.T, path string) []selector.Case {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := selector.ReadCases(f, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func sk(name, desc string, mods ...func(*skill.Skill)) *skill.Skill {
	s := &skill.Skill{Name: name, Description: desc, CostHint: "medium", Digest: name + "-1"}
	for _, m := range mods {
		m(s)
	}
	return s
}

func decide(t *testing.T, x *selector.Selector, req selector.Request, env selector.Env) *selector.Decision {
	t.Helper()
	d, err := x.Select(req, env)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	pdf       = sk("pdf-summarizer", "Summarize PDF documents into key points.", func(s *skill.Skill) { s.Tags = []string{"pdf", "summary"}; s.AntiTriggers = []string{"meeting"} })
	notes     = sk("meeting-notes", "Summarize a meeting transcript into notes and action items.", func(s *skill.Skill) { s.Tags = []string{"meeting", "transcript"} })
	weather   = sk("weather", "Weather forecast for a city.", func(s *skill.Skill) { s.ParallelSafe = true })
	news      = sk("weather-news", "Weather news and storm warnings for a city.", func(s *skill.Skill) { s.ParallelSafe = true })
	push      = sk("on-push", "Run checks on every push.", func(s *skill.Skill) { s.Triggers = []string{"com.github.*"} })
	audit     = sk("audit", "Record every event for the audit log.", func(s *skill.Skill) { s.Always = true })
	secret    = sk("secret-tool", "Summarize PDF documents secretly.", func(s *skill.Skill) { s.Metadata = map[string]any{"activation": "explicit"} })
	allSkills = []*skill.Skill{pdf, notes, weather, news, push, audit, secret}
)

func TestLexicalRoutingPicksTheRelevantSkill(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, allSkills...)
	d := decide(t, x, selector.Request{Text: "please summarise this PDF for me"}, selector.Env{})
	if d.Primary != "pdf-summarizer" {
		t.Fatalf("primary = %q, candidates %+v", d.Primary, d.Candidates)
	}
	c := d.Candidate("pdf-summarizer")
	if c.Source != selector.SourceLexical || c.Components.Trigger != 0.6 || c.Components.Success != 0.5 || !c.Selected || c.Role != "primary" {
		t.Fatalf("candidate = %+v", c)
	}
	// The explicit-only skill matches the words but is never chosen by score.
	if s := d.Candidate("secret-tool"); s == nil || s.Selected || !strings.Contains(s.Reason, "explicit") {
		t.Fatalf("secret-tool = %+v", s)
	}
	// A typo still finds it.
	if d := decide(t, x, selector.Request{Text: "sumarize the pdf"}, selector.Env{}); d.Primary != "pdf-summarizer" {
		t.Fatalf("typo: primary = %q", d.Primary)
	}
	// Off-topic text is rejected, with the candidates kept for the explanation.
	if d := decide(t, x, selector.Request{Text: "what is the capital of peru"}, selector.Env{}); d.Primary != "" || d.Threshold != selector.DefaultThreshold {
		t.Fatalf("off-topic routed to %q", d.Primary)
	}
}

func TestAntiTriggerPenalises(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, allSkills...)
	d := decide(t, x, selector.Request{Text: "summarize the meeting pdf"}, selector.Env{})
	c := d.Candidate("pdf-summarizer")
	if c == nil || c.Components.Conflict != -1 || !strings.Contains(c.Reason, `anti-trigger "meeting"`) {
		t.Fatalf("pdf = %+v", c)
	}
	if d.Primary != "meeting-notes" {
		t.Fatalf("primary = %q", d.Primary)
	}
}

func TestExplicitInvocationWins(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, allSkills...)
	for _, text := range []string{"$secret-tool now", "use @secret-tool on the file", "请使用 secret-tool skill 处理"} {
		d := decide(t, x, selector.Request{Text: text}, selector.Env{})
		if d.Primary != "secret-tool" || d.Candidates[0].Source != selector.SourceForced || d.Candidates[0].Components.Trigger != 1 {
			t.Fatalf("%q: %+v", text, d)
		}
	}
	// An e-mail address is not a mention; an unknown $name is ignored.
	if got := selector.Mentions("mail bob@secret-tool.com about $5 and $weather"); !reflect.DeepEqual(got, []string{"5", "weather"}) {
		t.Fatalf("mentions = %q", got)
	}
	_, err := x.Select(selector.Request{Skill: "nope"}, selector.Env{})
	var unknown *selector.UnknownSkillError
	if !errors.As(err, &unknown) || unknown.Name != "nope" || unknown.Suggest != "" {
		t.Fatalf("err = %v", err)
	}
	_, err = x.Select(selector.Request{Skill: "secret-tol"}, selector.Env{})
	if !errors.As(err, &unknown) || err.Error() != `skill "secret-tol" is not in the catalog; did you mean secret-tool?` {
		t.Fatalf("a misspelt name: %v", err)
	}
}

func TestTypePatternsSubscriptionsAndAlways(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, allSkills...)
	// Unavailable everywhere: a subscription is still selected, its score halved.
	d := decide(t, x, selector.Request{Type: "com.github.push"}, selector.Env{PoolLive: func(string) bool { return false }})
	if d.Primary != "on-push" || !reflect.DeepEqual(d.Always, []string{"audit"}) {
		t.Fatalf("plan = %+v", d)
	}
	c := d.Candidate("on-push")
	if c.Components.Available || c.Score >= 0.5 || !strings.Contains(c.Reason, "trigger com.github.* matches com.github.push") {
		t.Fatalf("on-push = %+v", c)
	}
	if got := d.Running(); !reflect.DeepEqual(got, []string{"on-push", "audit"}) {
		t.Fatalf("running = %v", got)
	}
	// No plan: always-skills do not make one.
	if d := decide(t, x, selector.Request{Type: "org.example.other"}, selector.Env{}); d.Primary != "" || len(d.Always) != 0 {
		t.Fatalf("plan = %+v", d)
	}
	for _, tc := range []struct {
		p, typ string
		want   bool
	}{{"a.*", "a.b", true}, {"a.*", "a.b.c", false}, {"a.>", "a.b.c", true}, {"a.>", "a", false}, {">", "x", true}, {"a.b", "a.b", true}, {"*.b", "a.c", false}} {
		if got := selector.MatchType(tc.p, tc.typ); got != tc.want {
			t.Errorf("MatchType(%q, %q) = %v", tc.p, tc.typ, got)
		}
	}
}

func TestParallelGroupsMaxActiveAndGeneric(t *testing.T) {
	t.Parallel()
	generic := sk("generic", "Do anything.")
	x := newSel(t, selector.Config{Threshold: 0.3, MaxActive: 2, Generic: "generic"}, append(allSkills, generic)...)
	d := decide(t, x, selector.Request{Text: "weather forecast and storm warnings for the city"}, selector.Env{})
	if d.Primary != "weather" && d.Primary != "weather-news" {
		t.Fatalf("primary = %q", d.Primary)
	}
	if len(d.ParallelGroups) != 1 || len(d.ParallelGroups[0]) != 2 || !reflect.DeepEqual(d.Fallback, []string{"generic"}) {
		t.Fatalf("plan = %+v", d)
	}
	if len(d.Running()) != 3 || d.EstimatedCost != 6 { // the pair, and audit (always, no triggers: every plan)
		t.Fatalf("running %v, cost %d", d.Running(), d.EstimatedCost)
	}
	selected := 0
	for _, c := range d.Candidates {
		if c.Selected && c.Role != "always" {
			selected++
		}
	}
	if selected > 2 {
		t.Fatalf("maxActive 2, selected %d", selected)
	}
}

func TestSuccessRateAndReadiness(t *testing.T) {
	t.Parallel()
	wf := sk("wf", "Weather forecast for a city.", func(s *skill.Skill) {
		s.Workflow = &skill.Workflow{Inputs: []skill.Input{{Name: "city", Required: true}}}
		s.RequiredTools = []string{"http"}
	})
	x := newSel(t, selector.Config{}, wf)
	env := selector.Env{
		Success:    func(name, version string) (int, int) { return 8, 8 },
		ToolServed: func(string) bool { return false },
	}
	c := decide(t, x, selector.Request{Text: "weather forecast", Data: map[string]any{"city": "Oslo"}}, env).Candidate("wf")
	if c.Components.Success != 0.9 || c.Components.Context != 0.5 {
		t.Fatalf("components = %+v", c.Components)
	}
}

func TestIndexFollowsChanges(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, pdf)
	if d := decide(t, x, selector.Request{Text: "transcribe the podcast audio"}, selector.Env{}); d.Primary != "" {
		t.Fatalf("primary = %q", d.Primary)
	}
	audio := sk("transcriber", "Transcribe podcast audio files to text.")
	if n := x.Sync([]*skill.Skill{pdf, audio}); n != 1 {
		t.Fatalf("sync changed %d skills, want 1 (pdf's digest is the same)", n)
	}
	if d := decide(t, x, selector.Request{Text: "transcribe the podcast audio"}, selector.Env{}); d.Primary != "transcriber" {
		t.Fatalf("primary = %q", d.Primary)
	}
	x.Remove("transcriber")
	if d := decide(t, x, selector.Request{Text: "transcribe the podcast audio"}, selector.Env{}); len(d.Candidates) != 0 {
		t.Fatalf("removed skill still recalled: %+v", d.Candidates)
	}
}

func TestTextOf(t *testing.T) {
	t.Parallel()
	for data, want := range map[string]string{
		`{"query":"a"}`:              "a",
		`{"text":"  ","prompt":"b"}`: "b",
		`{"message":1,"text":"c"}`:   "c",
		`[1]`:                        "",
		`not json`:                   "",
		`{"other":"x"}`:              "",
	} {
		if got := selector.TextOf([]byte(data), nil); got != want {
			t.Errorf("TextOf(%s) = %q, want %q", data, got, want)
		}
	}
	if got := selector.TextOf([]byte(`{"q":"x"}`), []string{"q"}); got != "x" {
		t.Errorf("custom field: %q", got)
	}
}

func TestTerms(t *testing.T) {
	t.Parallel()
	got := selector.Terms("Please summarize the PDFs, résumé: pdf-summarizer running!")
	want := []string{"summar", "pdfs", "resum", "pdf", "summar", "run"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Terms = %q, want %q", got, want)
	}
}

// The labelled set: on requests it was not tuned on, the router meets the bar and
// beats plain BM25 clearly.
func TestHeldOutRouting(t *testing.T) {
	t.Parallel()
	cat, ds := skill.Discover("../../testdata/routing/skills")
	if ds.HasErrors() || len(cat.Skills) < 30 {
		t.Fatalf("skills: %d, %v", len(cat.Skills), ds)
	}
	f, err := os.Open("../../testdata/routing/heldout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := selector.ReadCases(f, "heldout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	x := newSel(t, selector.Config{}, cat.Skills...)
	_, s := selector.Evaluate(x, cases, selector.Env{})
	t.Logf("held out: %+v", s)
	if s.Top1 < 0.9 || s.OffTopicRejected < 5.0/6 {
		t.Errorf("top-1 %.3f (want ≥ 0.9), off-topic rejected %.3f (want ≥ 5/6)", s.Top1, s.OffTopicRejected)
	}
	if s.Top1 < s.BaselineStemTop1+0.1 || s.Recall5 < s.BaselineStemRecall5+0.03 {
		t.Errorf("router %.3f/%.3f does not beat BM25+stemming %.3f/%.3f clearly", s.Top1, s.Recall5, s.BaselineStemTop1, s.BaselineStemRecall5)
	}
}

// CLINC150's test split against the phrase-trigger catalog (a public set, never
// tuned on): the router routes its in-domain requests as docs/routing.md reports
// (0.600 top-1), clearly above BM25+stemming, and rejects its out-of-scope ones
// (1211 of 1290).
func TestCLINC150HeldOut(t *testing.T) {
	t.Parallel()
	const dir = "../../testdata/routing/public/clinc150/"
	x := newSel(t, selector.Config{}, publicSkills(t, dir, 12)...)
	all := append(readCasesFile(t, dir+"heldout.jsonl"), readCasesFile(t, dir+"offtopic-heldout.jsonl")...)
	in, off := all[:0:0], all[:0:0]
	for _, c := range all {
		if c.Expect == "" {
			off = append(off, c)
		} else {
			in = append(in, c)
		}
	}
	if len(in) != 120 || len(off) != 1290 {
		t.Fatalf("%d in-domain and %d off-topic cases, want 120 and 1290", len(in), len(off))
	}
	_, s := selector.Evaluate(x, in, selector.Env{})
	_, o := selector.Evaluate(x, off, selector.Env{})
	t.Logf("in-domain %+v; off-topic rejected %.3f", s, o.OffTopicRejected)
	if s.Top1 < 0.56 || o.OffTopicRejected < 0.93 {
		t.Errorf("in-domain top-1 %.3f (want ≥ 0.56), off-topic rejected %.3f (want ≥ 0.93)", s.Top1, o.OffTopicRejected)
	}
	if s.Top1 < s.BaselineStemTop1+0.1 {
		t.Errorf("router %.3f does not beat BM25+stemming %.3f clearly", s.Top1, s.BaselineStemTop1)
	}
}

func TestReadCasesErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"query":"a"}`:                     "c.jsonl:1: expect is missing",
		"\n{\"expect\":null}":               "c.jsonl:2: query must be",
		`{"query":"a","expect":3}`:          "expect must be a skill name, a non-empty list of them, or null",
		`{"query":"a","expect":[]}`:         "expect must be a skill name, a non-empty list of them, or null",
		`{"query":"a","expect":null,"x":1}`: `unknown field "x"`,
		`{`:                                 "c.jsonl:1:",
	} {
		_, err := selector.ReadCases(strings.NewReader(in), "c.jsonl")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
	cs, err := selector.ReadCases(strings.NewReader("# comment\n{\"query\":\"a\",\"expect\":null}\n{\"query\":\"b\",\"expect\":\"x\"}\n{\"query\":\"c\",\"expect\":[\"y\",\"z\"]}\n"), "c")
	if err != nil || len(cs) != 3 || cs[0].Expect != "" || cs[1].Expect != "x" || cs[2].Expect != "y" || !reflect.DeepEqual(cs[2].Any, []string{"y", "z"}) {
		t.Fatalf("cases %+v, err %v", cs, err)
	}
}

// A skill file may list trigger patterns, and the selector matches them.
func TestPatternTriggersFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := "---\nname: orders\ndescription: Handle every order event.\ntriggers: [com.example.order.*, \"io.example.>\"]\n---\nHandle the order event that arrived and report what was done with it.\n"
	if err := os.WriteFile(dir+"/orders.md", []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, ds := skill.Discover(dir)
	if ds.HasErrors() || len(cat.Skills) != 1 {
		t.Fatalf("%v", ds)
	}
	x := newSel(t, selector.Config{}, cat.Skills...)
	for typ, want := range map[string]string{"com.example.order.created": "orders", "io.example.a.b": "orders", "com.example.order.a.b": ""} {
		if d := decide(t, x, selector.Request{Type: typ}, selector.Env{}); d.Primary != want {
			t.Errorf("%s: primary %q, want %q", typ, d.Primary, want)
		}
	}
}

// Skills that write triggers as words and phrases load as written and route by
// them; an anti-trigger phrase in the request keeps its skill from being chosen.
func TestPhraseTriggersRoute(t *testing.T) {
	t.Parallel()
	cat, ds := skill.Discover("../../testdata/routing/phrasestyle/skills")
	if ds.HasErrors() || len(cat.Skills) != 12 {
		t.Fatalf("skills: %d, %v", len(cat.Skills), ds)
	}
	x := newSel(t, selector.Config{}, cat.Skills...)

	d := decide(t, x, selector.Request{Text: "Can you do a CODE REVIEW of this change?"}, selector.Env{})
	c := d.Candidate("code_review")
	if d.Primary != "code_review" || c.Source != selector.SourceRule || !slices.Contains(c.Matched, "code review") {
		t.Fatalf("phrase: primary %q, code_review %+v", d.Primary, c)
	}
	// A trigger that is also a valid type (a single word) is matched as a word too.
	if d := decide(t, x, selector.Request{Text: "show me the diff"}, selector.Env{}); d.Primary != "code_review" || d.Candidate("code_review").Source != selector.SourceRule {
		t.Fatalf("one-word trigger: primary %q", d.Primary)
	}
	// code_review's phrase matches, but so does its anti-trigger: the request is
	// for the security audit.
	d = decide(t, x, selector.Request{Text: "please review my code for a vulnerability"}, selector.Env{})
	c = d.Candidate("code_review")
	if d.Primary != "security_audit" || c == nil || c.Selected || c.Components.Conflict != -1 || !strings.Contains(c.Reason, `anti-trigger "vulnerability"`) {
		t.Fatalf("anti-trigger: primary %q, code_review %+v", d.Primary, c)
	}
	// The only skill the request names says no: nothing runs.
	if d := decide(t, x, selector.Request{Text: "deploy to production now"}, selector.Env{}); d.Primary != "" {
		t.Fatalf("anti-trigger alone: primary %q", d.Primary)
	}

	f, err := os.Open("../../testdata/routing/phrasestyle/cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases, err := selector.ReadCases(f, "cases.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	res, s := selector.Evaluate(x, cases, selector.Env{})
	if s.Top1 < 0.96 || s.OffTopicRejected < 1 {
		for _, r := range res {
			if !r.OK {
				t.Logf("miss: %q -> %v", r.Query, r.Ranked)
			}
		}
		t.Errorf("top-1 %.3f (want ≥ 0.96), off-topic rejected %.3f (want all)", s.Top1, s.OffTopicRejected)
	}
}

// A case that lists several skills is right when any of them is primary, and
// recalled when any is among the first five; the baselines count the same way.
func TestEvaluateAnyOf(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, allSkills...)
	cases := []selector.Case{
		{Query: "summarize the pdf", Expect: "meeting-notes", Any: []string{"meeting-notes", "pdf-summarizer"}},
		{Query: "summarize the pdf", Expect: "weather", Any: []string{"weather"}},
	}
	res, s := selector.Evaluate(x, cases, selector.Env{})
	if !res[0].OK || res[1].OK || s.Top1 != 0.5 || s.BaselineTop1 != 0.5 || s.BaselineStemTop1 != 0.5 {
		t.Fatalf("results %+v, summary %+v", res, s)
	}
	// Each result names every skill that is right, and the baselines' best skill,
	// which they count by.
	if !slices.Equal(res[0].ExpectAny, cases[0].Any) || res[1].ExpectAny != nil {
		t.Errorf("results expect any of %v and %v, want %v and none", res[0].ExpectAny, res[1].ExpectAny, cases[0].Any)
	}
	if b, err := json.Marshal(res[0]); err != nil || !strings.Contains(string(b), `"expect_any":["meeting-notes","pdf-summarizer"]`) {
		t.Errorf("--json line %s (%v) does not list expect_any", b, err)
	}
	for _, b := range []*string{res[0].Baseline, res[0].BaselineStem} {
		if b == nil || !slices.Contains(cases[0].Any, *b) {
			t.Errorf("case 0's baselines took %v, %v; they count it right", res[0].Baseline, res[0].BaselineStem)
		}
	}
}

// The keyword index's own BM25 order ranks skills the request fits equally well by
// coverage: a short description about the words beats a long one that mentions
// them, whatever their names.
func TestLexicalRankFollowsBM25(t *testing.T) {
	t.Parallel()
	long := sk("a-image-tool", "Resize an image, and also crop, rotate, watermark, compress, convert and annotate photos, scans, screenshots and diagrams of every format.")
	short := sk("z-image-resizer", "Resize an image.")
	x := newSel(t, selector.Config{}, long, short)
	d := decide(t, x, selector.Request{Text: "resize this image"}, selector.Env{})
	if d.Primary != "z-image-resizer" || len(d.Candidates) != 2 || d.Candidates[0].Score <= d.Candidates[1].Score {
		t.Fatalf("primary %q, candidates %+v", d.Primary, d.Candidates)
	}
}

// Words glued in a name are found by their parts: camelCase, letters and digits,
// and a lower-cased compound whose halves the skill's own text uses.
func TestNamePartsAreFound(t *testing.T) {
	t.Parallel()
	if got, want := selector.WordParts("PDFSummarizer getWeather resnet50"), []string{"pdfsummarizer", "getweather", "resnet50", "pdf", "summarizer", "get", "weather", "resnet", "50"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("WordParts = %q, want %q", got, want)
	}
	x := newSel(t, selector.Config{},
		sk("financetool", "Stock prices and finance news for a company."),
		sk("weathertool", "Forecasts for a city: rain, sun and wind."),
		sk("ResNet50", "An image classifier."))
	for q, want := range map[string]string{"finance news on apple": "financetool", "resnet 50 please": "ResNet50"} {
		d := decide(t, x, selector.Request{Text: q}, selector.Env{})
		if len(d.Candidates) == 0 || d.Candidates[0].Name != want {
			t.Errorf("%q: candidates %+v, want %s first", q, d.Candidates, want)
		}
	}
	if d := decide(t, x, selector.Request{Text: "weather"}, selector.Env{}); len(d.Candidates) != 1 || d.Candidates[0].Name != "weathertool" {
		t.Errorf("weather: candidates %+v", d.Candidates)
	}
	// Other glued names are split only where the skill's own text has both halves.
	if d := decide(t, newSel(t, selector.Config{}, sk("stockprices", "Quotes.")), selector.Request{Text: "stock"}, selector.Env{}); len(d.Candidates) != 0 {
		t.Errorf("stock: candidates %+v", d.Candidates)
	}
}

// Trigger phrases and anti-triggers find other forms of their words.
func TestPhrasesMatchWordForms(t *testing.T) {
	t.Parallel()
	cat, ds := skill.Discover("../../testdata/routing/phrasestyle/skills")
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	x := newSel(t, selector.Config{}, cat.Skills...)
	d := decide(t, x, selector.Request{Text: "any code reviews pending?"}, selector.Env{})
	if c := d.Candidate("code_review"); d.Primary != "code_review" || c.Source != selector.SourceRule {
		t.Fatalf("code reviews: primary %q, candidates %+v", d.Primary, d.Candidates)
	}
	d = decide(t, x, selector.Request{Text: "review my code, it has vulnerabilities"}, selector.Env{})
	if c := d.Candidate("code_review"); c == nil || c.Selected || !strings.Contains(c.Reason, `anti-trigger "vulnerability"`) {
		t.Fatalf("vulnerabilities: code_review %+v", c)
	}
}

// A lower-cased name that glues a verb to words of the skill's text is found by
// its parts; one that does not split wholly into such words is not split.
func TestGluedVerbNamesAreFound(t *testing.T) {
	t.Parallel()
	// Each pair shares a description; only the name, split, tells them apart (and
	// unsplit, the tie goes to the first name).
	films, times := "Search for movies by genre at theaters near a city.", "Returns the current local time in ISO 8601 format."
	x := newSel(t, selector.Config{},
		sk("movies-1-findmovies", films), sk("cinema-listings", films),
		sk("getcurrenttime", times), sk("clock-reader", times),
		sk("qwertyzone", "Changes nothing."))
	for q, want := range map[string]string{"find movies in New York": "movies-1-findmovies", "get me the current time": "getcurrenttime"} {
		d := decide(t, x, selector.Request{Text: q}, selector.Env{})
		if len(d.Candidates) == 0 || d.Candidates[0].Name != want {
			t.Errorf("%q: candidates %+v, want %s first", q, d.Candidates, want)
		}
	}
	if d := decide(t, x, selector.Request{Text: "qwerty"}, selector.Env{}); len(d.Candidates) != 0 {
		t.Errorf("qwerty: candidates %+v", d.Candidates)
	}
}

// A request's word finds a skill that uses a synonym of it, ranked below one that
// uses the word itself.
func TestSynonymsAreFound(t *testing.T) {
	t.Parallel()
	movie := sk("movie-finder", "Find a movie by actor or genre.")
	cinema := sk("film-guide", "Reviews of a film, by critics.")
	taxi := sk("ride-booker", "Book a taxi to an address.")
	x := newSel(t, selector.Config{}, movie, taxi)
	for q, want := range map[string]string{"find me a film with Tom Hanks": "movie-finder", "I need a cab to the airport": "ride-booker"} {
		d := decide(t, x, selector.Request{Text: q}, selector.Env{})
		if len(d.Candidates) == 0 || d.Candidates[0].Name != want {
			t.Errorf("%q: candidates %+v, want %s first", q, d.Candidates, want)
		}
	}
	d := decide(t, newSel(t, selector.Config{}, movie, cinema), selector.Request{Text: "reviews of a film"}, selector.Env{})
	if len(d.Candidates) != 2 || d.Candidates[0].Name != "film-guide" {
		t.Errorf("reviews of a film: candidates %+v, want film-guide first", d.Candidates)
	}
	// Without synonyms the cab is no word of the catalog.
	if d := decide(t, newSel(t, selector.Config{SynonymWeight: -1}, movie, taxi), selector.Request{Text: "a cab"}, selector.Env{}); len(d.Candidates) != 0 {
		t.Errorf("synonyms off: candidates %+v", d.Candidates)
	}
}

// A skill that has a request's adjacent words as a pair ranks above one that has
// the same words apart.
func TestAdjacentPairsRankHigher(t *testing.T) {
	t.Parallel()
	apart := sk("a-tracker", "Detection of motion; an object counter for video.")
	pair := sk("b-detector", "Object detection in video; a motion counter.")
	for _, c := range []struct {
		cfg  selector.Config
		want string
	}{{selector.Config{}, "b-detector"}, {selector.Config{Index: selector.Weights{Name: 3, Description: 1}}, "a-tracker"}} {
		d := decide(t, newSel(t, c.cfg, apart, pair), selector.Request{Text: "object detection in my video"}, selector.Env{})
		if len(d.Candidates) != 2 || d.Candidates[0].Name != c.want {
			t.Errorf("bigram %v: candidates %+v, want %s first", c.cfg.Index.Bigram, d.Candidates, c.want)
		}
	}
}

// Flow control is asked only about skills that would join the plan: a skill below
// the threshold, or explicit-only, is never refused by a filter (which would
// otherwise be the reason a request went unmatched), and the generic fallback is
// asked like any other.
func TestAdmitIsAskedOnlyAboutSkillsThatWouldJoin(t *testing.T) {
	t.Parallel()
	generic := sk("generic", "Do anything.")
	x := newSel(t, selector.Config{Threshold: 0.3, Generic: "generic"}, append(allSkills, generic)...)
	var asked []string
	refuse := map[string]bool{}
	env := selector.Env{Admit: func(s *skill.Skill) (bool, string) {
		asked = append(asked, s.Name)
		if refuse[s.Name] {
			return false, "filter false"
		}
		return true, ""
	}}

	d := decide(t, x, selector.Request{Text: "summarize this pdf"}, env)
	if d.Primary != "pdf-summarizer" || !slices.Contains(d.Fallback, "generic") {
		t.Fatalf("plan = %+v", d)
	}
	for _, n := range asked {
		if c := d.Candidate(n); c != nil && !c.Selected {
			t.Errorf("Admit asked about %s, which did not join the plan: %+v", n, c)
		}
	}
	if slices.Contains(asked, "secret-tool") {
		t.Errorf("Admit asked about an explicit-only skill: %v", asked)
	}

	asked, refuse["generic"] = nil, true
	d = decide(t, x, selector.Request{Text: "summarize this pdf"}, env)
	if d.Primary != "pdf-summarizer" || slices.Contains(d.Fallback, "generic") {
		t.Fatalf("a refused generic skill is in the fallback chain: %+v", d)
	}

	// Nothing passes the threshold: no skill is asked, so none is refused.
	asked = nil
	x = newSel(t, selector.Config{Threshold: 0.9}, allSkills...)
	d = decide(t, x, selector.Request{Text: "forecast for the city"}, env)
	if d.Primary != "" || len(d.Candidates) == 0 || len(asked) != 0 {
		t.Fatalf("primary %q, asked %v; candidates %+v", d.Primary, asked, d.Candidates)
	}
	if c := d.KeptOut(); c != nil {
		t.Errorf("nothing passed the threshold, yet KeptOut is %s (%v)", c.Name, c.Score)
	}

	// Every skill above the threshold refused: KeptOut names the best, whose
	// reason says why.
	x = newSel(t, selector.Config{Threshold: 0.3}, allSkills...)
	d = decide(t, x, selector.Request{Text: "summarize this pdf"}, selector.Env{Admit: func(s *skill.Skill) (bool, string) {
		return false, "filter false"
	}})
	if c := d.KeptOut(); d.Primary != "" || c == nil || c.Name != "pdf-summarizer" || !strings.Contains(c.Reason, "filter false") {
		t.Fatalf("primary %q, KeptOut %+v", d.Primary, c)
	}
}

// TestDecisionsOutliveLaterRequests checks that a Decision shares nothing with
// the selector's pooled working memory: deciding other requests, concurrently,
// leaves it as it was.
func TestDecisionsOutliveLaterRequests(t *testing.T) {
	t.Parallel()
	skills := []*skill.Skill{pdf}
	for i := range 40 { // more candidates than one block holds
		skills = append(skills, sk(fmt.Sprintf("report-%d", i), "Write a report of the sales figures.", func(s *skill.Skill) {
			s.Triggers = []string{"com.example.report"}
			s.ParallelSafe = i%2 == 0
		}))
	}
	x := newSel(t, selector.Config{}, skills...)
	reqs := []selector.Request{
		{Text: "summarize this pdf document"},
		{Text: "write the sales report", Type: "com.example.report"},
		{Text: "sales figures report for the pdf"},
		{Type: "com.example.report"},
	}
	want := make([]string, len(reqs))
	kept := make([]*selector.Decision, len(reqs))
	for i, r := range reqs {
		kept[i] = decide(t, x, r, selector.Env{})
		for _, c := range kept[i].Candidates {
			if c.Source == "" || !slices.Contains(c.Sources, c.Source) || slices.Contains(c.Sources, "") || c.Reason == "" {
				t.Errorf("request %d: candidate %s: source %q, sources %q, reason %q", i, c.Name, c.Source, c.Sources, c.Reason)
			}
		}
		b, err := json.Marshal(kept[i])
		if err != nil {
			t.Fatal(err)
		}
		want[i] = string(b)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				if _, err := x.Select(reqs[(g+i)%len(reqs)], selector.Env{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, d := range kept {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want[i] {
			t.Errorf("request %d: the decision changed after later requests:\nbefore %s\nafter  %s", i, want[i], b)
		}
		again, err := json.Marshal(decide(t, x, reqs[i], selector.Env{}))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != want[i] {
			t.Errorf("request %d: decided again, it differs:\nfirst %s\nagain %s", i, want[i], again)
		}
	}
	if len(kept[1].Candidates) <= 16 {
		t.Fatalf("want more than 16 candidates, got %d", len(kept[1].Candidates))
	}
}

// ClosestType names the trigger type a request's type most likely misspells,
// within its namespace or with its last token, and forgets types no skill has.
func TestClosestType(t *testing.T) {
	t.Parallel()
	orders := sk("orders", "Ships orders.", func(s *skill.Skill) { s.Triggers = []string{"com.shop.order.created", "com.shop.order.*"} })
	refunds := sk("refunds", "Refunds.", func(s *skill.Skill) { s.Triggers = []string{"com.shop.refund.created"} })
	x := newSel(t, selector.Config{}, orders, refunds)
	for typ, want := range map[string]string{
		"com.shop.order.create":    "com.shop.order.created", // in its namespace
		"com.shpo.order.created":   "com.shop.order.created", // its namespace misspelt
		"com.shop.order.created":   "",                       // itself
		"com.shop.invoice.created": "",                       // another namespace, not a typo of one
		"com.shop.order.*":         "",                       // patterns are not suggested
		"created":                  "",
	} {
		if got := x.ClosestType(typ); got != want {
			t.Errorf("ClosestType(%q) = %q, want %q", typ, got, want)
		}
	}
	x.Remove("orders")
	if got := x.ClosestType("com.shop.order.create"); got != "" {
		t.Errorf("after the skill is removed: %q", got)
	}
}

// A one-word trigger counts as a keyword hit the index is sure of: a skill that
// holds more of the request ranks above it, while a phrase of two words keeps
// full intent, and the word alone, with no keyword hit, still routes.
func TestOneWordTriggerIsKeywordEvidence(t *testing.T) {
	t.Parallel()
	trig := func(ts ...string) func(*skill.Skill) { return func(s *skill.Skill) { s.Triggers = ts } }
	meals := sk("meal_planner", "Plan weekly dinners and meals for a family, with a shopping list.", trig("meal plan"))
	nutrition := sk("nutrition_info", "Look up calories and macronutrients of a food.", trig("protein", "calories"))
	review := sk("code_review", "Read a change and comment on bugs and style.", trig("code review"))
	x := newSel(t, selector.Config{}, meals, nutrition, review)
	for _, c := range []struct{ text, want string }{
		{"plan my dinners for next week, high protein", "meal_planner"},
		{"how much protein is in an egg", "nutrition_info"},
		{"protein", "nutrition_info"},
		{"a code review of the weekly family dinners and meals planner", "code_review"},
	} {
		d := decide(t, x, selector.Request{Type: selector.RequestType, Text: c.text}, selector.Env{})
		if d.Primary != c.want {
			t.Errorf("%q: primary %q, want %q (%+v)", c.text, d.Primary, c.want, d.Candidates)
		}
	}
	d := decide(t, x, selector.Request{Type: selector.RequestType, Text: "plan my dinners for next week, high protein"}, selector.Env{})
	if c := d.Candidate("nutrition_info"); c == nil || c.Source != selector.SourceRule || c.Components.Trigger != 0.9 || c.Components.Intent >= 1 {
		t.Errorf("nutrition_info: %+v, want recalled by its phrase (trigger 0.9) with less than full intent", c)
	}
}

// routePublic routes one file of a public set (testdata/routing/public/<set>)
// against its n skills, with the default settings, after checking that it holds
// cases requests; with an off-topic file too, that one as well (100 requests).
func routePublic(t *testing.T, set string, n int, file string, cases int, offtopic string) (s, off selector.Summary) {
	t.Helper()
	dir := "../../testdata/routing/public/" + set + "/"
	x := newSel(t, selector.Config{}, publicSkills(t, dir, n)...)
	in := readCasesFile(t, dir+file)
	if len(in) != cases {
		t.Fatalf("%s%s: %d cases, want %d", dir, file, len(in), cases)
	}
	_, s = selector.Evaluate(x, in, selector.Env{})
	if offtopic != "" {
		o := readCasesFile(t, dir+offtopic)
		if len(o) != 100 {
			t.Fatalf("%s%s: %d cases, want 100", dir, offtopic, len(o))
		}
		_, off = selector.Evaluate(x, o, selector.Env{})
	}
	return s, off
}
