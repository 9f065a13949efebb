package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/client"
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
	t.Parallel()
	gwRE := regexp.MustCompile(`HTTP gateway on http://(\S+) `)
	d := startFullStoreDev(t, []string{"--gateway", "127.0.0.1:0", "--publish-timeout", "1s"}, gwRE)
	ctx, cl, probes := d.ctx, d.cl, d.probes
	gw := gwRE.FindStringSubmatch(d.logs.String())[1]
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
	free := d.fill(t, 0)
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
	d.eachRanOnce(t, ids)
}
