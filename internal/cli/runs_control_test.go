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
