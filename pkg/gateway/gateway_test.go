package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/gateway"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "0123456789abcdef-token"

// fixture is a gateway on a real JetStream server, with a stand-in for the router
// and workers that answers every trigger: type test.unmatched is not routed, every
// other completes with its data as the output "got".
type fixture struct {
	t    *testing.T
	ctx  context.Context
	b    *bus.Bus
	url  string
	mu   sync.Mutex
	seen []*event.Event // triggers as published on NATS
}

func setup(t *testing.T, cfg gateway.Config) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, b: b}
	cons, err := b.JS.OrderedConsumer(ctx, b.StreamTriggers(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { f.answer(m) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	cfg.Bus = b
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(sctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	f.url = "http://" + ln.Addr().String()
	return f
}

func (f *fixture) answer(m jetstream.Msg) {
	e, err := bus.Decode(m)
	if err != nil {
		f.t.Errorf("the gateway published something that is not a CloudEvent: %v", err)
		return
	}
	f.mu.Lock()
	f.seen = append(f.seen, e)
	f.mu.Unlock()
	act := events.ActivationID(e.Source(), e.ID())
	pub := func(id, typ string, data any) {
		msg, err := bus.Event{ID: id, Source: "test", Type: typ, Data: data}.Msg(f.b.Subjects.Event(idOf(typ, act), typ))
		if err != nil {
			f.t.Error(err)
			return
		}
		if _, err := f.b.JS.PublishMsg(f.ctx, msg); err != nil && f.ctx.Err() == nil {
			f.t.Error(err)
		}
	}
	if e.Type() == "test.debounced" {
		pub(act+".u", events.TypeRouteUnmatched, events.RouteUnmatched{ActivationID: act, Code: events.UnmatchedDebounced,
			Reason: `vip-alert: debounce 2s (key "c2"): folded into one run with the last trigger's data`})
		return
	}
	if e.Type() == "test.unmatched" {
		pub(act+".u", events.TypeRouteUnmatched, events.RouteUnmatched{ActivationID: act, Code: events.UnmatchedNoSkill, Reason: "no skill",
			EndedWaits: []string{"w1"}, Cancelled: []string{"c1", "c2"}})
		return
	}
	if e.Type() == "test.slow" {
		return // never answered
	}
	if e.Type() == "test.later" {
		// Completes 300 ms from now.
		time.AfterFunc(300*time.Millisecond, func() {
			pub(act+".d", events.TypeRouteDecided, events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "echo", ExecutionID: "x" + act}}})
			pub(act+".c", events.TypeExecutionCompleted, events.ExecutionCompleted{ExecutionID: "x" + act, ActivationID: act, Skill: "echo"})
		})
		return
	}
	if e.Type() == "test.live" {
		// A run whose first progress is live only (its sequence's first event),
		// then its outcome: a follower that subscribed late misses the first and
		// holds the outcome a second for it.
		exec := "x" + act
		seq := func(n int) string { return events.Seq{Job: 1, Delivery: 1, N: uint64(n)}.String() }
		live, err := bus.Event{ID: exec + ".started", Source: "test", Type: events.TypeExecutionStarted,
			Meta: bus.Meta{ExecutionID: exec, Seq: seq(1)},
			Data: events.ExecutionStarted{ExecutionID: exec, Skill: "echo", Attempt: 1}}.Msg(f.b.Subjects.Live(act, exec, events.TypeExecutionStarted))
		if err == nil {
			err = f.b.NC.PublishMsg(live)
		}
		if err != nil {
			f.t.Error(err)
		}
		pub(act+".d", events.TypeRouteDecided, events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "echo", ExecutionID: exec}}})
		f.store(bus.Event{ID: exec + ".completed", Source: "test", Type: events.TypeExecutionCompleted,
			Meta: bus.Meta{ExecutionID: exec, Seq: seq(2)},
			Data: events.ExecutionCompleted{ExecutionID: exec, ActivationID: act, Skill: "echo", Outputs: map[string]any{"ok": true}}}, f.b.Subjects.Event(exec, events.TypeExecutionCompleted))
		return
	}
	if e.Type() == "test.confirm" {
		// Paused for a confirmation nobody gives.
		exec := "x" + act
		pub(act+".d", events.TypeRouteDecided, events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "refund", ExecutionID: exec}}})
		f.store(bus.Event{ID: exec + ".confirmation.requested", Source: "test", Type: events.TypeConfirmationRequested,
			Data: events.ConfirmationRequested{ExecutionID: exec, ActivationID: act, Skill: "refund", StepID: "refund", Message: "Refund 40 EUR?", TimeoutAt: time.Now().Add(time.Hour)}},
			f.b.Subjects.Event(exec, events.TypeConfirmationRequested))
		return
	}
	if e.Type() == "test.parked" {
		// Parked on a repair whose patch waits for approval.
		exec, repairID := "x"+act, "r"+act
		pub := func(id, typ string, data any) {
			msg, err := bus.Event{ID: id + "." + events.Kind(typ), Source: "test", Type: typ, Data: data}.Msg(f.b.Subjects.Event(id, typ))
			if err == nil {
				_, err = f.b.JS.PublishMsg(f.ctx, msg)
			}
			if err != nil && f.ctx.Err() == nil {
				f.t.Error(err)
			}
		}
		pub(act, events.TypeRouteDecided, events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "echo", ExecutionID: exec}}})
		pub(exec, events.TypeRepairRequested, events.RepairRequested{ExecutionID: exec, Skill: "echo", RepairID: repairID, Fault: events.RepairFault{Kind: "reference", Name: "titel", Step: "post"}})
		pub(repairID, events.TypeRepairProposed, events.RepairProposed{RepairID: repairID, Skill: "echo", Summary: "titel → title"})
		return
	}
	pub(act+".d", events.TypeRouteDecided, events.RouteDecided{ActivationID: act, Plan: events.Plan{Primary: events.SkillRef{Name: "echo", ExecutionID: "x" + act}}})
	var got any
	_ = json.Unmarshal(e.Data(), &got)
	pub(act+".c", events.TypeExecutionCompleted, events.ExecutionCompleted{ExecutionID: "x" + act, ActivationID: act, Skill: "echo", Outputs: map[string]any{"got": got, "subject": m.Subject()}})
}

// store publishes e on subject to JetStream, as a worker stores an event.
func (f *fixture) store(e bus.Event, subject string) {
	msg, err := e.Msg(subject)
	if err == nil {
		_, err = f.b.JS.PublishMsg(f.ctx, msg)
	}
	if err != nil && f.ctx.Err() == nil {
		f.t.Error(err)
	}
}

func idOf(typ, act string) string {
	if typ == events.TypeExecutionCompleted {
		return "x" + act
	}
	return act
}

func (f *fixture) triggers() []*event.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*event.Event(nil), f.seen...)
}

// post sends a curl-shaped request and decodes the JSON answer.
func (f *fixture) post(path string, header map[string]string, body string) (int, map[string]any, http.Header) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		f.t.Fatalf("%s: answer is not a JSON object: %s", path, raw)
	}
	return resp.StatusCode, out, resp.Header
}

func binary(id, typ string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token, "ce-specversion": "1.0", "ce-id": id, "ce-source": "/curl", "ce-type": typ, "Content-Type": "application/json"}
}

// The sdk-go HTTP client posts events in binary and structured mode; the gateway
// answers 202 with the activation, or with ?wait the result.
func TestSDKClient(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Tokens: []string{token}})
	for _, mode := range []string{"binary", "structured"} {
		t.Run(mode, func(t *testing.T) {
			opts := []cehttp.Option{cloudevents.WithTarget(f.url + "/events?wait=20s"), cehttp.WithHeader("Authorization", "Bearer "+token)}
			p, err := cloudevents.NewHTTP(opts...)
			if err != nil {
				t.Fatal(err)
			}
			c, err := cloudevents.NewClient(p)
			if err != nil {
				t.Fatal(err)
			}
			e := cloudevents.NewEvent()
			e.SetID("sdk-" + mode)
			e.SetSource("/sdk")
			e.SetType("com.example.sdk")
			_ = e.SetData(cloudevents.ApplicationJSON, map[string]string{"mode": mode})
			ctx := f.ctx
			if mode == "structured" {
				ctx = cloudevents.WithEncodingStructured(ctx)
			} else {
				ctx = cloudevents.WithEncodingBinary(ctx)
			}
			resp, res := c.Request(ctx, e)
			if !cloudevents.IsACK(res) {
				t.Fatalf("request: %v", res)
			}
			var r *cehttp.Result
			if !cloudevents.ResultAs(res, &r) || r.StatusCode != http.StatusOK {
				t.Fatalf("status: %v", res)
			}
			_ = resp
		})
	}
	// Both arrived as triggers with their id, source, type and datacontenttype.
	natstest.Eventually(t, 10*time.Second, func() bool { return len(f.triggers()) == 2 }, "triggers: %d", len(f.triggers()))
	for _, e := range f.triggers() {
		if e.Source() != "/sdk" || e.Type() != "com.example.sdk" || e.DataContentType() != "application/json" || !strings.HasPrefix(e.ID(), "sdk-") {
			t.Errorf("trigger %s", e)
		}
	}
}

func TestEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Tokens: []string{token}, MaxBodyBytes: 4096})

	t.Run("binary, 202 with the activation", func(t *testing.T) {
		code, out, _ := f.post("/events", binary("b-1", "com.example.thing"), `{"a":1}`)
		if code != http.StatusAccepted || out["activation_id"] != events.ActivationID("/curl", "b-1") || out["subject"] != "skillbus.trigger.com.example.thing" {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("a source of skillbus's own is refused", func(t *testing.T) {
		// Its ids are predictable (a tick's time, a parent execution's step): a
		// sender must not plant the run skillbus's scheduler or skill tool will ask for.
		for _, source := range []string{"/skillbus/skill-tool", "/skillbus%2Fscheduler"} {
			h := binary("planted", "com.example.thing")
			h["ce-source"] = source
			code, out, _ := f.post("/events", h, `{"a":1}`)
			if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "are skillbus's own") {
				t.Errorf("%s: %d %v", source, code, out)
			}
		}
		code, out, _ := f.post("/events", binary("planted", "skill.hello.debounced"), `{"a":1}`)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "types beginning skill. are reserved") {
			t.Errorf("a reserved type: %d %v", code, out)
		}
	})
	t.Run("the same id again is a duplicate", func(t *testing.T) {
		code, out, _ := f.post("/events", binary("b-1", "com.example.thing"), `{"a":1}`)
		if code != http.StatusAccepted || out["duplicate"] != true {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("the same id from another source is another event", func(t *testing.T) {
		h := binary("b-1", "com.example.thing")
		h["ce-source"] = "/elsewhere"
		code, out, _ := f.post("/events", h, `{"a":1}`)
		if code != http.StatusAccepted || out["duplicate"] == true || out["activation_id"] != events.ActivationID("/elsewhere", "b-1") {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("wait for the result", func(t *testing.T) {
		code, out, _ := f.post("/events?wait=20s", binary("b-2", "com.example.thing"), `{"a":2}`)
		got, _ := out["outputs"].(map[string]any)
		if code != http.StatusOK || out["status"] != "completed" || got == nil || got["got"].(map[string]any)["a"] != 2.0 {
			t.Fatalf("%d %v", code, out)
		}
		// A sender waiting follows its run: the trigger asks for live progress.
		for _, e := range f.triggers() {
			if e.ID() == "b-2" && e.Extensions()[events.ExtProgress] != events.ProgressLive {
				t.Errorf("the trigger of a ?wait request has progress %v, want live", e.Extensions()[events.ExtProgress])
			}
		}
	})
	t.Run("wait, unmatched", func(t *testing.T) {
		code, out, _ := f.post("/events?wait=20s", binary("b-3", "test.unmatched"), `{}`)
		if code != http.StatusOK || out["status"] != "unmatched" || !strings.Contains(out["error"].(string), "no skill") {
			t.Fatalf("%d %v", code, out)
		}
		// What the event did though no skill took it.
		if fmt.Sprint(out["ended_waits"]) != "[w1]" || fmt.Sprint(out["cancelled"]) != "[c1 c2]" {
			t.Errorf("ended_waits %v, cancelled %v; want [w1] and [c1 c2]", out["ended_waits"], out["cancelled"])
		}
	})
	t.Run("wait, taken into a debounced run", func(t *testing.T) {
		// Not refused: a skill took it into a run that starts later, as its own
		// activation. 202, "deferred", with the debounce that took it.
		code, out, _ := f.post("/events?wait=20s", binary("b-8", "test.debounced"), `{}`)
		if code != http.StatusAccepted || out["status"] != "deferred" || !strings.Contains(out["error"].(string), `vip-alert: debounce 2s (key "c2")`) {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("wait ends first", func(t *testing.T) {
		code, out, _ := f.post("/events?wait=200ms", binary("b-4", "test.slow"), `{}`)
		if code != http.StatusAccepted || out["status"] != "pending" || out["activation_id"] == "" {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("wait follows the run from before its trigger is sent", func(t *testing.T) {
		// Its live progress published at once is not missed, so its outcome is
		// not held a second for it (three events of a batch were 1 to 3 s late).
		// A batch: the second event's run reports at once, while the gateway still
		// waits for the first's, 300 ms.
		body := `[{"specversion":"1.0","id":"b-10","source":"/curl","type":"test.later"},{"specversion":"1.0","id":"b-11","source":"/curl","type":"test.live"}]`
		start := time.Now()
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url+"/events?wait=20s", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var outs []map[string]any
		err = json.NewDecoder(resp.Body).Decode(&outs)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(outs) != 2 || outs[0]["status"] != "completed" || outs[1]["status"] != "completed" {
			t.Fatalf("%d %v %v", resp.StatusCode, outs, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the answer took %v: the second outcome was held for live progress its follow missed", took)
		}
		// Asked again once it has ended, the answer is the outcome at once: the
		// live progress the stored events lack is not waited for.
		start = time.Now()
		code, out, _ := f.post("/events?wait=20s", binary("b-11", "test.live"), `{}`)
		if code != http.StatusOK || out["status"] != "completed" || out["duplicate"] != true {
			t.Fatalf("%d %v", code, out)
		}
		if took := time.Since(start); took > 800*time.Millisecond {
			t.Errorf("the answer for a run that had ended took %v", took)
		}
	})
	t.Run("wait ends first while the run waits for a person", func(t *testing.T) {
		// Pending, and with it the execution and what it waits for: a caller can
		// act on it instead of asking again until the confirmation times out.
		code, out, _ := f.post("/events?wait=1s", binary("b-9", "test.confirm"), `{}`)
		w, _ := out["waiting"].(string)
		if code != http.StatusAccepted || out["status"] != "pending" || out["execution_id"] == nil || !strings.HasPrefix(w, `confirmation of step refund ("Refund 40 EUR?") until `) ||
			!strings.Contains(w, "skillbus runs confirm "+out["execution_id"].(string)) {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("wait, parked on a repair waiting for approval", func(t *testing.T) {
		// Not an outcome: 202, "repairing", so that nobody sends it again as if it failed.
		code, out, _ := f.post("/events?wait=20s", binary("b-7", "test.parked"), `{}`)
		if code != http.StatusAccepted || out["status"] != "repairing" || out["execution_id"] != "x"+out["activation_id"].(string) ||
			!strings.Contains(out["error"].(string), `repairing: reference fault "titel" in step post, repair `) || !strings.Contains(out["error"].(string), "waiting for approval") {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("explicit skill", func(t *testing.T) {
		code, out, _ := f.post("/events?skill=hello&wait=20s", binary("b-5", "io.skillbus.invoke"), `{}`)
		if code != http.StatusOK || out["outputs"].(map[string]any)["subject"] != "skillbus.trigger.skill.hello" {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("the scheme in any case", func(t *testing.T) {
		// RFC 7235: the authentication scheme is case-insensitive.
		for i, auth := range []string{"bearer " + token, "BEARER " + token, "Bearer   " + token} {
			h := binary(fmt.Sprint("case-", i), "com.example.case")
			h["Authorization"] = auth
			if code, out, _ := f.post("/events", h, `{}`); code != http.StatusAccepted {
				t.Errorf("Authorization: %q: %d %v, want 202", strings.Replace(auth, token, "<token>", 1), code, out)
			}
		}
	})
	t.Run("content-type is the datacontenttype", func(t *testing.T) {
		h := binary("b-6", "com.example.text")
		h["Content-Type"] = "text/plain; charset=utf-8"
		if code, out, _ := f.post("/events", h, "plain words"); code != http.StatusAccepted {
			t.Fatalf("%d %v", code, out)
		}
		natstest.Eventually(t, 10*time.Second, func() bool {
			for _, e := range f.triggers() {
				if e.ID() == "b-6" {
					return e.DataContentType() == "text/plain; charset=utf-8" && string(e.Data()) == "plain words"
				}
			}
			return false
		}, "trigger b-6 lost its content type or data")
	})
	t.Run("structured", func(t *testing.T) {
		body := `{"specversion":"1.0","id":"s-1","source":"/curl","type":"com.example.s","datacontenttype":"application/json","data":{"x":true}}`
		code, out, _ := f.post("/events?wait=20s", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents+json"}, body)
		if code != http.StatusOK || out["outputs"].(map[string]any)["got"].(map[string]any)["x"] != true {
			t.Fatalf("%d %v", code, out)
		}
	})
	t.Run("batch", func(t *testing.T) {
		body := `[{"specversion":"1.0","id":"batch-1","source":"/curl","type":"com.example.b"},{"specversion":"1.0","id":"batch-2","source":"/curl","type":"com.example.b","data":{"n":2}}]`
		req, _ := http.NewRequestWithContext(f.ctx, http.MethodPost, f.url+"/events?wait=20s", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []gateway.Accepted
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out) != 2 || out[1].Status != "completed" || out[0].ID != "batch-1" {
			t.Fatalf("%d %v %+v", resp.StatusCode, err, out)
		}
	})

	bad := []struct {
		name   string
		path   string
		header map[string]string
		body   string
		code   int
		want   string
	}{
		{"no token", "/events", map[string]string{"ce-specversion": "1.0", "ce-id": "x", "ce-source": "/s", "ce-type": "t"}, `{}`, 401, "Bearer"},
		{"wrong token", "/events", func() map[string]string {
			h := binary("x", "t")
			h["Authorization"] = "Bearer nope-nope-nope-nope"
			return h
		}(), `{}`, 401, "Bearer"},
		{"the token under another scheme", "/events", func() map[string]string {
			h := binary("x", "t")
			h["Authorization"] = "Basic " + token
			return h
		}(), `{}`, 401, "Bearer"},
		{"the token without a scheme", "/events", func() map[string]string {
			h := binary("x", "t")
			h["Authorization"] = token
			return h
		}(), `{}`, 401, "Bearer"},
		{"a signature without a secret configured", "/events", map[string]string{"X-Hub-Signature-256": gateway.Sign([]byte("k"), []byte("{}")), "ce-specversion": "1.0"}, `{}`, 401, "Bearer"},
		{"not a CloudEvent", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}, `{"hello":1}`, 415, "ce-specversion"},
		{"binary without ce-id", "/events", map[string]string{"Authorization": "Bearer " + token, "ce-specversion": "1.0", "ce-source": "/s", "ce-type": "t"}, `{}`, 400, "id"},
		{"a type that is not a subject", "/events", binary("x", "bad type!"), `{}`, 400, "only letters"},
		{"structured, malformed JSON", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents+json"}, `{"specversion":`, 400, "invalid CloudEvent"},
		{"binary, data declared JSON that is not", "/events", binary("nj", "t"), `{name:Ada}`, 400, "data is not valid JSON"},
		{"structured, data_base64 declared JSON that is not", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents+json"}, `{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"application/json","data_base64":"e25hbWU6QWRhfQ=="}`, 400, "data is not valid JSON"},
		{"structured without source", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents+json"}, `{"specversion":"1.0","id":"1","type":"t"}`, 400, "source"},
		{"empty batch", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents-batch+json"}, `[]`, 400, "empty"},
		// Each says what is wrong in the sender's terms, not the JSON parser's.
		{"structured, a number for the id", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents+json"}, `{"specversion":"1.0","id":5,"source":"/s","type":"t"}`, 400, "id: want a string, got a JSON number"},
		{"a batch that is an object", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents-batch+json"}, `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`, 400, "a batch is a JSON array of events; the body is a JSON object"},
		{"binary without ce-specversion", "/events", map[string]string{"Authorization": "Bearer " + token, "ce-id": "1", "ce-source": "/s", "ce-type": "t", "Content-Type": "application/json"}, `{}`, 400, "binary mode needs the ce-specversion header, 1.0"},
		{"binary, ce-specversion 2.0", "/events", func() map[string]string { h := binary("v2", "t"); h["ce-specversion"] = "2.0"; return h }(), `{}`, 400, `ce-specversion "2.0": only 1.0 is supported`},
		{"a structured event sent as application/json", "/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}, `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`, 415, "send it with Content-Type application/cloudevents+json"},
		{"oversize body", "/events", binary("big", "t"), `"` + strings.Repeat("x", 5000) + `"`, 413, "larger than 4096"},
		{"bad wait", "/events?wait=soon", binary("w", "t"), `{}`, 400, "?wait=soon"},
		// A bare ?wait, a misspelt parameter and a wait beyond --max-wait would each
		// answer without the outcome the sender asked for.
		{"wait without a duration", "/events?wait", binary("w", "t"), `{}`, 400, "?wait needs a duration"},
		{"misspelt parameter", "/events?wat=5s", binary("w", "t"), `{}`, 400, "?wat: no such parameter"},
		{"wait beyond the gateway's", "/events?wait=10m", binary("w", "t"), `{}`, 400, "longer than this gateway waits"},
		{"bad skill", "/events?skill=a.b", binary("w", "t"), `{}`, 400, "?skill"},
		{"two skills named", "/events?skill=word-count", func() map[string]string { h := binary("w2", "t"); h["ce-skill"] = "hello"; return h }(), `{}`, 400, `?skill=word-count and the event's skill extension "hello" name different skills`},
		{"unknown hook", "/hooks/nope", nil, `{}`, 404, "no such hook"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := f.post(tt.path, tt.header, tt.body)
			msg, _ := out["error"].(string)
			if code != tt.code || !strings.Contains(msg, tt.want) || strings.ContainsAny(msg, "\n") {
				t.Fatalf("%d %q, want %d and an error saying %q", code, msg, tt.code, tt.want)
			}
		})
	}
	// A GET is not an event, and a path the gateway does not serve is none either:
	// each says so in JSON, as every other error does.
	for _, tc := range []struct {
		path       string
		code       int
		want, allw string
	}{
		{"/events", http.StatusMethodNotAllowed, "GET /events: this path takes POST", "POST"},
		{"/nope", http.StatusNotFound, "/nope: no such path", ""},
	} {
		resp, err := http.Get(f.url + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || err != nil || !strings.Contains(body["error"], tc.want) || resp.Header.Get("Allow") != tc.allw {
			t.Errorf("GET %s: %d %v %v (Allow %q)", tc.path, resp.StatusCode, body, err, resp.Header.Get("Allow"))
		}
	}
}

// A GitHub webhook: type from X-GitHub-Event, id from X-GitHub-Delivery, body signed
// with the hook's secret in X-Hub-Signature-256.
func TestGitHubWebhook(t *testing.T) {
	t.Parallel()
	secret := "gh-secret"
	f := setup(t, gateway.Config{Tokens: []string{token}, Secret: "events-secret", Hooks: map[string]gateway.Hook{
		"github": {TypePrefix: "com.github.", TypeHeader: "X-GitHub-Event", IDHeader: "X-GitHub-Delivery", Source: "https://github.com/acme/app", Secret: secret},
		"plain":  {Type: "com.example.plain"},
	}})
	body := `{"action":"opened","number":7}`
	gh := func(sig string) map[string]string {
		return map[string]string{"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-Hub-Signature-256": sig, "Content-Type": "application/json"}
	}
	// A provider's own parameters in the hook's URL are ignored, not refused.
	code, out, _ := f.post("/hooks/github?wait=20s&env=prod", gh(gateway.Sign([]byte(secret), []byte(body))), body)
	if code != http.StatusOK || out["type"] != "com.github.pull_request" || out["id"] != "72d3162e-cc78-11e3-81ab-4c9367dc0958" ||
		out["outputs"].(map[string]any)["got"].(map[string]any)["number"] != 7.0 {
		t.Fatalf("%d %v", code, out)
	}
	for name, sig := range map[string]string{
		"unsigned":         "",
		"another secret":   gateway.Sign([]byte("guess"), []byte(body)),
		"another body":     gateway.Sign([]byte(secret), []byte(body+" ")),
		"not hex":          "sha256=zz",
		"no prefix":        strings.TrimPrefix(gateway.Sign([]byte(secret), []byte(body)), "sha256="),
		"a bearer instead": "",
	} {
		h := gh(sig)
		if name == "a bearer instead" {
			h["Authorization"] = "Bearer " + token
		}
		if code, out, _ := f.post("/hooks/github", h, body); code != http.StatusUnauthorized || !strings.Contains(out["error"].(string), "signature") {
			t.Errorf("%s: %d %v", name, code, out)
		}
	}
	h := gh(gateway.Sign([]byte(secret), []byte(body)))
	delete(h, "X-GitHub-Event")
	if code, out, _ := f.post("/hooks/github", h, body); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), "X-GitHub-Event") {
		t.Errorf("no event header: %d %v", code, out)
	}
	notJSON := "a=b"
	if code, out, _ := f.post("/hooks/github", gh(gateway.Sign([]byte(secret), []byte(notJSON))), notJSON); code != http.StatusBadRequest || !strings.Contains(out["error"].(string), "not JSON") {
		t.Errorf("form body: %d %v", code, out)
	}
	// A hook without a secret takes the bearer tokens.
	if code, out, _ := f.post("/hooks/plain", map[string]string{"Authorization": "Bearer " + token}, `{"k":1}`); code != http.StatusAccepted || out["type"] != "com.example.plain" {
		t.Errorf("plain hook: %d %v", code, out)
	}
	if code, _, _ := f.post("/hooks/plain", nil, `{"k":1}`); code != http.StatusUnauthorized {
		t.Errorf("plain hook without a token: %d", code)
	}
	// /events also takes a body signed with the gateway's secret.
	ev := `{"specversion":"1.0","id":"signed-1","source":"/signed","type":"com.example.signed"}`
	if code, out, _ := f.post("/events", map[string]string{"Content-Type": "application/cloudevents+json", "X-Hub-Signature-256": gateway.Sign([]byte("events-secret"), []byte(ev))}, ev); code != http.StatusAccepted {
		t.Errorf("signed event: %d %v", code, out)
	}
}

func TestOpenGateway(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{})
	h := binary("open-1", "com.example.open")
	delete(h, "Authorization")
	if code, out, _ := f.post("/events", h, `{}`); code != http.StatusAccepted {
		t.Fatalf("%d %v", code, out)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if _, err := gateway.New(gateway.Config{}); err == nil {
		t.Error("no bus: no error")
	}
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	if _, err := gateway.New(gateway.Config{Bus: b, Tokens: []string{"short"}}); err == nil || !strings.Contains(err.Error(), "16") {
		t.Errorf("short token: %v", err)
	}
	if (gateway.Config{Tokens: []string{token}}).Open() || !(gateway.Config{}).Open() {
		t.Error("Open")
	}
}

// One size limit end to end: an event the routers would reject as too large is
// refused with 413 and the limit, and nothing is published; a batch holding one
// publishes none of them. The body limit stays the bound of a whole request.
func TestEventOverTheRoutersLimitIs413(t *testing.T) {
	t.Parallel()
	f := setup(t, gateway.Config{Tokens: []string{token}, MaxEventBytes: 2048})
	big := `{"text":"` + strings.Repeat("x", 4000) + `"}`
	code, out, _ := f.post("/events", binary("big-1", "com.example.thing"), big)
	if msg, _ := out["error"].(string); code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "the limit is 2048 bytes") || !strings.Contains(msg, "big-1") {
		t.Fatalf("%d %v", code, out)
	}
	batch := `[{"specversion":"1.0","id":"small","source":"/curl","type":"com.example.thing","data":{}},` +
		`{"specversion":"1.0","id":"big-2","source":"/curl","type":"com.example.thing","data":` + big + `}]`
	code, out, _ = f.post("/events", map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/cloudevents-batch+json"}, batch)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("batch: %d %v", code, out)
	}
	// An event within the limit still goes through, and only it was published.
	if code, out, _ = f.post("/events", binary("ok-1", "com.example.thing"), `{"a":1}`); code != http.StatusAccepted {
		t.Fatalf("%d %v", code, out)
	}
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("%d triggers published, want only ok-1", info.State.Msgs)
	}
}

// A waiter who hangs up releases what its wait held — the consumers following its
// activation and the goroutines — within seconds, not the five minutes a consumer
// otherwise lingers.
func TestAbandonedWaitReleasesItsConsumers(t *testing.T) {
	f := setup(t, gateway.Config{Tokens: []string{token}})
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	// following reports the consumers on EVENTS, and whether one follows act.
	following := func(act string) (n int, found bool) {
		for ci := range evs.ListConsumers(f.ctx).Info() {
			n++
			found = found || strings.Contains(ci.Config.FilterSubject, act)
		}
		return n, found
	}
	base, _ := following("-")
	routines := runtime.NumGoroutine()
	for i := range 10 {
		id := fmt.Sprintf("slow-%d", i)
		ctx, cancel := context.WithCancel(f.ctx)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/events?wait=1m", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range binary(id, "test.slow") {
			req.Header.Set(k, v)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		natstest.Eventually(t, 5*time.Second, func() bool {
			_, ok := following(events.ActivationID("/curl", id))
			return ok
		}, "the wait never followed its activation")
		cancel()
		<-done
	}
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := following("-"); n > base; n, _ = following("-") {
		if time.Now().After(deadline) {
			for ci := range evs.ListConsumers(f.ctx).Info() {
				t.Logf("left: %s on %s, created %v, %d waiting pulls", ci.Name, ci.Config.FilterSubject, ci.Created, ci.NumWaiting)
			}
			t.Fatalf("%d consumers on EVENTS 5s after the waiters left, %d before", n, base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	natstest.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= routines+2 }, "%d goroutines after the waiters left, %d before", runtime.NumGoroutine(), routines)
}
