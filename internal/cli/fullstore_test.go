package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
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

// skillbus dev on a store that fills up loses nothing and says so: publishes are
// refused with an error (the gateway answers 503 with the reason), /readyz fails
// with the reason, and once space is free it carries on by itself — every trigger
// whose publish was acknowledged runs to exactly one outcome.
//
// As root on Linux the store is a tmpfs of 16 MiB, filled by a file (the server
// then gets ENOSPC, which only starting JetStream again clears); elsewhere JetStream
// is given a storage limit (--max-store) and filled by a stream of the test's own,
// which is deleted to free it.
func TestDevOnAFullStoreLosesNothing(t *testing.T) {
	store := t.TempDir()
	onTmpfs := runtime.GOOS == "linux" && os.Geteuid() == 0
	args := []string{"dev", "--port", "-1", "--store", store, "--skills", filepath.Join("..", "..", "testdata", "skills"),
		"--workers", "1", "--gateway", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--publish-timeout", "1s", "--log-level", "info"}
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
	gwRE := regexp.MustCompile(`HTTP gateway on http://(\S+) `)
	probeRE := regexp.MustCompile(`serving /metrics, /livez and /readyz" addr=(\S+)`)
	natstest.Eventually(t, 60*time.Second, func() bool {
		return natsRE.MatchString(logs.String()) && gwRE.MatchString(logs.String()) && probeRE.MatchString(logs.String())
	},
		"dev did not start:\n%s", logs)
	gw, probes := gwRE.FindStringSubmatch(logs.String())[1], probeRE.FindStringSubmatch(logs.String())[1]
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
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var ready string
	natstest.Eventually(t, 30*time.Second, func() bool {
		code, body := get("http://" + probes + "/readyz")
		ready = body
		return code == http.StatusOK
	}, "dev is not ready: %s", stringer(func() string { return ready }))
	if !strings.Contains(ready, "[+] jetstream store ok") {
		t.Fatalf("/readyz lacks the store check:\n%s", ready)
	}

	// Triggers are published all along; the test records which were acknowledged.
	var (
		mu             sync.Mutex
		acked          []string
		refused, total int
	)
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; pubCtx.Err() == nil; i++ {
			pctx, pcancel := context.WithTimeout(pubCtx, 2*time.Second)
			act, err := cl.Publish(pctx, client.Trigger{Skill: "hello", Source: "/fullstore", ID: fmt.Sprintf("t-%d", i), Data: []byte(fmt.Sprintf(`{"name":"n%d"}`, i))})
			pcancel()
			mu.Lock()
			total++
			if err == nil {
				acked = append(acked, act.ID)
			} else if pubCtx.Err() == nil {
				refused++
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // a publisher's pace, not a wait for anything
		}
	}()
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acked), refused
	}
	natstest.Eventually(t, 30*time.Second, func() bool { n, _ := counts(); return n >= 20 }, "triggers are not acknowledged")

	// Fill the store.
	var free func()
	if onTmpfs {
		filler := filepath.Join(store, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
		f.Close()
		free = func() {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		js, _ := jetstream.New(nc)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}}); err != nil {
			t.Fatal(err)
		}
		for err == nil {
			_, err = js.Publish(ctx, "fill", make([]byte, 32<<10))
		}
		free = func() {
			if err := js.DeleteStream(ctx, "FILL"); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, before := counts()
	natstest.Eventually(t, 30*time.Second, func() bool { _, r := counts(); return r >= before+3 }, "publishes to a full store are not refused")
	natstest.Eventually(t, 30*time.Second, func() bool {
		code, body := get("http://" + probes + "/readyz")
		ready = body
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[-] jetstream store: JetStream cannot store messages")
	}, "/readyz does not report the full store: %s", stringer(func() string { return ready }))
	req, _ := http.NewRequest(http.MethodPost, "http://"+gw+"/events", strings.NewReader(`{"name":"Web"}`))
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "web-full", "ce-source": "/curl", "ce-type": "com.example.greet", "Content-Type": "application/json"} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"error"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the gateway on a full store answered %d %s", resp.StatusCode, body)
	}

	// Free it: dev carries on by itself.
	free()
	natstest.Eventually(t, 90*time.Second, func() bool {
		code, body := get("http://" + probes + "/readyz")
		ready = body
		return code == http.StatusOK
	}, "dev is not ready again once space is free: %s", stringer(func() string { return ready }))
	n, _ := counts()
	natstest.Eventually(t, 60*time.Second, func() bool { m, _ := counts(); return m >= n+20 }, "triggers are not acknowledged once space is free")
	stopPub()
	<-pubDone

	// Every acknowledged trigger ran to exactly one outcome.
	mu.Lock()
	ids := append([]string(nil), acked...)
	t.Logf("%d triggers published, %d acknowledged, %d refused", total, len(acked), refused)
	mu.Unlock()
	fctx, fcancel := context.WithTimeout(ctx, 3*time.Minute)
	defer fcancel()
	execs := map[string]string{}
	for _, id := range ids {
		res, err := cl.Follow(fctx, id, nil)
		if err != nil {
			t.Fatalf("acknowledged trigger %s: %v", id, err)
		}
		if !res.Completed {
			t.Fatalf("acknowledged trigger %s did not complete: %+v", id, res)
		}
		execs[res.ExecutionID] = id
	}
	outcomes := map[string]int{}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(fctx, b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(fctx)
	if err != nil {
		t.Fatal(err)
	}
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
}
