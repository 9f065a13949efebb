package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestConcurrencyField(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\n" + fields + "---\nReview each large order from a gold customer and flag anything unusual.\n")
	}
	tests := []struct {
		name   string
		fields string
		want   []Concurrency
		max    int
		diags  []string // "line:col: severity: message" prefixes, in order
	}{
		{name: "keyed", fields: "concurrency: [{key: data.customer, limit: 2}]\n", want: []Concurrency{{Key: "data.customer", Limit: 2}}},
		{name: "keyed and total", fields: "concurrency:\n  - key: data.customer\n    limit: 1\n  - limit: 10\n",
			want: []Concurrency{{Key: "data.customer", Limit: 1}, {Limit: 10}}, max: 10},
		{name: "without key is max_concurrent", fields: "concurrency: [{limit: 3}]\n", want: []Concurrency{{Limit: 3}}, max: 3},
		{name: "same as max_concurrent", fields: "max_concurrent: 3\nconcurrency: [{limit: 3}]\n", want: []Concurrency{{Limit: 3}}, max: 3},
		{name: "contradicts max_concurrent", fields: "max_concurrent: 2\nconcurrency: [{limit: 3}]\n",
			diags: []string{"5:15: error: concurrency limit 3 without a key contradicts max_concurrent 2"}},
		{name: "contradicted by max_concurrent", fields: "concurrency: [{limit: 3}]\nmax_concurrent: 2\n",
			diags: []string{"5:17: error: max_concurrent 2 contradicts the concurrency limit 3 without a key"}},
		{name: "three entries", fields: "concurrency:\n  - {key: data.a, limit: 1}\n  - {key: data.b, limit: 1}\n  - {limit: 5}\n",
			diags: []string{"7:5: error: concurrency has 3 entries; at most 2"}},
		{name: "zero limit", fields: "concurrency: [{key: data.a, limit: 0}]\n", diags: []string{"4:36: error: concurrency.limit must be from 1 to 1000, not 0"}},
		{name: "negative limit", fields: "concurrency: [{limit: -1}]\n", diags: []string{"4:23: error: concurrency.limit must be from 1 to 1000, not -1"}},
		{name: "no limit", fields: "concurrency: [{key: data.a}]\n", diags: []string{"4:15: error: concurrency entry 1 needs limit"}},
		{name: "bad key", fields: "concurrency: [{key: data.a +, limit: 1}]\n", diags: []string{"4:29: error: concurrency.key is not a valid expression: Syntax error"}},
		{name: "list key", fields: "concurrency: [{key: \"[data.a]\", limit: 1}]\n", diags: []string{"4:22: error: concurrency.key is not a valid expression: a key must be"}},
		{name: "two without key", fields: "concurrency: [{limit: 1}, {limit: 2}]\n", diags: []string{"4:27: error: concurrency has two entries without a key"}},
		// A run carries no extensions, subject or time: such a key would be ""
		// on every run, one key for all.
		{name: "extension key", fields: "concurrency: [{key: extensions.tenant, limit: 1}]\n",
			diags: []string{"4:21: error: concurrency.key reads extensions.tenant, which a run does not carry: it would be \"\" on every run, one key for all; a key of a run reads id, type, source, and data (its inputs) (hint: put tenant in the trigger's data and key on data.tenant"}},
		{name: "subject and time in a key", fields: "concurrency:\n  - key: |\n      data.a + subject +\n        time\n    limit: 1\n",
			diags: []string{"6:16: error: concurrency.key reads subject, which a run does not carry", "7:9: error: concurrency.key reads time, which a run does not carry"}},
		{name: "id type source data key", fields: "concurrency: [{key: 'id + type + source + string(data.a)', limit: 1}]\n",
			want: []Concurrency{{Key: "id + type + source + string(data.a)", Limit: 1}}},
		{name: "bad key's hint", fields: "concurrency: [{key: tenant, limit: 1}]\n",
			diags: []string{"4:21: error: concurrency.key is not a valid expression: undeclared reference to 'tenant' (hint: CEL over the run: id, type, source, and data (its inputs)"}},
		{name: "unknown field", fields: "concurrency: [{key: data.a, limit: 1, burst: 2}]\n", diags: []string{"4:39: error: unknown field concurrency.burst"}},
		{name: "not a list", fields: "concurrency: {key: data.a, limit: 1}\n", diags: []string{"4:14: error: concurrency must be a list"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ok := parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.diags)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, s.Concurrency); diff != "" {
				t.Errorf("concurrency (-want +got):\n%s", diff)
			}
			if s.MaxConcurrent != tt.max {
				t.Errorf("max_concurrent %d, want %d", s.MaxConcurrent, tt.max)
			}
		})
	}
}

func TestThrottleField(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\n" + fields + "---\nReview each large order from a gold customer and flag anything unusual.\n")
	}
	tests := []struct {
		name   string
		fields string
		want   *Throttle
		diags  []string
	}{
		{name: "throttle", fields: "throttle: {key: data.customer, limit: 10, period: 1s, burst: 2}\n",
			want: &Throttle{Key: "data.customer", Limit: 10, Period: Duration(time.Second), Burst: 2}},
		{name: "no key", fields: "throttle: {limit: 1, period: 1m}\n", want: &Throttle{Limit: 1, Period: Duration(time.Minute)}},
		{name: "zero limit", fields: "throttle: {limit: 0, period: 1s}\n", diags: []string{"4:19: error: throttle.limit must be from 1 to 10000, not 0"}},
		{name: "negative burst", fields: "throttle: {limit: 1, period: 1s, burst: -1}\n", diags: []string{"4:41: error: throttle.burst must be from 0 to 10000"}},
		{name: "no period", fields: "throttle: {limit: 1}\n", diags: []string{"4:1: error: throttle needs period"}},
		{name: "sub-second", fields: "throttle: {limit: 1, period: 500ms}\n", diags: []string{"4:30: error: throttle.period 500ms is out of range"}},
		{name: "bad key", fields: "throttle: {key: data.x +, limit: 1, period: 1s}\n", diags: []string{"4:25: error: throttle.key is not a valid expression: Syntax error"}},
		{name: "subject key", fields: "throttle: {key: subject, limit: 1, period: 1s}\n",
			diags: []string{"4:17: error: throttle.key reads subject, which a run does not carry: it would be \"\" on every run, one key for all; a key of a run reads id, type, source, and data (its inputs) (hint: key on a field of the run's data"}},
		{name: "extension key", fields: "throttle: {key: 'extensions[\"tenant\"]', limit: 1, period: 1s}\n",
			diags: []string{"4:18: error: throttle.key reads extensions.tenant, which a run does not carry"}},
		{name: "unknown", fields: "throttle: {limit: 1, period: 1s, rate: 2}\n", diags: []string{"4:34: error: unknown field throttle.rate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ok := parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.diags)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, s.Throttle); diff != "" {
				t.Errorf("throttle (-want +got):\n%s", diff)
			}
		})
	}
}

// A concurrency or throttle key reads the run's inputs: a field the workflow
// does not declare fails every run, on the key or on the inputs.
func TestRunKeyReadsDeclaredInputs(t *testing.T) {
	t.Parallel()
	const steps = "steps: [{id: s, tool: echo, args: {a: 1}}]\n"
	tests := []struct {
		name, fields string
		want         []string
	}{
		{"misspelt", "concurrency: [{key: data.customr, limit: 1}]\ninputs: [{name: customer}, {name: amount, type: number}]\n", []string{
			"skills/x/skill.yaml:4:21: error: concurrency.key reads data.customr, an input the skill does not declare: every run would fail, one with it on its inputs, one without it on the key (hint: did you mean data.customer?)"}},
		{"undeclared", "throttle: {key: 'data[\"shop\"]', limit: 1, period: 1s}\ninputs: [{name: customer}]\n", []string{
			"skills/x/skill.yaml:4:18: error: throttle.key reads data.shop, an input the skill does not declare: every run would fail, one with it on its inputs, one without it on the key (hint: declare input shop, or key on one the skill declares (customer))"}},
		{"declared", "concurrency: [{key: data.customer, limit: 1}]\nthrottle: {key: 'has(data.x) ? data.customer : \"\"', limit: 1, period: 1s}\ninputs: [{name: customer}]\n", nil},
		{"any input", "concurrency: [{key: data.shop, limit: 1}]\ninputs: [{name: customer}, {name: \"*\"}]\n", nil},
		{"no inputs", "concurrency: [{key: data.shop, limit: 1}]\n", nil},
		// A router reads a rate_limit's key on the trigger, before inputs.
		{"rate limit", "rate_limit: {key: data.shop, limit: 1, period: 1m}\ninputs: [{name: customer}]\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\n"+tt.fields+steps))
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("diagnostic %q, want it to start %q", got[i], tt.want[i])
				}
			}
		})
	}
}
