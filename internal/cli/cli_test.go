package cli_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// The tests mostly wait (a dev server starting, a store filling and freeing,
// AckWaits): eight run at once rather than one per core.
func TestMain(m *testing.M) {
	natstest.WaitingTests(8)
	m.Run()
}

type mainFunc func(ctx context.Context, args []string, getenv cli.Env, stdout, stderr io.Writer) error

func TestHelp(t *testing.T) {
	t.Parallel()
	for name, main := range mains() {
		for _, args := range [][]string{{"--help"}} {
			var out, errOut bytes.Buffer
			err := main(context.Background(), args, noEnv, &out, &errOut)
			if err != nil {
				t.Errorf("%s %v: %v", name, args, err)
			}
			if !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "--nats-url") {
				t.Errorf("%s --help lacks examples or flags:\n%s", name, out.String())
			}
		}
	}
	for _, sub := range [][]string{{"dev", "--help"}, {"trigger", "--help"}, {"skills", "list", "--help"}, {"bench", "--help"}} {
		var out bytes.Buffer
		if err := cli.Skillbus(context.Background(), sub, noEnv, &out, &out); err != nil {
			t.Errorf("skillbus %v: %v", sub, err)
		}
		if !strings.Contains(out.String(), "Examples:") {
			t.Errorf("skillbus %v has no examples:\n%s", sub, out.String())
		}
	}
	// A newcomer with a request in words finds how to send it.
	var out bytes.Buffer
	if err := cli.Skillbus(context.Background(), []string{"trigger", "--help"}, noEnv, &out, &out); err != nil ||
		!strings.Contains(out.String(), `skillbus trigger io.skillbus.request --data '{"query":`) {
		t.Errorf("trigger --help shows no text request: %v\n%s", err, out.String())
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"trigger"}, nil, "give an event TYPE"},
		{[]string{"trigger", "--data", `{"query":"what to pack for lisbon"}`}, nil, `or send a text request as io.skillbus.request with its text in "query":` +
			"\n  skillbus trigger io.skillbus.request --data"},
		{[]string{"trigger", "bad type!"}, nil, "only letters, digits"},
		{[]string{"trigger", "--skill", "a.b"}, nil, "--skill"},
		{[]string{"trigger", "--skill", "hello", "--data", "{nope"}, nil, "not valid JSON"},
		{[]string{"trigger", "--skill", "hello", "--data", "@/nonexistent/file.json"}, nil, "no such file"},
		{[]string{"trigger", "--skill", "hello", "--at", "tomorrow"}, nil, `--at "tomorrow" is not an RFC 3339 time`},
		{[]string{"trigger", "--skill", "hello", "--at", "2020-01-01T00:00:00Z"}, nil, "--at 2020-01-01T00:00:00Z is in the past"},
		{[]string{"trigger", "--skill", "hello", "--in", "-5m"}, nil, "--in -5m0s: give a positive duration"},
		{[]string{"trigger", "--skill", "hello", "--in", "5m", "--at", "2099-01-01T00:00:00Z"}, nil, "give --at or --in, not both"},
		{[]string{"trigger", "--skill", "hello", "--in", "5m", "--wait"}, nil, "--wait follows a trigger published now"},
		{[]string{"trigger", "--skill", "hello", "--in", "soon"}, nil, `invalid argument "soon" for "--in"`},
		{[]string{"--no-such-flag"}, nil, "unknown flag"},
		{[]string{"frobnicate"}, nil, "unknown command"},
		{[]string{"dev", "--workers", "0"}, nil, "--workers must be at least 1"},
		{[]string{"dev", "--skills", "/nonexistent"}, nil, "not a directory"},
		{[]string{"bench", "--storage", "tape"}, nil, "want file or memory"},
		{[]string{"bench", "--server", "remote"}, nil, "want process or embedded"},
		{[]string{"bench", "--pairs", "-1"}, nil, "--pairs not negative"},
		{[]string{"bench", "--pair-executions", "0"}, nil, "--pair-executions must be positive"},
		{[]string{"bench", "--only", "speed"}, nil, "want throughput, ratio, engine"},
		{[]string{"skills", "list"}, map[string]string{"SKILLBUS_REPLICAS": "three"}, "SKILLBUS_REPLICAS"},
		{[]string{"runs", "show"}, nil, "accepts 1 arg(s), received 0"},
		{[]string{"skills", "show", "a", "b"}, nil, "Run 'skillbus skills show --help' for usage."},
		{[]string{"dev", "extra"}, nil, "unknown command \"extra\""},
		{[]string{"dev", "--ui", "127.0.0.1:0", "--ui-token", "s3cret"}, nil, "at least 16"},
		{[]string{"console"}, map[string]string{"SKILLBUS_UI_TOKEN": "x"}, "at least 16"},
		{[]string{"runs", "bogus"}, nil, `unknown command "bogus" for "skillbus runs"` + "\nRun 'skillbus runs --help'"},
		// Every group suggests its subcommands for a near miss, as the top level does.
		{[]string{"trigr"}, nil, "Did you mean this?\n\ttrigger\n"},
		{[]string{"dlq", "lst"}, nil, `unknown command "lst" for "skillbus dlq"` + "\n\nDid you mean this?\n\tlist\n"},
		{[]string{"runs", "lsit"}, nil, "Did you mean this?\n\tlist\n"},
		{[]string{"skills", "shwo"}, nil, "Did you mean this?\n\tshow\n"},
		{[]string{"repair", "aprove"}, nil, "Did you mean this?\n\tapprove\n"},
		{[]string{"completion", "bsh"}, nil, "Did you mean this?\n\tbash\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			getenv := func(k string) string { return tt.env[k] }
			err := cli.Skillbus(context.Background(), tt.args, getenv, &out, &out)
			if err == nil {
				t.Fatalf("no error; output:\n%s", out.String())
			}
			if code := cli.ExitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (usage): %v", code, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	var out bytes.Buffer
	err := cli.Registry(context.Background(), nil, noEnv, &out, &out)
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "--skills") {
		t.Errorf("registry without --skills: %v", err)
	}
	err = cli.Router(context.Background(), []string{"--log-level", "loud"}, noEnv, &out, &out)
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("router --log-level loud: %v", err)
	}
	err = cli.Worker(context.Background(), []string{"extra-arg"}, noEnv, &out, &out)
	if cli.ExitCode(err) != 2 {
		t.Errorf("worker with an argument: %v", err)
	}
}

// A command that cannot reach NATS says where it tried and what to do.
func TestNoServer(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := cli.Skillbus(context.Background(), []string{"skills", "list", "--nats-url", "nats://127.0.0.1:1"}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") || !strings.Contains(err.Error(), "skillbus dev") {
		t.Fatalf("err = %v", err)
	}
}

func noEnv(string) string { return "" }

func mains() map[string]mainFunc {
	return map[string]mainFunc{"skillbus": cli.Skillbus, "router": cli.Router, "worker": cli.Worker, "registry": cli.Registry}
}
