package e2e

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Ctrl-C on `skillbus dev` mid-run loses nothing: in-flight jobs finish, the rest
// stay in the streams, and the next start with the same store finishes them — every
// trigger still ends in exactly one result.
func TestDevShutdownLosesNothing(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	dev, port, args := startDev(t, "--store", store, "--skills", "testdata/skills", "--skills", "testdata/e2e", "--concurrency", "4")

	nc, err := nats.Connect("nats://127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, b: b, ctx: context.Background(), natsConn: nc}
	const n = 100 // 100 × 0.5 s on 2 workers × 4: about 6 s of work
	f.publish("stop", n, "slow-hello")
	natstest.Eventually(t, 60*time.Second, func() bool { return len(f.results("stop").completed) >= 10 }, "the run did not start")
	nc.Close()

	if err := dev.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := dev.cmd.Wait(); err != nil {
		t.Fatalf("dev did not exit cleanly on SIGINT: %v\n%s", err, dev.out.String())
	}
	// One drain, router first and then the workers, within one timeout.
	if n := strings.Count(dev.out.String(), "finishing in-flight work"); n != 1 {
		t.Fatalf("%d drains on SIGINT, want 1:\n%s", n, dev.out.String())
	}

	dev2 := start(t, "skillbus", args...)
	natstest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(dev2.out.String(), "skillbus dev is running") }, "dev did not restart")
	nc2, err := nats.Connect("nats://127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if f.b, err = bus.New(nc2, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	f.check("stop", n, "slow-hello", f.waitResults("stop", n))
}
