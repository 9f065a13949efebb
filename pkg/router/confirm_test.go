package router_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/internal/telemetrytest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/run"
)

// pause writes what a worker leaves behind when a step needs confirmation.
func (f *fixture) pause(execID, step string) {
	f.t.Helper()
	job, _ := json.Marshal(events.Job{ExecutionID: execID, ActivationID: "act-" + execID, Skill: events.SkillRef{Name: "hello", Pool: "default", ExecutionID: execID}, Inputs: json.RawMessage(`{}`)})
	p, _ := json.Marshal(run.Paused{ExecutionID: execID, Step: "deploy", Subject: "skillbus.exec.default.hello", Job: job, TimeoutAt: time.Now().Add(time.Hour)})
	runs, _ := f.b.KV(f.ctx, f.b.BucketRuns())
	if _, err := runs.Put(f.ctx, events.RunPausedKey(execID), p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) answer(execID, step string, a events.Answer, opts ...jetstream.PublishOpt) {
	f.t.Helper()
	subject := f.b.Subjects.Event(execID, events.TypeConfirmationRecorded)
	if len(opts) > 0 {
		subject = f.b.Subjects.ConfirmationTimeout(execID, step)
	}
	m, err := bus.Event{ID: execID + ".answer." + a.By, Source: "/test", Type: events.TypeConfirmationRecorded,
		Data: events.ConfirmationRecorded{ExecutionID: execID, StepID: step, Answer: a}}.Msg(subject)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(opts) > 0 {
		opts = append(opts, jetstream.WithScheduleTarget(f.b.Subjects.Event(execID, events.TypeConfirmationRecorded)))
	}
	if _, err := f.b.JS.PublishMsg(f.ctx, m, opts...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) pausedGone(execID string) bool {
	runs, _ := f.b.KV(f.ctx, f.b.BucketRuns())
	p, _, err := run.LoadPaused(f.ctx, runs, execID)
	return err == nil && p == nil
}

func TestAnswerResumesThePausedJob(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	f.pause("exec1", "deploy")
	// A pending timeout, to be cancelled by the human's answer.
	f.answer("exec1", "deploy", events.Answer{By: "timeout"}, jetstream.WithScheduleAt(time.Now().Add(time.Hour)))
	f.answer("exec1", "other-step", events.Answer{Approved: true, By: "stale"})
	f.answer("exec1", "deploy", events.Answer{Approved: true, By: "ada"})
	j := f.job("skillbus.exec.default.hello")
	if a := j.Answers["deploy"]; !a.Approved || a.By != "ada" || len(j.Answers) != 1 {
		t.Fatalf("answers = %+v", j.Answers)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.pausedGone("exec1") }, "paused record left")
	evs, _ := f.b.JS.Stream(f.ctx, f.b.StreamEvents())
	natstest.Eventually(t, 10*time.Second, func() bool {
		_, err := evs.GetLastMsgForSubject(f.ctx, f.b.Subjects.ConfirmationTimeout("exec1", "deploy"))
		return err != nil
	}, "the pending timeout was not cancelled")
}

func TestUnansweredConfirmationIsDeniedAtItsDeadline(t *testing.T) {
	t.Parallel()
	f := setup(t, hello)
	f.pause("exec2", "deploy")
	f.answer("exec2", "deploy", events.Answer{By: "timeout", Reason: "no answer within 1s"}, jetstream.WithScheduleAt(time.Now().Add(time.Second)))
	j := f.job("skillbus.exec.default.hello")
	if a := j.Answers["deploy"]; a.Approved || a.By != "timeout" {
		t.Fatalf("answers = %+v", j.Answers)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.pausedGone("exec2") }, "paused record left")
}

// A confirmation answered later resumes the job under a span of its own that links
// to the paused execution's span instead of continuing it (that span ended when the
// execution paused); the resumed job carries the router's publish span.
func TestResumedConfirmationLinksThePausedSpan(t *testing.T) {
	rec := telemetrytest.Record(t)
	f := setup(t, hello)
	const paused = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	job, _ := json.Marshal(events.Job{ExecutionID: "exec3", Skill: events.SkillRef{Name: "hello", Pool: "default", ExecutionID: "exec3"}, Inputs: json.RawMessage(`{}`)})
	p, _ := json.Marshal(run.Paused{ExecutionID: "exec3", Step: "deploy", Subject: "skillbus.exec.default.hello", Job: job,
		Meta: map[string]string{events.ExtTraceParent: paused}, TimeoutAt: time.Now().Add(time.Hour)})
	runs, _ := f.b.KV(f.ctx, f.b.BucketRuns())
	if _, err := runs.Put(f.ctx, events.RunPausedKey("exec3"), p); err != nil {
		t.Fatal(err)
	}
	f.answer("exec3", "deploy", events.Answer{Approved: true, By: "ada"})
	f.job("skillbus.exec.default.hello")

	var answer, pub tracetest.SpanStub
	natstest.Eventually(t, 10*time.Second, func() bool {
		for _, s := range rec.Spans() {
			switch {
			case s.Name == "process skillbus.events.exec3.confirmation.recorded":
				answer = s
			case s.Name == "publish skillbus.exec.{pool}.{skill}.{activation}.{stage}" && hasAttr(s.Attributes, "skillbus.execution.id", "exec3"):
				pub = s
			}
		}
		return answer.Name != "" && pub.Name != ""
	}, "no spans of the answer and the resumed job")
	if answer.Parent.IsValid() && answer.Parent.SpanID().String() == "00f067aa0ba902b7" {
		t.Error("the answer's span continues the paused execution's span")
	}
	if len(answer.Links) != 1 || answer.Links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" ||
		answer.Links[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !hasAttr(answer.Links[0].Attributes, "skillbus.link.reason", "resumed") {
		t.Fatalf("the answer's span links %+v, want one to the paused span, reason resumed", answer.Links)
	}
	if pub.Parent.SpanID() != answer.SpanContext.SpanID() || pub.SpanKind != trace.SpanKindProducer {
		t.Errorf("the resumed job's publish span (kind %v, parent %s) is not a PRODUCER child of the answer's %s", pub.SpanKind, pub.Parent.SpanID(), answer.SpanContext.SpanID())
	}
	s, _ := f.b.JS.Stream(f.ctx, f.b.StreamJobs())
	raw, err := s.GetLastMsgForSubject(f.ctx, "skillbus.exec.default.hello.*.*")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := bus.DecodeFast(bus.MsgOf(raw.Subject, raw.Header, raw.Data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stored.Meta().TraceParent, "00-"+pub.SpanContext.TraceID().String()+"-"+pub.SpanContext.SpanID().String()+"-01"; got != want {
		t.Errorf("the resumed job's traceparent is %s, want the publish span's %s", got, want)
	}
}

func hasAttr(kvs []attribute.KeyValue, key, value string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == key && kv.Value.Emit() == value {
			return true
		}
	}
	return false
}

// An answer whose resumed job cannot be written (JOBS refuses new messages, as a
// full store does) is retried with backoff well past the 10 deliveries after which
// it used to be dropped, and resumes the run once the store takes writes again.
func TestAnswerIsRetriedUntilTheStoreTakesTheResumedJob(t *testing.T) {
	t.Parallel()
	f := setupWith(t, func(c *router.Config) { c.RetryBase, c.RetryMax = 5*time.Millisecond, 20*time.Millisecond }, hello)
	f.pause("exec-full", "deploy")
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
	f.answer("exec-full", "deploy", events.Answer{Approved: true, By: "ada"})
	c, err := f.b.JS.Consumer(f.ctx, f.b.StreamEvents(), "router-confirmations")
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.ConsumerInfo
	natstest.Eventually(t, 20*time.Second, func() bool {
		info, err = c.Info(f.ctx)
		return err == nil && info.Delivered.Consumer > 15
	}, "the answer was not retried past 15 deliveries: %+v", info)
	if info.NumAckPending+int(info.NumPending) == 0 || f.pausedGone("exec-full") {
		t.Fatalf("the answer was given up: %+v", info)
	}
	if _, err := f.b.JS.UpdateStream(f.ctx, open); err != nil {
		t.Fatal(err)
	}
	j := f.job("skillbus.exec.default.hello")
	if a := j.Answers["deploy"]; !a.Approved || a.By != "ada" {
		t.Fatalf("answers = %+v", j.Answers)
	}
	natstest.Eventually(t, 10*time.Second, func() bool { return f.pausedGone("exec-full") }, "paused record left")
}
