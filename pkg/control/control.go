// Package control cancels executions and pauses and resumes skills. The CLI
// (skillbus runs cancel, runs pause, runs resume) and the console both act
// through it, so a cancel or a pause is recorded the same way whoever gives it,
// with who gave it.
//
// Everything it does is a record in KV runs that the workers watch (see package
// worker): a cancel request per execution, a hold per paused skill. It ends no
// run itself: the worker that runs, or would run, the execution publishes its
// outcome, execution.cancelled, exactly once. An execution that no worker holds
// — paused for a confirmation or sleeping, held by a paused skill, parked for a
// repair — has its job published again so that a worker ends it now rather than
// when it would have resumed.
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair/service"
	"github.com/skillbus/skillbus/pkg/run"
)

// States of an execution when a cancel was asked for.
const (
	// StateActive: queued, waiting for a retry, or running. A worker ends it before
	// it starts, or at its next step boundary.
	StateActive = "queued or running"
	// StatePaused: paused, waiting for a confirmation or sleeping (a sleep step
	// parks its run the same way).
	StatePaused = "paused"
	// StateHeld: held because its skill is paused.
	StateHeld = "held"
	// StateRepairing: parked for a repair.
	StateRepairing = "repairing"
	// StateEnded: it had ended already; Cancellation.Outcome says how.
	StateEnded = "ended"
)

// Request says who asks and why.
type Request struct {
	// By names who asks; it is recorded and must not be empty.
	By     string
	Reason string
	// Source is the CloudEvent source of any job published again; default
	// "skillbus".
	Source string
}

func (r *Request) check() error {
	if r.By == "" {
		return errors.New("control: who asks (By) is empty")
	}
	if r.Source == "" {
		r.Source = "skillbus"
	}
	return nil
}

// Cancellation is what a cancel found and did.
type Cancellation struct {
	ExecutionID string `json:"execution_id"`
	Skill       string `json:"skill,omitempty"`
	// State is one of the State* constants.
	State string `json:"state"`
	// Outcome is how an execution that had ended ended (run.Status*).
	Outcome string `json:"outcome,omitempty"`
	// Again: it had been cancelled before; the first request's who and why stand.
	Again bool `json:"again,omitempty"`
	// FellBackFrom is the execution that had fallen back to this one, when the
	// cancel named that one.
	FellBackFrom string `json:"fell_back_from,omitempty"`
}

// String is one line for people: "3f2a… (report): cancelled, was queued or running".
func (c Cancellation) String() string {
	who := c.ExecutionID
	if c.Skill != "" {
		who += " (" + c.Skill + ")"
	}
	if c.State == StateEnded {
		return who + ": already ended (" + c.Outcome + ")"
	}
	s := who + ": cancelled, was " + c.State
	if c.FellBackFrom != "" {
		s += ", the fallback of " + c.FellBackFrom
	}
	if c.Again {
		s += " (cancelled before)"
	}
	return s
}

// Controller acts on one installation's bus.
type Controller struct {
	b      *bus.Bus
	runs   jetstream.KeyValue
	events jetstream.Stream
	jobs   jetstream.Stream
}

// New opens what the controller needs: KV runs and the EVENTS and JOBS streams.
func New(ctx context.Context, b *bus.Bus) (*Controller, error) {
	runs, err := b.KV(ctx, b.BucketRuns())
	if err != nil {
		return nil, fmt.Errorf("control: %w (is skillbus running there?)", err)
	}
	evs, err := b.Stream(ctx, b.StreamEvents())
	if err != nil {
		return nil, fmt.Errorf("control: stream %s: %w", b.StreamEvents(), err)
	}
	jobs, err := b.Stream(ctx, b.StreamJobs())
	if err != nil {
		return nil, fmt.Errorf("control: stream %s: %w", b.StreamJobs(), err)
	}
	return &Controller{b: b, runs: runs, events: evs, jobs: jobs}, nil
}

// ErrNoExecution: a cancel named an execution that nothing on the bus knows of —
// no outcome, job, claim, or paused, held or parked record (a mistyped id, or one
// older than the streams keep).
var ErrNoExecution = errors.New("no such execution")

// Cancel cancels one execution. An execution that fell back to another skill is
// followed: the cancel applies to the run that is still going. An execution
// nothing knows of is ErrNoExecution, and no cancel is recorded for it.
func (c *Controller) Cancel(ctx context.Context, executionID string, r Request) (Cancellation, error) {
	return c.cancelExecution(ctx, executionID, r, cancelHow{})
}

// cancelHow is how cancelExecution looks for the execution.
type cancelHow struct {
	// known: the execution was found already (its job read from JOBS).
	known bool
	// noRepairs: KV repairs is not looked in for a parked record (the caller
	// may not read it).
	noRepairs bool
}

// cancelExecution is Cancel, looking for the execution as how says.
func (c *Controller) cancelExecution(ctx context.Context, executionID string, r Request, how cancelHow) (Cancellation, error) {
	if err := r.check(); err != nil {
		return Cancellation{}, err
	}
	if err := events.CheckToken("execution id", executionID); err != nil {
		return Cancellation{}, err
	}
	from := ""
	for range 16 { // a fallback chain is short; a loop of them is not followed for ever
		out, err := run.Load(ctx, c.events, c.b.Subjects, executionID)
		if err != nil {
			return Cancellation{}, fmt.Errorf("cancel %s: %w", executionID, err)
		}
		if out != nil && out.Status == run.StatusFallback && out.Next != "" {
			from, executionID, how.known = executionID, out.Next, true
			continue
		}
		if out != nil {
			return Cancellation{ExecutionID: executionID, Skill: out.Skill, State: StateEnded, Outcome: out.Status, FellBackFrom: from}, nil
		}
		if !how.known {
			if ok, err := c.exists(ctx, executionID); err != nil {
				return Cancellation{}, fmt.Errorf("cancel %s: %w", executionID, err)
			} else if !ok {
				return Cancellation{}, fmt.Errorf("%w: %s", ErrNoExecution, executionID)
			}
		}
		res, err := c.cancel(ctx, executionID, r, how.noRepairs)
		res.FellBackFrom = from
		return res, err
	}
	return Cancellation{}, fmt.Errorf("cancel: execution %s falls back through more than 16 skills", executionID)
}

// cancel records the request for an execution with no outcome, and releases its
// job if no worker holds it. With noRepairs a run parked for a repair is not
// released: the repair service publishes its job when the repair ends, and the
// worker that takes it finds the cancel.
func (c *Controller) cancel(ctx context.Context, id string, r Request, noRepairs bool) (Cancellation, error) {
	res := Cancellation{ExecutionID: id, State: StateActive}
	rec, _ := json.Marshal(run.Cancel{ExecutionID: id, By: r.By, Reason: r.Reason, At: time.Now().UTC()})
	if _, err := c.runs.Create(ctx, events.RunCancelKey(id), rec); errors.Is(err, jetstream.ErrKeyExists) {
		res.Again = true
	} else if err != nil {
		return res, fmt.Errorf("cancel %s: record the request: %w", id, err)
	}
	// Paused for a confirmation: the router would resume it only when answered.
	if p, rev, err := run.LoadPaused(ctx, c.runs, id); err != nil {
		return res, err
	} else if p != nil {
		var job events.Job
		if err := json.Unmarshal(p.Job, &job); err != nil {
			return res, fmt.Errorf("cancel %s: the paused job: %w", id, err)
		}
		res.State, res.Skill = StatePaused, job.Skill.Name
		if err := c.release(ctx, job, p.Meta, events.StageCancelled, id+".job.cancelled", r.Source, ""); err != nil {
			return res, err
		}
		// A confirmation answered meanwhile resumed it already; either way a
		// worker now finds the cancel.
		_ = c.runs.Delete(ctx, events.RunPausedKey(id), jetstream.LastRevision(rev))
		if p.Kind == run.PausedWait {
			// Its wait record, or every router keeps matching triggers for it.
			// Purged, not deleted: a router that sees a wait record purged
			// also purges the wait's scheduled timeout (package router), which
			// needs a permission the CLI's credentials lack. Should this fail,
			// a wait.ended that finds the run no longer paused removes it.
			_ = c.runs.Purge(ctx, events.RunWaitKey(id))
		}
		return res, nil
	}
	// Held by a paused skill.
	if h, rev, err := c.loadHeld(ctx, id); err != nil {
		return res, err
	} else if h != nil {
		var job events.Job
		if err := json.Unmarshal(h.Job, &job); err != nil {
			return res, fmt.Errorf("cancel %s: the held job: %w", id, err)
		}
		res.State, res.Skill = StateHeld, job.Skill.Name
		if err := c.release(ctx, job, h.Meta, events.StageCancelled, id+".job.cancelled", r.Source, h.Gate); err != nil {
			return res, err
		}
		_ = c.runs.Delete(ctx, events.RunHeldKey(id), jetstream.LastRevision(rev))
		return res, nil
	}
	// Parked for a repair.
	if noRepairs {
		return res, nil
	}
	if repairs, err := c.b.KV(ctx, c.b.BucketRepairs()); err == nil {
		p, _, err := service.FindParked(ctx, repairs, id)
		if err != nil {
			return res, err
		}
		if p != nil {
			res.State, res.Skill = StateRepairing, p.Job.Skill.Name
			job := p.Job
			if err := c.release(ctx, job, p.Meta, events.StageCancelled, id+".job.cancelled", r.Source, ""); err != nil {
				return res, err
			}
			_ = repairs.Delete(ctx, service.ParkedKey(p.RepairID, id))
		}
	}
	return res, nil
}

// release publishes an execution's job again, on its own stage, for a worker to
// take through the claim path (it may have run before). gate is the concurrency
// gate a run waiting for a slot waited for: the worker that ends it passes its
// turn on, in case a slot freed as it was cancelled was meant for it.
func (c *Controller) release(ctx context.Context, job events.Job, meta map[string]string, stage, msgID, source, gate string) error {
	subject := c.b.Subjects.Exec(job.Skill.LanePool(), job.Skill.Name, job.ActivationID, stage)
	m, err := bus.Event{ID: msgID, Source: source, Type: events.TypeJob,
		Meta: bus.Meta{CorrelationID: meta[events.ExtCorrelationID], ExecutionID: job.ExecutionID,
			TraceParent: meta[events.ExtTraceParent], TraceState: meta[events.ExtTraceState]},
		Data: job}.JobMsg(subject)
	if err != nil {
		return fmt.Errorf("release the job of %s: %w", job.ExecutionID, err)
	}
	m.Header.Set(events.HeaderRecovered, "1")
	if gate != "" {
		m.Header.Set(events.HeaderConcGate, gate)
	}
	b := c.b.Batch()
	b.Publish(m)
	if err := b.Wait(ctx); err != nil {
		return fmt.Errorf("release the job of %s: %w", job.ExecutionID, err)
	}
	return nil
}

// exists reports whether anything knows of an execution that has no outcome: a
// record of it in KV runs (a cancel, claim, paused or held record), a parked
// record in KV repairs, or its job in JOBS. The records are read first; JOBS is
// only read for an execution none of them knows: one that is queued and never
// ran, or none.
func (c *Controller) exists(ctx context.Context, id string) (bool, error) {
	for _, key := range []string{events.RunCancelKey(id), events.RunClaimKey(id), events.RunPausedKey(id), events.RunHeldKey(id)} {
		_, err := c.runs.Get(ctx, key)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			return false, err
		}
	}
	if repairs, err := c.b.KV(ctx, c.b.BucketRepairs()); err == nil {
		if p, _, err := service.FindParked(ctx, repairs, id); err != nil {
			return false, err
		} else if p != nil {
			return true, nil
		}
	}
	return c.queued(ctx, id)
}

// Queued reports whether the jobs stream holds a job of the execution: it is
// queued, running, or set aside without a record of its own.
func (c *Controller) Queued(ctx context.Context, id string) (bool, error) { return c.queued(ctx, id) }

// queued reports whether JOBS holds a job of the execution. Its subject cannot
// be built from the execution id alone (it names the activation and the skill,
// and the id is a hash of the trigger and the skill), so jobs are read and told
// by their event id, <execution>.job (<execution>.job.<why> when published
// again), newest first: a run still queued is among the latest jobs, which a
// lookup reads before the older ones, in ranges that double as it goes back.
func (c *Controller) queued(ctx context.Context, id string) (bool, error) {
	info, err := c.jobs.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("read the jobs: %w", err)
	}
	first, end := info.State.FirstSeq, info.State.LastSeq+1
	if info.State.Msgs == 0 {
		return false, nil
	}
	prefix := id + ".job"
	for size := uint64(queuedRange); end > first; size *= 2 {
		from := first
		if end-first > size {
			from = end - size
		}
		if found, err := c.queuedIn(ctx, prefix, from, end); err != nil || found {
			return found, err
		}
		end = from
	}
	return false, nil
}

// queuedRange is how many jobs a lookup reads first, from the newest back.
const queuedRange = 128

// queuedIn reports whether a job whose event id is prefix, or prefix and more,
// is in JOBS between sequences from and end (excluded).
func (c *Controller) queuedIn(ctx context.Context, prefix string, from, end uint64) (bool, error) {
	cons, err := c.jobs.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy,
		FilterSubject: c.b.Subjects.AllExec(), DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from,
		MemoryStorage: true, InactiveThreshold: time.Minute})
	if err != nil {
		return false, fmt.Errorf("read the jobs: %w", err)
	}
	// Gone at once, not after its inactivity: it is no one's to wait for.
	defer func() { _ = c.jobs.DeleteConsumer(context.WithoutCancel(ctx), cons.CachedInfo().Name) }()
	for next := from; next < end; {
		batch, err := cons.FetchNoWait(int(min(end-next, 1024)))
		if err != nil {
			return false, fmt.Errorf("read the jobs: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return false, fmt.Errorf("read the jobs: %w", err)
			}
			if next = md.Sequence.Stream + 1; md.Sequence.Stream >= end {
				return false, nil
			}
			if jobOf(m, prefix) {
				return true, nil
			}
		}
		if err := batch.Error(); err != nil {
			return false, fmt.Errorf("read the jobs: %w", err)
		}
		if n == 0 {
			return false, nil
		}
	}
	return false, nil
}

// structuredHead begins every job skillbus publishes (bus.Event.JobMsg).
var structuredHead = []byte(`{"specversion":"1.0","id":"`)

// jobOf reports whether m is a job whose event id is prefix (<execution>.job) or
// begins with prefix and a dot.
func jobOf(m jetstream.Msg, prefix string) bool {
	is := func(id string) bool { return id == prefix || strings.HasPrefix(id, prefix+".") }
	if mid := m.Headers().Get(jetstream.MsgIDHeader); mid != "" { // the event id, where there is one
		return is(mid)
	}
	if rest, ok := bytes.CutPrefix(m.Data(), structuredHead); ok {
		// Without decoding: the id, then its closing quote or a dot and more.
		if !bytes.HasPrefix(rest, []byte(prefix)) || len(rest) == len(prefix) {
			return false
		}
		return rest[len(prefix)] == '"' || rest[len(prefix)] == '.'
	}
	e, err := bus.DecodeFast(m) // a job in another form
	return err == nil && is(e.ID)
}

func (c *Controller) loadHeld(ctx context.Context, id string) (*run.Held, uint64, error) {
	e, err := c.runs.Get(ctx, events.RunHeldKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var h run.Held
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return nil, 0, fmt.Errorf("held job %s: %w", id, err)
	}
	return &h, e.Revision(), nil
}

// CancelSkill cancels every execution of a skill that is queued, running, paused,
// held or repairing and whose job was published at or after since (zero: within
// the JOBS stream's retention). It returns what it cancelled, oldest first;
// executions that had ended are left out. Its runs not yet planned but pending
// as triggers — a debounced burst, a batch — whatever since says, are cancelled
// when they come due: routers read the cancel (run.SkillCancel) then.
func (c *Controller) CancelSkill(ctx context.Context, skillName string, since time.Time, r Request) ([]Cancellation, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if err := events.CheckToken("skill", skillName); err != nil {
		return nil, err
	}
	// First the runs still pending as triggers (a debounced burst, a batch):
	// those of triggers stored until now are cancelled when they come due.
	if err := c.cutSkill(ctx, skillName, r); err != nil {
		return nil, err
	}
	ids, err := c.skillExecutions(ctx, skillName, since)
	if err != nil {
		return nil, err
	}
	var out []Cancellation
	for _, id := range ids {
		res, err := c.cancelExecution(ctx, id, r, cancelHow{known: true})
		if err != nil {
			return out, err
		}
		if res.State != StateEnded {
			out = append(out, res)
		}
	}
	return out, nil
}

// cutSkill records a cancel of the skill's runs still pending as triggers, up
// to the last trigger stored now (run.SkillCancel).
func (c *Controller) cutSkill(ctx context.Context, skillName string, r Request) error {
	st, err := c.b.Stream(ctx, c.b.StreamTriggers())
	if err != nil {
		return fmt.Errorf("cancel %s: %w", skillName, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return fmt.Errorf("cancel %s: %w", skillName, err)
	}
	rec, _ := json.Marshal(run.SkillCancel{Skill: skillName, Seq: info.State.LastSeq, Stream: info.Created, By: r.By, Reason: r.Reason, At: time.Now().UTC()})
	if _, err := c.runs.Put(ctx, events.SkillCancelledKey(skillName), rec); err != nil {
		return fmt.Errorf("cancel %s: record the cancel of its pending runs: %w", skillName, err)
	}
	return nil
}

// skillExecutions lists the executions whose jobs for the skill are in the JOBS
// stream since the time given, oldest first, each once.
func (c *Controller) skillExecutions(ctx context.Context, skillName string, since time.Time) ([]string, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.b.Subjects.SkillJobs(skillName)}}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := c.jobs.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("read the jobs of %s: %w", skillName, err)
	}
	seen := map[string]bool{}
	var ids []string
	for {
		batch, err := cons.FetchNoWait(512)
		if err != nil {
			return nil, fmt.Errorf("read the jobs of %s: %w", skillName, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var j events.Job
			if e, err := bus.DecodeFast(m); err == nil && events.DecodeJobWithoutRoute(e.Data, &j) == nil &&
				j.ExecutionID != "" && j.Skill.Name == skillName && !seen[j.ExecutionID] {
				seen[j.ExecutionID] = true
				ids = append(ids, j.ExecutionID)
			}
		}
		if n == 0 {
			return ids, nil
		}
	}
}

// JobExecutions lists, each once, the executions whose id begins with prefix among
// those of the last jobs JOBS holds, at most last of them: runs queued, running or
// ended lately, which a shortened execution id names. A job's id is its
// Nats-Msg-Id or, without one, the start of its structured body.
func (c *Controller) JobExecutions(ctx context.Context, prefix string, last uint64) ([]string, error) {
	info, err := c.jobs.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the jobs: %w", err)
	}
	if info.State.Msgs == 0 {
		return nil, nil
	}
	start := info.State.FirstSeq
	if info.State.LastSeq >= last && info.State.LastSeq-last+1 > start {
		start = info.State.LastSeq - last + 1
	}
	cons, err := c.jobs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.b.Subjects.AllExec()},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		return nil, fmt.Errorf("read the jobs: %w", err)
	}
	seen := map[string]bool{}
	var ids []string
	for {
		batch, err := cons.FetchNoWait(1024)
		if err != nil {
			return nil, fmt.Errorf("read the jobs: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			id := m.Headers().Get(jetstream.MsgIDHeader)
			if id == "" {
				if e, err := bus.DecodeFast(m); err == nil {
					id = e.ID
				}
			}
			x, _, ok := strings.Cut(id, ".job")
			if ok && strings.HasPrefix(x, prefix) && !seen[x] {
				seen[x] = true
				ids = append(ids, x)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("read the jobs: %w", err)
		}
		if n == 0 {
			return ids, nil
		}
	}
}

// ActivationExecution is one execution of an activation's plan, as its job
// names it.
type ActivationExecution struct {
	ExecutionID string
	Skill       string
}

// ActivationExecutions lists the executions an activation's jobs in JOBS name, in
// the order their jobs were published, each once: what an activation id (the one
// a sender is given) stands for.
func (c *Controller) ActivationExecutions(ctx context.Context, activationID string) ([]ActivationExecution, error) {
	cons, err := c.jobs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.b.Subjects.ActivationJobs(activationID)},
	})
	if err != nil {
		return nil, fmt.Errorf("read the jobs: %w", err)
	}
	seen := map[string]bool{}
	var out []ActivationExecution
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, fmt.Errorf("read the jobs: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var j events.Job
			if e, err := bus.DecodeFast(m); err == nil && events.DecodeJobWithoutRoute(e.Data, &j) == nil && j.ExecutionID != "" && !seen[j.ExecutionID] {
				seen[j.ExecutionID] = true
				out = append(out, ActivationExecution{ExecutionID: j.ExecutionID, Skill: j.Skill.Name})
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("read the jobs: %w", err)
		}
		if n == 0 {
			return out, nil
		}
	}
}
