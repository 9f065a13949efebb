package natsperm_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/control"
)

// A router cancels a run by a skill's cancel_on with the router's permissions:
// nothing it does is refused (a refused JetStream request would be noticed
// only at the API timeout, stalling every such cancel).
func TestRouterCancelsUnderItsPermissions(t *testing.T) {
	url, v := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := &fleet{t: t, ctx: ctx, url: url, v: v, ledger: &ledger{}, skills: t.TempDir()}
	copySkill(t, f.skills, "hello")
	f.service(cli.Registry, "registry", "--skills", f.skills)
	opJS, err := jetstream.New(f.conn("operator"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := opJS.KeyValue(ctx, "repairs")
		return err == nil
	}, "the registry did not create the buckets")

	b, err := bus.New(f.conn("router"), bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := control.New(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CancelKnown(ctx, "exec-running-1", control.Request{By: "cancel_on", Reason: "order.cancelled", Source: "/skillbus/router"})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != control.StateActive {
		t.Fatalf("state %q, want %q", res.State, control.StateActive)
	}
	if got := v.take(); len(got) > 0 {
		t.Fatalf("the router's cancel was refused: %v", got)
	}
}
