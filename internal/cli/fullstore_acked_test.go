package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/client"
)

// Triggers acknowledged just before the store fills — taken by the server, their
// plans and jobs not yet written, some perhaps not yet flushed to their files when
// the disk refuses the next write — all run, each to exactly one outcome, once
// space returns and skillbus dev has restarted its server (the ENOSPC restart).
//
// Deterministically: the store is first filled but for a little room, then
// triggers are published one at a time, each waiting for its acknowledgement,
// until the server refuses one; every trigger acknowledged before that refusal
// must complete. As root on Linux the store is a tmpfs of 16 MiB filled by a file
// (the server gets ENOSPC); elsewhere dev runs with --max-store and a stream of the
// test's own takes the room (the server refuses for want of storage).
func TestDevRunsTriggersAckedJustBeforeTheStoreFilled(t *testing.T) {
	t.Parallel()
	d := startFullStoreDev(t, nil)
	ctx, cl := d.ctx, d.cl
	ready := func() bool {
		resp, err := http.Get("http://" + d.probes + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	natstest.Eventually(t, 30*time.Second, ready, "dev is not ready:\n%s", d.logs)
	// One trigger run end to end first: every stream and consumer has its files.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	_, res, err := cl.Run(wctx, client.Trigger{Skill: "hello", Source: "/acked", ID: "warm", Data: []byte(`{"name":"w"}`)}, nil)
	wcancel()
	if err != nil || !res.Completed {
		t.Fatalf("warm-up: %+v %v", res, err)
	}

	// Fill the store but for a little room.
	free := d.fill(t, 256<<10)

	// Publish, each acknowledged before the next, until the server refuses one.
	var acked []string
	var refused error
	for i := 0; refused == nil && i < 2000; i++ {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		act, err := cl.Publish(pctx, client.Trigger{Skill: "hello", Source: "/acked", ID: fmt.Sprintf("a-%d", i), Data: []byte(fmt.Sprintf(`{"name":"n%d"}`, i))})
		pcancel()
		if err != nil {
			refused = err
			break
		}
		acked = append(acked, act.ID)
	}
	if refused == nil {
		t.Fatalf("%d triggers acknowledged and none refused: the store did not fill", len(acked))
	}
	if len(acked) == 0 {
		t.Fatalf("no trigger acknowledged before the store filled: %v", refused)
	}
	t.Logf("%d triggers acknowledged before the store filled; then: %v", len(acked), refused)
	natstest.Eventually(t, 30*time.Second, func() bool { return !ready() }, "/readyz passes on a full store")

	free()
	natstest.Eventually(t, 90*time.Second, ready, "dev is not ready again once space is free:\n%s", d.logs)
	d.eachRanOnce(t, acked)
	if !strings.Contains(d.logs.String(), "restarting the NATS server") && d.onTmpfs {
		t.Errorf("dev did not restart its server after ENOSPC:\n%s", d.logs)
	}
}
