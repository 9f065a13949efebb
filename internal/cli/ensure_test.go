package cli_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A worker and a router started with --ensure=false before the registry wait for
// every stream, bucket and object store they need, saying which, and run once the
// registry has made them: the streams first, then the buckets, then the skill
// files' object store, as a registry starting meanwhile would.
func TestEnsureFalseWaitsForBucketsAndObjectStore(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b, err := bus.New(srv.Conn(t), bus.Config{}) // and nothing created
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	type role struct {
		name string
		logs *natstest.Buffer
		done chan error
	}
	run := func(name string, main func(context.Context, []string, cli.Env, io.Writer, io.Writer) error, args ...string) *role {
		r := &role{name: name, logs: &natstest.Buffer{}, done: make(chan error, 1)}
		go func() {
			r.done <- main(ctx, append([]string{"--nats-url", srv.URL(), "--log-format", "text", "--ensure=false"}, args...), noEnv, r.logs, r.logs)
		}()
		return r
	}
	worker := run("worker", cli.Worker, "--name", "w1", "--bus-tools=false")
	router := run("router", cli.Router)
	roles := []*role{worker, router}
	waitLog := func(r *role, want string) {
		t.Helper()
		natstest.Eventually(t, 30*time.Second, func() bool {
			select {
			case err := <-r.done:
				t.Fatalf("%s exited instead of waiting: %v\n%s", r.name, err, r.logs)
			default:
			}
			return strings.Contains(r.logs.String(), want)
		}, "%s never logged %q:\n%s", r.name, want, r.logs)
	}
	waitLog(worker, "stream SKILLBUS_TRIGGERS")
	waitLog(router, "stream SKILLBUS_TRIGGERS")

	for _, sc := range b.Streams() {
		if _, err := b.JS.CreateOrUpdateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	// What the worker reported before: "nats: bucket not found", and it exited.
	waitLog(worker, "waiting_for=\"bucket "+b.BucketSkills())
	waitLog(router, "waiting_for=\"bucket "+b.BucketSkills())

	if err := b.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	waitLog(router, "router: running")
	waitLog(worker, "waiting_for=\"object store skill-files\"")
	if _, err := b.JS.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "skill-files"}); err != nil {
		t.Fatal(err)
	}
	waitLog(worker, "worker: running")

	cancel()
	for _, r := range roles {
		if err := <-r.done; err != nil {
			t.Errorf("%s: %v\n%s", r.name, err, r.logs)
		}
	}
}
