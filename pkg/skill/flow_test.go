package skill

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFlowFields(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\n" + fields + "---\nReview each large order from a gold customer and flag anything unusual.\n")
	}
	type want struct {
		filter string
		rl     *RateLimit
		db     *Debounce
		bt     *Batch
		co     []CancelOn
	}
	tests := []struct {
		name   string
		fields string
		want   want
		diags  []string // "line:col: severity: message" prefixes, in order
	}{
		{name: "filter", fields: "filter: data.amount > 100\n", want: want{filter: "data.amount > 100"}},
		{name: "quoted filter", fields: "filter: 'data.tier == \"gold\"'\n", want: want{filter: `data.tier == "gold"`}},
		{name: "block filter", fields: "filter: |\n  data.amount > 100 &&\n  type == \"x\"\n", want: want{filter: "data.amount > 100 &&\ntype == \"x\""}},
		{name: "rate limit", fields: "rate_limit: {key: data.customer, limit: 10, period: 1m}\n",
			want: want{rl: &RateLimit{Key: "data.customer", Limit: 10, Period: Duration(time.Minute)}}},
		{name: "rate limit without key", fields: "rate_limit:\n  limit: 3\n  period: 30\n",
			want: want{rl: &RateLimit{Limit: 3, Period: Duration(30 * time.Second)}}},
		{name: "debounce", fields: "debounce: {key: data.customer, period: 2s, timeout: 30s}\n",
			want: want{db: &Debounce{Key: "data.customer", Period: Duration(2 * time.Second), Timeout: Duration(30 * time.Second)}}},
		{name: "debounce default timeout", fields: "debounce:\n  period: 1m\n",
			want: want{db: &Debounce{Period: Duration(time.Minute), Timeout: Duration(10 * time.Minute)}}},
		// A router evaluates these keys on the trigger, which has its extensions.
		{name: "rate limit by extension", fields: "rate_limit: {key: extensions.tenant, limit: 10, period: 1m}\n",
			want: want{rl: &RateLimit{Key: "extensions.tenant", Limit: 10, Period: Duration(time.Minute)}}},
		{name: "debounce by subject", fields: "debounce: {key: subject, period: 2s}\n",
			want: want{db: &Debounce{Key: "subject", Period: Duration(2 * time.Second), Timeout: Duration(20 * time.Second)}}},
		{name: "batch by extension", fields: "batch: {key: extensions.tenant, max_size: 5, timeout: 5s}\n",
			want: want{bt: &Batch{Key: "extensions.tenant", MaxSize: 5, Timeout: Duration(5 * time.Second)}}},
		{name: "debounce without period", fields: "debounce: {timeout: 1m}\n", diags: []string{"4:1: error: debounce needs period"}},
		{name: "debounce short timeout", fields: "debounce: {period: 10s, timeout: 5s}\n", diags: []string{"4:34: error: debounce.timeout 5s is shorter than debounce.period 10s"}},
		{name: "debounce sub-second", fields: "debounce: {period: 500ms}\n", diags: []string{"4:20: error: debounce.period 500ms is out of range"}},
		{name: "debounce bad key", fields: "debounce: {key: data.x +, period: 1s}\n", diags: []string{"4:25: error: debounce.key is not a valid expression: Syntax error"}},
		{name: "debounce unknown field", fields: "debounce: {period: 1s, wait: 3s}\n", diags: []string{"4:24: error: unknown field debounce.wait"}},
		{name: "batch", fields: "batch: {key: data.customer, max_size: 50, timeout: 5s}\n",
			want: want{bt: &Batch{Key: "data.customer", MaxSize: 50, Timeout: Duration(5 * time.Second)}}},
		{name: "batch without timeout", fields: "batch: {max_size: 5}\n", diags: []string{"4:1: error: batch needs timeout"}},
		{name: "batch too large", fields: "batch: {max_size: 5000, timeout: 5s}\n", diags: []string{"4:19: error: batch.max_size must be from 1 to 1000, not 5000"}},
		{name: "batch sub-second", fields: "batch: {max_size: 5, timeout: 500ms}\n", diags: []string{"4:31: error: batch.timeout 500ms is out of range"}},
		{name: "batch bad key", fields: "batch: {key: data.x +, max_size: 5, timeout: 5s}\n", diags: []string{"4:22: error: batch.key is not a valid expression: Syntax error"}},
		{name: "batch unknown field", fields: "batch: {max_size: 5, timeout: 5s, size: 3}\n", diags: []string{"4:35: error: unknown field batch.size"}},
		{name: "batch and debounce", fields: "debounce: {period: 1s}\nbatch: {max_size: 5, timeout: 5s}\n", diags: []string{"5:1: error: a skill has debounce or batch, not both"}},
		{name: "cancel_on", fields: "cancel_on:\n  - type: com.example.order.paid\n    match: event.data.order == trigger.data.order\n    timeout: 30m\n  - {type: com.example.order.deleted}\n",
			want: want{co: []CancelOn{{Type: "com.example.order.paid", Match: "event.data.order == trigger.data.order", Timeout: Duration(30 * time.Minute)},
				{Type: "com.example.order.deleted", Timeout: Duration(time.Hour)}}}},
		{name: "cancel_on bad match", fields: "cancel_on:\n  - type: com.example.order.paid\n    match: event.data.order == data.order\n", diags: []string{"6:32: error: cancel_on[0].match is not a valid expression: undeclared reference to 'data'"}},
		{name: "cancel_on syntax", fields: "cancel_on: [{type: a.b, match: 'event.id =='}]\n", diags: []string{"4:44: error: cancel_on[0].match is not a valid expression: Syntax error"}},
		{name: "cancel_on no type", fields: "cancel_on: [{match: event.id == trigger.id}]\n", diags: []string{"4:13: error: cancel_on[0] needs type"}},
		{name: "cancel_on bad type", fields: "cancel_on: [{type: 'a b'}]\n", diags: []string{"4:20: error: cancel_on[0].type \"a b\" is not a CloudEvent type"}},
		{name: "cancel_on unknown field", fields: "cancel_on: [{type: a.b, when: x}]\n", diags: []string{"4:25: error: unknown field cancel_on[0].when"}},
		{name: "cancel_on long timeout", fields: "cancel_on: [{type: a.b, timeout: 720h}]\n", diags: []string{"4:34: error: cancel_on[0].timeout 720h0m0s is out of range"}},
		{name: "cancel_on not a list", fields: "cancel_on: {type: a.b}\n", diags: []string{"4:12: error: cancel_on must be a list"}},
		{name: "syntax error", fields: "filter: data.amount >\n", diags: []string{"4:22: error: filter is not a valid expression: Syntax error"}},
		{name: "and as a word", fields: "filter: data.amount > 100 and not data.test\n", diags: []string{"4:27: error: filter is not a valid expression: Syntax error: mismatched input 'and' expecting <EOF> (hint: CEL writes and/or/not as &&, ||, !)"}},
		{name: "and in a string", fields: "filter: data.note == 'this and that' &&\n", diags: []string{"4:40: error: filter is not a valid expression: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER} (hint: CEL over the event"}},
		{name: "quoted error", fields: "filter: \"data.amount > nosuch\"\n", diags: []string{"4:24: error: filter is not a valid expression: undeclared reference to 'nosuch'"}},
		{name: "block error", fields: "filter: |\n  data.amount > 100 &&\n    nosuch\n", diags: []string{"6:5: error: filter is not a valid expression: undeclared reference to 'nosuch'"}},
		{name: "not bool", fields: "filter: subject\n", diags: []string{"4:9: error: filter is not a valid expression: a filter must be true or false"}},
		{name: "empty filter", fields: "filter: \"\"\n", diags: []string{"4:10: error: filter is not a valid expression: the expression is empty"}},
		{name: "filter list", fields: "filter: [a]\n", diags: []string{"4:9: error: filter must be a string"}},
		{name: "bad key", fields: "rate_limit: {key: data.x +, limit: 1, period: 1s}\n", diags: []string{"4:27: error: rate_limit.key is not a valid expression: Syntax error"}},
		{name: "list key", fields: "rate_limit: {key: \"[data.x]\", limit: 1, period: 1s}\n", diags: []string{"4:20: error: rate_limit.key is not a valid expression: a key must be"}},
		{name: "unknown field", fields: "rate_limit: {limit: 1, period: 1s, burst: 3}\n", diags: []string{"4:36: error: unknown field rate_limit.burst"}},
		{name: "misspelt field", fields: "rate_limit: {limit: 1, priod: 1s}\n", diags: []string{"4:1: error: rate_limit needs period", "4:24: error: unknown field rate_limit.priod (hint: did you mean period?)"}},
		{name: "no limit", fields: "rate_limit: {period: 1m}\n", diags: []string{"4:1: error: rate_limit needs limit"}},
		{name: "zero limit", fields: "rate_limit: {limit: 0, period: 1m}\n", diags: []string{"4:21: error: rate_limit.limit must be at least 1"}},
		{name: "short period", fields: "rate_limit: {limit: 1, period: 500ms}\n", diags: []string{"4:32: error: rate_limit.period 500ms is out of range"}},
		{name: "long period", fields: "rate_limit: {limit: 1, period: 48h}\n", diags: []string{"4:32: error: rate_limit.period 48h0m0s is out of range"}},
		{name: "not a mapping", fields: "rate_limit: 10\n", diags: []string{"4:13: error: rate_limit must be a mapping"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ok := parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.diags)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, want{filter: s.Filter, rl: s.RateLimit, db: s.Debounce, bt: s.Batch, co: s.CancelOn}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("flow fields (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlowFieldsInSkillYAML(t *testing.T) {
	t.Parallel()
	_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\nfilter: data.a >\nsteps:\n- id: a\n  tool: log\n  args: {message: hi}\n"))
	if len(ds) == 0 || !strings.HasPrefix(ds[0].String(), "skills/x/skill.yaml:3:17: error: filter is not a valid expression") {
		t.Fatalf("diagnostics %v", ds)
	}
}
