package selector_test

import (
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// A phrase said after "about" or "while" is what the request is about, not what
// it asks for: the skill it names is weighed by the keyword index as any other,
// and a request for something no skill does is not routed for its topic.
func TestTopicPhraseIsNotATrigger(t *testing.T) {
	t.Parallel()
	trig := func(ts ...string) func(*skill.Skill) { return func(s *skill.Skill) { s.Triggers = ts } }
	x := newSel(t, selector.Config{},
		sk("weather_forecast", "Forecasts the weather for a city.", trig("weather", "forecast", "rain")),
		sk("debug_helper", "Helps find the cause of a bug.", trig("debug", "error", "stack trace")),
		sk("code_review", "Reviews a code change.", trig("code review", "pull request", "pr")),
		sk("habit_tracker", "Tracks daily habits and streaks.", trig("habit", "streak")),
		sk("calendar", "Schedules meetings in the calendar.", trig("meeting", "calendar")),
		sk("expense_report", "Files expense reports with receipts.", trig("expense", "receipt")),
	)
	for _, c := range []struct{ text, want, topic string }{
		{"write a short poem about autumn rain", "", "weather_forecast"},
		{"play some lo-fi music while I debug this", "", "debug_helper"},
		{"recommend a good book about building habits", "", "habit_tracker"},
		// The trigger before the topic word still decides.
		{"look over this PR, I am worried about the error handling", "code_review", "debug_helper"},
		{"will it rain in Lisbon tomorrow", "weather_forecast", ""},
		// A topic that is most of the request is enough for its skill.
		{"tell me about the weather", "weather_forecast", "weather_forecast"},
	} {
		d := decide(t, x, selector.Request{Text: c.text}, selector.Env{})
		if d.Primary != c.want {
			t.Errorf("%q: primary %q, want %q; %+v", c.text, d.Primary, c.want, d.Candidates)
		}
		if c.topic == "" {
			continue
		}
		if tc := d.Candidate(c.topic); tc == nil || (tc.Source == selector.SourceRule || !strings.Contains(tc.Reason, "the request's topic")) {
			t.Errorf("%q: %s %+v, want it recalled by the keyword index, its phrase the topic", c.text, c.topic, tc)
		}
	}
}
