package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/otlptest"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// TestRepairTrace follows one execution through an automatic repair with tracing
// on: the failed delivery asks for the repair in its trace (a PRODUCER span the
// repair worker's span continues) and settles with an ack span; the job released
// after the repair runs in a trace of its own, the decision's, whose PRODUCER span
// and delivery link to the failed execution instead of continuing its trace.
func TestRepairTrace(t *testing.T) {
	f := setup(t, map[string]string{"traced-title": fmt.Sprintf(brokenSkill, "traced-title", "\nrepair: auto")})
	rcv := otlptest.Start(t)
	env := map[string]string{}
	for _, kv := range rcv.Env("skillbus-test") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	tel, err := telemetry.Setup(f.ctx, telemetry.Config{Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	id := f.run("traced-title", 1)[0]

	var spans []otlptest.Span
	var first, released otlptest.Span
	rcv.Wait(t, 30*time.Second, "both deliveries' spans and the release's", func(all []otlptest.Span) bool {
		spans = all
		first, released = otlptest.Span{}, otlptest.Span{}
		for _, s := range all {
			if s.Name == "process skillbus.exec.default.traced-title.{activation}.{stage}" && s.Attrs["skillbus.execution.id"] == id {
				if s.Attrs["skillbus.recovered"] == true {
					released = s
				} else {
					first = s
				}
			}
		}
		return first.SpanID != "" && released.SpanID != "" && count(all, "publish skillbus.exec.{pool}.{skill}.{activation}.{stage}") == 1
	})
	defer func() {
		if t.Failed() {
			t.Logf("spans:\n%s", otlptest.Tree(spans))
		}
	}()
	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}

	// The failed delivery asks the repair service to park it; the service's
	// handling of that asks for the repair.
	park := only(t, spans, "publish skillbus.repair.{skill}.parked")
	otlptest.AssertChild(t, first, park)
	parked := only(t, spans, "process skillbus.repair.traced-title.parked")
	otlptest.AssertChild(t, park, parked)
	ask := only(t, spans, "publish skillbus.repair.{skill}")
	otlptest.AssertChild(t, parked, ask)
	if ask.Kind != 4 /* PRODUCER */ || ask.Attrs["messaging.system"] != "nats" || ask.Attrs["messaging.destination.name"] != "skillbus.repair.traced-title" ||
		ask.Attrs["messaging.operation.type"] != "send" || ask.Attrs["messaging.message.id"] == nil {
		t.Errorf("the repair job's span: %s %v", ask, ask.Attrs)
	}
	var diagnosed bool
	for _, s := range spans {
		if s.Name == "process skillbus.repair.traced-title" && s.ParentSpanID == ask.SpanID {
			diagnosed = true
		}
	}
	if !diagnosed {
		t.Errorf("no repair worker's span continues the repair job's %s", ask)
	}

	// The release: a new trace, linked to the failed execution's.
	rel := byID[released.ParentSpanID]
	if rel.Name != "publish skillbus.exec.{pool}.{skill}.{activation}.{stage}" || rel.Kind != 4 || rel.Attrs["messaging.message.id"] == nil || !strings.HasPrefix(rel.Attrs["messaging.destination.name"].(string), "skillbus.exec.default.traced-title.") {
		t.Fatalf("the released job's parent is not the release's PRODUCER span: %s %v", rel, rel.Attrs)
	}
	if rel.TraceID == first.TraceID || released.TraceID == first.TraceID {
		t.Errorf("the released job continues the failed execution's trace %s", first.TraceID)
	}
	if l := otlptest.AssertLinked(t, rel, first); l.Attrs["skillbus.link.reason"] != "repair" {
		t.Errorf("the release's link: %v", l.Attrs)
	}
	if l := otlptest.AssertLinked(t, released, first); l.Attrs["skillbus.link.reason"] != "repair" {
		t.Errorf("the released delivery's link: %v", l.Attrs)
	}
}

func count(spans []otlptest.Span, name string) int {
	n := 0
	for _, s := range spans {
		if s.Name == name {
			n++
		}
	}
	return n
}

func only(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	if n := count(spans, name); n != 1 {
		t.Fatalf("%d spans %q, want 1", n, name)
	}
	s, _ := otlptest.Find(spans, name)
	return s
}
