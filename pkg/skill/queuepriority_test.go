package skill

import (
	"testing"
)

func TestQueuePriority(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\n" + fields + "---\nReview each large order from a gold customer and flag anything unusual.\n")
	}
	tests := []struct {
		name   string
		fields string
		want   string
		diags  []string // "line:col: severity: message" prefixes, in order
	}{
		{name: "number", fields: "queue_priority: 300\n", want: "300"},
		{name: "negative", fields: "queue_priority: -600\n", want: "-600"},
		{name: "expression", fields: "queue_priority: 'data.plan == \"enterprise\" ? 300 : 0'\n", want: `data.plan == "enterprise" ? 300 : 0`},
		{name: "out of range", fields: "queue_priority: 900\n", diags: []string{"4:17: error: queue_priority is not a valid expression: a queue priority is -600 to 600 seconds; 900 is out of range"}},
		{name: "branch out of range", fields: "queue_priority: 'data.vip ? 3600 : 0'\n", diags: []string{"4:29: error: queue_priority is not a valid expression: a queue priority is -600 to 600 seconds; 3600 is out of range"}},
		{name: "block expression", fields: "queue_priority: |\n  data.vip\n    ? 700 : 0\n", diags: []string{"6:7: error: queue_priority is not a valid expression: a queue priority is -600 to 600 seconds; 700 is out of range"}},
		{name: "not a number", fields: "queue_priority: data.plan\n", want: "data.plan"}, // dyn: decided at run time
		{name: "string", fields: "queue_priority: '\"soon\"'\n", diags: []string{"4:18: error: queue_priority is not a valid expression: a queue priority must be a number of seconds; this is string"}},
		{name: "bad syntax", fields: "queue_priority: data.x +\n", diags: []string{"4:25: error: queue_priority is not a valid expression: Syntax error"}},
		{name: "high", fields: "queue_priority: high\n", diags: []string{"4:17: error: queue_priority high is not a number of seconds: high, medium and low are priority's values"}},
		{name: "priority as a number", fields: "priority: 300\n", diags: []string{"4:11: error: priority 300 is not valid: priority is high, medium or low and orders routing candidates; queue_priority is the number of seconds that orders queued runs (hint: to start this skill's runs sooner in a busy pool, write queue_priority: 300)"}},
		{name: "priority high", fields: "priority: high\nqueue_priority: 60\n", want: "60"},
		{name: "with max_concurrent", fields: "max_concurrent: 2\nqueue_priority: 60\n", diags: []string{"5:17: error: queue_priority does not apply to a skill with max_concurrent 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ok := parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.diags)
			if !ok {
				return
			}
			if s.QueuePriority != tt.want {
				t.Errorf("queue_priority %q, want %q", s.QueuePriority, tt.want)
			}
		})
	}
}
