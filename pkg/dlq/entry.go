package dlq

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// Kinds of entries, in Entry.Kind.
const (
	KindJob        = "job"        // a job whose skill failed for good
	KindTrigger    = "trigger"    // a trigger the router rejected
	KindUnreadable = "unreadable" // a job message no worker could read
)

// Statuses of entries, in Entry.Status.
const (
	StatusDead     = "dead"     // never replayed
	StatusReplayed = "replayed" // replayed at least once; see Replays
)

// Replay outcomes, in Replay.Outcome.
const (
	OutcomePending   = "pending"   // the new execution has no outcome yet
	OutcomeCompleted = "completed" // it completed
	OutcomeFailed    = "failed"    // it failed (and is a dead-letter entry of its own)
	OutcomeFallback  = "fallback"  // it failed and fell back to another skill
	OutcomeRouted    = "routed"    // a replayed trigger: the router's part is not followed here
)

// Subject tokens under <prefix>.dead. that are not skills (skill names never start
// with '_').
const (
	tokenTrigger  = events.DeadTrigger
	tokenJob      = events.DeadJob
	tokenReplayed = events.DeadReplayed
)

// Entry is one dead letter. The JSON field names are what `skillbus dlq list --json`
// and `show --json` print.
type Entry struct {
	// ID names the entry: the dead execution's id for a job, "trigger.<seq>" for a
	// rejected trigger, "job.<seq>" for an unreadable job.
	ID string `json:"id"`
	// Seq is the entry's sequence in the DLQ stream; commands accept it as an id.
	Seq  uint64 `json:"seq"`
	Kind string `json:"kind"`
	// Status is dead or replayed.
	Status string `json:"status"`
	// Skill is the skill that died (jobs).
	Skill   string `json:"skill,omitempty"`
	Version string `json:"version,omitempty"`
	Digest  string `json:"digest,omitempty"`
	// DiedAt is when the entry was written.
	DiedAt time.Time `json:"died_at"`
	// Class is the failure class of a job (retryable, fatal, repairable) or the
	// router's code for a trigger (invalid_event, unknown_skill, too_large, ...).
	Class string `json:"class,omitempty"`
	// Reason is the error message.
	Reason string `json:"reason"`
	// StepID is the step that failed, when one did.
	StepID string `json:"step_id,omitempty"`
	// Deliveries is how many times the job was delivered (its attempts).
	Deliveries uint64 `json:"deliveries,omitempty"`
	Worker     string `json:"worker,omitempty"`
	// ActivationID is the activation the job belonged to.
	ActivationID string `json:"activation_id,omitempty"`
	// Trigger identifies the trigger the job came from, or the rejected trigger.
	Trigger events.TriggerRef `json:"trigger"`
	// Inputs are the job's inputs (a JSON object).
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// Data is the trigger's data: JSON as sent, anything else as a JSON string. A
	// rejected trigger carries it; for a job, Show reads it from the TRIGGERS stream
	// while that keeps the trigger (7 days by default).
	Data json.RawMessage `json:"data,omitempty"`
	// History lists the skills tried before this one in the activation's fallback chain.
	History []events.Attempt `json:"history,omitempty"`
	// Subject is the entry's subject in the DLQ.
	Subject string `json:"subject"`
	// Replays are the entry's replays, oldest first.
	Replays []Replay `json:"replays,omitempty"`
	// Log is the execution log of the delivery that failed (Show only; workflow.Log
	// as JSON), while the events stream keeps the failed outcome.
	Log json.RawMessage `json:"log,omitempty"`

	job     *events.DeadLetter // KindJob
	header  nats.Header        // the dead letter's headers
	trace   bus.Meta           // a dead job's trace context, which its replay links to
	payload []byte
}

// Replay is one replay of an entry: its record, and how the new execution ended.
type Replay struct {
	events.DLQReplayed
	// Outcome is pending, completed, failed or fallback for a job; routed for a trigger.
	Outcome string `json:"outcome"`
}

// ShortID is the entry's id cut for a table: execution ids to 12 characters.
func (e *Entry) ShortID() string {
	if e.Kind == KindJob && len(e.ID) > 12 {
		return e.ID[:12]
	}
	return e.ID
}

// decode reads a DLQ message. ok is false for a replay record, which is no entry.
func decode(prefix, subject string, seq uint64, at time.Time, h nats.Header, data []byte) (e *Entry, ok bool) {
	token := strings.TrimPrefix(subject, events.Subjects{Prefix: prefix}.Dead(""))
	if token == tokenReplayed || strings.HasPrefix(token, tokenReplayed+".") {
		return nil, false
	}
	e = &Entry{Seq: seq, DiedAt: at, Subject: subject, Status: StatusDead}
	e.ID = strings.TrimSuffix(h.Get(bus.HeaderMsgID), ".dead")
	if e.ID == "" {
		e.ID = "seq." + strconv.FormatUint(seq, 10)
	}
	switch token {
	case tokenTrigger:
		e.Kind = KindTrigger
		e.Class, e.Reason = h.Get(events.HeaderDeadCode), h.Get(events.HeaderDeadReason)
		e.Trigger.Subject = h.Get(events.HeaderDeadSubject)
		e.Trigger.Seq, _ = strconv.ParseUint(h.Get(events.HeaderDeadTriggerSeq), 10, 64)
		if ev, err := bus.Decode(bus.MsgOf(e.Trigger.Subject, h, data)); err == nil {
			e.Trigger.ID, e.Trigger.Source, e.Trigger.Type = ev.ID(), ev.Source(), ev.Type()
			e.Data = jsonOrString(ev.Data())
		} else {
			e.Data = jsonOrString(data)
		}
		e.header, e.payload = h, data
		return e, true
	case tokenJob:
		e.Kind = KindUnreadable
		e.Reason = h.Get(events.HeaderDeadReason)
		e.Trigger.Subject = h.Get(events.HeaderDeadSubject)
		e.Data = jsonOrString(data)
		e.header, e.payload = h, data
		return e, true
	}
	e.Kind, e.Skill = KindJob, token
	var dl events.DeadLetter
	ev, err := bus.Decode(bus.MsgOf(subject, h, data))
	if err == nil {
		err = json.Unmarshal(ev.Data(), &dl)
	}
	if err != nil {
		// Not written by a worker of this version; show it as it is, without replay.
		e.Kind, e.Reason, e.Data = KindUnreadable, "dead letter does not decode: "+err.Error(), jsonOrString(data)
		e.header, e.payload = h, data
		return e, true
	}
	e.header, e.trace = h, bus.MetaOf(ev)
	j := dl.Job
	if j.ExecutionID != "" {
		e.ID = j.ExecutionID
	}
	e.job = &dl
	e.Skill = j.Skill.Name
	e.Version, e.Digest = j.Skill.Version, j.Skill.Digest
	e.Class, e.Reason, e.StepID, e.Deliveries, e.Worker = dl.Class, dl.Reason, dl.StepID, dl.Deliveries, dl.Worker
	e.ActivationID, e.Trigger, e.Inputs, e.History = j.ActivationID, j.Trigger, j.Inputs, j.History
	return e, true
}

// jsonOrString returns b if it is JSON, else b as a JSON string; nil for nothing.
func jsonOrString(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

// matches reports whether id names the entry: its id, its DLQ sequence, or a prefix
// of at least 6 characters of its id. A prefix of digits alone is both a sequence and
// a prefix (an execution id's first 8 hex digits are all decimal digits once in 40).
func (e *Entry) matches(id string) bool {
	return id == e.ID || e.hasSeq(id) || len(id) >= minPrefix && strings.HasPrefix(e.ID, id)
}

// hasSeq reports whether id is the entry's DLQ sequence number.
func (e *Entry) hasSeq(id string) bool {
	if !isDigits(id) {
		return false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	return err == nil && n == e.Seq
}

// minPrefix is the shortest id prefix accepted for an entry.
const minPrefix = 6

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
