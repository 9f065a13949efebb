package selector_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// workflow gives a skill a workflow with these inputs.
func workflow(ins ...skill.Input) func(*skill.Skill) {
	return func(s *skill.Skill) { s.Workflow = &skill.Workflow{Inputs: ins} }
}

// A skill that only the request's words recall, and whose inputs would refuse
// the request's data, joins no plan: its run would fail at once. One the request
// is for by type, or by name, keeps its place, and so does one whose inputs take
// the data.
func TestTextRequestSkipsASkillWhoseInputsRefuseItsData(t *testing.T) {
	t.Parallel()
	greet := sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name", Default: "world"}))
	text := selector.Request{Type: selector.RequestType, Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}
	d := decide(t, newSel(t, selector.Config{}, greet), text, selector.Env{})
	if d.Primary != "" || d.KeptOut() == nil || !strings.Contains(d.KeptOut().Reason, "its inputs (name) do not take the field query") {
		t.Fatalf("primary %q, kept out %+v", d.Primary, d.KeptOut())
	}

	for _, c := range []struct {
		what string
		s    *skill.Skill
		req  selector.Request
	}{
		{"declares query", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "query"})), text},
		{"declares *", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name"}, skill.Input{Name: skill.AnyInput})), text},
		{"declares no inputs", sk("greet", "Greets a person by name."), text},
		{"subscribed to the type", sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name"}), func(s *skill.Skill) { s.Triggers = []string{"com.example.greet"} }),
			selector.Request{Type: "com.example.greet", Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}},
		{"named", greet, selector.Request{Skill: "greet", Text: "greet Ada", Data: map[string]any{"query": "greet Ada"}}},
		{"no data", greet, selector.Request{Text: "greet Ada"}},
	} {
		if d := decide(t, newSel(t, selector.Config{}, c.s), c.req, selector.Env{}); d.Primary != "greet" {
			t.Errorf("%s: primary %q, candidates %+v", c.what, d.Primary, d.Candidates)
		}
	}

	// A required input the data lacks refuses it too, where its score would not.
	need := sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "query"}, skill.Input{Name: "name", Required: true}),
		func(s *skill.Skill) { s.Triggers = []string{"greet ada"} }) // scores above the threshold all the same
	d = decide(t, newSel(t, selector.Config{}, need), text, selector.Env{})
	if d.Primary != "" || d.KeptOut() == nil || !strings.Contains(d.KeptOut().Reason, "its required input name is not in the data") {
		t.Errorf("primary %q, candidates %+v", d.Primary, d.Candidates)
	}
}

// A candidate whose missing required input already puts it below the threshold
// (readiness) says that its inputs refuse the data too: that is what to fix.
func TestBelowTheThresholdAndRefusingSaysBoth(t *testing.T) {
	t.Parallel()
	count := sk("word-count", "Counts the words of a text.", workflow(skill.Input{Name: "text", Required: true}))
	req := selector.Request{Type: selector.RequestType, Text: "count the words of this sentence", Data: map[string]any{"query": "count the words of this sentence"}}
	d := decide(t, newSel(t, selector.Config{}, count), req, selector.Env{})
	c := d.Candidate("word-count")
	if d.Primary != "" || c == nil || !strings.Contains(c.Reason, selector.RefusedPrefix+"its inputs (text) do not take the field query") || !strings.Contains(c.Reason, "below threshold") {
		t.Fatalf("primary %q, candidate %+v", d.Primary, c)
	}
}

// What RefusesFields refuses, as a run would: an undeclared field without "*",
// a required input without a default that is missing or null; a batch skill is
// judged by its run's {"events": [...]}.
func TestRefusesFieldsAsARunWould(t *testing.T) {
	t.Parallel()
	batch := func(s *skill.Skill) { s.Batch = &skill.Batch{MaxSize: 10} }
	for _, c := range []struct {
		what string
		s    *skill.Skill
		data map[string]any
		want string
	}{
		{"declared", sk("a", "", workflow(skill.Input{Name: "query"})), map[string]any{"query": "x"}, ""},
		{"undeclared", sk("a", "", workflow(skill.Input{Name: "name"}, skill.Input{Name: "shout"})), map[string]any{"query": "x", "b": 1}, "its inputs (name, shout) do not take the field b"},
		{"star", sk("a", "", workflow(skill.Input{Name: "name"}, skill.Input{Name: skill.AnyInput})), map[string]any{"query": "x"}, ""},
		{"required with a default", sk("a", "", workflow(skill.Input{Name: "query"}, skill.Input{Name: "n", Required: true, Default: 3})), map[string]any{"query": "x"}, ""},
		{"required, missing", sk("a", "", workflow(skill.Input{Name: "query"}, skill.Input{Name: "n", Required: true})), map[string]any{"query": "x"}, "its required input n is not in the data"},
		{"required, null", sk("a", "", workflow(skill.Input{Name: "query"}, skill.Input{Name: "n", Required: true})), map[string]any{"query": "x", "n": nil}, "its required input n is not in the data"},
		{"no workflow", sk("a", ""), map[string]any{"query": "x"}, ""},
		{"batch of events", sk("a", "", workflow(skill.Input{Name: "events"}), batch), map[string]any{"query": "x"}, ""},
		{"batch of queries", sk("a", "", workflow(skill.Input{Name: "query"}), batch), map[string]any{"query": "x"}, "its inputs (query) do not take the field events"},
	} {
		if got := c.s.RefusesFields(c.data); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
}

// route eval routes a case's text as a client sends it, so a skill the router
// would keep out of the live request is a miss there too; skills validate's
// example check routes words only, and warns once about the inputs instead.
func TestEvalAndValidateOfASkillWhoseInputsRefuseText(t *testing.T) {
	t.Parallel()
	greet := sk("greet", "Greets a person by name.", workflow(skill.Input{Name: "name", Default: "world"}),
		func(s *skill.Skill) { s.Examples.Positive = []string{"greet Ada warmly by name"} })
	pdfs := sk("pdf-summarizer", "Summarize PDF documents into key points.")
	x := newSel(t, selector.Config{}, greet, pdfs)
	_, s := selector.Evaluate(x, []selector.Case{{Query: "greets a person by name", Expect: "greet"}}, selector.Env{})
	if s.Top1 != 0 {
		t.Errorf("route eval took greet for a text request its inputs refuse: top-1 %v", s.Top1)
	}
	if ws := selector.ExampleWarnings([]*skill.Skill{greet, pdfs}); len(ws) != 0 {
		t.Errorf("example warnings %v, want none: the example routes to greet by its words", ws)
	}
	ws := selector.TextInputWarnings([]*skill.Skill{greet, pdfs})
	if len(ws) != 1 || ws[0].Field != "inputs" || !strings.Contains(ws[0].Message, "greet is meant to be chosen by a request's words") {
		t.Errorf("text input warnings %v", ws)
	}
	greet.Workflow.Inputs = append(greet.Workflow.Inputs, skill.Input{Name: "text"})
	if ws := selector.TextInputWarnings([]*skill.Skill{greet}); len(ws) != 0 {
		t.Errorf("a skill that takes text: %v", ws)
	}
}

// The generic fallback is left out of a plan when its inputs would refuse the
// request's data, whether or not the request recalled it.
func TestGenericFallbackWhoseInputsRefuseTheData(t *testing.T) {
	t.Parallel()
	generic := sk("generic", "Anything at all.", workflow(skill.Input{Name: "name"}))
	x := newSel(t, selector.Config{Generic: "generic"}, pdf, generic)
	req := selector.Request{Type: selector.RequestType, Text: "summarize this pdf", Data: map[string]any{"query": "summarize this pdf"}}
	if d := decide(t, x, req, selector.Env{}); d.Primary != "pdf-summarizer" || slices.Contains(d.Fallback, "generic") {
		t.Errorf("with query: primary %q, fallback %v", d.Primary, d.Fallback)
	}
	req.Data = map[string]any{"name": "summarize this pdf"}
	if d := decide(t, x, req, selector.Env{}); !slices.Contains(d.Fallback, "generic") {
		t.Errorf("with name: fallback %v, want the generic skill", d.Fallback)
	}
}

// A skill the registry marks invalid (its last good version serving) is a change
// for the selector, though its digest is the same, and its candidates say so.
func TestInvalidMarkReachesTheReason(t *testing.T) {
	t.Parallel()
	x := newSel(t, selector.Config{}, pdf)
	marked := *pdf
	marked.Invalid = "pdf/SKILL.md:3:1: error: invalid YAML; did you mean x?"
	if !x.Put(&marked) || x.Put(&marked) {
		t.Fatal("the mark is not a change once, and only once")
	}
	d := decide(t, x, selector.Request{Text: "summarize this pdf"}, selector.Env{})
	if c := d.Candidate("pdf-summarizer"); d.Primary != "pdf-summarizer" || c == nil ||
		!strings.Contains(c.Reason, selector.InvalidPrefix+"pdf/SKILL.md:3:1: error: invalid YAML, did you mean x?") {
		t.Fatalf("primary %q, candidates %+v", d.Primary, d.Candidates)
	}
	if !x.Put(pdf) {
		t.Fatal("unmarked is a change too")
	}
	if c := decide(t, x, selector.Request{Text: "summarize this pdf"}, selector.Env{}).Candidate("pdf-summarizer"); strings.Contains(c.Reason, "invalid") {
		t.Fatalf("unmarked: %q", c.Reason)
	}
}

// A skill's examples are sent in the field it takes text in: a skill that takes
// "text" is not warned that its examples route to no skill (they did, sent as
// "query"), and a --cases request sent as "query" that it cannot take says why.
func TestExamplesAreSentInTheFieldTheirSkillTakes(t *testing.T) {
	t.Parallel()
	temp := sk("temp-convert", "Converts a temperature between Celsius and Fahrenheit.",
		workflow(skill.Input{Name: "text", Required: true}),
		func(s *skill.Skill) {
			s.Examples.Positive = []string{"convert 451 fahrenheit to celsius", "how hot is 30 degrees celsius in fahrenheit"}
		})
	if got := selector.TextField(temp); got != "text" {
		t.Fatalf("TextField %q, want text", got)
	}
	all := []*skill.Skill{temp, pdf}
	if ws := selector.ExampleWarnings(all); len(ws) != 0 {
		t.Errorf("example warnings %v, want none: sent as text, each example routes to temp-convert", ws)
	}
	if ws := selector.TextInputWarnings(all); len(ws) != 0 {
		t.Errorf("text input warnings %v, want none: it takes text", ws)
	}
	x := newSel(t, selector.Config{}, temp, pdf)
	rs, s := selector.Evaluate(x, selector.ExampleCases(all), selector.Env{})
	if s.Top1 != 1 {
		t.Errorf("route eval of its examples: top-1 %v, results %+v", s.Top1, rs)
	}
	rs, _ = selector.Evaluate(x, []selector.Case{{Query: "convert 100 celsius to fahrenheit", Expect: "temp-convert", Field: "query"}}, selector.Env{})
	if rs[0].OK || rs[0].Why != "its inputs (text) do not take the field query" {
		t.Errorf("sent as query: ok %v, why %q", rs[0].OK, rs[0].Why)
	}
	rs, _ = selector.Evaluate(x, []selector.Case{{Query: "convert 100 celsius to fahrenheit", Expect: "temp-convert", Field: "text"}}, selector.Env{})
	if !rs[0].OK || rs[0].Why != "" {
		t.Errorf("sent as text: ok %v, why %q", rs[0].OK, rs[0].Why)
	}
}

// A skill that takes text but also requires an input without a default cannot
// run on a request that says only its text: the warnings name that input, not
// the text fields.
func TestTextSkillWithAnotherRequiredInputIsWarnedByName(t *testing.T) {
	t.Parallel()
	temp := sk("temp-convert", "Converts a temperature between Celsius and Fahrenheit.",
		workflow(skill.Input{Name: "text"}, skill.Input{Name: "precision", Required: true}),
		func(s *skill.Skill) { s.Examples.Positive = []string{"convert 451 fahrenheit to celsius"} })
	ws := selector.TextInputWarnings([]*skill.Skill{temp, pdf})
	if len(ws) != 1 || !strings.Contains(ws[0].Message, `sent as {"text": ...} cannot run it: its required input precision is not in the data`) ||
		!strings.Contains(ws[0].Hint, "give precision a default") {
		t.Fatalf("text input warnings %v", ws)
	}
	// Its examples are kept out for the same reason: said once, by the warning above.
	if ws := selector.ExampleWarnings([]*skill.Skill{temp, pdf}); len(ws) != 0 {
		t.Fatalf("example warnings %v", ws)
	}
}

// The text field of a skill is one whose request it would run: a batch skill takes
// any (its run gets the events), and of two text inputs, the required one.
func TestTextFieldIsOneTheSkillRuns(t *testing.T) {
	t.Parallel()
	batch := sk("digest", "Sends a digest of the requests of the last hour.", workflow(skill.Input{Name: "events", Required: true}),
		func(s *skill.Skill) {
			s.Batch = &skill.Batch{MaxSize: 10}
			s.Examples.Positive = []string{"send me a digest of the last hour"}
		})
	both := sk("summarize", "Summarizes a text.", workflow(skill.Input{Name: "query"}, skill.Input{Name: "text", Required: true}),
		func(s *skill.Skill) { s.Examples.Positive = []string{"summarize this text for me"} })
	for _, c := range []struct {
		s    *skill.Skill
		want string
	}{{batch, "query"}, {both, "text"}} {
		if got := selector.TextField(c.s); got != c.want {
			t.Errorf("%s: TextField %q, want %q", c.s.Name, got, c.want)
		}
	}
	if ws := selector.TextInputWarnings([]*skill.Skill{batch, both, pdf}); len(ws) != 0 {
		t.Errorf("text input warnings %v, want none: a text request runs each", ws)
	}
}
