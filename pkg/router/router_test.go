package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/skill"
)

// The tests mostly wait (AckWaits, debounce and batch windows, servers
// restarting): eight run at once rather than one per core.
func TestMain(m *testing.M) {
	natstest.WaitingTests(8)
	goleak.VerifyTestMain(m)
}

type fixture struct {
	t   *testing.T
	b   *bus.Bus
	nc  *nats.Conn
	kv  jetstream.KeyValue
	cat *catalog.Catalog
	ctx context.Context
	cfg router.Config
	r   *router.Router
}

func setup(t *testing.T, skills ...*skill.Skill) *fixture {
	t.Helper()
	return setupWith(t, nil, skills...)
}

func setupBus(t *testing.T, cfg bus.Config, skills ...*skill.Skill) *fixture {
	t.Helper()
	return setupFull(t, cfg, nil, skills...)
}

// setupWith is setup with changes to the router's configuration.
func setupWith(t *testing.T, configure func(*router.Config), skills ...*skill.Skill) *fixture {
	t.Helper()
	return setupFull(t, bus.Config{}, configure, skills...)
}

func setupFull(t *testing.T, bcfg bus.Config, configure func(*router.Config), skills ...*skill.Skill) *fixture {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bcfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, b: b, nc: srv.Conn(t), kv: kv, ctx: ctx}
	for _, s := range skills {
		f.putSkill(s)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.cat, err = catalog.Watch(ctx, kv, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cat.Stop)
	cfg := router.Config{Bus: b, Catalog: f.cat, Log: log, MaxEventBytes: 4096}
	if configure != nil {
		configure(&cfg)
	}
	r, err := router.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	f.cfg, f.r = cfg, r
	return f
}

func (f *fixture) putSkill(s *skill.Skill) {
	f.t.Helper()
	b, _ := json.Marshal(s)
	if _, err := f.kv.Put(f.ctx, s.Name, b); err != nil {
		f.t.Fatal(err)
	}
}

// publish sends a trigger with ce- headers written by hand, as any NATS client would.
func (f *fixture) publish(subject string, headers map[string]string, data string) {
	f.t.Helper()
	m := nats.NewMsg(subject)
	for k, v := range headers {
		m.Header.Set(k, v)
	}
	m.Data = []byte(data)
	js, _ := jetstream.New(f.nc)
	if _, err := js.PublishMsg(f.ctx, m); err != nil {
		f.t.Fatal(err)
	}
}

func ce(id, typ string) map[string]string {
	return map[string]string{"ce-specversion": "1.0", "ce-id": id, "ce-source": "/test", "ce-type": typ, "Content-Type": "application/json"}
}

// event waits for the event of type typ about id and decodes its data into v.
func (f *fixture) event(id, typ string, v any) {
	f.t.Helper()
	if typ == events.TypeRouteDecided {
		// At the default events level the decision rides in the plan's jobs.
		var d events.RouteDecided
		var err error
		natstest.Eventually(f.t, 10*time.Second, func() bool {
			d, _, err = f.b.Decision(f.ctx, id)
			return err == nil
		}, "no decision for %s: %v", id, err)
		b, _ := json.Marshal(d)
		if err := json.Unmarshal(b, v); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	s, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		f.t.Fatal(err)
	}
	var raw *jetstream.RawStreamMsg
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		raw, err = s.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(id, typ))
		return err == nil
	}, "no %s event for %s: %v", typ, id, err)
	e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: raw.Header, Data: raw.Data}))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := json.Unmarshal(e.Data(), v); err != nil {
		f.t.Fatal(err)
	}
}

// job returns the last job published on subject, the job subject of a skill in a
// pool (skillbus.exec.<pool>.<skill>), whatever its activation and stage.
func (f *fixture) job(subject string) events.Job {
	f.t.Helper()
	subject += ".*.*"
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	var raw *jetstream.RawStreamMsg
	var err error
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		raw, err = s.GetLastMsgForSubject(f.ctx, subject)
		return err == nil
	}, "no job on %s: %v", subject, err)
	e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: raw.Header, Data: raw.Data}))
	if err != nil {
		f.t.Fatal(err)
	}
	var j events.Job
	if err := json.Unmarshal(e.Data(), &j); err != nil {
		f.t.Fatal(err)
	}
	return j
}

// settled waits until the router consumer has nothing pending or unacked.
func (f *fixture) settled() {
	f.t.Helper()
	c, err := f.b.JS.Consumer(f.ctx, f.b.StreamTriggers(), "router")
	if err != nil {
		f.t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		info, err = c.Info(f.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, "router consumer not settled: %+v", info)
}

var hello = &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"}}

func TestExplicitInvocation(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	f.publish("skillbus.trigger.skill.hello", ce("1", "io.skillbus.invoke"), `{"name":"Ada"}`)
	act := events.ActivationID("/test", "1")
	var rd events.RouteDecided
	f.event(act, events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "hello" || rd.Plan.Primary.Source != "forced" || rd.Plan.Primary.ExecutionID != events.ExecutionID("/test", "1", "hello") {
		t.Fatalf("plan = %+v", rd.Plan)
	}
	j := f.job("skillbus.exec.default.hello")
	if string(j.Inputs) != `{"name":"Ada"}` || j.ActivationID != act || j.Skill.Version != "abcdef012345" {
		t.Fatalf("job = %+v", j)
	}
	f.settled()
}

func TestExplicitByExtension(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	h := ce("2", "com.example.other")
	h["ce-skill"] = "hello"
	f.publish("skillbus.trigger.com.example.other", h, `{}`)
	f.job("skillbus.exec.default.hello")
}

func TestRuleMatchOrdersByPriority(t *testing.T) {
	t.Parallel()
	low := &skill.Skill{Name: "a-low", Description: "d", Triggers: []string{"com.example.greet"}, Priority: "low"}
	high := &skill.Skill{Name: "z-high", Description: "d", Triggers: []string{"com.example.greet"}, Priority: "high", Pool: "gpu"}
	f := setup(t, hello, low, high)
	f.publish("skillbus.trigger.com.example.greet", ce("3", "com.example.greet"), `[1,2]`)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "3"), events.TypeRouteDecided, &rd)
	var got []string
	for _, s := range append([]events.SkillRef{rd.Plan.Primary}, rd.Plan.FallbackChain...) {
		got = append(got, s.Name)
	}
	if strings.Join(got, ",") != "z-high,hello,a-low" {
		t.Fatalf("plan order = %v", got)
	}
	j := f.job("skillbus.exec.gpu.z-high")
	if len(j.Fallback) != 2 || string(j.Inputs) != `{"data":[1,2]}` {
		t.Fatalf("job = %+v", j)
	}
}

func TestNoMatchIsRecordedAndAcked(t *testing.T) {
	t.Parallel()
	logged := &typoLogged{}
	f := setupWith(t, func(c *router.Config) { c.Log = slog.New(logged) }, hello)
	f.publish("skillbus.trigger.com.example.nobody", ce("4", "com.example.nobody"), `{}`)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "4"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedNoSkill || !strings.Contains(u.Reason, "com.example.nobody") || strings.Contains(u.Reason, "did you mean") {
		t.Fatalf("unmatched = %+v", u)
	}
	// A type one letter from a skill's trigger names it.
	f.publish("skillbus.trigger.com.example.gret", ce("5", "com.example.gret"), `{}`)
	f.event(events.ActivationID("/test", "5"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedNoSkill || !strings.HasSuffix(u.Reason, `event type "com.example.gret"; did you mean com.example.greet?`) {
		t.Fatalf("unmatched = %+v", u)
	}
	f.settled()
	// The likely typo is logged for whoever publishes without waiting; the type
	// near no skill's is not.
	if got := logged.lines(); len(got) != 1 || got[0] != "com.example.gret→com.example.greet" {
		t.Errorf("logged %q, want the typo once with its near type", got)
	}
}

// typoLogged is a slog handler that keeps the router's typo lines.
type typoLogged struct {
	mu  sync.Mutex
	got []string
}

func (h *typoLogged) Enabled(context.Context, slog.Level) bool { return true }
func (h *typoLogged) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *typoLogged) WithGroup(string) slog.Handler            { return h }
func (h *typoLogged) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "no skill takes this event type") {
		return nil
	}
	var typ, near string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "type":
			typ = a.Value.String()
		case "did_you_mean":
			near = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.got = append(h.got, typ+"→"+near)
	h.mu.Unlock()
	return nil
}

func (h *typoLogged) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.got)
}

func TestCatalogChangesAreFollowed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.putSkill(&skill.Skill{Name: "late", Description: "d", Triggers: []string{"com.example.late"}})
	if err := f.cat.Wait(f.ctx, func(c *catalog.Catalog) bool { _, ok := c.Get("late"); return ok }); err != nil {
		t.Fatal(err)
	}
	f.publish("skillbus.trigger.com.example.late", ce("5", "com.example.late"), `{}`)
	f.job("skillbus.exec.default.late")
}

func TestRepublishedTriggerMakesOneJob(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	for range 3 {
		f.publish("skillbus.trigger.skill.hello", ce("6", "io.skillbus.invoke"), `{}`)
	}
	f.settled()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	info, err := s.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("JOBS holds %d messages, want 1", info.State.Msgs)
	}
}

// A trigger published again after the duplicate window (same source and id) finds
// its activation's job and starts nothing, even after a worker took and acked the
// job: the job is written create-only on a subject naming the activation, in a
// stream that keeps it beyond the window.
func TestTriggerRepeatedAfterDuplicateWindowMakesNoJob(t *testing.T) {
	t.Parallel()
	const window = 100 * time.Millisecond
	f := setupBus(t, bus.Config{DuplicateWindow: window}, hello)
	f.publish("skillbus.trigger.skill.hello", ce("7", "io.skillbus.invoke"), `{}`)
	f.settled()
	// A worker takes the job and acks it: the job stays in the stream all the same.
	c, err := f.b.JS.CreateOrUpdateConsumer(f.ctx, f.b.StreamJobs(), jetstream.ConsumerConfig{
		Durable: "worker-default", FilterSubject: f.b.Subjects.ExecPool("default"), AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if err := m.DoubleAck(f.ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Past JOBS' duplicate window for the job's message id, so that only the
	// create-only subject can keep a second job out: a probe with that id, on a
	// pool no one takes, is stored rather than dropped as a repeat.
	jobID := events.ExecutionID("/test", "7", "hello") + ".job"
	js, _ := jetstream.New(f.nc)
	probes := 0
	natstest.Eventually(t, 10*time.Second, func() bool {
		m := nats.NewMsg(f.b.Subjects.Exec("probe", "window", "x", events.StagePlan))
		m.Header.Set("Nats-Msg-Id", jobID)
		ack, err := js.PublishMsg(f.ctx, m)
		probes++
		return err == nil && !ack.Duplicate
	}, "JOBS still drops %s as a repeat", jobID)
	h := ce("7", "io.skillbus.invoke")
	h["Nats-Msg-Id"] = "a-retry"
	f.publish("skillbus.trigger.skill.hello", h, `{}`)
	f.settled()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamTriggers())
	if info, err := s.Info(f.ctx); err != nil || info.State.LastSeq != 2 {
		t.Fatalf("TRIGGERS has stored %v messages (%v), want 2", info.State.LastSeq, err)
	}
	s, _ = f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	info, err := s.Info(f.ctx, jetstream.WithSubjectFilter(f.b.Subjects.ExecPool("default")))
	if err != nil {
		t.Fatal(err)
	}
	var jobs uint64
	for _, n := range info.State.Subjects {
		jobs += n
	}
	if jobs != 1 {
		t.Errorf("JOBS holds %d jobs of hello, want 1 (after %d probes of the window)", jobs, probes)
	}
}

// The same event with a source that needs percent-encoding in a header gets one
// activation id whether it arrives in binary mode (encoded header) or structured
// mode (plain JSON).
func TestActivationIDUsesTheCanonicalSource(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	h := ce("8", "io.skillbus.invoke")
	h["ce-source"] = "/orders%20eu/caf%C3%A9"
	f.publish("skillbus.trigger.skill.hello", h, `{}`)
	var rd events.RouteDecided
	f.event(events.ActivationID("/orders eu/café", "8"), events.TypeRouteDecided, &rd)
	if events.CanonicalSource(rd.Trigger.Source) != "/orders eu/café" {
		t.Fatalf("trigger source %q", rd.Trigger.Source)
	}
	f.publish("skillbus.trigger.skill.hello", map[string]string{"Content-Type": "application/cloudevents+json"},
		`{"specversion":"1.0","id":"8","source":"/orders eu/café","type":"io.skillbus.invoke","data":{}}`)
	f.settled()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if info, err := s.Info(f.ctx); err != nil || info.State.LastSeq != 1 {
		t.Fatalf("JOBS stored %v messages (%v), want 1: the two encodings got two activation ids", info.State.LastSeq, err)
	}
}

// Every kind of bad trigger is terminated and recorded with its reason: a
// route.unmatched event and the raw message in the DLQ.
func TestBadTriggersAreTerminatedAndRecorded(t *testing.T) {
	t.Parallel()
	without := func(k string) map[string]string {
		h := ce("x", "com.example.greet")
		delete(h, k)
		return h
	}
	tests := []struct {
		name    string
		subject string
		headers map[string]string
		data    string
		code    string
		reason  string
	}{
		{"missing id", "skillbus.trigger.com.example.greet", without("ce-id"), `{}`, events.UnmatchedInvalid, "id"},
		{"missing source", "skillbus.trigger.com.example.greet", without("ce-source"), `{}`, events.UnmatchedInvalid, "source"},
		{"missing type", "skillbus.trigger.com.example.greet", without("ce-type"), `{}`, events.UnmatchedInvalid, "type"},
		{"missing specversion", "skillbus.trigger.com.example.greet", without("ce-specversion"), `{}`, events.UnmatchedInvalid, "specversion"},
		{"too large", "skillbus.trigger.com.example.greet", ce("x", "com.example.greet"), `{"pad":"` + strings.Repeat("x", 5000) + `"}`, events.UnmatchedTooLarge, "limit is 4096"},
		{"type cannot be a subject", "skillbus.trigger.com.example.greet", ce("x", "com.example greet!"), `{}`, events.UnmatchedBadType, "subject"},
		{"type does not match subject", "skillbus.trigger.com.example.greet", ce("x", "com.example.other"), `{}`, events.UnmatchedBadType, "does not match its subject"},
		{"unknown skill", "skillbus.trigger.skill.nosuch", ce("x", "io.skillbus.invoke"), `{}`, events.UnmatchedUnknownSkill, `"nosuch"`},
		{"data not JSON", "skillbus.trigger.com.example.greet", ce("x", "com.example.greet"), `{oops`, events.UnmatchedInvalid, "not valid JSON"},
	}
	f := setup(t, hello)
	for i, tt := range tests {
		// Distinct ids, so each rejection has its own activation.
		if _, ok := tt.headers["ce-id"]; ok {
			tt.headers["ce-id"] = fmt.Sprint("bad-", i)
		}
		f.publish(tt.subject, tt.headers, tt.data)
	}
	f.settled()
	dlq, _ := f.b.JS.Stream(f.ctx, f.b.StreamDead())
	byCode := map[string][]string{}
	natstest.Eventually(t, 10*time.Second, func() bool {
		info, err := dlq.Info(f.ctx)
		return err == nil && info.State.Msgs == uint64(len(tests))
	}, "DLQ does not hold %d rejected triggers", len(tests))
	for seq := uint64(1); seq <= uint64(len(tests)); seq++ {
		m, err := dlq.GetMsg(f.ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != "skillbus.dead._trigger" {
			t.Fatalf("DLQ subject %s", m.Subject)
		}
		byCode[m.Header.Get("Skillbus-Code")] = append(byCode[m.Header.Get("Skillbus-Code")], m.Header.Get("Skillbus-Reason"))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found := false
			for _, r := range byCode[tt.code] {
				found = found || strings.Contains(r, tt.reason)
			}
			if !found {
				t.Errorf("no DLQ entry with code %s and a reason mentioning %q; have %q", tt.code, tt.reason, byCode[tt.code])
			}
		})
	}
	// Each was also announced as route.unmatched.
	evs, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	info, err := evs.Info(f.ctx, jetstream.WithSubjectFilter("skillbus.events.*.route.unmatched"))
	if err != nil {
		t.Fatal(err)
	}
	// With a filter, Info counts each matching subject's messages (State.Msgs is
	// the whole stream's); each rejection has its own activation.
	if len(info.State.Subjects) != len(tests) {
		t.Fatalf("%d route.unmatched events, want %d", len(info.State.Subjects), len(tests))
	}
}

// A sender that publishes past the gateway cannot use skillbus's own sources,
// whose ids are predictable (a child call's is its parent's execution and step):
// taken first, such a trigger would name the child call's activation with the
// sender's data, and skillbus's own call would find its job there. A router
// takes them only on the subject only skillbus's roles publish, and records the
// sender's under the trigger's stream sequence, not the activation it names.
func TestSkillbusSourcesOnlyOnTheirOwnSubject(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	const key = "0123abcd/step-greet"
	own := events.ActivationID("/skillbus/skill-tool", key)
	forged := ce(key, "io.skillbus.invoke")
	forged["ce-source"] = "/skillbus/skill-tool"
	f.publish("skillbus.trigger.skill.hello", forged, `{"who":"sender"}`)
	var un events.RouteUnmatched
	f.event(events.ActivationID("skillbus:trigger-seq", "1"), events.TypeRouteUnmatched, &un)
	if un.Code != events.UnmatchedReservedSource || !strings.Contains(un.Reason, "skillbus.trigger.skill.*.internal") {
		t.Fatalf("forged trigger: %s: %s", un.Code, un.Reason)
	}
	// Nor is any other rejection of such a trigger recorded under that
	// activation: one whose type is not its subject's, one too large.
	f.publish("skillbus.trigger.com.example.other", forged, `{}`)
	f.event(events.ActivationID("skillbus:trigger-seq", "2"), events.TypeRouteUnmatched, &un)
	if un.Code != events.UnmatchedReservedSource {
		t.Fatalf("forged trigger on another type's subject: %s: %s", un.Code, un.Reason)
	}
	f.publish("skillbus.trigger.skill.hello", forged, `{"pad":"`+strings.Repeat("x", 5000)+`"}`)
	f.event(events.ActivationID("skillbus:trigger-seq", "3"), events.TypeRouteUnmatched, &un)
	if un.Code != events.UnmatchedTooLarge {
		t.Fatalf("forged trigger too large: %s: %s", un.Code, un.Reason)
	}
	evs, err := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := evs.Info(f.ctx, jetstream.WithSubjectFilter("skillbus.events."+own+".>")); err != nil || len(info.State.Subjects) != 0 {
		t.Fatalf("events recorded under the child call's activation: %v (%v), want none", info.State.Subjects, err)
	}
	// skillbus's own call, on its own subject, runs with its own data.
	f.publish("skillbus.trigger.skill.hello.internal", forged, `{"who":"parent"}`)
	var d events.RouteDecided
	f.event(own, events.TypeRouteDecided, &d)
	if d.Plan.Primary.Name != "hello" || d.Plan.Primary.ExecutionID != events.ExecutionID("/skillbus/skill-tool", key, "hello") {
		t.Fatalf("plan = %+v", d.Plan)
	}
	if j := f.job("skillbus.exec.default.hello"); string(j.Inputs) != `{"who":"parent"}` || j.ActivationID != own {
		t.Fatalf("job = %+v", j)
	}
}

// A skill invoked by name whose files never validated is reported as invalid_skill
// with its errors, not as unknown.
func TestInvalidSkillInvokedByName(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken", "SKILL.md"), []byte("---\nname: broken\n---\nno description\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Config{Bus: f.b, Roots: []string{dir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	f.publish("skillbus.trigger.skill.broken", ce("inv", "io.skillbus.invoke"), `{}`)
	var un events.RouteUnmatched
	f.event(events.ActivationID("/test", "inv"), events.TypeRouteUnmatched, &un)
	if un.Code != events.UnmatchedInvalidSkill || !strings.Contains(un.Reason, "SKILL.md") || !strings.Contains(un.Reason, "description") {
		t.Fatalf("unmatched %s: %s", un.Code, un.Reason)
	}
}

// The decision travels in the plan's jobs; it is an event of its own in EVENTS only
// at the full events level. Either way Bus.Decision reads the same plan.
func TestDecisionIsAnEventOnlyAtTheFullLevel(t *testing.T) {
	t.Parallel()
	for _, level := range []events.Level{events.LevelSteps, events.LevelFull} {
		t.Run(string(level), func(t *testing.T) {
			t.Parallel()
			f := setupFull(t, bus.Config{}, func(c *router.Config) { c.Events = level }, hello)
			f.publish("skillbus.trigger.skill.hello", ce("lv", "io.skillbus.invoke"), `{}`)
			act := events.ActivationID("/test", "lv")
			var rd events.RouteDecided
			f.event(act, events.TypeRouteDecided, &rd)
			if rd.Plan.Primary.Name != "hello" || rd.ActivationID != act || len(rd.Candidates) != 1 {
				t.Fatalf("decision = %+v", rd)
			}
			f.settled()
			s, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
			_, err := s.GetLastMsgForSubject(f.ctx, f.b.Subjects.Event(act, events.TypeRouteDecided))
			if persisted := err == nil; persisted != (level == events.LevelFull) {
				t.Fatalf("level %s: route.decided in EVENTS = %v (%v)", level, persisted, err)
			}
		})
	}
}

// A trigger that may have been routed before — here one stored while no router ran,
// re-sent after the duplicate window — and that the changed catalog would now route
// to another skill starts nothing: the router reads the first decision before
// publishing, since the create-only job of another skill would not collide.
func TestTriggerRoutedBeforeToAnotherSkillMakesNoJob(t *testing.T) {
	t.Parallel()
	const window = 100 * time.Millisecond
	f := setupBus(t, bus.Config{DuplicateWindow: window}, hello)
	f.publish("skillbus.trigger.com.example.greet", ce("moved", "com.example.greet"), `{}`)
	f.settled()
	f.job("skillbus.exec.default.hello")
	f.r.Stop(f.ctx)

	hola := *hello
	hola.Name, hola.Digest = "hola", "0123456789abcdef"
	if err := f.kv.Delete(f.ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	f.putSkill(&hola)
	if err := f.cat.Wait(f.ctx, func(c *catalog.Catalog) bool {
		_, gone := c.Get("hello")
		_, here := c.Get("hola")
		return !gone && here
	}); err != nil {
		t.Fatal(err)
	}
	// The retry has an id of its own (no window to wait out), and hola's job
	// another execution's: only the job of hello's activation can keep it out.
	h := ce("moved", "com.example.greet")
	h["Nats-Msg-Id"] = "a-retry"
	f.publish("skillbus.trigger.com.example.greet", h, `{}`)

	r, err := router.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Stop(context.Background()) })
	f.settled()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	info, err := s.Info(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.LastSeq != 1 {
		t.Fatalf("JOBS stored %d jobs, want the first one only", info.State.LastSeq)
	}
}

// planJob waits for the job of activation act's primary and returns it.
func (f *fixture) planJob(act string) events.Job {
	f.t.Helper()
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	var raw *jetstream.RawStreamMsg
	var err error
	natstest.Eventually(f.t, 10*time.Second, func() bool {
		raw, err = s.GetLastMsgForSubject(f.ctx, f.b.Subjects.PlanJobs(act))
		return err == nil
	}, "no job for activation %s: %v", act, err)
	e, err := bus.Decode(bus.FromNATS(&nats.Msg{Header: raw.Header, Data: raw.Data}))
	if err != nil {
		f.t.Fatal(err)
	}
	var j events.Job
	if err := json.Unmarshal(e.Data(), &j); err != nil {
		f.t.Fatal(err)
	}
	return j
}

// The delegation depth of a trigger's jobs comes from the job chain the router
// wrote: a sender's claim of a depth (the skilldepth extension earlier versions
// trusted) is ignored, and a trigger naming a parent is one level below it.
func TestDelegationDepthComesFromTheParentJob(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	with := func(id string, ext map[string]string) map[string]string {
		h := ce(id, "io.skillbus.invoke")
		for k, v := range ext {
			h["ce-"+k] = v
		}
		return h
	}
	f.publish("skillbus.trigger.skill.hello", with("root", map[string]string{"skilldepth": "-20"}), `{}`)
	root := events.ActivationID("/test", "root")
	if d := f.planJob(root).Depth; d != 0 {
		t.Fatalf("a trigger saying skilldepth -20 got depth %d, want 0", d)
	}
	parent := root
	for want := 1; want <= 3; want++ {
		id := fmt.Sprintf("child%d", want)
		f.publish("skillbus.trigger.skill.hello", with(id, map[string]string{events.ExtParent: parent, "skilldepth": "-20"}), `{}`)
		act := events.ActivationID("/test", id)
		if d := f.planJob(act).Depth; d != want {
			t.Fatalf("child %d levels below the root got depth %d", want, d)
		}
		parent = act
	}

	// A parent with no job is refused, with the reason.
	f.publish("skillbus.trigger.skill.hello", with("orphan", map[string]string{events.ExtParent: "nosuchactivation"}), `{}`)
	var u events.RouteUnmatched
	f.event(events.ActivationID("/test", "orphan"), events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedInvalid || !strings.Contains(u.Reason, "nosuchactivation") {
		t.Fatalf("orphan: %+v", u)
	}
}

// A trigger over the size limit is rejected under its own activation id, so
// whoever waits for it (trigger --wait, a Go client, the gateway's ?wait) gets
// route.unmatched with too_large instead of waiting out its timeout.
func TestTooLargeTriggerAnswersItsWaiter(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	act := events.ActivationID("/test", "big")
	wait := make(chan *client.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
		defer cancel()
		res, err := client.New(f.b).Follow(ctx, act, nil)
		if err != nil {
			t.Errorf("the waiter got no answer: %v", err)
		}
		wait <- res
	}()
	f.publish("skillbus.trigger.skill.hello", ce("big", "io.skillbus.invoke"), `{"text":"`+strings.Repeat("x", 5000)+`"}`)
	var u events.RouteUnmatched
	f.event(act, events.TypeRouteUnmatched, &u)
	if u.Code != events.UnmatchedTooLarge || !strings.Contains(u.Reason, "the limit is 4096") || u.Trigger.ID != "big" {
		t.Fatalf("%+v", u)
	}
	if res := <-wait; res == nil || res.Unmatched == nil || res.Unmatched.Code != events.UnmatchedTooLarge {
		t.Fatalf("the waiter got %+v", res)
	}
}

// A trigger whose jobs cannot be written (here the JOBS stream refuses new
// messages, as a full store does) is retried with backoff for as long as it takes
// — well past the 10 deliveries after which it used to be dropped without a
// trace — and routed once the store takes writes again.
func TestTriggerIsRetriedUntilTheStoreTakesItsJobs(t *testing.T) {
	t.Parallel()
	f := setupWith(t, func(c *router.Config) { c.RetryBase, c.RetryMax = 5*time.Millisecond, 20*time.Millisecond }, hello)
	jobs, err := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	if err != nil {
		t.Fatal(err)
	}
	full := jobs.CachedInfo().Config
	open := full
	full.MaxMsgs, full.Discard = 1, jetstream.DiscardNew
	if _, err := f.b.JS.PublishMsg(f.ctx, &nats.Msg{Subject: "skillbus.exec.default.filler.x.job", Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.JS.UpdateStream(f.ctx, full); err != nil {
		t.Fatal(err)
	}
	f.publish("skillbus.trigger.skill.hello", ce("stuck", "io.skillbus.invoke"), `{}`)
	c, err := f.b.JS.Consumer(f.ctx, f.b.StreamTriggers(), "router")
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 20*time.Second, func() bool {
		info, err = c.Info(f.ctx)
		return err == nil && info.Delivered.Consumer > 15
	}, "the trigger was not retried past 15 deliveries: %+v", info)
	if info.NumAckPending+int(info.NumPending) == 0 {
		t.Fatalf("the trigger was given up: %+v", info)
	}
	if _, err := f.b.JS.UpdateStream(f.ctx, open); err != nil {
		t.Fatal(err)
	}
	if j := f.planJob(events.ActivationID("/test", "stuck")); j.Skill.Name != "hello" {
		t.Fatalf("job %+v", j)
	}
	f.settled()
}
