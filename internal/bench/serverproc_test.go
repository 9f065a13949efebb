package bench

import (
	"context"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// The bench's server process accepts connections with JetStream, reports CPU time
// that grows as it works (and that the bench adds to its own), and is gone after
// stop.
func TestServerProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := startServerProcess(ctx, serverSpec{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.stop()
		}
	}()
	nc, err := bus.Connect(srv.URL(), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, err := bus.New(nc, bus.Config{})
	if err != nil {
		t.Fatal(err)
	}
	before := srv.cpu()
	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, err := b.JS.Publish(ctx, b.Subjects.Prefix+".trigger.skill.x", []byte(`{}`))
		return err == nil && srv.cpu() > before
	}, "the server process's CPU time did not grow (%v)", before)
	if srv.CPU() < srv.cpu() {
		t.Fatal("CPU leaves out the server's")
	}
	srv.stop()
	stopped = true
	if n := srv.cpu(); n != 0 {
		t.Fatalf("the server process still answers after stop (%v)", n)
	}
	if c, err := bus.Connect(srv.URL(), "test"); err == nil {
		c.Close()
		t.Fatal("the server still accepts connections after stop")
	}
}
