package selector

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kljensen/snowball/english"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Case is one labelled request: Expect is the skill that should be primary, or ""
// when no skill should take it.
type Case struct {
	Query  string `json:"query"`
	Expect string `json:"expect"`
	// Any lists every skill that counts as right when a request has several (an
	// expect list in a cases file); Expect is the first of them.
	Any []string `json:"-"`
	// Origin says where the case comes from: a file:line, or skill/example.
	Origin string `json:"-"`
	// Field is the field of the request's data the text is sent in, as a client
	// would send it: "query" for a case read from a file (ReadCases), the field
	// its skill takes text in for an example (TextField). "" sends it as the
	// Evaluate call says.
	Field string `json:"-"`
	// holdOut is the skill whose example this is; the example is left out of that
	// skill while the case is routed, so a skill is not tested on its own words.
	holdOut string
	// negative: an example.negative of holdOut; any primary but holdOut passes.
	negative bool
}

// ReadCases reads JSONL cases: one {"query": "...", "expect": "name" | ["name", ...] |
// null} a line (a list: any of those skills is right); blank lines and lines
// starting with # are skipped. Errors name the line.
func ReadCases(r io.Reader, name string) ([]Case, error) {
	var out []Case
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &raw); err != nil {
			return nil, fmt.Errorf("%s:%d: %v (want {\"query\": \"...\", \"expect\": \"skill\" | null})", name, n, err)
		}
		for k := range raw {
			if k != "query" && k != "expect" {
				return nil, fmt.Errorf("%s:%d: unknown field %q; a case has query and expect", name, n, k)
			}
		}
		var q string
		if err := json.Unmarshal(raw["query"], &q); err != nil || strings.TrimSpace(q) == "" {
			return nil, fmt.Errorf("%s:%d: query must be a non-empty string", name, n)
		}
		exp, ok := raw["expect"]
		if !ok {
			return nil, fmt.Errorf("%s:%d: expect is missing; write null for a request no skill should take", name, n)
		}
		c := Case{Query: q, Origin: fmt.Sprintf("%s:%d", name, n), Field: "query"}
		if t := strings.TrimSpace(string(exp)); strings.HasPrefix(t, "[") {
			if err := json.Unmarshal(exp, &c.Any); err != nil || len(c.Any) == 0 || slices.Contains(c.Any, "") {
				return nil, fmt.Errorf("%s:%d: expect must be a skill name, a non-empty list of them, or null, not %s", name, n, exp)
			}
			c.Expect = c.Any[0]
		} else if t != "null" {
			if err := json.Unmarshal(exp, &c.Expect); err != nil || c.Expect == "" {
				return nil, fmt.Errorf("%s:%d: expect must be a skill name, a non-empty list of them, or null, not %s", name, n, exp)
			}
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// ExampleCases are the cases a catalog carries: every skill's examples.positive
// (expect the skill) and examples.negative (expect anything else), each sent in
// the field its skill takes text in (TextField).
func ExampleCases(skills []*skill.Skill) []Case {
	var out []Case
	for _, s := range skills {
		f := TextField(s)
		for i, q := range s.Examples.Positive {
			out = append(out, Case{Query: q, Expect: s.Name, Origin: fmt.Sprintf("%s examples.positive[%d]", s.Name, i), Field: f, holdOut: s.Name})
		}
		for i, q := range s.Examples.Negative {
			out = append(out, Case{Query: q, Origin: fmt.Sprintf("%s examples.negative[%d]", s.Name, i), Field: f, holdOut: s.Name, negative: true})
		}
	}
	return out
}

// TextField is the field of a text request's data a skill takes its text in: the
// first of DefaultTextFields whose request it would run (Skill.RefusesFields), or
// else the first it declares (its run then refuses the request for another input:
// TextInputWarnings names it); "query" for a skill that declares no inputs or
// "*", or a batch skill (its run gets the events, whatever their fields); and ""
// for one that declares none of them (TextInputWarnings says so).
func TextField(s *skill.Skill) string {
	if s.Workflow == nil || len(s.Workflow.Inputs) == 0 || s.Batch != nil {
		return "query"
	}
	declared, star := "", false
	for _, f := range DefaultTextFields {
		if s.RefusesFields(map[string]any{f: ""}) == "" {
			return f
		}
		for _, in := range s.Workflow.Inputs {
			if in.Name == f && declared == "" {
				declared = f
			}
		}
	}
	for _, in := range s.Workflow.Inputs {
		star = star || in.Name == skill.AnyInput
	}
	if declared == "" && star {
		return "query"
	}
	return declared
}

// Result is one routed case.
type Result struct {
	Query  string  `json:"query"`
	Expect *string `json:"expect"`
	// ExpectAny lists every skill that is right, for a case that expects any of
	// several; Expect is the first of them.
	ExpectAny []string  `json:"expect_any,omitempty"`
	Primary   *string   `json:"primary"`
	Ranked    []string  `json:"ranked"`
	Scores    []float64 `json:"scores,omitempty"`
	OK        bool      `json:"ok"`
	// Why says why a right skill the router recalled was kept out of the plan:
	// its inputs refuse the data the text was sent in.
	Why    string `json:"why,omitempty"`
	Origin string `json:"origin,omitempty"`
	// Baseline is plain BM25's best skill over names and descriptions.
	Baseline *string `json:"baseline,omitempty"`
	// BaselineStem is BM25+stemming's best skill.
	BaselineStem *string `json:"baseline_stem,omitempty"`
}

// Summary are an evaluation's figures.
type Summary struct {
	Cases int `json:"cases"`
	// Top1 is the share of cases whose primary is the expected skill (none for
	// requests no skill should take).
	Top1 float64 `json:"top1"`
	// Recall3 and Recall5 are the shares of cases with an expected skill that have
	// it among the first 3 or 5 candidates, selected or not.
	Recall3 float64 `json:"recall3"`
	Recall5 float64 `json:"recall5"`
	// NoMatchPrecision is the share of cases routed to no skill that expected none;
	// OffTopicRejected is the share of cases expecting none that got none.
	NoMatchPrecision float64 `json:"no_match_precision"`
	OffTopicRejected float64 `json:"off_topic_rejected"`
	OffTopic         int     `json:"off_topic"`
	// Baseline figures: Okapi BM25 over name and description (see Baseline), with
	// no threshold: a request matching no word gets no skill. BaselineStem is the
	// same with words stemmed.
	BaselineTop1        float64 `json:"baseline_top1"`
	BaselineRecall5     float64 `json:"baseline_recall5"`
	BaselineStemTop1    float64 `json:"baseline_stem_top1"`
	BaselineStemRecall5 float64 `json:"baseline_stem_recall5"`
	// AgainstStem compares the router with BM25+stemming request by request, on
	// the cases that expect a skill: BM25 has no threshold, so it cannot be
	// right on a request no skill should take but by matching none of its
	// words, and counting those would make every rejection the router's win.
	AgainstStem Paired `json:"against_stem"`
	// Confused counts misses by "expected -> got".
	Confused []Confusion `json:"confused,omitempty"`
}

// Paired compares the router with a baseline request by request, in top-1 and in
// recall@5, on the cases with an expected skill.
type Paired struct {
	Top1    Discordant `json:"top1"`
	Recall5 Discordant `json:"recall5"`
}

// Discordant counts the requests the router gets right where the baseline does
// not (Better) and the reverse (Worse). P is the two-sided sign test's p-value on
// them (McNemar's exact test): how often two equally good rankers would differ
// by this much or more. A difference of a few requests on a small set is noise,
// whatever it does to the accuracies: P tells how much.
type Discordant struct {
	Better int     `json:"better"`
	Worse  int     `json:"worse"`
	P      float64 `json:"p"`
}

func (d *Discordant) add(router, baseline bool) {
	switch {
	case router && !baseline:
		d.Better++
	case baseline && !router:
		d.Worse++
	}
}

// signTest is the two-sided exact sign test's p-value for a and b successes of
// two outcomes equally likely: twice the chance of min(a, b) or fewer in a + b
// fair coin tosses, at most 1.
func signTest(a, b int) float64 {
	n, k := a+b, min(a, b)
	if n == 0 || 2*k == n {
		return 1
	}
	// Σ C(n, i) / 2^n for i ≤ k, in logs: n may be thousands.
	lgn, _ := math.Lgamma(float64(n + 1))
	tail := 0.0
	for i := 0; i <= k; i++ {
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		tail += math.Exp(lgn - li - lr - float64(n)*math.Ln2)
	}
	return math.Min(1, 2*tail)
}

// Confusion is how often one skill (or none) was taken for another.
type Confusion struct {
	Expect string `json:"expect"`
	Got    string `json:"got"`
	Count  int    `json:"count"`
}

// right reports whether name is a right answer to c.
func (c *Case) right(name string) bool {
	if len(c.Any) > 0 {
		return slices.Contains(c.Any, name)
	}
	return name == c.Expect
}

// refusal is the part of a candidate's reason that says its inputs refuse the
// request's data, without RefusedPrefix, or "".
func refusal(reason string) string {
	_, why, ok := strings.Cut(reason, RefusedPrefix)
	if !ok {
		return ""
	}
	why, _, _ = strings.Cut(why, "; ")
	return why
}

// rankOf is the position of the first right answer in ranked, or -1.
func (c *Case) rankOf(ranked []string) int {
	for i, n := range ranked {
		if c.right(n) {
			return i
		}
	}
	return -1
}

// Evaluate routes every case and sums up. Cases from skill examples are routed with
// that example left out of its skill.
func Evaluate(x *Selector, cases []Case, env Env) ([]Result, Summary) {
	return evaluate(x, cases, env, true, true)
}

// evaluate is Evaluate, with the baselines only when baselines is set, and each
// case's text as a client sends it, {"query": text}, only when asData is: then a
// skill whose inputs refuse that is not chosen, as the live router would not.
func evaluate(x *Selector, cases []Case, env Env, baselines, asData bool) ([]Result, Summary) {
	skills := x.Skills()
	var base, stem *Baseline
	if baselines {
		base, stem = NewBaseline(skills, false), NewBaseline(skills, true)
	} else {
		base, stem = NewBaseline(nil, false), NewBaseline(nil, true)
	}
	results := make([]Result, 0, len(cases))
	var sum Summary
	var pos, r3, r5, nulls, nullsOK, routedNone, b1, b5, s1, s5 int
	conf := map[[2]string]int{}
	for _, c := range cases {
		var restore *skill.Skill
		if c.holdOut != "" && !c.negative {
			if s, ok := x.Get(c.holdOut); ok {
				restore = s
				cp := *s
				cp.Digest = ""
				cp.Examples.Positive = without(s.Examples.Positive, c.Query)
				x.Put(&cp)
			}
		}
		req := Request{Text: c.Query}
		switch {
		case c.Field != "":
			req.Data = map[string]any{c.Field: c.Query}
		case asData:
			// As a client sends it: io.skillbus.request with the text in "query".
			req.Data = map[string]any{"query": c.Query}
		}
		d, err := x.Select(req, env)
		if restore != nil {
			x.Put(restore)
		}
		r := Result{Query: c.Query, Origin: c.Origin, Ranked: []string{}}
		if c.Expect != "" {
			r.Expect = &c.Expect
		}
		if len(c.Any) > 1 {
			r.ExpectAny = c.Any
		}
		if err == nil {
			if d.Primary != "" {
				p := d.Primary
				r.Primary = &p
			}
			for _, cd := range d.Candidates {
				r.Ranked = append(r.Ranked, cd.Name)
				r.Scores = append(r.Scores, cd.Score)
				if r.Why == "" && !c.negative && c.Expect != "" && c.right(cd.Name) && cd.Name != d.Primary {
					r.Why = refusal(cd.Reason)
				}
			}
		}
		got := ""
		if r.Primary != nil {
			got = *r.Primary
		}
		switch {
		case c.negative:
			r.OK = got != c.holdOut
		case c.Expect == "":
			r.OK = got == ""
		default:
			r.OK = c.right(got)
		}
		bl, sl := base.Search(c.Query, 5), stem.Search(c.Query, 5)
		if len(bl) > 0 {
			r.Baseline = &bl[0]
		}
		if len(sl) > 0 {
			r.BaselineStem = &sl[0]
		}
		if c.negative {
			// A negative example only says which skill must not take it.
		} else if c.Expect != "" {
			pos++
			ri, bi, si := c.rankOf(r.Ranked), c.rankOf(bl), c.rankOf(sl)
			if ri >= 0 && ri < 3 {
				r3++
			}
			if ri >= 0 && ri < 5 {
				r5++
			}
			if bi == 0 {
				b1++
			}
			if bi >= 0 {
				b5++
			}
			if si == 0 {
				s1++
			}
			if si >= 0 {
				s5++
			}
			if baselines {
				sum.AgainstStem.Top1.add(r.OK, si == 0)
				sum.AgainstStem.Recall5.add(ri >= 0 && ri < 5, si >= 0)
			}
		} else {
			nulls++
			if got == "" {
				nullsOK++
			}
			if len(bl) == 0 {
				b1++
			}
			if len(sl) == 0 {
				s1++
			}
		}
		if got == "" && !c.negative {
			routedNone++
		}
		if r.OK {
			sum.Top1++
		} else {
			e := c.Expect
			if c.negative {
				e = "not " + c.holdOut
			}
			conf[[2]string{orNone(e), orNone(got)}]++
		}
		results = append(results, r)
	}
	sum.Cases = len(cases)
	if sum.Cases > 0 {
		sum.Top1 /= float64(sum.Cases)
	}
	scored := pos + nulls
	sum.Recall3, sum.Recall5 = ratio(r3, pos), ratio(r5, pos)
	sum.NoMatchPrecision = ratio(nullsOK, routedNone)
	sum.OffTopicRejected, sum.OffTopic = ratio(nullsOK, nulls), nulls
	sum.BaselineTop1, sum.BaselineRecall5 = ratio(b1, scored), ratio(b5, pos)
	sum.BaselineStemTop1, sum.BaselineStemRecall5 = ratio(s1, scored), ratio(s5, pos)
	for _, d := range []*Discordant{&sum.AgainstStem.Top1, &sum.AgainstStem.Recall5} {
		// Three significant digits: a p-value is never 0, however small.
		d.P, _ = strconv.ParseFloat(strconv.FormatFloat(signTest(d.Better, d.Worse), 'g', 3, 64), 64)
	}
	for k, n := range conf {
		sum.Confused = append(sum.Confused, Confusion{Expect: k[0], Got: k[1], Count: n})
	}
	sort.Slice(sum.Confused, func(i, j int) bool {
		a, b := sum.Confused[i], sum.Confused[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Expect+a.Got < b.Expect+b.Got
	})
	for _, f := range []*float64{&sum.Top1, &sum.Recall3, &sum.Recall5, &sum.NoMatchPrecision, &sum.OffTopicRejected,
		&sum.BaselineTop1, &sum.BaselineRecall5, &sum.BaselineStemTop1, &sum.BaselineStemRecall5} {
		*f = math.Round(*f*1000) / 1000
	}
	return results, sum
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

func without(xs []string, s string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// BaselineK1, BaselineB and BaselineTokens describe the baseline, for reports.
const (
	BaselineK1     = 1.2
	BaselineB      = 0.75
	BaselineTokens = "lower-cased runs of letters and digits of name + description; no stop words removed; idf = ln(1 + (N - df + 0.5) / (df + 0.5))"
)

// Baseline is standard Okapi BM25 over each skill's name and description, as a
// search library would rank them: k1 1.2, b 0.75, the text split into lower-cased
// runs of letters and digits (Words), every word kept, Lucene's idf, each query word
// counted as often as it occurs. With stemming, words of ASCII letters are reduced
// by the Snowball English stemmer. It has no threshold and no typo tolerance. It is
// what the router is measured against.
type Baseline struct {
	stem  bool
	docs  []map[string]int
	lens  []int
	names []string
	df    map[string]int
	avg   float64
}

// NewBaseline indexes skills; stem stems their words.
func NewBaseline(skills []*skill.Skill, stem bool) *Baseline {
	b := &Baseline{stem: stem, df: map[string]int{}}
	total := 0
	for _, s := range skills {
		tf := map[string]int{}
		ws := b.tokens(s.Name + " " + s.Description)
		for _, w := range ws {
			tf[w]++
		}
		for w := range tf {
			b.df[w]++
		}
		b.docs, b.lens, b.names = append(b.docs, tf), append(b.lens, len(ws)), append(b.names, s.Name)
		total += len(ws)
	}
	if len(skills) > 0 {
		b.avg = float64(total) / float64(len(skills))
	}
	return b
}

func (b *Baseline) tokens(text string) []string {
	ws := Words(text)
	if b.stem {
		for i, w := range ws {
			if isASCIILetters(w) {
				ws[i] = english.Stem(w, false)
			}
		}
	}
	return ws
}

// Scores returns every skill's BM25 score for text, in the order indexed.
func (b *Baseline) Scores(text string) []float64 {
	qs := b.tokens(text)
	N := float64(len(b.docs))
	out := make([]float64, len(b.docs))
	for i, tf := range b.docs {
		var s float64
		for _, q := range qs {
			f := float64(tf[q])
			if f == 0 {
				continue
			}
			s += okapi(f, float64(b.df[q]), N, float64(b.lens[i]), b.avg, BaselineK1, BaselineB, luceneIDF)
		}
		out[i] = s
	}
	return out
}

// okapi is one query term's Okapi BM25 score in one document: tf its count there,
// df the documents holding it, n the documents, dl the document's length and avgdl
// the average.
func okapi(tf, df, n, dl, avgdl, k1, b float64, idf func(n, df float64) float64) float64 {
	return idf(n, df) * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avgdl))
}

// luceneIDF is Lucene's (and bleve's) BM25 idf, which stays positive for terms in
// most documents.
func luceneIDF(n, df float64) float64 { return math.Log(1 + (n-df+0.5)/(df+0.5)) }

// Search returns the k best skill names for text.
func (b *Baseline) Search(text string, k int) []string {
	type hit struct {
		name  string
		score float64
	}
	var hits []hit
	for i, s := range b.Scores(text) {
		if s > 0 {
			hits = append(hits, hit{b.names[i], s})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		return hits[i].name < hits[j].name
	})
	var out []string
	for i := 0; i < len(hits) && i < k; i++ {
		out = append(out, hits[i].name)
	}
	return out
}

// ExampleWarnings are warnings for skill examples that route elsewhere: a positive
// example whose primary is another skill (or none), a negative one this skill takes.
func ExampleWarnings(skills []*skill.Skill) skill.Diagnostics {
	if len(skills) < 2 {
		return nil
	}
	sel := New(Config{})
	sel.Sync(skills)
	// Each example is sent in the field its skill takes text in (Case.Field): an
	// example its inputs refuse is TextInputWarnings' to report, once a skill.
	results, _ := evaluate(sel, ExampleCases(skills), Env{}, false, false)
	by := map[string]*skill.Skill{}
	for _, s := range skills {
		by[s.Name] = s
	}
	var ds skill.Diagnostics
	for _, r := range results {
		if r.OK {
			continue
		}
		got := "no skill"
		if r.Primary != nil {
			got = *r.Primary
		}
		if r.Expect != nil {
			s := by[*r.Expect]
			d := skill.Diagnostic{File: s.Source, Severity: skill.SeverityWarning, Field: "examples.positive",
				Message: fmt.Sprintf("example %q routes to %s, not to %s, when it is left out of %s (as a request worded a little otherwise would be)", r.Query, got, s.Name, s.Name),
				Hint:    "the example itself routes to it; make the description, tags or other examples say it too, so that other wordings do; 'skillbus route --explain' shows the scores"}
			if r.Why != "" {
				// Its words found it: its inputs keep it out, as they keep out any
				// text request. TextInputWarnings says so once for the skill.
				continue
			}
			ds = append(ds, d)
		} else {
			name := got
			if s := by[name]; s != nil {
				ds = append(ds, skill.Diagnostic{File: s.Source, Severity: skill.SeverityWarning, Field: "examples.negative",
					Message: fmt.Sprintf("negative example %q routes to %s itself", r.Query, name),
					Hint:    "add an anti_triggers phrase, or narrow the description"})
			}
		}
	}
	return ds
}

// TextInputWarnings are warnings for a workflow skill meant to be chosen by a
// request's words — it has positive examples or phrase triggers — whose inputs
// take none of the fields a text request carries its text in (DefaultTextFields),
// nor "*": the router never chooses it for such a request, since its run would
// refuse the data.
func TextInputWarnings(skills []*skill.Skill) skill.Diagnostics {
	var ds skill.Diagnostics
	for _, s := range skills {
		if s.Workflow == nil || len(s.Workflow.Inputs) == 0 || len(s.Examples.Positive) == 0 && len(s.TriggerPhrases) == 0 {
			continue
		}
		f := TextField(s)
		if f == "" {
			ds = append(ds, skill.Diagnostic{File: s.Source, Severity: skill.SeverityWarning, Field: "inputs",
				Message: fmt.Sprintf("%s is meant to be chosen by a request's words (examples, phrase triggers), but its inputs take none of the fields a text request holds its text in (%s): the router will not choose it for one",
					s.Name, strings.Join(DefaultTextFields, ", ")),
				Hint: `declare an input query (or "*"), and give its other required inputs defaults`})
			continue
		}
		if why := s.RefusesFields(map[string]any{f: ""}); why != "" {
			ds = append(ds, skill.Diagnostic{File: s.Source, Severity: skill.SeverityWarning, Field: "inputs",
				Message: fmt.Sprintf("%s is meant to be chosen by a request's words (examples, phrase triggers), but a text request sent as {%q: ...} cannot run it: %s; the router will not choose it for one",
					s.Name, f, why),
				Hint: refusalHint(why)})
		}
	}
	return ds
}

// refusalHint says how to make a skill take a text request its inputs refuse
// (why: Skill.RefusesFields's answer).
func refusalHint(why string) string {
	if strings.HasPrefix(why, "its required input ") {
		in := strings.TrimSuffix(strings.TrimPrefix(why, "its required input "), " is not in the data")
		return fmt.Sprintf("give %s a default, or make it optional, so a request that says only its text can run", in)
	}
	return `declare an input query (or "*"), and give its other required inputs defaults`
}
