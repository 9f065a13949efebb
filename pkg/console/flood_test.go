package console

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// TestALiveListKeepsUpWithAThousandUpdatesASecond publishes routing decisions and
// outcomes of 1,000 runs a second for three seconds on a real nats-server and
// checks that a live page receives them batched (a few messages a second, not
// thousands) and is current soon after the last one.
func TestALiveListKeepsUpWithAThousandUpdatesASecond(t *testing.T) {
	ns := natstest.Start(t)
	b := ns.Bus(t, bus.Config{})
	c, err := New(Config{Bus: b})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	natstest.Eventually(t, 10*time.Second, func() bool {
		c.hub.mu.Lock()
		defer c.hub.mu.Unlock()
		return len(c.hub.subs) == 1
	}, "the live stream never subscribed")
	const runs, perSecond = 3000, 1000
	last := fmt.Sprintf("flood%05d", runs-1)
	type seen struct {
		frames int
		at     time.Time
	}
	done := make(chan seen, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 4<<20), 4<<20)
		frames := 0
		for sc.Scan() {
			line := sc.Text()
			if line == "event: runs" {
				frames++
			}
			if strings.Contains(line, `id="run-`+last+`"`) && strings.Contains(line, `data-state="completed"`) {
				done <- seen{frames, time.Now()}
				return
			}
		}
	}()
	start := time.Now()
	tick := time.NewTicker(time.Second / 100)
	defer tick.Stop()
	for i := 0; i < runs; {
		<-tick.C // 10 runs every 10ms: 1,000 a second, each a decision and an outcome
		for range perSecond / 100 {
			exec := fmt.Sprintf("flood%05d", i)
			publish(t, b, exec, events.TypeRouteDecided, events.RouteDecided{ActivationID: exec,
				Plan: events.Plan{Primary: events.SkillRef{Name: "s", ExecutionID: exec}}})
			publish(t, b, exec, events.TypeExecutionCompleted, events.ExecutionCompleted{ExecutionID: exec, Skill: "s"})
			i++
		}
	}
	select {
	case <-b.JS.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	published := time.Now()
	select {
	case s := <-done:
		lag := s.at.Sub(published)
		t.Logf("%d runs (%d events) in %v; the page was current %v after the last publish, in %d messages",
			runs, 2*runs, published.Sub(start).Round(time.Millisecond), lag.Round(time.Millisecond), s.frames)
		if s.frames > 40 {
			t.Errorf("%d messages for %d updates: not batched", s.frames, 2*runs)
		}
		if lag > 5*time.Second {
			t.Errorf("the page fell behind: current %v after the last publish", lag)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the last run never reached the live page")
	}
}

func publish(t *testing.T, b *bus.Bus, id, typ string, data any) {
	t.Helper()
	m, err := bus.Event{ID: id + "." + events.Kind(typ), Source: "/flood", Type: typ, Data: data}.Msg(b.Subjects.Event(id, typ))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.JS.PublishMsgAsync(m); err != nil {
		t.Fatal(err)
	}
}
