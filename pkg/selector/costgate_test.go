package selector_test

import (
	"math"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// costCatalog is a small catalog of distinct skills, the thermostat's cost hint
// set by hint.
func costCatalog(hint string) []*skill.Skill {
	low := func(s *skill.Skill) { s.CostHint = "low" }
	return []*skill.Skill{
		sk("thermostat", "Sets the home thermostat temperature and mode.", func(s *skill.Skill) { s.CostHint = hint }),
		sk("lights", "Turns the lights on or off and dims them.", low),
		sk("forecast", "Weather forecast for a city: rain, wind and temperature.", low),
		sk("flights", "Searches flights between airports for given dates.", low),
		sk("recipes", "Finds recipes by ingredient or dish.", low),
		sk("stocks", "Quotes stock prices and market indices.", low),
		sk("reminders", "Sets reminders at a time or place.", low),
		sk("news", "Reads the news headlines of the day.", low),
	}
}

// TestCostHintOrdersButDoesNotAdmit: a low cost hint puts a skill ahead of a
// costlier one the request is as surely for, but does not let a request through
// that would not reach a skill without a hint; a high hint asks for more.
func TestCostHintOrdersButDoesNotAdmit(t *testing.T) {
	t.Parallel()
	// One word of the request ("home") is the thermostat's; the others no skill's.
	const weak = "my home office tax"
	scores := map[string]float64{}
	for _, h := range []string{"low", "medium"} {
		x := newSel(t, selector.Config{}, costCatalog(h)...)
		d := decide(t, x, selector.Request{Text: weak}, selector.Env{})
		c := d.Candidates[0]
		if d.Primary != "" || c.Name != "thermostat" {
			t.Fatalf("%s: primary %q, best %s %.3f: want the thermostat best and none chosen", h, d.Primary, c.Name, c.Score)
		}
		scores[h] = c.Score
		if h == "low" && (math.Abs(c.Gate()-(c.Score-0.05)) > 1e-9 || !strings.Contains(c.Reason, "as a skill of medium cost) below threshold 0.65")) {
			t.Errorf("low: gate %.3f of score %.3f, reason %q", c.Gate(), c.Score, c.Reason)
		}
	}
	// The score still counts the hint: the low one would pass on its score alone.
	if scores["low"] < selector.DefaultThreshold || scores["medium"] >= selector.DefaultThreshold {
		t.Fatalf("scores %v: want low at or above the threshold, medium below", scores)
	}

	// A request the thermostat is surely for is chosen whatever the hint.
	for _, h := range []string{"low", "medium", "high"} {
		x := newSel(t, selector.Config{}, costCatalog(h)...)
		if d := decide(t, x, selector.Request{Text: "set the thermostat to 21"}, selector.Env{}); d.Primary != "thermostat" {
			t.Errorf("%s: primary %q, want thermostat", h, d.Primary)
		}
	}

	// Of two skills the request is as surely for, the cheaper goes first.
	const desc = "Sets the home thermostat temperature and mode."
	x := newSel(t, selector.Config{},
		sk("heat-a", desc), sk("heat-b", desc, func(s *skill.Skill) { s.CostHint = "low" }))
	d := decide(t, x, selector.Request{Text: "set the thermostat to 21"}, selector.Env{})
	if d.Primary != "heat-b" || len(d.Fallback) != 1 || d.Fallback[0] != "heat-a" {
		t.Errorf("primary %q, fallback %v: want heat-b, then heat-a", d.Primary, d.Fallback)
	}
}
