package dlq

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseSince reads a --since value: a duration back from now ("90m", "2h", "7d",
// "1d12h"; d is 24 hours) or a point in time ("2026-11-23", "2026-11-23T10:00:00Z",
// "2026-11-23 10:00" in now's location). It returns the time it names.
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("--since is empty: want a duration (90m, 2h, 7d) or a time (2026-11-23, 2026-11-23T10:00:00Z)")
	}
	if d, ok, err := parseDuration(s); ok {
		if err != nil {
			return time.Time{}, fmt.Errorf("--since %q: %v", s, err)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		var t time.Time
		var err error
		if layout == time.RFC3339Nano {
			t, err = time.Parse(layout, s)
		} else {
			t, err = time.ParseInLocation(layout, s, now.Location())
		}
		if err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %q is neither a duration (90m, 2h, 7d, 1d12h) nor a time (2026-11-23, 2026-11-23 10:00, 2026-11-23T10:00:00Z)", s)
}

// parseDuration reads a Go duration with an optional leading "<n>d". ok is false when
// s does not look like a duration at all (it does not start with a digit, or it
// looks like a date).
func parseDuration(s string) (d time.Duration, ok bool, err error) {
	if s[0] < '0' || s[0] > '9' {
		if s[0] == '-' {
			return 0, true, fmt.Errorf("a negative duration points into the future")
		}
		return 0, false, nil
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == len(s) {
		return 0, true, fmt.Errorf("a number needs a unit (m, h, d, ...)")
	}
	if s[i] == '-' || s[i] == ':' || s[i] == 'T' {
		return 0, false, nil // a date or a time of day
	}
	if s[i] == 'd' {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n > 106751 { // time.Duration holds about 292 years
			return 0, true, fmt.Errorf("%s days is too long", s[:i])
		}
		d = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return d, true, nil
		}
	}
	rest, err := time.ParseDuration(s)
	if err != nil {
		return 0, true, fmt.Errorf("not a duration: %v", strings.TrimPrefix(err.Error(), "time: "))
	}
	if rest < 0 {
		return 0, true, fmt.Errorf("a negative duration points into the future")
	}
	if d > 0 && rest > 1<<63-1-d {
		return 0, true, fmt.Errorf("too long")
	}
	return d + rest, true, nil
}
