package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/storage"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine"))
}

func TestIsFault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("skill failed"), false},
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		// What an asynchronous publish to a full store gets: no acknowledgement.
		{fmt.Errorf("publish skillbus.events.x.execution.completed: %w", jetstream.ErrAsyncPublishTimeout), true},
		{jetstream.ErrNoStreamResponse, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrJetStreamNotEnabled, true},
		{nats.ErrConnectionClosed, true},
		{fmt.Errorf("wrapped: %w", &jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}), true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}, true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 3"}, false},
		{fmt.Errorf("%w: disabled", storage.ErrFault), true},
	} {
		if got := storage.IsFault(tc.err); got != tc.want {
			t.Errorf("IsFault(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// smallStore is a store directory that can be filled and freed: as root on Linux a
// tmpfs of 8 MiB, filled by a file that takes all its space (nats-server then gets
// ENOSPC on its next write and keeps that error); elsewhere an ordinary directory,
// "filled" by shutting JetStream down, which is what a clustered server does when
// out of space (and a standalone one on EACCES).
type smallStore struct {
	dir  string
	tmpf bool
}

func newSmallStore(t *testing.T) *smallStore {
	t.Helper()
	s := &smallStore{dir: t.TempDir()}
	if runtime.GOOS == "linux" && os.Geteuid() == 0 {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", s.dir).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		s.tmpf = true
		t.Cleanup(func() { _ = exec.Command("umount", "-l", s.dir).Run() })
	}
	return s
}

func (s *smallStore) filler() string { return filepath.Join(s.dir, "filler") }

// fill takes the store's space (or shuts JetStream down).
func (s *smallStore) fill(t *testing.T, srv *server.Server) {
	t.Helper()
	if !s.tmpf {
		if err := srv.ShutdownJetStream(); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Create(s.filler())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// free gives the space back.
func (s *smallStore) free(t *testing.T) {
	t.Helper()
	if s.tmpf {
		if err := os.Remove(s.filler()); err != nil {
			t.Fatal(err)
		}
	}
}

// A store that fills refuses publishes — an error, never an acknowledgement of a
// message it did not keep — and is reported by the readiness check; once space is
// free the guard starts JetStream again by itself, every acknowledged message is
// still there, once, and publishes are taken again.
func TestGuardStartsJetStreamAgainOnceSpaceIsFree(t *testing.T) {
	st := newSmallStore(t)
	srv := natstest.StartWith(t, func(o *server.Options) {
		o.StoreDir = st.dir
		o.JetStreamMaxStore, o.JetStreamMaxMemory = -1, -1
	})
	var logs natstest.Buffer
	var smu sync.Mutex // the guard restarts the server while the test looks at it
	current := func() *server.Server { smu.Lock(); defer smu.Unlock(); return srv.Server }
	// Without a tmpfs the fault is JetStream shut down, which a restart would end at
	// once: the restart waits until the test frees the store.
	var freed atomic.Bool
	restart := func() error {
		if !st.tmpf && !freed.Load() {
			return errors.New("the test has not freed the store yet")
		}
		smu.Lock()
		defer smu.Unlock()
		srv.Restart()
		return nil
	}
	g, err := storage.NewGuard(storage.GuardConfig{Server: current, Restart: restart, Every: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Headroom: 1 << 20, MaxAttempts: 1 << 20, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	g.Start()
	defer g.Stop()
	nc := srv.Conn(t)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	publish := func(id string) error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		_, err := js.PublishMsg(pctx, &nats.Msg{Subject: "s." + id, Data: bytes.Repeat([]byte("x"), 4<<10), Header: nats.Header{"Nats-Msg-Id": {id}}})
		if err == nil {
			acked[id] = true
		}
		return err
	}
	for i := range 20 {
		if err := publish(fmt.Sprintf("before-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Check answers the guard's last look, which may have caught the stream
	// half created (its directory on disk, the stream not yet registered).
	natstest.Eventually(t, 10*time.Second, func() bool { return g.Check(ctx) == nil }, "the guard never found the server ready before the fault")

	st.fill(t, current())
	var perr error
	for i := 0; perr == nil && i < 200; i++ {
		perr = publish(fmt.Sprintf("full-%d", i))
	}
	if perr == nil {
		t.Fatal("every publish to a full store was acknowledged")
	}
	if !storage.IsFault(perr) {
		t.Errorf("the refused publish's error is not a storage fault: %v", perr)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return g.Check(ctx) != nil }, "the readiness check passes on a full store")
	if err := g.Check(ctx); !errors.Is(err, storage.ErrFault) {
		t.Errorf("readiness error %v does not wrap ErrFault", err)
	}
	if st.tmpf {
		// Still full: JetStream is not started again, and says why in the log.
		natstest.Eventually(t, 10*time.Second, func() bool {
			return strings.Contains(logs.String(), "JetStream cannot store messages") && strings.Contains(logs.String(), "no room in the JetStream store yet")
		}, "no fault logged:\n%s", &logs)
		if err := publish("still-full"); err == nil {
			t.Fatal("a publish to the full store was acknowledged")
		}
	}

	st.free(t)
	freed.Store(true)
	natstest.Eventually(t, 20*time.Second, func() bool { return g.Check(ctx) == nil && g.Restarts() > 0 }, "JetStream did not come back once space was free:\n%s", &logs)
	natstest.Eventually(t, 20*time.Second, func() bool { return publish("after") == nil }, "publishes are not taken after the recovery")

	// Every acknowledged message is in the stream, once.
	c, err := js.OrderedConsumer(ctx, "S", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, "S")
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for range info.State.Msgs {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		seen[strings.TrimPrefix(m.Subject(), "s.")]++
	}
	for id := range acked {
		if seen[id] != 1 {
			t.Errorf("acknowledged message %s is in the stream %d times", id, seen[id])
		}
	}
}

// The server's own storage limit (max_file_store) is reported too, and needs no
// restart: it takes writes again as soon as space is freed within it.
func TestFaultAtTheStorageLimit(t *testing.T) {
	t.Parallel()
	srv := natstest.StartWith(t, func(o *server.Options) { o.JetStreamMaxStore = 1 << 20 })
	js, _ := jetstream.New(srv.Conn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
		t.Fatal(err)
	}
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		_, err = js.Publish(ctx, "fill", make([]byte, 16<<10))
	}
	if !storage.IsFault(err) {
		t.Fatalf("a publish past the limit: %v, want a storage fault", err)
	}
	if err := storage.Fault(srv.Server); err == nil || !strings.Contains(err.Error(), "max_file_store") {
		t.Fatalf("Fault at the limit: %v", err)
	}
	if err := js.DeleteStream(ctx, "FILL"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return storage.Fault(srv.Server) == nil }, "Fault after freeing space: %v", stringer(func() string { return fmt.Sprint(storage.Fault(srv.Server)) }))
}

// A stream being created or deleted is, for an instant, a directory in the store
// that the server does not list; its health check reports it as a stream that
// could not be recovered. One look seeing that reports nothing; two looks in a
// row do (as they would a stream that really could not be loaded).
func TestGuardWaitsForASecondLookAtAFaultRestartsDoNotClear(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var logs natstest.Buffer
	g, err := storage.NewGuard(storage.GuardConfig{Server: func() *server.Server { return srv.Server },
		Restart: func() error { t.Error("the guard restarted the server for a stream it cannot see"); return nil },
		Log:     slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ghost := filepath.Join(srv.Server.JetStreamConfig().StoreDir, "$G", "streams", "GHOST")
	if err := os.MkdirAll(ghost, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := storage.Fault(srv.Server); err == nil || !strings.Contains(err.Error(), "could not be recovered") {
		t.Fatalf("Fault with a stream directory the server does not list: %v, want could not be recovered", err)
	}
	var w storage.Watch
	g.Look(&w)
	if err := g.Check(context.Background()); err != nil {
		t.Fatalf("one look at a stream directory the server does not list made the server unready: %v", err)
	}
	// Gone by the next look, as a stream created or deleted is: nothing was reported.
	if err := os.Remove(ghost); err != nil {
		t.Fatal(err)
	}
	g.Look(&w)
	if err := g.Check(context.Background()); err != nil || logs.String() != "" {
		t.Fatalf("after the directory went: Check %v, logs:\n%s", err, &logs)
	}
	// Still there at the second look: reported.
	if err := os.MkdirAll(ghost, 0o755); err != nil {
		t.Fatal(err)
	}
	g.Look(&w)
	if err := g.Check(context.Background()); err != nil {
		t.Fatalf("first look: %v", err)
	}
	g.Look(&w)
	if err := g.Check(context.Background()); !errors.Is(err, storage.ErrFault) || !strings.Contains(err.Error(), "could not be recovered") {
		t.Fatalf("two looks at a stream that could not be recovered: Check %v, want the fault", err)
	}
	if !strings.Contains(logs.String(), "JetStream cannot store messages") {
		t.Errorf("the fault seen twice was not logged:\n%s", &logs)
	}
}

// A connected process sees JetStream disabled on its server, and, given the
// server's monitoring /healthz, what only that shows.
func TestRemoteChecks(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	js, _ := jetstream.New(srv.Conn(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check := storage.Remote(js)
	if err := check(ctx); err != nil {
		t.Fatalf("JetStream enabled: %v", err)
	}
	var mu sync.Mutex
	code, body := http.StatusOK, `{"status":"ok"}`
	hz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}))
	defer hz.Close()
	hcheck := storage.Healthz(hz.URL, nil)
	if err := hcheck(ctx); err != nil {
		t.Fatalf("healthz ok: %v", err)
	}
	mu.Lock()
	code, body = http.StatusServiceUnavailable, `{"status":"unavailable","error":"JetStream stream 'SKILLBUS > SKILLBUS_JOBS' write error: no space left on device"}`
	mu.Unlock()
	if err := hcheck(ctx); !errors.Is(err, storage.ErrFault) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("healthz unavailable: %v", err)
	}

	if err := srv.Server.ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	var err error
	natstest.Eventually(t, 10*time.Second, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, time.Second) // as /readyz bounds its checks
		defer ccancel()
		err = check(cctx)
		return errors.Is(err, storage.ErrFault) && strings.Contains(err.Error(), "disabled")
	}, "JetStream disabled is reported as %v", stringer(func() string { return fmt.Sprint(err) }))
}

// While the NATS connection is down the jetstream check says it cannot check, not
// that the store could not be written: a stopped nats-server is no full disk.
func TestRemoteCheckWhileNATSIsDown(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	check := storage.Remote(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := check(ctx); err != nil {
		t.Fatalf("NATS up: %v", err)
	}
	srv.Stop()
	natstest.Eventually(t, 10*time.Second, func() bool { return !b.Connected() }, "still connected")
	cctx, ccancel := context.WithTimeout(ctx, time.Second) // as /readyz bounds its checks
	err := check(cctx)
	ccancel()
	if !errors.Is(err, storage.ErrNotChecked) || errors.Is(err, storage.ErrFault) || strings.Contains(err.Error(), "free space") {
		t.Fatalf("NATS down: %v, want %v", err, storage.ErrNotChecked)
	}
	srv.Start()
	natstest.Eventually(t, 15*time.Second, func() bool {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		defer ccancel()
		return check(cctx) == nil
	}, "NATS back, JetStream still not ready")
}

type stringer func() string

func (f stringer) String() string { return f() }

// A fault a restart does not end is restarted MaxAttempts times, then left alone.
func TestGuardStopsRestartingAFaultRestartsDoNotEnd(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var logs natstest.Buffer
	var restarts atomic.Int32
	g, err := storage.NewGuard(storage.GuardConfig{Server: func() *server.Server { return srv.Server },
		Restart: func() error { restarts.Add(1); return nil }, Every: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Headroom: 1, MaxAttempts: 3, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Server.DisableJetStream()
	g.Start()
	defer g.Stop()
	natstest.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "no more restarts") }, "the guard kept restarting:\n%s", &logs)
	if n := restarts.Load(); n != 3 {
		t.Errorf("%d restarts, want 3", n)
	}
}

// /readyz answers within 100 ms while the server restarts: while the guard's own
// restart runs (it says so), and while the server is held by a restart the guard did
// not start (it answers what it last saw). GuardConfig.Server waits for a restart to
// finish, as bus.Embedded's Current does, so a check that asked it would wait too.
func TestReadyzAnswersAtOnceDuringARestart(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	var smu sync.Mutex // held through a restart, as bus.Embedded holds its lock
	entered, release := make(chan struct{}), make(chan struct{})
	current := func() *server.Server { smu.Lock(); defer smu.Unlock(); return srv.Server }
	restart := func() error { smu.Lock(); defer smu.Unlock(); close(entered); <-release; return nil }
	g, err := storage.NewGuard(storage.GuardConfig{Server: current, Restart: restart, Every: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Headroom: 1, MaxAttempts: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var ready telemetry.Health
	ready.Add("jetstream store", g.Check)
	probes := httptest.NewServer(telemetry.Handler(prometheus.NewRegistry(), &ready, nil))
	defer probes.Close()

	// readyz asks /readyz, giving up after a second; a check that waits for the
	// restart keeps the handler until the test lets the restart end.
	readyz := func(within time.Duration) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, probes.URL+"/readyz", nil)
		began := time.Now()
		resp, err := http.DefaultClient.Do(req)
		took := time.Since(began)
		if err != nil {
			t.Errorf("/readyz: %v (after %v)", err, took)
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if took > within {
			t.Errorf("/readyz took %v, want at most %v", took, within)
		}
		return resp.StatusCode, string(body)
	}
	readyz(time.Second) // a first request sets up the connection

	// A restart the guard did not start holds the server: readiness answers what
	// the guard last saw, at once.
	smu.Lock()
	code, body := readyz(100 * time.Millisecond)
	smu.Unlock()
	if code != http.StatusOK {
		t.Errorf("/readyz while the server is held, healthy before: %d %s", code, body)
	}

	// The guard's own restart: readiness says so, at once.
	srv.Server.DisableJetStream()
	g.Start()
	defer g.Stop()
	<-entered
	code, body = readyz(100 * time.Millisecond)
	close(release)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[-] jetstream store: JetStream cannot store messages: the NATS server is restarting") {
		t.Errorf("/readyz during the guard's restart: %d %s", code, body)
	}
}

func TestRestartableHealth(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]bool{
		"JetStream stream '$G > JOBS' write error: write /data/jetstream/msgs/1.blk: no space left on device": true,
		"insufficient resources":                                 true,
		"JetStream not enabled":                                  true,
		"JetStream stream '$G > JOBS' is not current: no leader": false,
		"JetStream account 'A' could not be resolved":            false,
		"JetStream stream '$G > JOBS' could not be recovered":    false,
		"": false,
	} {
		if got := storage.RestartableHealth(msg); got != want {
			t.Errorf("RestartableHealth(%q) = %v, want %v", msg, got, want)
		}
	}
}
