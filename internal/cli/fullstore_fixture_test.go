package cli_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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

// fullStoreDev is skillbus dev on a store that can be filled: as root on Linux a
// tmpfs of 16 MiB (filled by a file, the server gets ENOSPC, which only starting
// JetStream again clears); elsewhere JetStream has a storage limit (--max-store)
// and a stream of the test's own takes the room.
type fullStoreDev struct {
	ctx     context.Context
	store   string
	onTmpfs bool
	logs    *natstest.Buffer
	nc      *nats.Conn
	js      jetstream.JetStream
	b       *bus.Bus
	cl      *client.Client
	probes  string // the /metrics, /livez and /readyz address
}

// startFullStoreDev starts skillbus dev with one worker and the test skills, plus
// extra arguments, and waits until it logs its NATS URL, its probes' address and
// every pattern of wait; it stops dev at the end of the test.
func startFullStoreDev(t *testing.T, extra []string, wait ...*regexp.Regexp) *fullStoreDev {
	t.Helper()
	d := &fullStoreDev{store: t.TempDir(), onTmpfs: runtime.GOOS == "linux" && os.Geteuid() == 0, logs: &natstest.Buffer{}}
	args := append([]string{"dev", "--port", "-1", "--store", d.store, "--skills", filepath.Join("..", "..", "testdata", "skills"),
		"--workers", "1", "--metrics-addr", "127.0.0.1:0", "--log-level", "info"}, extra...)
	if d.onTmpfs {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", d.store).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", "-l", d.store).Run() })
	} else {
		args = append(args, "--max-store", fmt.Sprint(8<<20))
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- cli.Skillbus(ctx, args, noEnv, d.logs, d.logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	natsRE := regexp.MustCompile(`NATS\s+(nats://127\.0\.0\.1:\d+)`)
	probeRE := regexp.MustCompile(`serving /metrics, /livez and /readyz" addr=(\S+)`)
	natstest.Eventually(t, 60*time.Second, func() bool {
		s := d.logs.String()
		for _, re := range append([]*regexp.Regexp{natsRE, probeRE}, wait...) {
			if !re.MatchString(s) {
				return false
			}
		}
		return true
	}, "dev did not start:\n%s", d.logs)
	d.probes = probeRE.FindStringSubmatch(d.logs.String())[1]
	nc, err := nats.Connect(natsRE.FindStringSubmatch(d.logs.String())[1], nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d.nc = nc
	if d.b, err = bus.New(nc, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	d.cl = client.New(d.b)
	if d.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return d
}

// fill fills the store but for about leave bytes (0: all of it) and returns what
// frees it again.
func (d *fullStoreDev) fill(t *testing.T, leave int64) (free func()) {
	t.Helper()
	if d.onTmpfs {
		filler := filepath.Join(d.store, "filler")
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
		if leave > 0 {
			if err := f.Truncate(n - leave); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		return func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := d.js.CreateStream(d.ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
		t.Fatal(err)
	}
	const msg = 32 << 10
	var err error
	for err == nil {
		_, err = d.js.Publish(d.ctx, "fill", make([]byte, msg))
	}
	if leave > 0 {
		fill, err := d.js.Stream(d.ctx, "FILL")
		if err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= uint64((leave+msg-1)/msg); seq++ {
			if err := fill.DeleteMsg(d.ctx, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	return func() {
		if err := d.js.DeleteStream(d.ctx, "FILL"); err != nil {
			t.Fatal(err)
		}
	}
}

// eachRanOnce checks that every trigger of ids completed and that each of their
// executions has exactly one outcome in EVENTS.
func (d *fullStoreDev) eachRanOnce(t *testing.T, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(d.ctx, 3*time.Minute)
	defer cancel()
	execs := map[string]string{}
	for _, id := range ids {
		res, err := d.cl.Follow(ctx, id, nil)
		if err != nil {
			t.Fatalf("acknowledged trigger %s: %v", id, err)
		}
		if !res.Completed {
			t.Fatalf("acknowledged trigger %s did not complete: %+v", id, res)
		}
		execs[res.ExecutionID] = id
	}
	st, err := d.js.Stream(ctx, d.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
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
}
