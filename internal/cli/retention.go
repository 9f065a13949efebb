package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// retention is how long the streams keep what they hold, where given. It is applied
// where the streams are created or updated: by the registry in the Kubernetes
// manifests, by every process started with --ensure (the default) otherwise. A
// process not given it creates a missing stream with the default and leaves an
// existing one's retention as it is.
type retention struct {
	jobs, events, triggers, dead age
}

// age is a duration flag that also takes whole days ("7d"); zero until set.
type age struct{ d time.Duration }

func (a *age) String() string {
	if a.d > 0 && a.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(a.d/(24*time.Hour)), 10) + "d"
	}
	if a.d == 0 {
		return ""
	}
	return a.d.String()
}

func (a *age) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	a.d = d
	return nil
}

func (a *age) Type() string { return "duration" }

// parseAge reads a Go duration ("36h", "90m") or a whole number of days ("7d").
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 36500 {
			return 0, fmt.Errorf("%q: want a number of days from 1 to 36500 (7d) or a duration (36h)", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a positive duration (36h) or number of days (7d)", s)
	}
	return d, nil
}

// registerRetention adds the --keep-* flags, each defaulting to its environment
// variable.
//
// Where the process has no --ensure flag (dev, which always creates its streams),
// the help says so without naming one.
func (c *common) registerRetention(cmd *cobra.Command, getenv Env) {
	f := cmd.Flags()
	where := "set on the streams where this process creates or updates them (--ensure)"
	if f.Lookup("ensure") == nil {
		where = "set on the streams this process creates or updates at start"
	}
	for _, k := range []struct {
		a         *age
		flag, env string
		what      string
	}{
		{&c.keep.jobs, "keep-jobs", "SKILLBUS_KEEP_JOBS", "how long JOBS keeps a job after it ran, e.g. 2d or 36h (a new stream: 7d): a trigger re-sent with the same source and id within it starts nothing new"},
		{&c.keep.events, "keep-events", "SKILLBUS_KEEP_EVENTS", "how long EVENTS keeps outcomes and progress (a new stream: 7d): a re-sent trigger is answered with its first result within it"},
		{&c.keep.triggers, "keep-triggers", "SKILLBUS_KEEP_TRIGGERS", "how long TRIGGERS keeps triggers (a new stream: 7d)"},
		{&c.keep.dead, "keep-dead", "SKILLBUS_KEEP_DEAD", "how long the DLQ keeps dead letters (a new stream: 30d)"},
	} {
		if v := getenv(k.env); v != "" {
			if err := k.a.Set(v); err != nil && c.envErr == nil {
				c.envErr = usage("$%s=%v", k.env, err)
			}
		}
		f.Var(k.a, k.flag, k.what+"; at least the 2m duplicate window; "+where+"; without it an existing stream keeps its own ($"+k.env+")")
	}
}
