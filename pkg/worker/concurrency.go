package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	execctl "github.com/skillbus/skillbus/pkg/control"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/skill"
)

// Keyed concurrency: a skill's concurrency entries with a key.
//
// (An entry without a key is max_concurrent, which a solo pool's consumer enforces:
// see solo.go.) Skills without keyed entries pay nothing here: the gate looks at the
// skill's entries and goes on.
//
// Slots. Before it starts, a run takes one slot of each of its keyed limits: for the
// value its key expression gives (the gate, events.ConcGate), a runs key
// conc.<skill>.<entry>.<key hash>.<n> with n below the limit, taken by a create-only
// write whose value is the execution and whose per-key TTL is AckWait. The job's
// heartbeat renews the slots (a compare-and-set, with the TTL again) and the end of
// the delivery deletes them. So at most limit runs of a key value hold a slot at
// once, whatever the number of workers, and the slot of a worker that was killed
// expires within AckWait of its last renewal; the server then writes a marker that
// every watcher sees as it sees a delete. A delivery of an execution that finds its
// own slot still there (its earlier delivery died) takes it back if it holds the
// execution's claim, and only then: a delivery without one may be racing a live
// copy of itself that holds the slot.
//
// Waiting. A run that finds every slot of a gate taken is set aside as a paused
// skill's run is: its job is kept whole in a run.Held record naming the gate, and
// acked, so it holds no worker, no MaxAckPending place and no retry; a cancel finds
// it there (package control). Every worker follows the slots and the waiting records
// (watchGates). When a slot of a gate is freed, the run that has waited longest for
// that gate is published again (stage slot) and takes the claim path. Every worker
// that saw the slot freed publishes the same run under the same message id, so
// JetStream keeps one copy; they pick the same run because they read the same
// records in the same order, and each forgets the run it released at once, so a
// second freed slot releases the next run. A run published again may find its slot
// taken by a newer run that came first; it then waits again, at the back.
//
// Nothing strands. A run that writes its record just after the last slot was freed
// would have no one to release it, so after writing it tries the slots once more;
// if it gets one, it takes its record back and runs (through the claim path if the
// record was already released: a copy of it may be queued). A worker that starts
// releases the runs of every gate with free slots. A release that fails is
// retried with backoff until it is published or the record is gone.
//
// Fairness. Each value of a key has its own slots: a key with thousands of waiting
// runs holds none of another key's. A flood of one key costs the others only the
// time the workers take to set the flood's runs aside (a few writes each, no run),
// not its runs' turns, and released runs go to the back of the pool's queue, behind
// every run already queued.

// gates is a worker's view of the keyed concurrency: compiled keys, the slots taken
// and the runs waiting, by gate.
type gates struct {
	progs sync.Map // skill digest → *gateProgs

	mu      sync.Mutex
	ready   bool                      // the initial records are read: frees release runs
	slots   map[string]map[int]string // gate → slots taken → the execution holding each
	waiting map[string][]waiter       // gate → waiting runs, oldest first
	where   map[string]string         // execution → the gate it waits for
	limits  map[string]int            // gate → its limit, from the waiting records
	// throttled: the throttled runs set aside until their start (throttlewait.go),
	// by execution, released at once when their skill's throttle changes.
	throttled map[string]throttledRun
	// applied is the last KV runs sequence applied; moved is closed when it moves.
	applied uint64
	moved   chan struct{}
	// seen: gate with waiting runs → when a free of one of its slots or a
	// release (by any worker) was last seen; see checkGates.
	seen map[string]time.Time
	ctx  context.Context // the watch's: releases run under it
	work sync.WaitGroup  // releases under way
	stop func()
}

// heldWrittenHook, when set (by tests), is called between writing a waiting run's
// record and trying its slots again.
var heldWrittenHook atomic.Pointer[func(executionID string, rev uint64)]

// slotLostHook, when set (by tests), is called when a run's heartbeat finds a
// concurrency slot it held taken or freed.
var slotLostHook atomic.Pointer[func(executionID string)]

// finishedHook, when set (by tests), is called when a run has returned its
// decision, before it is settled.
var finishedHook atomic.Pointer[func(executionID string)]

// releaseFaultHook, when set (by tests), is asked before a waiting run's release
// is published; an error fails that release.
var releaseFaultHook atomic.Pointer[func(executionID string) error]

// waiter is a waiting run as the view keeps it: what a release needs to find its
// record, not the job (every worker keeps every waiting run).
type waiter struct {
	id  string
	rev uint64
}

// gateProgs are a skill version's keyed limits, compiled.
type gateProgs struct {
	entries []gateEntry
	err     error
}

type gateEntry struct {
	index int // in the skill's concurrency list
	limit int
	key   *flow.Program
}

// heldSlot is a slot a job holds, at the revision it last wrote.
type heldSlot struct {
	key string
	rev uint64
}

func (w *Worker) gateProgsOf(s *skill.Skill) *gateProgs {
	if p, ok := w.gates.progs.Load(s.Digest); ok {
		return p.(*gateProgs)
	}
	p := &gateProgs{}
	for i, c := range s.Concurrency {
		if c.Key == "" {
			continue
		}
		prg, err := flow.Compile(c.Key, flow.Key)
		if err != nil {
			p.err = fmt.Errorf("concurrency.key %s does not compile: %w", c.Key, err)
			break
		}
		p.entries = append(p.entries, gateEntry{index: i, limit: c.Limit, key: prg})
	}
	w.gates.progs.Store(s.Digest, p)
	return p
}

// keyEvent is what a concurrency key reads of a run: its trigger's attributes as
// the job carries them, and its inputs (the trigger's data) as data.
func keyEvent(j *job) (*flow.Event, error) {
	var data any = map[string]any{}
	if len(j.data.Inputs) > 0 {
		if err := json.Unmarshal(j.data.Inputs, &data); err != nil {
			return nil, err
		}
	}
	t := j.data.Trigger
	return &flow.Event{ID: t.ID, Type: t.Type, Source: t.Source, Data: data}, nil
}

// gatesOf returns the gates j's run must pass, each with its limit.
func (w *Worker) gatesOf(j *job, p *gateProgs) ([]string, []int, error) {
	if p.err != nil {
		return nil, nil, p.err
	}
	ev, err := keyEvent(j)
	if err != nil {
		return nil, nil, fmt.Errorf("concurrency: inputs are not JSON: %w", err)
	}
	names, limits := make([]string, 0, len(p.entries)), make([]int, 0, len(p.entries))
	for _, e := range p.entries {
		v, err := e.key.KeyOf(ev)
		if err != nil {
			return nil, nil, fmt.Errorf("concurrency.key %s: %w", e.key, err)
		}
		names = append(names, events.ConcGate(j.data.Skill.Name, e.index, events.KeyHash(v)))
		limits = append(limits, e.limit)
	}
	return names, limits, nil
}

// missingInput is the required input of j's skill that err, a concurrency key's
// error, says the trigger lacks ("no such key: customer"), or "".
func missingInput(j *job, err error) string {
	_, key, ok := strings.Cut(err.Error(), "no such key: ")
	if !ok || j.skill == nil || j.skill.Workflow == nil {
		return ""
	}
	key = strings.TrimSpace(key)
	for _, in := range j.skill.Workflow.Inputs {
		if in.Required && in.Name == key {
			return key
		}
	}
	return ""
}

// takeSlots is the gate of a skill with keyed concurrency: it takes a slot of each
// of the run's gates, or sets the run aside to wait (done: the delivery is settled).
func (w *Worker) takeSlots(ctx context.Context, j *job, p *gateProgs) (done bool, err error) {
	names, limits, err := w.gatesOf(j, p)
	if err != nil {
		if in := missingInput(j, err); in != "" {
			// The key reads an input the trigger lacks: what is wrong is the trigger.
			err = fmt.Errorf("input %s is required (%w)", in, err)
		}
		return true, w.fail(ctx, j, "", failure.Fatalf("%v", err))
	}
	j.gated = true // whether it takes the slots or waits again, a turn it was given is used
	blocked, err := w.trySlots(ctx, j, names, limits, quickTries)
	if err != nil || blocked < 0 {
		return err != nil, err
	}
	if w.releasedFor(j) == names[blocked] {
		// Released for a free of this gate but none found: the free may be one
		// this worker's view never saw (gatecheck.go). Correct the view from KV
		// and try the slots it shows free.
		if _, err := w.reconcile(ctx, names[blocked], limits[blocked]); err != nil {
			return true, fmt.Errorf("concurrency slot: %w", err)
		}
		if blocked, err = w.trySlots(ctx, j, names, limits, currentTries); err != nil || blocked < 0 {
			return err != nil, err
		}
	}
	return w.waitForSlot(ctx, j, names, limits, blocked)
}

// concDetail says which limit a run of the skill name waits on: "1 at once per
// data.customer", from the concurrency entry of gate in s (the version whose
// limits count).
func concDetail(s *skill.Skill, name, gate string, limit int) string {
	if s != nil {
		for i, c := range s.Concurrency {
			if c.Key != "" && strings.HasPrefix(gate, events.ConcGate(name, i, "")) {
				return fmt.Sprintf("%d at once per %s", limit, c.Key)
			}
		}
	}
	return fmt.Sprintf("%d at once", limit)
}

// releasedFor is the gate a released run's delivery was released for, or "".
func (w *Worker) releasedFor(j *job) string {
	if j.msg == nil {
		return ""
	}
	return j.msg.Headers().Get(events.HeaderConcGate)
}

// How many of a gate's slots that the view shows taken takeSlot tries as well
// (the view may lag a free by a moment): a few on a run's first try, none once
// the view is known to be current, all when it may not be.
const (
	quickTries   = 2
	currentTries = 0
	allTries     = -1
)

// trySlots takes a slot of every gate, in order; blocked is the first gate with
// none free (its slots of the earlier gates given back), or -1.
func (w *Worker) trySlots(ctx context.Context, j *job, names []string, limits []int, tries int) (blocked int, err error) {
	for i, g := range names {
		ok, err := w.takeSlot(ctx, j, g, limits[i], tries)
		if err != nil || !ok {
			w.freeSlots(j)
			if err != nil {
				return -1, fmt.Errorf("concurrency slot: %w", err)
			}
			return i, nil
		}
	}
	return -1, nil
}

// takeSlot takes a free slot of gate, or one this execution holds already. It
// tries the slots the view shows free (or held by this execution) first, then
// up to tries (allTries: every one) of those it shows taken, each from a random
// place, so that runs arriving at once do not all race for slot 0 and a run
// arriving at a crowded gate costs a write or two, not one per slot.
func (w *Worker) takeSlot(ctx context.Context, j *job, gate string, limit, tries int) (bool, error) {
	if w.gates.overLimit(gate, limit, j.data.ExecutionID) {
		return false, nil
	}
	from := rand.N(limit)
	for pass := range 2 {
		tried := 0
		for i := range limit {
			n := (from + i) % limit
			if w.gates.shownFree(gate, n, j.data.ExecutionID) == (pass == 1) {
				continue
			}
			if pass == 1 {
				if tries >= 0 && tried >= tries {
					break
				}
				tried++
			}
			ok, err := w.takeSlotN(ctx, j, events.ConcSlotKey(gate, n))
			if ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}

// takeSlotN takes slot key if it is free or this execution's.
func (w *Worker) takeSlotN(ctx context.Context, j *job, key string) (bool, error) {
	rev, err := w.runs.Create(ctx, key, []byte(j.data.ExecutionID), jetstream.KeyTTL(w.cfg.AckWait))
	if err == nil {
		j.slots = append(j.slots, heldSlot{key, rev})
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, err
	}
	e, err := w.runs.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil // freed meanwhile: someone else's to take
	case err != nil:
		return false, err
	}
	if string(e.Value()) == j.data.ExecutionID {
		// Another delivery of this execution took it. Taken back only by a
		// delivery that holds the execution's claim: then the other one died or
		// lost its claim, and stops. A delivery without a claim (the fast path)
		// may be racing a released copy of itself that claimed the execution and
		// runs under this slot now; taking the slot and then giving it back when
		// its own claim fails would let another run of the key start beside the
		// copy.
		if _, claimed := j.claimRev(); !claimed {
			return false, nil
		}
		s := heldSlot{key, e.Revision()}
		if s.rev, err = w.renewSlot(ctx, s, j.data.ExecutionID); err == nil {
			j.slots = append(j.slots, s)
			return true, nil
		}
		if !isWrongLastSequence(err) {
			return false, err
		}
	}
	return false, nil
}

// renewSlot writes slot s again with a fresh TTL if it is still at its revision.
func (w *Worker) renewSlot(ctx context.Context, s heldSlot, executionID string) (uint64, error) {
	m := &nats.Msg{Subject: w.runsSubject(s.key), Header: nats.Header{}, Data: []byte(executionID)}
	m.Header.Set(jetstream.MsgTTLHeader, w.cfg.AckWait.String())
	ack, err := w.cfg.Bus.Publish(ctx, m, jetstream.WithExpectLastSequencePerSubject(s.rev))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// runsSubject is the subject a runs key is written on.
func (w *Worker) runsSubject(key string) string { return "$KV." + w.cfg.Bus.BucketRuns() + "." + key }

// renewSlots renews the slots j holds, from its heartbeat. A slot found at another
// revision is re-read: still this execution's (an earlier renewal was written but
// its answer lost), it is adopted; freed (it expired while a heartbeat was late) or
// someone else's, j's run stops, since another run of the key may hold it now.
func (w *Worker) renewSlots(ctx context.Context, j *job) {
	for i, s := range j.slots {
		rev, err := w.renewSlot(ctx, s, j.data.ExecutionID)
		if isWrongLastSequence(err) {
			e, gerr := w.runs.Get(ctx, s.key)
			switch {
			case gerr == nil && string(e.Value()) == j.data.ExecutionID:
				j.slots[i].rev = e.Revision()
				continue
			case gerr == nil || errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
				if j.loseSlot() {
					w.cfg.Log.Warn("worker: lost a concurrency slot of a running execution; stopping it", "execution", j.data.ExecutionID, "slot", s.key)
				} else {
					// Its lease ran out while the server could not take the renewal (a
					// full disk, an outage) after the run ended: the run is not run again.
					w.cfg.Log.Warn("worker: a finished execution lost its concurrency slot while its outcome waited to be published; publishing it all the same", "execution", j.data.ExecutionID, "slot", s.key)
					j.slots = slices.Delete(j.slots, i, i+1)
				}
				if h := slotLostHook.Load(); h != nil {
					(*h)(j.data.ExecutionID)
				}
				return
			}
			err = gerr
		}
		if err != nil {
			if ctx.Err() == nil {
				w.cfg.Log.Warn("worker: could not renew a concurrency slot", "execution", j.data.ExecutionID, "slot", s.key, "err", err)
			}
			continue
		}
		j.slots[i].rev = rev
	}
}

// freeSlots gives back the slots j holds. It runs after j's heartbeat stopped.
func (w *Worker) freeSlots(j *job) {
	if len(j.slots) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.AckWait)
	defer cancel()
	for _, s := range j.slots {
		if err := w.runs.Delete(ctx, s.key, jetstream.LastRevision(s.rev)); err != nil && !isWrongLastSequence(err) {
			// It expires within AckWait all the same.
			w.cfg.Log.Warn("worker: could not free a concurrency slot", "execution", j.data.ExecutionID, "slot", s.key, "err", err)
		}
	}
	j.slots = nil
}

// waitForSlot sets j aside to wait for a slot of gate names[blocked]. An error
// hands the delivery back (done): it must not run without its slots.
func (w *Worker) waitForSlot(ctx context.Context, j *job, names []string, limits []int, blocked int) (done bool, err error) {
	data, err := json.Marshal(j.data)
	if err != nil {
		return true, err
	}
	rec, err := json.Marshal(run.Held{
		ExecutionID: j.data.ExecutionID, Skill: j.data.Skill.Name, Subject: j.msg.Subject(), Job: data,
		Meta: map[string]string{events.ExtCorrelationID: j.meta.CorrelationID, events.ExtTraceParent: j.meta.TraceParent, events.ExtTraceState: j.meta.TraceState},
		At:   time.Now().UTC(), Gate: names[blocked], Limit: limits[blocked],
	})
	if err != nil {
		return true, err
	}
	// Acked below, the job has no other copy: its record must outlive KV runs' TTL.
	key := events.RunHeldKey(j.data.ExecutionID)
	rev, err := execctl.PutKept(ctx, w.cfg.Bus, key, rec)
	if err != nil {
		return true, fmt.Errorf("set aside a run waiting for a concurrency slot: %w", err)
	}
	if h := heldWrittenHook.Load(); h != nil {
		(*h)(j.data.ExecutionID, rev)
	}
	// A slot freed before the record was written released no one: try once more,
	// the slots the view shows free once it has read the record (every free after
	// it releases a waiting run), or every slot if it does not read it in time
	// (well within the ack wait: the delivery sends no heartbeat yet).
	tries := allTries
	if w.gates.caughtUp(ctx, rev, w.cfg.AckWait/4) {
		tries = currentTries
	}
	again, err := w.trySlots(ctx, j, names, limits, tries)
	if err != nil {
		return true, err
	}
	if again < 0 {
		// Whether or not this delete wins, a worker that saw the record and a freed
		// slot may have published a copy already (releaseWaiting deletes the record
		// only after publishing it). The copy claims the execution and would take
		// this slot back as its own, so this delivery runs only if it claims the
		// execution first: never on the fast path.
		if err := w.runs.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil && !isWrongLastSequence(err) {
			w.freeSlots(j)
			return true, err // handed back: its redelivery claims the execution
		}
		if j.fast {
			j.fast = false
			if handled, err := w.claim(ctx, j); handled || err != nil {
				w.freeSlots(j)
				return true, err
			}
		}
		return false, nil
	}
	if _, claimed := j.claimRev(); claimed {
		// Handed back on purpose: whoever runs it later claims it at once.
		if err := w.release(ctx, j, j.retries); err != nil {
			return true, err
		}
	}
	w.cfg.Log.Debug("worker: run waits for a concurrency slot", "execution", j.data.ExecutionID, "gate", names[again])
	w.waiting(j, "concurrency", concDetail(w.flowSkill(j), j.data.Skill.Name, names[again], limits[again]))
	return true, j.msg.Ack()
}

// waiting tells whoever follows j's activation live why its run has not started
// (for: concurrency, throttle, pause). Nothing is stored: the run starts with
// execution.started as any run does.
func (w *Worker) waiting(j *job, why, detail string) {
	w.publish(j, j.data.ExecutionID+".waiting."+why+"."+j.deliveryID(), events.TypeExecutionWaiting, events.ExecutionWaiting{
		ExecutionID: j.data.ExecutionID, Skill: j.data.Skill.Name, For: why, Detail: detail,
	}, false)
}

// throttleDetail says the rate a run waits on and when it starts: "1 per 1m0s
// per data.customer, starts at 12:00:05".
func throttleDetail(th *skill.Throttle, at time.Time) string {
	d := fmt.Sprintf("%d per %s", th.Limit, time.Duration(th.Period))
	if th.Key != "" {
		d += " per " + th.Key
	}
	return d + ", starts at " + at.UTC().Format(time.TimeOnly) + " UTC"
}

// watchGates follows the slots and the waiting records until Stop, releasing a
// waiting run whenever a slot of its gate is freed. Start's ctx bounds only the
// first read. It reads KV runs through an ordered consumer of the keys' writes.
func (w *Worker) watchGates(ctx context.Context) error {
	g := &w.gates
	g.slots, g.waiting, g.where, g.limits = map[string]map[int]string{}, map[string][]waiter{}, map[string]string{}, map[string]int{}
	g.throttled = map[string]throttledRun{}
	g.moved = make(chan struct{})
	g.seen = map[string]time.Time{}
	b := w.cfg.Bus
	prefix := w.runsSubject("")
	c, err := b.OrderedConsumer(ctx, "KV_"+b.BucketRuns(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{prefix + events.ConcSlotsFilter, prefix + events.RunsHeldFilter},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	})
	if err != nil {
		return fmt.Errorf("worker: watch concurrency slots: %w", err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	initial := make(chan struct{})
	var once sync.Once
	if info := c.CachedInfo(); info == nil || info.NumPending == 0 {
		once.Do(func() { close(initial) })
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		g.mu.Lock()
		w.applyGate(wctx, kvWrite{key: strings.TrimPrefix(m.Subject(), prefix), rev: md.Sequence.Stream, del: kvDeleted(m.Headers()), value: m.Data()})
		g.applied = md.Sequence.Stream
		close(g.moved)
		g.moved = make(chan struct{})
		g.mu.Unlock()
		if md.NumPending == 0 {
			once.Do(func() { close(initial) })
		}
	})
	if err != nil {
		cancel()
		return fmt.Errorf("worker: watch concurrency slots: %w", err)
	}
	select {
	case <-ctx.Done():
		cc.Stop()
		cancel()
		return fmt.Errorf("worker: read concurrency slots: %w", ctx.Err())
	case <-initial:
	}
	g.stop = func() { cc.Stop(); <-cc.Closed(); cancel() }
	g.mu.Lock()
	g.ready, g.ctx = true, wctx
	g.work.Go(func() { w.checkGates(wctx) })
	for gate, ws := range g.waiting {
		for range min(len(ws), w.gateLimit(gate)-len(g.slots[gate])) {
			w.releaseNext(wctx, gate)
		}
	}
	g.mu.Unlock()
	return nil
}

// kvWrite is one write of a slot or a waiting record.
type kvWrite struct {
	key   string
	rev   uint64
	del   bool
	value []byte
}

// kvDeleted reports whether a KV message is a delete, a purge, or the server's
// marker of a key removed by its TTL.
func kvDeleted(h nats.Header) bool {
	return h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}

// applyGate applies one slot or waiting record; callers hold g.mu.
func (w *Worker) applyGate(ctx context.Context, e kvWrite) {
	g := &w.gates
	if gate, ok := events.ConcSlotGate(e.key); ok {
		n, err := strconv.Atoi(e.key[len(gate)+1:])
		if err != nil {
			return
		}
		taken := g.slots[gate]
		if e.del {
			// Only frees count: a gate whose live holders renew their slots is
			// still checked (gatecheck.go).
			if _, waits := g.seen[gate]; waits {
				g.seen[gate] = time.Now()
			}
			// Every free of a slot is one delete or one expiry marker, but not every
			// take is seen: KV runs keeps one write per key, and a take freed at once
			// is gone before it is read. So a free releases a run whether or not its
			// take was seen.
			delete(taken, n)
			if len(taken) == 0 {
				delete(g.slots, gate)
			}
			// Not while the gate holds as many runs as its limit, which was
			// lowered (current.go): the runs above it end first, and the waiting
			// runs keep their order.
			if g.ready && len(taken) < w.gateLimit(gate) {
				w.releaseNext(ctx, gate)
			}
			return
		}
		if taken == nil {
			taken = map[int]string{}
			g.slots[gate] = taken
		}
		if holder := taken[n]; holder != string(e.value) {
			taken[n] = string(e.value)
		}
		return
	}
	id, ok := events.HeldExecution(e.key)
	if !ok {
		return
	}
	gate, waited := g.where[id]
	g.forget(id)
	delete(g.throttled, id)
	if e.del {
		if _, waits := g.seen[gate]; waited && waits {
			// Released (or cancelled) by some worker: as a release of this
			// worker's own, the gate is not quiet, so this worker does not
			// release another run for the same free before the first takes it.
			g.seen[gate] = time.Now()
		}
		return
	}
	// Only what a release needs: the job stays in the record.
	var h struct {
		Skill string    `json:"skill"`
		Gate  string    `json:"gate"`
		Limit int       `json:"limit"`
		Until time.Time `json:"until"`
	}
	if json.Unmarshal(e.value, &h) != nil {
		return
	}
	if h.Gate == "" {
		if !h.Until.IsZero() {
			g.throttled[id] = throttledRun{id: id, skill: h.Skill, rev: e.rev, until: h.Until}
		}
		return // a paused skill's job, or a throttled one: not released for a slot
	}
	g.waiting[h.Gate] = append(g.waiting[h.Gate], waiter{id: id, rev: e.rev})
	g.where[id], g.limits[h.Gate] = h.Gate, h.Limit
	if _, ok := g.seen[h.Gate]; !ok {
		g.seen[h.Gate] = time.Now()
	}
}

// forget drops an execution's waiting run from the view.
func (g *gates) forget(id string) {
	gate, ok := g.where[id]
	if !ok {
		return
	}
	delete(g.where, id)
	ws := g.waiting[gate]
	if i := slices.IndexFunc(ws, func(x waiter) bool { return x.id == id }); i >= 0 {
		ws = slices.Delete(ws, i, i+1)
	}
	if len(ws) == 0 {
		delete(g.waiting, gate)
		delete(g.limits, gate)
		delete(g.seen, gate)
		return
	}
	g.waiting[gate] = ws
}

// releaseNext publishes again the run that has waited longest for gate. Callers
// hold g.mu.
func (w *Worker) releaseNext(ctx context.Context, gate string) {
	g := &w.gates
	ws := g.waiting[gate]
	if len(ws) == 0 {
		return
	}
	next := ws[0]
	g.forget(next.id)
	if _, ok := g.seen[gate]; ok {
		g.seen[gate] = time.Now()
	}
	g.work.Go(func() { w.releaseUntilDone(ctx, next) })
}

// releaseUntilDone releases wt, retrying a failed release (a publish timing out
// during a leader change, a full store) with backoff, up to 5s apart, for as long
// as its record is still the one released: the view has forgotten it, so no later
// free would release it.
func (w *Worker) releaseUntilDone(ctx context.Context, wt waiter) {
	for attempt := uint64(1); ; attempt++ {
		err := w.releaseWaiting(ctx, wt)
		if err == nil || ctx.Err() != nil {
			return
		}
		w.cfg.Log.Warn("worker: could not release a run waiting for a concurrency slot; retrying", "execution", wt.id, "err", err)
		t := time.NewTimer(min(w.cfg.Backoff.Delay(attempt), 5*time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		e, err := w.runs.Get(ctx, events.RunHeldKey(wt.id))
		if (err == nil && e.Revision() != wt.rev) || errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return // released by another worker, cancelled, or waiting anew
		}
	}
}

// releaseWaiting publishes a waiting run's job again, then removes its record if
// it is still the one released.
//
// The record is read first. Gone, or written again, it is not released: another
// worker released it for the same free (the common case with several workers),
// it was cancelled (control then passes its turn on, as a released run that is
// cancelled does), or it waits anew, in its new place in line.
func (w *Worker) releaseWaiting(ctx context.Context, wt waiter) error {
	if h := releaseFaultHook.Load(); h != nil {
		if err := (*h)(wt.id); err != nil {
			return err
		}
	}
	e, err := w.runs.Get(ctx, events.RunHeldKey(wt.id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil
	}
	if err != nil {
		return err
	}
	if e.Revision() != wt.rev {
		return nil
	}
	var rec run.Held
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return fmt.Errorf("held job %s: %w", wt.id, err)
	}
	return w.publishHeld(ctx, wt.rev, &rec, events.StageSlot)
}

// publishHeld publishes a job set aside in rec (at revision rev) again, on stage,
// under a message id of the record's revision, so that every worker that does it
// publishes it once; then it removes the record if it is still that one.
func (w *Worker) publishHeld(ctx context.Context, rev uint64, rec *run.Held, stage string) error {
	var job events.Job
	if err := json.Unmarshal(rec.Job, &job); err != nil {
		return fmt.Errorf("held job %s: %w", rec.ExecutionID, err)
	}
	b, meta := w.cfg.Bus, rec.Meta
	m, err := bus.Event{ID: rec.ExecutionID + ".job." + stage + "." + strconv.FormatUint(rev, 10), Source: w.cfg.Source, Type: events.TypeJob,
		Meta: bus.Meta{CorrelationID: meta[events.ExtCorrelationID], ExecutionID: job.ExecutionID,
			TraceParent: meta[events.ExtTraceParent], TraceState: meta[events.ExtTraceState]},
		Data: job}.JobMsg(b.Subjects.Exec(job.Skill.LanePool(), job.Skill.Name, job.ActivationID, stage))
	if err != nil {
		return err
	}
	m.Header.Set(events.HeaderRecovered, "1")
	if rec.Gate != "" {
		m.Header.Set(events.HeaderConcGate, rec.Gate)
	}
	batch := b.Batch()
	batch.Publish(m)
	if err := batch.Wait(ctx); err != nil {
		return err
	}
	if err := w.runs.Delete(ctx, events.RunHeldKey(rec.ExecutionID), jetstream.LastRevision(rev)); err != nil && !isWrongLastSequence(err) {
		return err
	}
	return nil
}

// stopGates ends the watch and waits for the releases under way.
func (w *Worker) stopGates() {
	g := &w.gates
	if g.stop == nil {
		return
	}
	g.stop()
	g.work.Wait()
	g.stop = nil
}

// shownFree reports whether the view shows slot n of gate free, or held by the
// execution id.
func (g *gates) shownFree(gate string, n int, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	holder, taken := g.slots[gate][n]
	return !taken || holder == id
}

// overLimit reports whether the view shows gate holding, besides the execution
// id, at least limit runs, some of them in slots at or above limit: runs that
// took them under a higher limit, since lowered. Its slots below limit may be
// free, but a run does not take one until as many runs as hold slots above it
// end.
func (g *gates) overLimit(gate string, limit int, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	taken, above := 0, false
	for n, holder := range g.slots[gate] {
		if holder == id {
			continue
		}
		taken++
		above = above || n >= limit
	}
	return above && taken >= limit
}

// caughtUp waits up to d for the view to have read KV runs up to rev.
func (g *gates) caughtUp(ctx context.Context, rev uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		g.mu.Lock()
		done, moved := g.applied >= rev, g.moved
		g.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-moved:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
