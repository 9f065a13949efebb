// Package service runs repairs on the bus: the records of repairs and of the
// executions parked on them in KV repairs, the repair workers consuming the REPAIR
// stream, and the actions (list, show, approve, reject) that `skillbus repair` and
// other front ends call.
//
// KV repairs holds, per repair (one skill version and fault), the record
// "r.<id>", and per parked execution "w.<id>.<execution id>" with its job. The
// repair service alone writes them: a worker asks it to park an execution with a
// message on the REPAIR stream (Park), because a worker may not write the bucket —
// with that right, anyone holding a worker's credentials could write an approved
// record that the registry would then publish. The service parks an execution by
// writing its key first and reading the record second, and ends a repair by
// writing the record's final status first and listing the parked executions
// second, so every parked execution is resumed by one of the two (both may: the
// resumed job's message id is the same).
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// Statuses of a repair.
const (
	StatusRequested = "requested" // a repair job waits for a repair worker
	StatusProposed  = "proposed"  // a patch waits for approval
	StatusApproved  = "approved"  // approved; being published
	StatusRejected  = "rejected"
	StatusExpired   = "expired"
	StatusApplied   = "applied" // published as a new version; executions resumed on it
	StatusFailed    = "failed"  // no patch, out of budget, or publishing failed
)

// Final reports whether a repair with status s has ended.
func Final(s string) bool {
	return s == StatusRejected || s == StatusExpired || s == StatusApplied || s == StatusFailed
}

// Record is a repair as KV repairs keeps it.
type Record struct {
	ID        string           `json:"id"`
	Skill     string           `json:"skill"`
	Status    string           `json:"status"`
	Diagnosis repair.Diagnosis `json:"diagnosis"`
	BudgetKey string           `json:"budget_key"`
	Patch     *repair.Patch    `json:"patch,omitempty"`
	Attempts  []repair.Attempt `json:"attempts,omitempty"`
	Spent     int              `json:"spent,omitempty"` // attempts on the fault before this repair
	Auto      bool             `json:"auto,omitempty"`
	ExpiresAt time.Time        `json:"expires_at,omitzero"`
	Decided   string           `json:"decided_by,omitempty"`
	Reason    string           `json:"reason,omitempty"`
	// NewDigest and NewVersion: the version the approved patch became.
	NewDigest  string    `json:"new_digest,omitempty"`
	NewVersion string    `json:"new_version,omitempty"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	// First is the execution whose park request created the record: a redelivery
	// of that request publishes the repair job again (the creator may have died
	// between the two).
	First string `json:"first_execution,omitempty"`
}

// Parked is an execution waiting for a repair: its job, kept whole so that it can
// be published again.
type Parked struct {
	ExecutionID string            `json:"execution_id"`
	RepairID    string            `json:"repair_id"`
	Step        string            `json:"step,omitempty"`
	Class       string            `json:"class"`
	Error       string            `json:"error"`
	Job         events.Job        `json:"job"`
	Meta        map[string]string `json:"meta,omitempty"`
	ParkedAt    time.Time         `json:"parked_at"`
}

// RecordKey and ParkedKey are the keys of a repair and of a parked execution.
func RecordKey(id string) string              { return "r." + id }
func ParkedKey(id, executionID string) string { return "w." + id + "." + executionID }
func budgetKey(key string) string             { return "b." + key }

// ErrNotFound: no repair has that id.
var ErrNotFound = errors.New("repair: not found")

// Load returns a repair's record and revision.
func Load(ctx context.Context, kv jetstream.KeyValue, id string) (*Record, uint64, error) {
	e, err := kv.Get(ctx, RecordKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, err
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("repair %s: %w", id, err)
	}
	return &r, e.Revision(), nil
}

// update changes a repair's record with compare-and-set, retrying on conflicts.
// change returns false to leave the record as it is.
func update(ctx context.Context, kv jetstream.KeyValue, id string, change func(*Record) bool) (*Record, bool, error) {
	for range 50 {
		r, rev, err := Load(ctx, kv, id)
		if err != nil {
			return nil, false, err
		}
		if !change(r) {
			return r, false, nil
		}
		r.Updated = time.Now().UTC()
		b, _ := json.Marshal(r)
		if _, err := kv.Update(ctx, RecordKey(id), b, rev); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue
			}
			return nil, false, err
		}
		return r, true, nil
	}
	return nil, false, fmt.Errorf("repair %s: record changed 50 times meanwhile", id)
}

// Create stores a new repair's record; created is false when it existed already,
// and r is then the stored one.
func Create(ctx context.Context, kv jetstream.KeyValue, rec *Record) (r *Record, created bool, err error) {
	b, _ := json.Marshal(rec)
	if _, err := kv.Create(ctx, RecordKey(rec.ID), b); err == nil {
		return rec, true, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, false, err
	}
	r, _, err = Load(ctx, kv, rec.ID)
	return r, false, err
}

// ParkedOn lists the executions parked on a repair.
func ParkedOn(ctx context.Context, kv jetstream.KeyValue, id string) ([]Parked, error) {
	lister, err := kv.ListKeysFiltered(ctx, "w."+id+".*")
	if err != nil {
		return nil, err
	}
	var out []Parked
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // resumed meanwhile
		}
		var p Parked
		if json.Unmarshal(e.Value(), &p) == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// countParked counts the executions parked on a repair.
func countParked(ctx context.Context, kv jetstream.KeyValue, id string) int {
	lister, err := kv.ListKeysFiltered(ctx, "w."+id+".*")
	if err != nil {
		return 0
	}
	n := 0
	for range lister.Keys() {
		n++
	}
	return n
}

// Release publishes a parked execution's job again — on the repaired version when
// the repair was applied, or declined so that it fails as it would have without
// repair — and removes its parked key. The message id is the same whoever
// releases it, so a release by both the worker and the repair worker runs it once.
func Release(ctx context.Context, b *bus.Bus, kv jetstream.KeyValue, source string, rec *Record, p Parked) error {
	job := p.Job
	prev := 0
	if job.Repair != nil {
		prev = job.Repair.Attempts
	}
	jr := &events.JobRepair{ID: rec.ID, BudgetKey: rec.BudgetKey, Attempts: prev, Step: p.Step, Error: p.Error, Class: p.Class}
	if rec.Status == StatusApplied {
		jr.Attempts++
		jr.From = job.Skill.Digest
		job.Skill.Digest, job.Skill.Version = rec.NewDigest, rec.NewVersion
	} else {
		jr.Declined = fmt.Sprintf("repair %s %s", rec.ID, rec.Status)
		if rec.Reason != "" {
			jr.Declined += ": " + rec.Reason
		}
	}
	job.Repair = jr
	meta := bus.Meta{
		CorrelationID: p.Meta[events.ExtCorrelationID], ExecutionID: p.ExecutionID, CausationID: rec.ID,
		TraceParent: p.Meta[events.ExtTraceParent], TraceState: p.Meta[events.ExtTraceState],
	}
	// One id per release, the same whoever releases it: an execution parked on the
	// same repair twice (a repair that flip-flops A→B→A finds the record of the
	// first one ended) is released twice, and the attempts its job carries tell the
	// two apart. With the repair id alone the second was dropped as a duplicate and
	// the execution stayed parked.
	id, subject := fmt.Sprintf("%s.job.repair.%s.%d", p.ExecutionID, rec.ID, prev), b.Subjects.Exec(job.Skill.LanePool(), job.Skill.Name, job.ActivationID, events.StageRepair(rec.ID))
	// In the releaser's trace, linked to the parked execution's: that ended long ago.
	_, span, link := telemetry.StartPublishLinkedMeta(ctx, telemetry.Message{Destination: subject, Template: b.Subjects.JobTemplate(), ID: id},
		&meta.TraceParent, &meta.TraceState, telemetry.LinkRepair, telemetry.AttrExecutionID.String(p.ExecutionID), telemetry.AttrSkillName.String(job.Skill.Name))
	msg, err := bus.Event{ID: id, Source: source, Type: events.TypeJob, Meta: meta, Data: job}.JobMsg(subject)
	if err != nil {
		telemetry.End(span, err)
		return err
	}
	// Take the claim path: it looks up the execution's outcome first.
	msg.Header.Set(events.HeaderRecovered, "1")
	if link != "" {
		msg.Header.Set(events.HeaderLink, link)
	}
	batch := b.Batch()
	batch.Publish(msg)
	err = batch.Wait(ctx)
	telemetry.End(span, err)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, ParkedKey(rec.ID, p.ExecutionID)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}

// spent returns the attempts spent on a budget key.
func spent(ctx context.Context, kv jetstream.KeyValue, key string) (int, uint64) {
	e, err := kv.Get(ctx, budgetKey(key))
	if err != nil {
		return 0, 0
	}
	var n int
	_ = json.Unmarshal(e.Value(), &n)
	return n, e.Revision()
}

// spend records n attempts on a budget key.
func spend(ctx context.Context, kv jetstream.KeyValue, key string, n int) error {
	for range 20 {
		have, rev := spent(ctx, kv, key)
		b, _ := json.Marshal(have + n)
		var err error
		if rev == 0 {
			_, err = kv.Create(ctx, budgetKey(key), b)
		} else {
			_, err = kv.Update(ctx, budgetKey(key), b, rev)
		}
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !strings.Contains(err.Error(), "wrong last sequence") {
			return err
		}
	}
	return errors.New("repair: budget changed 20 times meanwhile")
}
