package console

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/events"
)

var subj = events.Subjects{Prefix: "skillbus"}

func TestFlowVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    events.RouteDecided
		want []string
	}{
		{name: "none", d: events.RouteDecided{Candidates: []events.Candidate{{Name: "a", Selected: true, Reason: "trigger match"}}}},
		{name: "filter and rate limit of the selected only",
			d: events.RouteDecided{Candidates: []events.Candidate{
				{Name: "a", Selected: true, Reason: "trigger match; filter true; rate_limit 10 per 1m0s: 3 of 10 in the window"},
				{Name: "b", Reason: "filter false: data.x"}}},
			want: []string{"a: filter true", "a: rate_limit 10 per 1m0s: 3 of 10 in the window"}},
		{name: "batch run",
			d: events.RouteDecided{Trigger: events.TriggerRef{Source: events.SourceDebounced + "ingest", ID: "batch-ab12-7", Subject: subj.TriggerDebounced("ingest")},
				Candidates: []events.Candidate{{Name: "ingest", Selected: true, Reason: "explicit; batch run"}}},
			want: []string{"the run of a batch of ingest's triggers (data: their events)", "ingest: batch run"}},
		{name: "debounced run",
			d:    events.RouteDecided{Trigger: events.TriggerRef{Source: events.SourceDebounced + "digest", ID: "f00d", Subject: subj.TriggerDebounced("digest")}},
			want: []string{"the run of a debounced burst of digest, with its last trigger's data (activation f00d)"}},
		{name: "a debounce's source on an ordinary trigger",
			d: events.RouteDecided{Trigger: events.TriggerRef{Source: events.SourceDebounced + "digest", ID: "batch-forged",
				Subject: subj.Trigger("com.example.change")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, flowVerdicts(subj, &tt.d)); diff != "" {
				t.Errorf("flowVerdicts (-want +got):\n%s", diff)
			}
		})
	}
}

// The run page shows the verdicts in its plan.
func TestRunPageShowsFlowVerdicts(t *testing.T) {
	t.Parallel()
	p, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	d := events.RouteDecided{Trigger: events.TriggerRef{Source: events.SourceDebounced + "ingest", ID: "batch-ab12-7", Subject: subj.TriggerDebounced("ingest")},
		Candidates: []events.Candidate{{Name: "ingest", Selected: true, Reason: "explicit; batch run"}}}
	var b strings.Builder
	if err := p.byName["run"].ExecuteTemplate(&b, "layout", view{Data: &runView{ID: "x", Decided: &d, Flow: flowVerdicts(subj, &d)}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<dt class="flow">flow control</dt><dd class="flow">the run of a batch of ingest&#39;s triggers`, `<dd class="flow">ingest: batch run</dd>`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the run page lacks %s", want)
		}
	}
}
