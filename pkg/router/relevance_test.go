package router_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/embedrecall"
	"github.com/skillbus/skillbus/pkg/llmrecall"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/stats"
	"github.com/skillbus/skillbus/pkg/tool/llm"
	"github.com/skillbus/skillbus/pkg/tool/llm/llmtest"
)

var (
	pdf = &skill.Skill{Name: "pdf-summarizer", Version: "1.0.0", Description: "Summarize PDF documents into key points.",
		Tags: []string{"pdf", "summary"}, Kind: skill.KindInstruction, Digest: "p1"}
	forecast = &skill.Skill{Name: "forecast", Version: "1.0.0", Description: "Weather forecast and storm warnings for a city.",
		Kind: skill.KindInstruction, Digest: "f1", ParallelSafe: true, CostHint: "low"}
	warnings = &skill.Skill{Name: "storm-warnings", Version: "1.0.0", Description: "Storm warnings and weather forecast for a city.",
		Kind: skill.KindInstruction, Digest: "w1", ParallelSafe: true, CostHint: "low", Pool: "alerts"}
)

func (f *fixture) heartbeat(name string, pools ...string) {
	f.t.Helper()
	kv, err := f.b.KV(f.ctx, f.b.BucketWorkers())
	if err != nil {
		f.t.Fatal(err)
	}
	if len(pools) == 0 {
		if err := kv.Delete(f.ctx, name); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	v, _ := json.Marshal(map[string]any{"name": name, "pools": pools})
	if _, err := kv.Put(f.ctx, name, v); err != nil {
		f.t.Fatal(err)
	}
}

// terminal publishes what a worker publishes when an execution ends.
// results writes terminal results of a skill version to the stats bucket, as a
// worker that published them does.
func (f *fixture) results(skillName string, ok ...bool) {
	f.t.Helper()
	kv, err := f.b.KV(f.ctx, f.b.BucketStats())
	if err != nil {
		f.t.Fatal(err)
	}
	r := stats.NewRecorder(kv, nil)
	for _, o := range ok {
		r.Add(skillName, "1.0.0", o)
	}
	if err := r.Flush(f.ctx); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) ask(text string) *selector.Decision {
	f.t.Helper()
	body, _ := json.Marshal(events.RouteRequest{Data: json.RawMessage(`{"query":` + string(mustJSON(text)) + `}`)})
	msg, err := f.nc.Request(events.Subjects{Prefix: "skillbus"}.Router(events.RouterEndpointRoute), body, 5*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		f.t.Fatalf("router service: %s %s", code, msg.Header.Get(micro.ErrorHeader))
	}
	var d selector.Decision
	if err := json.Unmarshal(msg.Data, &d); err != nil {
		f.t.Fatal(err)
	}
	return &d
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func TestTextRequestsAreRoutedByRelevance(t *testing.T) {
	t.Parallel()
	f := setup(t, hello, pdf, forecast)
	f.heartbeat("w1", "default")
	natstest.Eventually(t, 10*time.Second, func() bool {
		c := f.ask("summarize this pdf").Candidate("pdf-summarizer")
		return c != nil && c.Components.Available
	}, "the router never saw the worker's heartbeat")

	f.publish("skillbus.trigger.io.skillbus.request", ce("t1", "io.skillbus.request"), `{"text":"please summarise the attached PDF"}`)
	var rd events.RouteDecided
	f.event(events.ActivationID("/test", "t1"), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "pdf-summarizer" || rd.Plan.Primary.Source != selector.SourceLexical || rd.Threshold != selector.DefaultThreshold {
		t.Fatalf("plan = %+v", rd.Plan)
	}
	if len(rd.Candidates) == 0 || rd.Candidates[0].Name != "pdf-summarizer" || !rd.Candidates[0].Selected || rd.Candidates[0].Reason == "" {
		t.Fatalf("candidates = %+v", rd.Candidates)
	}
	if j := f.job("skillbus.exec.default.pdf-summarizer"); string(j.Inputs) != `{"text":"please summarise the attached PDF"}` {
		t.Fatalf("job inputs = %s", j.Inputs)
	}

	// Off-topic text: recorded as unmatched, with the best candidates.
	f.publish("skillbus.trigger.io.skillbus.request", ce("t2", "io.skillbus.request"), `{"text":"summary of the football match"}`)
	var ru events.RouteUnmatched
	f.event(events.ActivationID("/test", "t2"), events.TypeRouteUnmatched, &ru)
	if ru.Code != events.UnmatchedNoSkill || len(ru.Candidates) == 0 || ru.Threshold != selector.DefaultThreshold {
		t.Fatalf("unmatched = %+v", ru)
	}

	// Success rate comes from the terminal results of the skill version.
	before := f.ask("summarize this pdf").Candidate("pdf-summarizer").Components.Success
	f.results("pdf-summarizer", true, true)
	f.results("pdf-summarizer", true) // another worker's
	natstest.Eventually(t, 10*time.Second, func() bool {
		return f.ask("summarize this pdf").Candidate("pdf-summarizer").Components.Success == 0.8
	}, "success rate did not follow results (before %v)", before)
	if before != 0.5 {
		t.Fatalf("prior = %v, want 0.5", before)
	}

	// No live worker in the pool: availability halves the score.
	f.heartbeat("w1")
	natstest.Eventually(t, 10*time.Second, func() bool {
		d := f.ask("summarize this pdf")
		c := d.Candidate("pdf-summarizer")
		return c != nil && !c.Components.Available && d.Primary == ""
	}, "availability did not follow heartbeats")
	f.settled()
}

func TestParallelGroupRunsAsConcurrentJobs(t *testing.T) {
	t.Parallel()
	f := setup(t, forecast, warnings)
	f.heartbeat("w1", "default", "alerts")
	natstest.Eventually(t, 10*time.Second, func() bool {
		return len(f.ask("weather forecast storm warnings city").Running()) == 2
	}, "the router never saw the worker's heartbeat")

	f.publish("skillbus.trigger.io.skillbus.request", ce("p1", "io.skillbus.request"), `{"query":"weather forecast and storm warnings for my city"}`)
	act := events.ActivationID("/test", "p1")
	var rd events.RouteDecided
	f.event(act, events.TypeRouteDecided, &rd)
	if len(rd.Plan.ParallelGroups) != 1 || len(rd.Plan.ParallelGroups[0]) != 2 {
		t.Fatalf("plan = %+v", rd.Plan)
	}
	j1 := f.job("skillbus.exec.default.forecast")
	j2 := f.job("skillbus.exec.alerts.storm-warnings")
	if j1.ActivationID != act || j2.ActivationID != act || len(j2.Fallback) != 0 {
		t.Fatalf("jobs = %+v / %+v", j1, j2)
	}
	// Each job names the executions that can end each of the plan's jobs: whichever
	// worker ends the last publishes activation.completed (see the worker's tests).
	// The primary's job (either skill may rank first) comes first, with its fallbacks.
	first, second := j1, j2
	if rd.Plan.Primary.Name == "storm-warnings" {
		first, second = j2, j1
	}
	want := [][]string{{first.ExecutionID}, {second.ExecutionID}}
	for _, f := range rd.Plan.FallbackChain {
		want[0] = append(want[0], f.ExecutionID)
	}
	if !reflect.DeepEqual(j1.Together, want) || !reflect.DeepEqual(j2.Together, want) {
		t.Fatalf("together = %v / %v, want %v", j1.Together, j2.Together, want)
	}
}

func TestRecallSourcesHelpAndDegrade(t *testing.T) {
	t.Parallel()
	invoice := &skill.Skill{Name: "invoice-generator", Version: "1.0.0", Description: "Generate an invoice for a customer.", Kind: skill.KindInstruction, Digest: "i1"}
	// A chat model that knows "bill the client" means invoicing; an embeddings
	// endpoint that fails; a chat model that never answers.
	good := llmtest.New(t, func(*llmtest.Request) llmtest.Reply {
		return llmtest.Text(`{"matched_skills": [{"name": "invoice-generator", "description": "..."}]}`)
	})
	slow := llmtest.New(t, func(*llmtest.Request) llmtest.Reply { return llmtest.Reply{Wait: true} })
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	recallers := func(t *testing.T, chat *llmtest.Server) []router.Recaller {
		c, err := llm.New(chat.Config("m"))
		if err != nil {
			t.Fatal(err)
		}
		lr, _ := llmrecall.New(llmrecall.Config{Chat: c})
		er, err := embedrecall.New(embedrecall.Config{URL: failing.URL + "/v1", Model: "e", Client: failing.Client()})
		if err != nil {
			t.Fatal(err)
		}
		return []router.Recaller{lr, er}
	}
	f := setupWith(t, func(c *router.Config) { c.Recallers = recallers(t, good); c.RecallTimeout = 5 * time.Second }, invoice, pdf)
	f.heartbeat("w1", "default")
	natstest.Eventually(t, 10*time.Second, func() bool {
		return f.ask("bill acme for ten hours").Primary == "invoice-generator"
	}, "the model's recall did not route the request")
	c := f.ask("bill acme for ten hours").Candidate("invoice-generator")
	if c.Source != selector.SourceLLM || c.Components.Intent != 0.9 {
		t.Fatalf("candidate = %+v", c)
	}

	// A slow model and a failing embedder: the trigger is routed by the keyword index.
	g := setupWith(t, func(c *router.Config) { c.Recallers = recallers(t, slow); c.RecallTimeout = 100 * time.Millisecond }, invoice, pdf)
	g.heartbeat("w1", "default")
	g.publish("skillbus.trigger.io.skillbus.request", ce("s1", "io.skillbus.request"), `{"text":"summarize this pdf"}`)
	var rd events.RouteDecided
	g.event(events.ActivationID("/test", "s1"), events.TypeRouteDecided, &rd)
	if rd.Plan.Primary.Name != "pdf-summarizer" {
		t.Fatalf("plan = %+v", rd.Plan)
	}
}

// The route service shapes text alone (the console's route form) as the request
// a client sends, {"query": text}, so it answers as the router routes that
// trigger: a skill whose inputs refuse the data is kept out, and says why.
func TestRouteServiceShapesTextAsARequest(t *testing.T) {
	t.Parallel()
	greet := &skill.Skill{Name: "greeter", Version: "1.0.0", Description: "Greets a person by name, warmly.", Kind: skill.KindWorkflow, Digest: "g1",
		Workflow: &skill.Workflow{Inputs: []skill.Input{{Name: "name", Default: "world"}}}}
	f := setup(t, greet, pdf)
	ask := func(rr events.RouteRequest) *selector.Decision {
		body, _ := json.Marshal(rr)
		msg, err := f.nc.Request(events.Subjects{Prefix: "skillbus"}.Router(events.RouterEndpointRoute), body, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var d selector.Decision
		if err := json.Unmarshal(msg.Data, &d); err != nil {
			t.Fatal(err)
		}
		return &d
	}
	f.heartbeat("w1", "default")
	var d *selector.Decision
	natstest.Eventually(t, 10*time.Second, func() bool {
		d = ask(events.RouteRequest{Text: "greets a person by name warmly"})
		c := d.Candidate("greeter")
		return c != nil && c.Components.Available
	}, "the router never saw the greeter and the worker")
	if c := d.KeptOut(); d.Primary != "" || c == nil || !strings.Contains(c.Reason, "its inputs (name) do not take the field query") {
		t.Fatalf("text alone: primary %q, kept out %+v", d.Primary, c)
	}
	// With data that fits, it is chosen.
	if d = ask(events.RouteRequest{Text: "greets a person by name warmly", Data: json.RawMessage(`{"name":"Ada"}`)}); d.Primary != "greeter" {
		t.Fatalf("with data: %+v", d)
	}
}
