package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/skillbus/skillbus/pkg/skill"
)

func TestDueTicks(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	minutely, _ := skill.Schedule{Cron: "* * * * *"}.Compile()
	yearly, _ := skill.Schedule{Cron: "@yearly"}.Compile()
	every, _ := skill.Schedule{Cron: "@every 1s"}.Compile()
	tests := []struct {
		name      string
		tab       skill.Timetable
		last, now string
		limit     int
		want      []string
	}{
		{"none due", minutely, "2026-01-01T00:00:30Z", "2026-01-01T00:00:59Z", 1, nil},
		{"the tick itself", minutely, "2026-01-01T00:00:30Z", "2026-01-01T00:01:00Z", 1, []string{"2026-01-01T00:01:00Z"}},
		{"latest of many", minutely, "2026-01-01T00:00:00Z", "2026-01-01T00:05:30Z", 1, []string{"2026-01-01T00:05:00Z"}},
		{"all of a few", minutely, "2026-01-01T00:00:00Z", "2026-01-01T00:03:00Z", 100, []string{"2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z", "2026-01-01T00:03:00Z"}},
		{"latest after a year", yearly, "2024-01-01T00:00:00Z", "2026-06-01T00:00:00Z", 1, []string{"2026-01-01T00:00:00Z"}},
		{"all after years", yearly, "2023-01-01T00:00:00Z", "2026-06-01T00:00:00Z", 100, []string{"2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tk := range dueTicks(tt.tab, at(tt.last), at(tt.now), tt.limit) {
				got = append(got, tk.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("due (-want +got):\n%s", diff)
			}
		})
	}
	// The clocks go back at 02:00 EDT on 2026-11-01: 01:30 is shown twice and
	// ticks once.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	nightly, _ := skill.Schedule{Cron: "30 1 * * *", Timezone: "America/New_York"}.Compile()
	var fell []string
	for _, tk := range dueTicks(onceADay{tab: nightly, loc: ny}, at("2026-10-31T12:00:00Z"), at("2026-11-02T12:00:00Z"), 100) {
		fell = append(fell, tk.UTC().Format(time.RFC3339))
	}
	if diff := cmp.Diff([]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}, fell); diff != "" {
		t.Errorf("across the fall-back (-want +got):\n%s", diff)
	}
	// A year down with @every 1s and catch_up: all: the latest MaxCatchUp, found
	// without walking the year.
	start := time.Now()
	got := dueTicks(every, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), skill.MaxCatchUp)
	if len(got) != skill.MaxCatchUp || !got[len(got)-1].Equal(at("2026-01-01T00:00:00Z")) || !got[0].Equal(at("2025-12-31T23:58:21Z")) {
		t.Errorf("got %d ticks, %v … %v", len(got), got[0], got[len(got)-1])
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
}
