package cli_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// --keep-* (or their environment variables) set how long the streams keep what
// they hold, where the process ensures them; a retention shorter than the
// duplicate window, or not a duration, is refused with a message naming it.
func TestRetentionFlags(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	skills := filepath.Join("..", "..", "testdata", "skills")
	var out bytes.Buffer
	env := func(k string) string { return map[string]string{"SKILLBUS_KEEP_EVENTS": "36h"}[k] }
	err := cli.Registry(context.Background(), []string{"--once", "--skills", skills, "--log-level", "error", "--nats-url", srv.URL(),
		"--keep-jobs", "2d", "--keep-triggers", "90m"}, env, &out, &out)
	if err != nil {
		t.Fatalf("registry: %v\n%s", err, out.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := bus.New(srv.Conn(t), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for stream, want := range map[string]time.Duration{
			b.StreamJobs(): 48 * time.Hour, b.StreamEvents(): 36 * time.Hour, b.StreamTriggers(): 90 * time.Minute, b.StreamDead(): 30 * 24 * time.Hour,
		} {
			s, err := b.JS.Stream(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config.MaxAge; got != want {
				t.Errorf("%s: %s keeps %v, want %v", when, stream, got, want)
			}
		}
	}
	check("given")
	// Another process ensuring the streams without them changes nothing.
	out.Reset()
	if err := cli.Registry(context.Background(), []string{"--once", "--skills", skills, "--log-level", "error", "--nats-url", srv.URL()}, noEnv, &out, &out); err != nil {
		t.Fatalf("registry: %v\n%s", err, out.String())
	}
	check("after a start without them")
	// A process that was not given them learns the streams' own (a confirmation's
	// longest timeout is bounded by the events' retention).
	other, err := bus.New(srv.Conn(t), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	check("after Ensure without them")
	if c := other.Config(); c.EventsMaxAge != 36*time.Hour || c.JobsMaxAge != 48*time.Hour || c.DeadMaxAge != 30*24*time.Hour {
		t.Errorf("Config after Ensure: events %v, jobs %v, dead %v; want the streams' 36h, 48h, 720h", c.EventsMaxAge, c.JobsMaxAge, c.DeadMaxAge)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--keep-jobs", "1m"}, nil, "the jobs are kept 1m0s, less than the duplicate window 2m0s"},
		{[]string{"--keep-dead", "soon"}, nil, `invalid argument "soon" for "--keep-dead"`},
		{[]string{"--keep-events", "0d"}, nil, "want a number of days from 1 to 36500"},
		{[]string{"--keep-events", "9999999999d"}, nil, "want a number of days from 1 to 36500"},
		{[]string{"--keep-events", "1.5d"}, nil, "want a number of days"},
		{nil, map[string]string{"SKILLBUS_KEEP_JOBS": "-1h"}, "$SKILLBUS_KEEP_JOBS"},
	} {
		out.Reset()
		err := cli.Registry(context.Background(), append([]string{"--once", "--skills", skills, "--log-level", "error", "--nats-url", srv.URL()}, tc.args...),
			func(k string) string { return tc.env[k] }, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || cli.ExitCode(err) != 2 {
			t.Errorf("%v %v: exit %d, %v; want a usage error saying %q", tc.args, tc.env, cli.ExitCode(err), err, tc.want)
		}
	}
}

// The --keep-* help says the minimum, and names --ensure only where the process has
// that flag.
func TestRetentionHelp(t *testing.T) {
	t.Parallel()
	for name, run := range map[string]func(context.Context, []string, cli.Env, io.Writer, io.Writer) error{
		"dev": func(ctx context.Context, args []string, env cli.Env, o, e io.Writer) error {
			return cli.Skillbus(ctx, append([]string{"dev"}, args...), env, o, e)
		},
		"router": cli.Router,
	} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, &out, &out); err != nil {
			t.Fatalf("%s --help: %v", name, err)
		}
		help := out.String()
		if !strings.Contains(help, "at least the 2m duplicate window") || strings.Contains(help, "(--ensure)") != (name == "router") {
			t.Errorf("%s --help:\n%s", name, help)
		}
	}
}
