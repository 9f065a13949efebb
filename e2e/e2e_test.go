// Package e2e runs skillbus's real binaries as separate processes against a real
// nats-server, and checks what a user would: every trigger ends in exactly one
// terminal result with the right outputs, also when a worker is killed mid-run.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

var binDir string

func TestMain(m *testing.M) {
	// The tests run in parallel, and each spends its time waiting on its processes
	// (a step's sleep, an AckWait, a process starting) far more than computing: four
	// at a time rather than one per core.
	natstest.WaitingTests(4)
	dir, err := os.MkdirTemp("", "skillbus-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building the binaries:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinaries puts the programs the tests start into dir. Each is built by
// `go run -exec cp <package> <dir>/<name>`: go run keeps the executables it links
// in the build cache (go build does not), so when nothing changed since the last
// run the binary is copied from there rather than linked again, which takes 5 to 8
// s of CPU per race binary. Built with the test's own -race, so that make test
// compiles each package once, and without the symbol table and DWARF (-s -w),
// which a test never reads and whose writing is about 30% of a link's CPU time;
// stack traces and race reports come from the runtime's own tables, which stay.
// skillbus first, which depends on nearly every package the others do: the rest,
// in parallel, do not compile a missing package several times over.
func buildBinaries(dir string) error {
	run := func(pkg string) error {
		args := append([]string{"run"}, natstest.BuildFlags()...)
		args = append(args, "-ldflags=-s -w", "-exec", "cp", pkg, filepath.Join(dir, path.Base(pkg)))
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := run("./cmd/skillbus"); err != nil {
		return err
	}
	pkgs := []string{"./cmd/registry", "./cmd/router", "./cmd/worker", "./examples/tool-service"}
	errs := make([]error, len(pkgs))
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		wg.Go(func() { errs[i] = run(pkg) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// proc is a running binary whose output is kept for the test log.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *natstest.Buffer
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startEnv(t, nil, name, args...)
}

// startEnv starts a binary with env (KEY=VALUE) added to its minimal environment.
func startEnv(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Dir = repoRoot()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), natstest.RaceEnv()}, env...)
	out := &natstest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", name, out.String())
		}
	})
	return p
}

// fleet is a nats-server and the processes of one skillbus deployment.
type fleet struct {
	t       *testing.T
	srv     *natstest.Server
	b       *bus.Bus
	workers []*proc
	ctx     context.Context
	// natsConn publishes triggers; default a new connection to srv.
	natsConn *nats.Conn
}

func startFleet(t *testing.T, workers int) *fleet {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	f := &fleet{t: t, srv: srv, b: b, ctx: ctx}
	url := "--nats-url=" + srv.URL()
	start(t, "registry", url, "--skills", "testdata/skills", "--skills", "testdata/e2e")
	start(t, "router", url)
	for i := range workers {
		f.workers = append(f.workers, start(t, "worker", url, "--ack-wait=2s", "--backoff-base=50ms", "--backoff-max=200ms",
			"--concurrency=8", fmt.Sprintf("--name=w%d", i+1)))
	}
	// Ready: the catalog holds the skills and every consumer exists.
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, err1 := kv.Get(ctx, "slow-hello")
		_, err2 := b.JS.Consumer(ctx, b.StreamTriggers(), "router")
		_, err3 := b.JS.Consumer(ctx, b.StreamJobs(), "worker-default")
		wkv, _ := b.KV(ctx, b.BucketWorkers())
		n := 0
		if wkv != nil {
			if l, err := wkv.ListKeys(ctx); err == nil {
				for range l.Keys() {
					n++
				}
			}
		}
		return err1 == nil && err2 == nil && err3 == nil && n == workers
	}, "the fleet did not come up")
	return f
}

// publish sends n triggers with plain nats.go and hand-written ce- headers.
func (f *fleet) publish(run string, n int, skill string) {
	f.t.Helper()
	nc := f.natsConn
	if nc == nil {
		nc = f.srv.Conn(f.t)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		f.t.Fatal(err)
	}
	var futures []jetstream.PubAckFuture
	for i := range n {
		m := nats.NewMsg("skillbus.trigger.skill." + skill)
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", fmt.Sprintf("%s-%d", run, i))
		m.Header.Set("ce-source", "/e2e")
		m.Header.Set("ce-type", "com.example.greet")
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set("Nats-Msg-Id", fmt.Sprintf("%s-%d", run, i))
		m.Data = []byte(fmt.Sprintf(`{"name":"%s-%d"}`, run, i))
		fu, err := js.PublishMsgAsync(m)
		if err != nil {
			f.t.Fatal(err)
		}
		futures = append(futures, fu)
	}
	for _, fu := range futures {
		select {
		case <-fu.Ok():
		case err := <-fu.Err():
			f.t.Fatal(err)
		}
	}
}

// terminal is what the EVENTS stream says about one run's terminal results.
type terminal struct {
	completed map[string]events.ExecutionCompleted // by execution id
	failed    map[string]events.ExecutionFailed
	messages  int // terminal messages, duplicates included
}

// results reads every terminal event of the run from the EVENTS stream.
func (f *fleet) results(run string) terminal {
	f.t.Helper()
	res := terminal{completed: map[string]events.ExecutionCompleted{}, failed: map[string]events.ExecutionFailed{}}
	c, err := f.b.JS.OrderedConsumer(f.ctx, f.b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"skillbus.events.*.execution.completed", "skillbus.events.*.execution.failed"},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	for {
		batch, err := c.FetchNoWait(1000)
		if err != nil {
			f.t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			e, err := bus.Decode(m)
			if err != nil {
				f.t.Fatal(err)
			}
			switch e.Type() {
			case events.TypeExecutionCompleted:
				var d events.ExecutionCompleted
				_ = json.Unmarshal(e.Data(), &d)
				if !strings.HasPrefix(fmt.Sprint(d.Outputs["greeting"]), "Hello, "+run+"-") {
					continue
				}
				res.messages++
				res.completed[d.ExecutionID] = d
			case events.TypeExecutionFailed:
				var d events.ExecutionFailed
				_ = json.Unmarshal(e.Data(), &d)
				res.messages++
				res.failed[d.ExecutionID] = d
			}
		}
		if got == 0 {
			return res
		}
	}
}

// count returns how many events of kind about an execution satisfy keep.
func (f *fleet) count(execID, kind string, keep func(map[string]any) bool) int {
	f.t.Helper()
	c, err := f.b.JS.OrderedConsumer(f.ctx, f.b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"skillbus.events." + execID + "." + kind},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	batch, err := c.FetchNoWait(100)
	if err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		var d map[string]any
		if json.Unmarshal(eventData(m.Headers(), m.Data()), &d) == nil && keep(d) {
			n++
		}
	}
	return n
}

func (f *fleet) waitResults(run string, n int) terminal {
	f.t.Helper()
	var res terminal
	natstest.Eventually(f.t, 90*time.Second, func() bool {
		res = f.results(run)
		return len(res.completed)+len(res.failed) >= n
	}, "%s: only %d of %d terminal results", run, len(res.completed)+len(res.failed), n)
	return res
}

func (f *fleet) check(run string, n int, skill string, res terminal) {
	f.t.Helper()
	if len(res.failed) > 0 {
		for _, d := range res.failed {
			f.t.Errorf("%s: execution %s failed: %s", run, d.ExecutionID, d.Error)
			break
		}
	}
	if res.messages != n || len(res.completed) != n {
		f.t.Fatalf("%s: %d terminal messages for %d executions, want exactly %d", run, res.messages, len(res.completed), n)
	}
	for i := range n {
		id := fmt.Sprintf("%s-%d", run, i)
		d, ok := res.completed[events.ExecutionID("/e2e", id, skill)]
		if !ok {
			f.t.Fatalf("%s: no result for trigger %s", run, id)
		}
		if want := "Hello, " + id + "!"; d.Outputs["greeting"] != want {
			f.t.Fatalf("%s: trigger %s: greeting %q, want %q", run, id, d.Outputs["greeting"], want)
		}
	}
}

func TestTwoHundredTriggers(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2)
	const n = 200
	f.publish("calm", n, "hello")
	f.check("calm", n, "hello", f.waitResults("calm", n))

	// Again while a worker is killed with SIGKILL mid-run: its in-flight jobs are
	// redelivered to the other worker after AckWait, and still every trigger has
	// exactly one terminal result.
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	// deliveries is how many job deliveries the workers' consumers have made:
	// every first delivery, and every redelivery of a job whose ack wait ran out.
	deliveries := func() uint64 {
		n := uint64(0)
		for info := range jobs.ListConsumers(f.ctx).Info() {
			if strings.HasPrefix(info.Name, "worker-") {
				n += info.Delivered.Consumer
			}
		}
		return n
	}
	before := deliveries()
	f.publish("kill", n, "slow-hello")
	// Kill a worker that is busy with the run: one that has finished some of its
	// executions (their terminal records name it) while most are still to do.
	// held is how many jobs the workers hold (delivered, not acknowledged). On a
	// loaded machine the router can publish the run's jobs slower than the
	// workers finish them, and a worker killed while it waits for more holds none.
	held := func() int {
		n := 0
		for info := range jobs.ListConsumers(f.ctx).Info() {
			if strings.HasPrefix(info.Name, "worker-") {
				n += info.NumAckPending
			}
		}
		return n
	}
	victim := -1
	var started time.Time
	natstest.Eventually(t, 60*time.Second, func() bool {
		done := f.results("kill").completed
		if len(done) < 10 { // of 200 × 0.5 s on 16 slots: the run has seconds to go
			return false
		}
		if started.IsZero() {
			started = time.Now()
		}
		// Best when both workers are busy: of 16 slots (8 each), at least 10 held,
		// so each holds 2 or more. A machine too loaded for that gets its kill
		// after 3 s all the same, well before the run can end.
		if held() < 10 && time.Since(started) < 3*time.Second {
			return false
		}
		for id := range done {
			if rec, err := run.Load(f.ctx, evs, f.b.Subjects, id); err == nil && rec != nil {
				if i, err := strconv.Atoi(strings.TrimPrefix(rec.Worker, "w")); err == nil {
					victim = i - 1
					return true
				}
			}
		}
		return false
	}, "the kill run did not start")
	if err := f.workers[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	res := f.waitResults("kill", n)
	f.check("kill", n, "slow-hello", res)
	// The killed worker's jobs came back: the run took more deliveries than it has
	// jobs. (A claim in KV runs is no proof: a job that waited in a worker's buffer
	// takes the claim path too.)
	took := deliveries() - before
	if took <= n {
		t.Fatalf("the kill run's %d jobs took %d deliveries: none was redelivered, so the killed worker held no jobs and the test proved nothing", n, took)
	}
	redelivered := took - n
	// Jobs the killed worker was in the middle of resume after the steps it finished
	// (their step.completed events are the checkpoints). How many depends on where
	// the kill landed, so this is reported, not asserted; pkg/worker's
	// TestWorkerDeathResumesFromCheckpoints checks it deterministically.
	resumed := 0
	for id := range res.completed {
		resumed += f.count(id, "step.completed", func(d map[string]any) bool { return d["resumed"] == true })
	}
	t.Logf("kill run: %d jobs redelivered, %d steps resumed from checkpoints", redelivered, resumed)
}

// eventData is the data of an event as the stream holds it: skillbus writes
// structured-mode CloudEvents, whose data is inside their JSON. nil when it does not
// decode.
func eventData(h nats.Header, data []byte) []byte {
	e, err := bus.DecodeFast(bus.MsgOf("", h, data))
	if err != nil {
		return nil
	}
	return e.Data
}
