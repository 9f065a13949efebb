//go:build cluster

package cli_test

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
)

// On a 3-node JetStream cluster of nats-server processes with every stream and
// bucket at R3, the node that leads the jobs stream is killed with SIGKILL in the
// middle of a few hundred triggers and started again: every trigger still ends in
// exactly one terminal result.
func TestClusterSurvivesANodeMidRun(t *testing.T) {
	t.Parallel()
	const triggers = 400
	c := natstest.StartProcessCluster(t, 3)
	urls := c.URLs()
	env := func(k string) string {
		return map[string]string{"SKILLBUS_NATS_URL": urls, "SKILLBUS_REPLICAS": "3"}[k]
	}
	run := func(main func(context.Context, []string, cli.Env, io.Writer, io.Writer) error, args ...string) {
		ctx, cancel := context.WithCancel(context.Background())
		logs := &natstest.Buffer{}
		done := make(chan error, 1)
		go func() {
			done <- main(ctx, append(args, "--log-format", "text", "--log-level", "info"), env, logs, logs)
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil || t.Failed() {
				t.Logf("%v: %v\n%s", args, err, logs)
			}
		})
	}
	run(cli.Registry, "--skills", filepath.Join("..", "..", "testdata", "skills"))

	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b, err := bus.New(nc, bus.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	natstest.Eventually(t, 30*time.Second, func() bool {
		// Each attempt has its own deadline: a request lost while the cluster
		// settles is never answered.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		kv, err := b.JS.KeyValue(ctx, "skills")
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, "hello")
		return err == nil
	}, "the registry did not publish hello")
	for _, name := range []string{b.StreamTriggers(), b.StreamJobs(), b.StreamEvents(), "KV_runs"} {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		info, err := b.JS.Stream(sctx, name)
		scancel()
		if err != nil || info.CachedInfo().Config.Replicas != 3 {
			t.Fatalf("%s: %v, want replicas 3", name, err)
		}
	}
	run(cli.Router)
	run(cli.Worker, "--name", "w1", "--concurrency", "16")
	run(cli.Worker, "--name", "w2", "--concurrency", "16")

	// completed counts the stored execution.completed events per execution.
	// Every JetStream API call has its own deadline: a request in flight on the
	// connection to a node that dies gets no answer, and would otherwise wait for
	// the whole test's context.
	completed := func() (total, executions, most int) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := b.JS.Stream(ctx, b.StreamEvents())
		if err != nil {
			return -1, 0, 0
		}
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("skillbus.events.*.execution.>"))
		if err != nil {
			return -1, 0, 0
		}
		for subj, n := range info.State.Subjects {
			if strings.HasSuffix(subj, ".execution.completed") || strings.HasSuffix(subj, ".execution.failed") {
				total += int(n)
				executions++
				most = max(most, int(n))
			}
		}
		return total, executions, most
	}

	start := time.Now()
	var published, retries atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := client.New(b)
		for i := range triggers {
			tr := client.Trigger{Skill: "hello", Source: "/cluster-test", ID: fmt.Sprintf("t-%03d", i), Data: []byte(fmt.Sprintf(`{"name":"n%d"}`, i))}
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := cl.Publish(pctx, tr)
				pcancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				retries.Add(1) // the same id again: JetStream drops a repeat
			}
			published.Add(1)
		}
	}()

	// Kill while triggers are still being published and jobs run.
	natstest.Eventually(t, 2*time.Minute, func() bool { n, _, _ := completed(); return n >= 1 && published.Load() >= triggers/4 }, "no progress before the kill")
	ictx, icancel := context.WithTimeout(ctx, 10*time.Second)
	defer icancel()
	jobs, err := b.JS.Stream(ictx, b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	info, err := jobs.Info(ictx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		t.Fatalf("jobs stream cluster info: %v", err)
	}
	// The leader of the jobs stream, whichever else it leads (the cluster's
	// metadata too, sometimes: then the consumers' and streams' management also
	// waits for an election).
	victim := c.Node(info.Cluster.Leader)
	victimName := victim.Name
	metaLeader := c.MetaLeader()
	atKill, _, _ := completed()
	pubAtKill := published.Load()
	killedAt := time.Since(start)
	victim.Kill()

	// The two left keep going.
	natstest.Eventually(t, time.Minute, func() bool { n, _, _ := completed(); return n >= atKill+triggers/5 }, "no progress with a node down: %s", diag(ctx, b))
	whileDown, _, _ := completed()
	downFor := time.Since(start) - killedAt
	victim.Start()
	c.WaitHealthy(2 * time.Minute)
	healthyAfter := time.Since(start) - killedAt - downFor

	natstest.Eventually(t, 3*time.Minute, func() bool { _, e, _ := completed(); return e >= triggers }, "not every trigger has a result")
	wg.Wait()
	elapsed := time.Since(start)
	total, executions, most := completed()
	t.Logf("3 nodes (processes), R3 file storage; %d triggers of hello, 2 workers x 16; node %s (leader of the jobs stream; meta leader %s) SIGKILLed at %v after %d results (%d published), down %v, %d more results meanwhile, restarted and healthy in %v; %d publish retries; all done in %v: %d executions, %d terminal events, at most %d per execution",
		triggers, victimName, metaLeader, killedAt.Round(time.Millisecond), atKill, pubAtKill, downFor.Round(time.Millisecond), whileDown-atKill,
		healthyAfter.Round(time.Millisecond), retries.Load(), elapsed.Round(time.Millisecond), executions, total, most)
	if executions != triggers || total != triggers || most != 1 {
		t.Fatalf("want %d executions with exactly one terminal result each; got %d executions, %d terminal events (at most %d for one)",
			triggers, executions, total, most)
	}
}

type diagnosis struct {
	ctx context.Context
	b   *bus.Bus
}

func diag(ctx context.Context, b *bus.Bus) fmt.Stringer { return diagnosis{ctx, b} }

func (d diagnosis) String() string {
	ctx, cancel := context.WithTimeout(d.ctx, 10*time.Second)
	defer cancel()
	d.ctx = ctx
	var out strings.Builder
	for _, st := range []string{d.b.StreamTriggers(), d.b.StreamJobs(), d.b.StreamEvents()} {
		s, err := d.b.JS.Stream(d.ctx, st)
		if err != nil {
			fmt.Fprintf(&out, "\n%s: %v", st, err)
			continue
		}
		info, err := s.Info(d.ctx)
		if err != nil {
			fmt.Fprintf(&out, "\n%s: %v", st, err)
			continue
		}
		fmt.Fprintf(&out, "\n%s: msgs %d leader %s", st, info.State.Msgs, info.Cluster.Leader)
		for name := range s.ConsumerNames(d.ctx).Name() {
			ci, err := s.Consumer(d.ctx, name)
			if err != nil {
				continue
			}
			i := ci.CachedInfo()
			fmt.Fprintf(&out, "\n  consumer %s: pending %d ack-pending %d waiting %d leader %s", name, i.NumPending, i.NumAckPending, i.NumWaiting, i.Cluster.Leader)
		}
	}
	return out.String()
}
