package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

// The actions on repairs that front ends offer: `skillbus repair list|show|approve|
// reject` calls them, and so can a web console.

// Summary is a repair as front ends show it.
type Summary struct {
	ID         string    `json:"id"`
	Skill      string    `json:"skill"`
	Status     string    `json:"status"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name,omitempty"`
	Step       string    `json:"step,omitempty"`
	Error      string    `json:"error"`
	Diff       string    `json:"diff"`
	By         string    `json:"by,omitempty"`
	Summary    string    `json:"summary,omitempty"`
	Executions int       `json:"executions"` // how many executions wait on it
	Digest     string    `json:"digest"`
	NewDigest  string    `json:"new_digest,omitempty"`
	Decided    string    `json:"decided_by,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
}

// List returns every repair record, newest first.
func List(ctx context.Context, kv jetstream.KeyValue) ([]*Record, error) {
	lister, err := kv.ListKeysFiltered(ctx, "r.*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, err
	}
	var out []*Record
	for k := range lister.Keys() {
		r, _, err := Load(ctx, kv, strings.TrimPrefix(k, "r."))
		if err == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Record) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Actions are the operations on repairs, over a bus.
type Actions struct {
	Bus *bus.Bus
	// Source is the CloudEvents source of decisions; default "/skillbus/cli".
	Source string
}

func (a Actions) kv(ctx context.Context) (jetstream.KeyValue, error) {
	return a.Bus.KV(ctx, a.Bus.BucketRepairs())
}

// List summarises every repair, newest first; status, when set, keeps those with
// that status.
func (a Actions) List(ctx context.Context, status string) ([]Summary, error) {
	kv, err := a.kv(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := List(ctx, kv)
	if err != nil {
		return nil, err
	}
	out := []Summary{}
	for _, r := range recs {
		if status == "" || r.Status == status {
			out = append(out, summarise(ctx, kv, r))
		}
	}
	return out, nil
}

// Show returns one repair; a unique prefix of its id will do.
func (a Actions) Show(ctx context.Context, id string) (*Summary, error) {
	kv, err := a.kv(ctx)
	if err != nil {
		return nil, err
	}
	r, err := find(ctx, kv, id)
	if err != nil {
		return nil, err
	}
	s := summarise(ctx, kv, r)
	return &s, nil
}

// ErrNotProposed: only a proposed repair can be approved or rejected.
var ErrNotProposed = errors.New("repair: not proposed")

// Approve approves a proposed repair: a repair worker publishes it as a new version
// of the skill and runs the parked executions again on it.
func (a Actions) Approve(ctx context.Context, id, by string) (*Summary, error) {
	return a.decide(ctx, id, events.RepairDecided{Approved: true, By: by})
}

// Reject rejects a proposed repair: the parked executions fail as they would have
// without repair (they fall back along their plan, or are dead-lettered).
func (a Actions) Reject(ctx context.Context, id, by, reason string) (*Summary, error) {
	return a.decide(ctx, id, events.RepairDecided{By: by, Reason: reason})
}

func (a Actions) decide(ctx context.Context, id string, d events.RepairDecided) (*Summary, error) {
	kv, err := a.kv(ctx)
	if err != nil {
		return nil, err
	}
	r, err := find(ctx, kv, id)
	if err != nil {
		return nil, err
	}
	if r.Status != StatusProposed {
		return nil, fmt.Errorf("%w: repair %s is %s", ErrNotProposed, r.ID, r.Status)
	}
	d.RepairID, d.Skill = r.ID, r.Skill
	src := a.Source
	if src == "" {
		src = "/skillbus/cli"
	}
	b := a.Bus.Batch()
	publishDecision(b, a.Bus, src, r.Skill, d)
	if err := b.Wait(ctx); err != nil {
		return nil, err
	}
	s := summarise(ctx, kv, r)
	return &s, nil
}

// find loads a repair by id or unique id prefix.
func find(ctx context.Context, kv jetstream.KeyValue, id string) (*Record, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty id", ErrNotFound)
	}
	if r, _, err := Load(ctx, kv, id); err == nil {
		return r, nil
	}
	recs, err := List(ctx, kv)
	if err != nil {
		return nil, err
	}
	var match []*Record
	for _, r := range recs {
		if strings.HasPrefix(r.ID, id) {
			match = append(match, r)
		}
	}
	switch len(match) {
	case 0:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case 1:
		return match[0], nil
	}
	return nil, fmt.Errorf("repair: %s is the prefix of %d repairs; give more of the id", id, len(match))
}

func summarise(ctx context.Context, kv jetstream.KeyValue, r *Record) Summary {
	s := Summary{
		ID: r.ID, Skill: r.Skill, Status: r.Status, Kind: string(r.Diagnosis.Fault.Kind), Name: r.Diagnosis.Fault.Name,
		Step: r.Diagnosis.Fault.Step, Error: r.Diagnosis.Error, Digest: r.Diagnosis.Digest, NewDigest: r.NewDigest,
		Decided: r.Decided, Reason: r.Reason, ExpiresAt: r.ExpiresAt, Created: r.Created, Updated: r.Updated,
		Executions: countParked(ctx, kv, r.ID),
	}
	if r.Patch != nil {
		s.Diff, s.By, s.Summary = r.Patch.Diff, r.Patch.By, r.Patch.Summary
	}
	return s
}
