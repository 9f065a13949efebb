package skill

import (
	"strings"
	"testing"
)

// A batched workflow declares the input a batch's run gives, {"events": [...]},
// as an array, and requires no other: otherwise every batch would fail.
func TestBatchWorkflowInputs(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n- id: a\n  tool: log\n  args: {message: hi}\n"
	tests := []struct {
		name, inputs string
		want         []string
	}{
		{"no inputs", "", nil},
		{"declared", "inputs:\n- name: events\n  type: array\n- name: depth\n  type: integer\n  default: 2\n", nil},
		{"any", "inputs:\n- name: \"*\"\n", nil},
		{"optional other", "inputs:\n- name: events\n  type: array\n- name: shop\n", nil},
		{"undeclared", "inputs:\n- name: shop\n  type: string\n", []string{
			`skills/x/skill.yaml:4:1: error: each batch's run has the data {"events": [...]}, an input the workflow does not declare; every batch would fail (hint: add an input events (type: array), or one named "*"`}},
		{"required other", "inputs:\n- {name: shop, type: string, required: true}\n", []string{
			"skills/x/skill.yaml:4:1: error: input shop is required, but a batch's run gives only events; every batch would fail",
			`skills/x/skill.yaml:4:1: error: each batch's run has the data {"events": [...]}`}},
		{"required other with events", "inputs:\n- name: events\n  type: array\n- {name: shop, required: true}\n", []string{
			"skills/x/skill.yaml:4:1: error: input shop is required, but a batch's run gives only events"}},
		{"untyped events", "inputs:\n- name: events\n", []string{
			"skills/x/skill.yaml:4:1: error: each batch's run gives input events as an array of events, but it is declared as string (the type of an input without type:)"}},
		{"object events", "inputs:\n- name: events\n  type: object\n", []string{
			"skills/x/skill.yaml:4:1: error: each batch's run gives input events as an array of events, but it is declared as object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\nbatch: {max_size: 5, timeout: 5s}\n"+tt.inputs+steps))
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

// A debounced run has the last trigger's data, as any trigger's run: its inputs
// are not checked against a shape of their own.
func TestDebounceWorkflowInputsUnchecked(t *testing.T) {
	t.Parallel()
	_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\ntriggers: [t.x]\ndebounce: {period: 2s}\n"+
		"inputs:\n- {name: shop, type: string, required: true}\nsteps:\n- id: a\n  tool: log\n  args: {message: hi}\n"))
	if len(ds) != 0 {
		t.Fatalf("diagnostics %v", ds)
	}
}

// The keys a batch's run is counted or gated by read that run, whose data is
// {"events": [...]}: a key on a field of one trigger's data would fail on
// every batch (a rate_limit's drops the run as filter_error).
func TestBatchKeysReadTheRun(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\ntriggers: [t.x]\nbatch: {key: data.shop, max_size: 5, timeout: 5s}\n" + fields + "---\nLoad each batch of new orders into the warehouse and report how many were loaded.\n")
	}
	tests := []struct {
		name, fields string
		want         []string
	}{
		{"rate limit by a trigger's field", "rate_limit: {key: data.shop, limit: 5, period: 1m}\n", []string{
			`6:19: error: rate_limit.key reads data.shop, but it is evaluated on the batch's run, whose data is {"events": [...]}: it would fail on every batch (hint: key on the batch's events, such as data.events[0].data.shop, or move the key to batch.key)`}},
		{"concurrency by index", "concurrency: [{key: 'data[\"shop\"]', limit: 1}]\n", []string{
			"6:22: error: concurrency.key reads data.shop, but it is evaluated on the batch's run"}},
		{"throttle", "throttle: {key: data.customer.id, limit: 1, period: 1s}\n", []string{
			"6:17: error: throttle.key reads data.customer, but it is evaluated on the batch's run"}},
		{"rate limit by extension, subject and source", "rate_limit: {key: 'extensions.tenant + subject + source', limit: 5, period: 1m}\n", []string{
			`6:20: error: rate_limit.key reads extensions.tenant, but it is evaluated on the batch's run, which has no extensions: it would be "" on every batch, one count for all (hint: a batch's run cannot read extensions: key the batch itself (batch.key: extensions.tenant) or on the events' data)`,
			`6:40: error: rate_limit.key reads subject, but it is evaluated on the batch's run, which has none: it would be "" on every batch, one count for all (hint: key on the batch's events, such as data.events[0].subject)`,
			`6:50: error: rate_limit.key reads source, but it is evaluated on the batch's run, whose source is /skillbus/debounce/orders on every batch: one key for all`}},
		{"on the events", "rate_limit: {key: 'data.events[0].data.shop', limit: 5, period: 1m}\nconcurrency: [{key: 'string(size(data.events))', limit: 1}]\n", nil},
		{"queue priority", "queue_priority: 'data.plan == \"gold\" ? 60 : 0'\n", []string{
			`6:18: warning: queue_priority reads data.plan, but it is evaluated on the batch's run, whose data is {"events": [...]}: it would fail, and every batch be queued at 0 (hint: read the batch's events, such as data.events[0].data.plan)`}},
		{"queue priority on the events", "queue_priority: 'size(data.events) > 3 ? 60 : 0'\n", nil},
		{"has", "throttle: {key: 'has(data.shop) ? \"x\" : \"y\"', limit: 1, period: 1s}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.want)
		})
	}
	// Without a batch, the same keys read the trigger's data.
	parseExpecting(t, "skills/orders/SKILL.md", []byte("---\nname: orders\ndescription: d\ntriggers: [t.x]\n"+
		"debounce: {key: data.shop, period: 2s}\nrate_limit: {key: 'data.shop + extensions.tenant + subject', limit: 5, period: 1m}\nconcurrency: [{key: data.shop, limit: 1}]\n---\nLoad each batch of new orders into the warehouse and report how many were loaded.\n"), nil)
}

// A debounced burst's run is its last trigger with id its activation id and
// source /skillbus/debounce/<skill>: the filter, checked again on the run, and
// the keys of the limits on the run see those.
func TestDebounceReadsTheRun(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: orders\ndescription: d\ntriggers: [t.x]\ndebounce: {key: source, period: 2s}\n" + fields +
			"---\nLoad each batch of new orders into the warehouse and report how many were loaded.\n")
	}
	tests := []struct {
		name, fields string
		want         []string
	}{
		{"filter on source", "filter: source == \"/shop\"\n", []string{
			"6:9: warning: filter reads source, which is /skillbus/debounce/orders on the debounced run: the filter is checked on each trigger and again on their run, and a trigger it took may end in a run it refuses (hint: filter on the data, subject or extensions, which the run keeps; or drop debounce)"}},
		{"filter on id", "filter: 'id.startsWith(\"o-\")'\n", []string{
			"6:10: warning: filter reads id, which is its activation id on the debounced run"}},
		{"rate limit by source", "rate_limit: {key: source, limit: 1, period: 1m}\n", []string{
			"6:19: error: rate_limit.key reads source, which is /skillbus/debounce/orders on every debounced run: one key for all"}},
		{"throttle by source", "throttle: {key: source, limit: 1, period: 1s}\n", []string{
			"6:17: error: throttle.key reads source, which is /skillbus/debounce/orders on every debounced run"}},
		{"what the run keeps", "filter: 'data.a > 1 && subject != \"\" && extensions.tenant != \"test\"'\nrate_limit: {key: extensions.tenant, limit: 1, period: 1m}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parseExpecting(t, "skills/orders/SKILL.md", md(tt.fields), tt.want)
		})
	}
	// Without a debounce the run is the trigger.
	parseExpecting(t, "skills/orders/SKILL.md", []byte("---\nname: orders\ndescription: d\ntriggers: [t.x]\nfilter: source == \"/shop\"\n"+
		"rate_limit: {key: source, limit: 1, period: 1m}\n---\nLoad each batch of new orders into the warehouse and report how many were loaded.\n"), nil)
}
