package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A cancel of an id nothing knows of (mistyped) says so, exits 1 and reports
// nothing cancelled.
func TestRunsCancelOfAnUnknownExecution(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := events.ExecutionID("/t", "never-triggered", "hello")
	var out bytes.Buffer
	err := cli.Skillbus(ctx, []string{"runs", "cancel", id, "--nats-url", srv.URL()}, noEnv, &out, &out)
	if cli.ExitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), "no such execution: "+id) {
		t.Fatalf("runs cancel %s: exit %d (%v), want 1 and no such execution\n%s", id, cli.ExitCode(err), err, out.String())
	}
	if strings.Contains(out.String(), "cancelled") {
		t.Fatalf("runs cancel of an unknown id printed %q", out.String())
	}
}

// runs cancel --help names every kind of paused run a cancel ends at once.
func TestRunsCancelHelpNamesSleepingRuns(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := cli.Skillbus(context.Background(), []string{"runs", "cancel", "--help"}, noEnv, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "paused (waiting for a confirmation or sleeping)") {
		t.Fatalf("runs cancel --help leaves out sleeping runs:\n%s", out.String())
	}
}
