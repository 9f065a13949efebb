package cli_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	skillrun "github.com/skillbus/skillbus/pkg/run"
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
	store := t.TempDir()
	onTmpfs := runtime.GOOS == "linux" && os.Geteuid() == 0
	args := []string{"dev", "--port", "-1", "--store", store, "--skills", filepath.Join("..", "..", "testdata", "skills"),
		"--workers", "1", "--metrics-addr", "127.0.0.1:0", "--log-level", "info"}
	if onTmpfs {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", store).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", store).Run() })
	} else {
		args = append(args, "--max-store", fmt.Sprint(8<<20))
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &natstest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- cli.Skillbus(ctx, args, noEnv, logs, logs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	}()
	natsRE := regexp.MustCompile(`NATS\s+(nats://127\.0\.0\.1:\d+)`)
	probeRE := regexp.MustCompile(`serving /metrics, /livez and /readyz" addr=(\S+)`)
	natstest.Eventually(t, 60*time.Second, func() bool { return natsRE.MatchString(logs.String()) && probeRE.MatchString(logs.String()) },
		"dev did not start:\n%s", logs)
	probes := probeRE.FindStringSubmatch(logs.String())[1]
	ready := func() bool {
		resp, err := http.Get("http://" + probes + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	natstest.Eventually(t, 30*time.Second, ready, "dev is not ready:\n%s", logs)
	nc, err := nats.Connect(natsRE.FindStringSubmatch(logs.String())[1], nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(b)
	js, _ := jetstream.New(nc)
	// One trigger run end to end first: every stream and consumer has its files.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	_, res, err := cl.Run(wctx, client.Trigger{Skill: "hello", Source: "/acked", ID: "warm", Data: []byte(`{"name":"w"}`)}, nil)
	wcancel()
	if err != nil || !res.Completed {
		t.Fatalf("warm-up: %+v %v", res, err)
	}

	// Fill the store but for a little room.
	var free func()
	if onTmpfs {
		filler := filepath.Join(store, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		var n int64
		for {
			k, err := f.Write(buf)
			n += int64(k)
			if err != nil {
				break
			}
		}
		if err := f.Truncate(n - 256<<10); err != nil {
			t.Fatal(err)
		}
		f.Close()
		free = func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = js.Publish(ctx, "fill", make([]byte, 32<<10))
		}
		fill, err := js.Stream(ctx, "FILL")
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 8; seq++ { // leave about 256 KiB
			if err := fill.DeleteMsg(ctx, seq); err != nil {
				t.Fatal(err)
			}
		}
		free = func() {
			if err := js.DeleteStream(ctx, "FILL"); err != nil {
				t.Fatal(err)
			}
		}
	}

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
	natstest.Eventually(t, 90*time.Second, ready, "dev is not ready again once space is free:\n%s", logs)

	fctx, fcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer fcancel()
	execs := map[string]string{}
	for _, id := range acked {
		res, err := cl.Follow(fctx, id, nil)
		if err != nil {
			t.Fatalf("trigger %s, acknowledged before the store filled: %v", id, err)
		}
		if !res.Completed {
			t.Fatalf("trigger %s, acknowledged before the store filled, did not complete: %+v", id, res)
		}
		execs[res.ExecutionID] = id
	}
	st, err := js.Stream(fctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(fctx)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(fctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		e, err := bus.DecodeFast(bus.MsgOf(m.Subject, m.Header, m.Data))
		if err != nil || !events.Outcome(e.Type) {
			continue
		}
		if rec, err := skillrun.FromEvent(e.Type, e.Data, m.Time); err == nil {
			outcomes[rec.ExecutionID]++
		}
	}
	for ex, id := range execs {
		if outcomes[ex] != 1 {
			t.Errorf("trigger %s (execution %s) has %d outcomes, want 1", id, ex, outcomes[ex])
		}
	}
	if !strings.Contains(logs.String(), "restarting the NATS server") && onTmpfs {
		t.Errorf("dev did not restart its server after ENOSPC:\n%s", logs)
	}
}
