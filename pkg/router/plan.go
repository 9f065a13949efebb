package router

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/flow"
	"github.com/skillbus/skillbus/pkg/run"
	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Routing a trigger has three stages, in the worker's shape. parse decodes and
// checks the trigger; the router then asks the selector (and, for a trigger that
// names a parent, the parent's job) what should happen; plan turns that decision
// into an outcome value — the jobs to publish and the decision to record, or why
// nothing runs — without touching the bus. settle (settle.go) is the one place
// that writes: it publishes what the outcome says and acks or terminates the
// trigger.

// trigger is a trigger decoded and checked: everything deciding and planning read.
type trigger struct {
	msg jetstream.Msg
	// delivery is the message's JetStream metadata, when fromStream (see md).
	delivery   jetstream.MsgMetadata
	fromStream bool
	ref        events.TriggerRef
	e          *bus.Binary
	size       int
	req        selector.Request
	// inputs are the skill's inputs, the trigger's data as a JSON object.
	inputs json.RawMessage
	actID  string
	// decidedID is the id of the plan's decision, actID+".route.decided": the
	// two are one string, made once.
	decidedID string
	// meta are the extensions of what the trigger causes: its correlation, its
	// cause and the trace context of its CONSUMER span.
	meta bus.Meta
	// live is a follower waiting for the activation's events as they happen.
	live bool
	// depth is the delegation depth of the trigger's jobs (see depthOf).
	depth int
	// endedWaits are the executions whose wait_for_event the trigger ended;
	// cancelled, those it cancelled by their skills' cancel_on.
	endedWaits, cancelled []string
	// data is the trigger's data decoded, as flow expressions read it.
	data any
	fev  *flow.Event
	// limited are the skills over their rate limit for this trigger, with why;
	// rated those it was counted against, with its place; uncounted those admit
	// took with a rate limit not yet counted (see Router.count).
	limited, rated map[string]string
	uncounted      map[string]rateCheck
	// folds are the debounced skills the trigger is folded into (see Router.fold);
	// unfolded those admit took, to fold if they run at once (see admitDebounce).
	folds, unfolded map[string]folding
	// ramps are the version ramps in force (ramp.go); nil when none.
	ramps map[string]*run.Ramp
	// offline is a request decided once, offline (Filters): a debounced skill
	// is shown folded wherever it stands in the plan.
	offline bool
	// burstOf is the debounced skill this trigger is the run of a burst of: it
	// came on that skill's TriggerDebounced subject, which only routers publish.
	burstOf string
	// burstDigest is the version of burstOf the burst's triggers were taken
	// for (events.HeaderBurstDigest).
	burstDigest string
	// burstSeq is the TRIGGERS sequence of the burst's last trigger (of the
	// batch's), where its run stands for cancel_on; 0 when unknown.
	burstSeq uint64
	verdicts flowVerdicts
	// prio is what the queue_priority of the skills admit took gave (prio.go).
	prio map[string]queuePriority
	// routed is the outcome plan returns for a trigger it routes, held here so
	// that routing a trigger does not allocate one (a trigger stays on the
	// stack of Router.route).
	routed routed
}

// readMetadata reads msg's JetStream metadata into t, as a value: msg.Metadata()
// allocates what it returns, for every trigger. A message whose reply subject
// bus.Metadata cannot read (a test's stub) is asked itself.
func (t *trigger) readMetadata(msg jetstream.Msg) {
	md, err := bus.Metadata(msg)
	if err != nil {
		p, err := msg.Metadata()
		if err != nil || p == nil {
			return
		}
		md = *p
	}
	t.delivery, t.fromStream = md, true
}

// md is the trigger's JetStream metadata; nil for a message that did not come
// from a stream.
func (t *trigger) md() *jetstream.MsgMetadata {
	if !t.fromStream {
		return nil
	}
	return &t.delivery
}

// outcome is what routing a trigger came to. settle turns it into writes and the
// trigger's ack (or termination).
type outcome interface{ outcome() string }

// rejected: the trigger itself is bad; it is recorded and terminated, never retried.
type rejected struct{ code, reason string }

// unmatched: a valid trigger no skill takes; it is recorded and acked.
type unmatched struct {
	code, reason string
	d            *selector.Decision
}

// routed: the plan's jobs run.
type routed struct {
	decided   events.RouteDecided
	decidedID string // the plan's id, the jobs' cause
	// one is the job of a plan of one job, most of them; many those of a plan
	// of more. A slice of one kept in the struct would point into it, which
	// moves it to the heap.
	one  [1]plannedJob
	many []plannedJob
}

// jobs are the plan's jobs, the primary's first.
func (o *routed) jobs() []plannedJob {
	if o.many != nil {
		return o.many
	}
	return o.one[:]
}

// plannedJob is a job to publish: its subject, message id and extensions, and
// the job itself.
type plannedJob struct {
	subject, id string
	meta        bus.Meta
	job         events.Job
}

func (rejected) outcome() string  { return telemetry.OutcomeRejected }
func (unmatched) outcome() string { return telemetry.OutcomeUnmatched }
func (*routed) outcome() string   { return telemetry.OutcomeRouted }

// parseConfig is what parse needs of the router's configuration.
type parseConfig struct {
	subjects      events.Subjects
	maxEventBytes int
	textFields    []string
}

// parse decodes and checks a trigger. It returns the trigger, and a rejection when
// the trigger is bad: too large, not a CloudEvent, a type that does not match its
// subject or data that is not JSON. The trigger's ref is filled as far as it
// could be read, for the record of a rejection.
// t is the caller's, so that routing a trigger does not allocate one.
func parse(ctx context.Context, msg jetstream.Msg, pc parseConfig, t *trigger) outcome {
	*t = trigger{msg: msg, ref: events.TriggerRef{Subject: msg.Subject()}}
	t.readMetadata(msg)
	if md := t.md(); md != nil {
		t.ref.Seq = md.Sequence.Stream
	}
	t.size = bus.EventSize(msg)
	e, err := bus.DecodeFast(msg)
	if err == nil {
		t.ref.ID, t.ref.Source, t.ref.Type = e.ID, e.Source, e.Type
	}
	if t.size > pc.maxEventBytes {
		// Rejected under its own activation id when it has one, where whoever
		// waits for it looks.
		return rejected{events.UnmatchedTooLarge, fmt.Sprintf("trigger is %d bytes; the limit is %d (router --max-event-bytes)", t.size, pc.maxEventBytes)}
	}
	if err != nil {
		return rejected{events.UnmatchedInvalid, err.Error()}
	}
	t.e = e
	t.req.Type = e.Type
	subj := pc.subjects
	if events.IsReservedSource(e.Source) && !ownSubject(subj, msg.Subject()) {
		// A tick's or a child call's source and id, used first by a sender that
		// publishes past the gateway: taken, it would name skillbus's own
		// activation with the sender's data. Checked first, so that no other
		// rejection is recorded under that activation either (see reject).
		return rejected{events.UnmatchedReservedSource,
			fmt.Sprintf("source %q: sources beginning %s (or skillbus:) are skillbus's own, taken only on %s, where only its routers, workers and operators publish; use a source of your own",
				e.Source, events.ReservedSource, subj.TriggersInternal())}
	}
	if err := events.CheckType(e.Type); err != nil {
		return rejected{events.UnmatchedBadType, err.Error()}
	}
	if name, ok := subj.SkillFromTrigger(msg.Subject()); ok {
		t.req.Skill = name
	} else if name, ok := subj.SkillFromInternal(msg.Subject()); ok {
		t.req.Skill = name
	} else if name, ok := subj.SkillFromDebounced(msg.Subject()); ok {
		t.req.Skill, t.burstOf = name, name
		t.burstDigest = msg.Headers().Get(events.HeaderBurstDigest)
		t.burstSeq, _ = strconv.ParseUint(msg.Headers().Get(headerDebounceSeq), 10, 64)
	} else if typ, _ := subj.TypeFromTrigger(msg.Subject()); typ != e.Type {
		return rejected{events.UnmatchedBadType,
			fmt.Sprintf("event type %q does not match its subject %s; publish it on %s", e.Type, msg.Subject(), subj.Trigger(e.Type))}
	}
	if s := e.Ext(events.ExtSkill); s != "" && t.req.Skill == "" {
		t.req.Skill = s
	}
	inputs, obj, data, err := inputsOf(e)
	if err != nil {
		return rejected{events.UnmatchedInvalid, err.Error()}
	}
	t.inputs, t.data = inputs, data
	t.req.Text = textOf(obj, pc.textFields)
	t.req.Data = obj

	var ids [64]byte
	decided := string(append(events.AppendActivationID(ids[:0], e.Source, e.ID), decidedSuffix...))
	t.actID, t.decidedID = decided[:len(decided)-len(decidedSuffix)], decided
	// e.Meta() less the extensions set here anyway: each is a lookup.
	t.meta = bus.Meta{CorrelationID: t.actID, CausationID: e.ID, ExecutionID: e.Ext(events.ExtExecutionID)}
	if tp, ts := telemetry.Inject(ctx); tp != "" {
		t.meta.TraceParent, t.meta.TraceState = tp, ts
	} else {
		t.meta.TraceParent, t.meta.TraceState = e.Ext(events.ExtTraceParent), e.Ext(events.ExtTraceState)
	}
	t.live = e.Ext(events.ExtProgress) == events.ProgressLive
	return nil
}

// ownSubject reports whether a trigger came on a subject only skillbus's own
// roles publish (a skill's TriggerInternal or TriggerDebounced): the only place
// a router takes a source of skillbus's own (events.IsReservedSource).
func ownSubject(subj events.Subjects, subject string) bool {
	if _, ok := subj.SkillFromInternal(subject); ok {
		return true
	}
	_, ok := subj.SkillFromDebounced(subject)
	return ok
}

// plan turns the selector's decision about t into an outcome: the jobs of the skills
// that run at once (the primary, its parallel partners and the always-skills), each
// carrying the decision, or why nothing runs. It reads no bus; get finds a skill the
// decision names without having recalled it (the generic skill at the end of the
// fallback chain).
func plan(d *selector.Decision, t *trigger, subj events.Subjects, get func(string) (*skill.Skill, bool)) outcome {
	if d.Primary == "" {
		if code, reason, ok := t.verdicts.unmatchedByFlow(); ok {
			return unmatched{code: code, reason: reason, d: d}
		}
		return unmatched{code: events.UnmatchedNoSkill, reason: noSkillReason(d, t.req), d: d}
	}
	// A plan's entries, each built once (an execution id is a hash). A plan has
	// a few: a slice searched in order costs less than a map, and on the stack.
	type namedRef struct {
		name string
		sr   events.SkillRef
	}
	var refsArr [4]namedRef
	refs := refsArr[:0]
	refOf := func(name string) events.SkillRef {
		for i := range refs {
			if refs[i].name == name {
				return refs[i].sr
			}
		}
		var sr events.SkillRef
		if c := d.Candidate(name); c != nil {
			sr = skillRef(*c, t.e)
		} else { // the generic skill, appended to the chain without being recalled
			s, _ := get(name)
			sr = skillRef(selector.Candidate{Name: s.Name, Skill: s, Source: "generic"}, t.e)
		}
		if t.ramps != nil {
			sr = ramp(t.ramps, sr, t.actID)
		}
		if t.prio != nil {
			sr = t.withPriority(sr)
		}
		refs = append(refs, namedRef{name, sr})
		return sr
	}
	p := events.Plan{Primary: refOf(d.Primary), ParallelGroups: d.ParallelGroups, EstimatedCost: d.EstimatedCost, Parameters: d.Parameters}
	for _, n := range d.Fallback {
		if d.Candidate(n) == nil {
			// The generic skill, which the catalog may have dropped since the
			// selector named it: then the chain ends without it.
			if _, ok := get(n); !ok {
				continue
			}
		}
		p.FallbackChain = append(p.FallbackChain, refOf(n))
	}
	for _, n := range d.Always {
		p.Always = append(p.Always, refOf(n))
	}
	o := &t.routed
	*o = routed{
		decided:   events.RouteDecided{ActivationID: t.actID, Trigger: t.ref, Plan: p, Threshold: d.Threshold, Candidates: candidates(d)},
		decidedID: t.decidedID,
	}
	running := d.Running()
	var together [][]string
	if len(running) > 1 {
		// Whichever worker ends the last of them says the activation is over.
		together = make([][]string, len(running))
		for i, name := range running {
			together[i] = []string{refOf(name).ExecutionID}
		}
		for _, f := range p.FallbackChain {
			together[0] = append(together[0], f.ExecutionID)
		}
	}
	if len(running) > 1 {
		o.many = make([]plannedJob, len(running))
	}
	jobs := o.jobs()
	for i, name := range running {
		sr := refOf(name)
		pj := &jobs[i]
		pj.job = events.Job{
			Depth:        t.depth,
			ExecutionID:  sr.ExecutionID,
			ActivationID: t.actID,
			Skill:        sr,
			Inputs:       t.inputs,
			Trigger:      t.ref,
			Live:         t.live,
			Together:     together,
		}
		if i == 0 {
			pj.job.Fallback = p.FallbackChain // only the primary's job falls back
		}
		pj.job.Route = events.RouteOf(o.decided, i == 0) // last in its data, which a worker skips
		pj.meta = t.meta
		pj.meta.ExecutionID = sr.ExecutionID
		pj.meta.CausationID = o.decidedID
		pj.subject, pj.id = jobNames(subj, events.LanePool(sr.Pool, events.Lane(sr.QueuePriority)), sr.Name, t.actID, sr.ExecutionID)
	}
	return o
}

// decidedSuffix ends the id of a plan's decision, after its activation id.
const decidedSuffix = ".route.decided"

// jobNames is the subject of a plan's job and its message id (the execution id
// and ".job"), made as one string.
func jobNames(subj events.Subjects, pool, skill, actID, execID string) (subject, id string) {
	var buf [256]byte
	b := subj.AppendExec(buf[:0], pool, skill, actID, events.StagePlan)
	n := len(b)
	all := string(append(append(b, execID...), ".job"...))
	return all[:n], all[n:]
}

// noSkillReason says why no skill took a request.
func noSkillReason(d *selector.Decision, req selector.Request) string {
	if c := d.KeptOut(); c != nil {
		// It passed, but a filter, a rate limit or its inputs keep it out.
		return fmt.Sprintf("%s scores %.3f, above the threshold %.2f, but is kept out: %s", c.Name, c.Score, d.Threshold, c.Reason)
	}
	if len(d.Candidates) > 0 {
		best := &d.Candidates[0]
		why := ""
		if _, r, ok := strings.Cut(best.Reason, selector.RefusedPrefix); ok {
			// Its inputs refuse the data as well: that is what to fix.
			r, _, _ = strings.Cut(r, "; ")
			why = " (" + selector.RefusedPrefix + r + ")"
		}
		return fmt.Sprintf("no skill scored above the threshold %.2f; best: %s %.3f%s", d.Threshold, best.Name, best.Score, why)
	}
	reason := "no skill matches"
	if req.Text != "" {
		reason += " the text"
	}
	if req.Type != "" && req.Type != selector.RequestType {
		reason += fmt.Sprintf(" event type %q", req.Type)
	}
	return reason
}
