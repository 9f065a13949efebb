package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/run"
)

// keepRamped takes the versions that a version ramp sends runs to (KV runs,
// events.SkillRampKey) out of what a collection would remove, whatever the
// Retention says: workers fetch a ramped version's definition and files for as
// long as the ramp lasts.
func (r *Registry) keepRamped(ctx context.Context, p *gcPlan) error {
	if len(p.collect) == 0 {
		return nil
	}
	runs, err := r.cfg.Bus.KV(ctx, r.cfg.Bus.BucketRuns())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil // no fleet has run here: nothing is ramped
	}
	if err != nil {
		return err
	}
	keys, err := runs.ListKeysFiltered(ctx, events.SkillsRampFilter)
	if err != nil {
		return err
	}
	ramped := map[versionID]bool{}
	for k := range keys.Keys() {
		e, err := runs.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return err
		}
		var rp run.Ramp
		if err := json.Unmarshal(e.Value(), &rp); err != nil {
			return fmt.Errorf("ramp %s: %w", k, err)
		}
		ramped[versionID{rp.Skill, rp.Digest}] = true
	}
	kept := p.collect[:0]
	for _, c := range p.collect {
		if ramped[c.id] {
			p.live[c.id] = true
			continue
		}
		kept = append(kept, c)
	}
	p.collect = kept
	return nil
}

// rampReader reads skills' ramps one at a time, as a collection is about to
// remove a version.
type rampReader struct {
	runs jetstream.KeyValue // nil: no fleet has run here
}

func (r *Registry) rampsNow(ctx context.Context) (rampReader, error) {
	runs, err := r.cfg.Bus.KV(ctx, r.cfg.Bus.BucketRuns())
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return rampReader{}, nil
	}
	return rampReader{runs}, err
}

// ramped reports whether a ramp sends runs to version id now.
func (rr rampReader) ramped(ctx context.Context, id versionID) (bool, error) {
	if rr.runs == nil {
		return false, nil
	}
	e, err := rr.runs.Get(ctx, events.SkillRampKey(id.name))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var rp run.Ramp
	if err := json.Unmarshal(e.Value(), &rp); err != nil {
		return false, fmt.Errorf("ramp of %s: %w", id.name, err)
	}
	return rp.Skill == id.name && rp.Digest == id.digest, nil
}
