package cli

import (
	"testing"
	"time"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"", time.Time{}, false},
		{"1h30m", now.Add(-90 * time.Minute), false},
		{"2026-03-01T06:00:00Z", time.Date(2026, 3, 1, 6, 0, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"0s", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	} {
		got, err := parseSince(tc.in, now)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && ExitCode(err) != 2 {
			t.Errorf("parseSince(%q): exit code %d, want 2 (usage)", tc.in, ExitCode(err))
		}
	}
}
