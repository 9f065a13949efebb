package router

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/selector"
)

// live is what the router learns from the running system, without adding anything
// to the execution path: terminal results per skill version (read from the EVENTS
// stream by an ordered, unacknowledged consumer) and which pools have a live worker
// (the workers bucket's heartbeats). It also finishes activations that ran several
// jobs at once.
type live struct {
	r *Router

	mu      sync.Mutex
	results map[string]*tally // name@version
	workers map[string][]string
	pending map[string]*activation

	cc   jetstream.ConsumeContext
	kw   jetstream.KeyWatcher
	done chan struct{}
}

type tally struct{ ok, total int }

type activation struct {
	want  []string // skills started, in plan order
	got   []events.ActivationResult
	meta  bus.Meta
	start time.Time
}

func newLive(r *Router) *live {
	return &live{r: r, results: map[string]*tally{}, workers: map[string][]string{}, pending: map[string]*activation{}, done: make(chan struct{})}
}

func (l *live) start(ctx context.Context) error {
	b := l.r.cfg.Bus
	p := b.Subjects.Prefix + ".events.*."
	c, err := b.JS.OrderedConsumer(ctx, b.StreamEvents(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{p + events.Kind(events.TypeExecutionCompleted), p + events.Kind(events.TypeExecutionFailed), p + events.Kind(events.TypeExecutionFallback)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   ptr(time.Now().Add(-l.r.cfg.StatsWindow)),
		// The counts need the outcome's type, skill, version and activation, all in
		// its headers: the server sends no data, and the router parses none.
		HeadersOnly: true,
	})
	if err != nil {
		return err
	}
	l.cc, err = c.Consume(func(m jetstream.Msg) { l.terminal(ctx, m) })
	if err != nil {
		return err
	}
	kv, err := b.KV(ctx, b.BucketWorkers())
	if err != nil {
		l.cc.Stop()
		return err
	}
	l.kw, err = kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		l.cc.Stop()
		return err
	}
	go func() {
		defer close(l.done)
		for e := range l.kw.Updates() {
			if e == nil {
				continue
			}
			l.mu.Lock()
			if e.Operation() != jetstream.KeyValuePut {
				delete(l.workers, e.Key())
			} else {
				var hb struct {
					Pools []string `json:"pools"`
				}
				if json.Unmarshal(e.Value(), &hb) == nil {
					l.workers[e.Key()] = hb.Pools
				}
			}
			l.mu.Unlock()
		}
	}()
	return nil
}

func ptr[T any](v T) *T { return &v }

func (l *live) stop() {
	if l.cc != nil {
		l.cc.Stop()
	}
	if l.kw != nil {
		_ = l.kw.Stop()
		<-l.done
	}
}

func (l *live) terminal(ctx context.Context, m jetstream.Msg) {
	h := m.Headers()
	typ := h.Get("ce-type")
	if !events.Outcome(typ) {
		return
	}
	// Only these fields are read, from the headers; the data (outputs, the log)
	// is not even sent.
	d := outcomeFields{
		ExecutionID: h.Get("ce-" + events.ExtExecutionID), ActivationID: h.Get("ce-" + events.ExtCorrelationID),
		Skill: h.Get(events.HeaderSkill), Version: h.Get(events.HeaderVersion),
	}
	l.mu.Lock()
	pending := l.pending[d.ActivationID] != nil
	l.mu.Unlock()
	if d.Skill == "" || (pending && typ == events.TypeExecutionFailed) {
		// An outcome from before outcomes named their skill in headers, or the error
		// of a failed run that ends a tracked activation: read the data.
		full, err := l.outcome(ctx, m)
		if err != nil {
			return
		}
		d = full
	}
	var res events.ActivationResult
	actID, name, version := d.ActivationID, d.Skill, d.Version
	ok, ended := false, true
	switch typ {
	case events.TypeExecutionFallback:
		// The skill failed; the activation goes on with the next skill of the chain,
		// whose own outcome ends it.
		actID, ended = "", false
	case events.TypeExecutionCompleted:
		ok = true
		res = events.ActivationResult{Skill: d.Skill, ExecutionID: d.ExecutionID, Outcome: events.OutcomeCompleted}
	case events.TypeExecutionFailed:
		res = events.ActivationResult{Skill: d.Skill, ExecutionID: d.ExecutionID, Outcome: events.OutcomeFailed, Error: d.Error}
	}
	l.mu.Lock()
	t := l.results[name+"@"+version]
	if t == nil {
		t = &tally{}
		l.results[name+"@"+version] = t
	}
	t.total++
	if ok {
		t.ok++
	}
	var finished *activation
	if a := l.pending[actID]; a != nil && ended {
		a.got = append(a.got, res)
		if len(a.got) >= len(a.want) {
			finished = a
			delete(l.pending, actID)
		}
	}
	l.mu.Unlock()
	if finished != nil {
		l.r.finish(ctx, actID, finished)
	}
}

// outcomeFields are what the router reads of an outcome.
type outcomeFields struct {
	ExecutionID  string `json:"execution_id"`
	ActivationID string `json:"activation_id"`
	Skill        string `json:"skill"`
	Version      string `json:"version"`
	Error        string `json:"error"`
}

// outcome reads the data of an outcome m delivered without it.
func (l *live) outcome(ctx context.Context, m jetstream.Msg) (outcomeFields, error) {
	var d outcomeFields
	md, err := m.Metadata()
	if err != nil {
		return d, err
	}
	raw, err := l.r.events.GetMsg(ctx, md.Sequence.Stream)
	if err != nil {
		return d, err
	}
	e, err := bus.DecodeFast(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(e.Data, &d)
}

// success is selector.Env.Success.
func (l *live) success(name, version string) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.results[name+"@"+version]; t != nil {
		return t.ok, t.total
	}
	return 0, 0
}

// poolLive is selector.Env.PoolLive.
func (l *live) poolLive(pool string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ps := range l.workers {
		for _, p := range ps {
			if p == pool {
				return true
			}
		}
	}
	return false
}

func (l *live) env() selector.Env {
	return selector.Env{Success: l.success, PoolLive: l.poolLive}
}

// track starts following an activation of several concurrent jobs.
func (l *live) track(actID string, skills []string, meta bus.Meta) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.pending[actID]; !ok {
		l.pending[actID] = &activation{want: skills, meta: meta, start: time.Now()}
	}
}

// finish publishes activation.completed.
func (r *Router) finish(ctx context.Context, actID string, a *activation) {
	data := events.ActivationCompleted{ActivationID: actID}
	ok, failed := 0, 0
	for _, g := range a.got {
		if g.Outcome == events.OutcomeCompleted {
			ok++
		} else {
			failed++
		}
	}
	// Plan order: by the skill the job started with when it finished there, else as they came.
	for _, s := range a.want {
		for i, g := range a.got {
			if g.Skill == s {
				data.Executions = append(data.Executions, g)
				a.got = append(a.got[:i], a.got[i+1:]...)
				break
			}
		}
	}
	data.Executions = append(data.Executions, a.got...)
	switch {
	case failed == 0:
		data.Outcome = events.OutcomeCompleted
	case ok == 0:
		data.Outcome = events.OutcomeFailed
	default:
		data.Outcome = events.OutcomePartial
	}
	b := r.cfg.Bus.Batch()
	b.PublishEvent(r.cfg.Bus.Subjects.Event(actID, events.TypeActivationCompleted), bus.Event{
		ID: actID + ".activation.completed", Source: r.cfg.Source, Type: events.TypeActivationCompleted, Meta: a.meta, Data: data,
	})
	if err := b.Wait(ctx); err != nil {
		r.cfg.Log.Warn("router: activation.completed not published", "activation", actID, "err", err)
	}
}
