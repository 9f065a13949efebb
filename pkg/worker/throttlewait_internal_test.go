package worker

import (
	"testing"
	"time"
)

// A due message fires at its run's start time, to the whole second before it,
// unless that is more than half the events' retention away: then at that half,
// so that the stream keeps it until it fires.
func TestDueAtStaysWithinTheEventsRetention(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	week := 7 * 24 * time.Hour
	for _, c := range []struct {
		name   string
		at     time.Time
		maxAge time.Duration
		want   time.Time
	}{
		{"soon", now.Add(time.Hour), week, now.Add(time.Hour).Truncate(time.Second)},
		{"at the half", now.Add(week / 2), week, now.Add(week / 2).Truncate(time.Second)},
		{"past the half", now.Add(week), week, now.Add(week / 2).Truncate(time.Second)},
		{"past the retention", now.Add(30 * 24 * time.Hour), week, now.Add(week / 2).Truncate(time.Second)},
		{"unbounded retention", now.Add(30 * 24 * time.Hour), 0, now.Add(30 * 24 * time.Hour).Truncate(time.Second)},
	} {
		if got := dueAt(now, c.at, c.maxAge); !got.Equal(c.want) {
			t.Errorf("%s: dueAt = %v, want %v", c.name, got, c.want)
		}
	}
}
