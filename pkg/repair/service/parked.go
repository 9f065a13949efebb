package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// FindParked returns the parked record of an execution and the repair it waits
// on, or nil when the execution is not parked. Every view of a run (runs list and
// show, the console, trigger --wait) asks it, so that a parked run is never
// missing from them.
func FindParked(ctx context.Context, kv jetstream.KeyValue, executionID string) (*Parked, *Record, error) {
	lister, err := kv.ListKeysFiltered(ctx, "w.*."+executionID)
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	var key string
	for k := range lister.Keys() {
		key = k
	}
	if key == "" {
		return nil, nil, nil
	}
	p, err := loadParked(ctx, kv, key)
	if p == nil || err != nil {
		return nil, nil, err
	}
	rec, _, err := Load(ctx, kv, p.RepairID)
	if errors.Is(err, ErrNotFound) {
		// Parked first, the record second: the record is on its way.
		return p, nil, nil
	}
	return p, rec, err
}

// AllParked lists every parked execution with the repair it waits on (nil while
// its record is not written yet).
func AllParked(ctx context.Context, kv jetstream.KeyValue) ([]Parked, map[string]*Record, error) {
	lister, err := kv.ListKeysFiltered(ctx, "w.>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	var out []Parked
	recs := map[string]*Record{}
	for _, k := range keys {
		p, err := loadParked(ctx, kv, k)
		if err != nil || p == nil {
			continue // released meanwhile
		}
		out = append(out, *p)
		if _, ok := recs[p.RepairID]; !ok {
			rec, _, _ := Load(ctx, kv, p.RepairID)
			recs[p.RepairID] = rec
		}
	}
	return out, recs, nil
}

func loadParked(ctx context.Context, kv jetstream.KeyValue, key string) (*Parked, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Parked
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, fmt.Errorf("parked execution %s: %w", key, err)
	}
	return &p, nil
}

// Repairing is the one line every view of a parked run shows:
// "repairing: reference fault "titel" in step post, repair 3f2a9c1d0b7e waiting
// for approval". rec may be nil (the record is not written yet).
func Repairing(p *Parked, rec *Record) string {
	fault, wait := "a repairable fault", "requested"
	if rec != nil {
		f := rec.Diagnosis.Fault
		fault = fmt.Sprintf("%s fault %q", f.Kind, f.Name)
		if f.Step != "" {
			fault += " in step " + f.Step
		}
		wait = Waiting(rec)
	} else if p.Step != "" {
		fault += " in step " + p.Step
	}
	return fmt.Sprintf("repairing: %s, repair %s %s", fault, ShortID(p.RepairID), wait)
}

// Waiting says what a repair with this record waits for, as the end of a sentence
// that starts with "repair <id>".
func Waiting(rec *Record) string {
	switch rec.Status {
	case StatusRequested:
		return "waiting for a repair worker to propose a patch"
	case StatusProposed:
		if rec.Auto {
			return "proposed, applied without approval (repair: auto)"
		}
		return "waiting for approval"
	case StatusApproved:
		return "approved, being published"
	}
	return strings.TrimSpace(rec.Status) + ", the parked runs being released"
}

// ShortID is the part of a repair id that front ends show; `skillbus repair`
// takes it back.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
