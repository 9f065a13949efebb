package router

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

// staticCatalog is a catalog that never changes.
type staticCatalog []*skill.Skill

func (c staticCatalog) All() []*skill.Skill { return c }
func (staticCatalog) Revision() uint64      { return 1 }

// stubMsg is a delivery of a trigger, by default its first, stored after the router
// started; acking it does nothing.
type stubMsg struct {
	subject string
	header  nats.Header
	data    []byte
	md      jetstream.MsgMetadata
}

func (m *stubMsg) Metadata() (*jetstream.MsgMetadata, error) { return &m.md, nil }
func (m *stubMsg) Data() []byte                              { return m.data }
func (m *stubMsg) Headers() nats.Header                      { return m.header }
func (m *stubMsg) Subject() string                           { return m.subject }
func (m *stubMsg) Reply() string                             { return "" }
func (m *stubMsg) Ack() error                                { return nil }
func (m *stubMsg) DoubleAck(context.Context) error           { return nil }
func (m *stubMsg) Nak() error                                { return nil }
func (m *stubMsg) NakWithDelay(time.Duration) error          { return nil }
func (m *stubMsg) InProgress() error                         { return nil }
func (m *stubMsg) Term() error                               { return nil }
func (m *stubMsg) TermWithReason(string) error               { return nil }

// benchRouter is a started router over skills, on a fresh embedded server.
func benchRouter(b *testing.B, skills ...*skill.Skill) *Router {
	b.Helper()
	srv := natstest.Start(b)
	bs := srv.Bus(b, bus.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b.Cleanup(cancel)
	r, err := New(Config{Bus: bs, Catalog: staticCatalog(skills), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Stop(context.Background()) })
	return r
}

// benchRoute routes b.N distinct triggers of type typ, each to its job, through
// route itself: decoding, deciding, building the job and publishing it.
func benchRoute(b *testing.B, r *Router, typ, data string) {
	ctx := context.Background()
	m := &stubMsg{
		subject: r.cfg.Bus.Subjects.Trigger(typ),
		header: nats.Header{
			"ce-specversion": {"1.0"}, "ce-source": {"/bench"}, "ce-type": {typ},
			"Content-Type": {"application/json"},
		},
		data: []byte(data),
	}
	m.md.NumDelivered = 1
	m.md.Sequence.Stream = 1 << 40 // stored after the router started: a first delivery reads nothing
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.header["ce-id"] = ids[i : i+1]
		if _, err := r.route(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoute is the router's hot path for a trigger one skill's rule matches:
// one job published and acknowledged per trigger.
func BenchmarkRoute(b *testing.B) {
	s := &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"}}
	benchRoute(b, benchRouter(b, s), "com.example.greet", `{"name":"Ada","n":3}`)
}

// BenchmarkRouteFiltered is BenchmarkRoute for a skill with a filter, which holds:
// the difference is the filter's cost per trigger.
func BenchmarkRouteFiltered(b *testing.B) {
	s := &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"},
		Filter: `data.n > 2 && data.name.startsWith("A")`}
	benchRoute(b, benchRouter(b, s), "com.example.greet", `{"name":"Ada","n":3}`)
}

// BenchmarkRouteRateLimited is BenchmarkRoute for a skill with a rate limit each
// trigger passes: the difference is counting it (two reads and a write).
func BenchmarkRouteRateLimited(b *testing.B) {
	s := &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Digest: "abcdef0123456789", Triggers: []string{"com.example.greet"},
		RateLimit: &skill.RateLimit{Key: "data.name", Limit: 1 << 30, Period: skill.Duration(24 * time.Hour)}}
	benchRoute(b, benchRouter(b, s), "com.example.greet", `{"name":"Ada","n":3}`)
}

// BenchmarkDecide is the router's work on a trigger short of publishing: parse,
// select (with the skills' flow control, as selectFor runs it) and plan; no
// server. plain/filter is the cost a filter adds per trigger.
func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct{ name, filter string }{
		{"plain", ""},
		{"filter", `data.n > 2 && data.name.startsWith("A")`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := &skill.Skill{Name: "hello", Description: "greets", Kind: skill.KindWorkflow, Digest: "abcdef0123456789",
				Triggers: []string{"com.example.greet"}, Filter: bc.filter}
			skills := []*skill.Skill{s}
			sel := selector.New(selector.Config{})
			sel.Sync(skills)
			flows := compileFlows(skills, nil)
			m := stub("skillbus.trigger.com.example.greet", ceHeaders("1", "com.example.greet"), `{"name":"Ada","n":3}`)
			ctx := context.Background()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				var t trigger
				if o := parse(ctx, m, testParse, &t); o != nil {
					b.Fatal(o)
				}
				env := selector.Env{}
				if len(flows) > 0 {
					env.Admit = admit(&t, flows)
				}
				d, err := sel.Select(t.req, env)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := plan(d, &t, testSubjects, sel.Get).(*routed); !ok {
					b.Fatal("not routed")
				}
			}
			// The process's CPU time per trigger, which waiting for a core on a busy
			// machine does not inflate as it does ns/op.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
