package router

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/run"
)

// Version ramps: `skillbus skills ramp` writes a run.Ramp to KV runs; every
// router watches those records and keeps them in an immutable map swapped
// whole on each change, so a trigger reads one atomic pointer — nil while no
// skill is ramped. A plan entry for a ramped skill gets the ramped version when
// the activation's slot (a hash of its id, run.RampSlot) is below the ramp's
// share, the current version otherwise; either way the entry says which and why
// (events.SkillRef.Ramp). Every delivery of a trigger has the same activation id,
// so it runs the same version.

type rampIndex struct {
	kw   jetstream.KeyWatcher
	done chan struct{}
}

func (r *Router) startRamps(ctx context.Context) error {
	kw, err := r.runs.Watch(context.WithoutCancel(ctx), events.SkillsRampFilter)
	if err != nil {
		return err
	}
	ix := &rampIndex{kw: kw, done: make(chan struct{})}
	loaded := make(chan struct{})
	go func() {
		defer close(ix.done)
		first := true
		cur := map[string]*run.Ramp{}
		for e := range kw.Updates() {
			if e == nil {
				if first {
					first = false
					close(loaded)
				}
				continue
			}
			name, ok := events.RampedSkill(e.Key())
			if !ok {
				continue
			}
			next := maps.Clone(cur)
			delete(next, name)
			if e.Operation() == jetstream.KeyValuePut {
				var rp run.Ramp
				if err := json.Unmarshal(e.Value(), &rp); err != nil || rp.Digest == "" {
					r.cfg.Log.Warn("router: unreadable ramp ignored", "skill", name, "err", err)
				} else {
					next[name] = &rp
				}
			}
			cur = next
			if len(cur) == 0 {
				r.ramps.Store(nil)
			} else {
				r.ramps.Store(&next)
			}
		}
		if first {
			close(loaded)
		}
	}()
	select {
	case <-loaded:
	case <-ctx.Done():
		_ = kw.Stop()
		<-ix.done
		return ctx.Err()
	}
	r.rampIx = ix
	return nil
}

func (r *Router) stopRamps() {
	if ix := r.rampIx; ix != nil {
		_ = ix.kw.Stop()
		<-ix.done
	}
}

// rampsNow is the ramps in force, nil when none.
func rampsNow(p *atomic.Pointer[map[string]*run.Ramp]) map[string]*run.Ramp {
	if m := p.Load(); m != nil {
		return *m
	}
	return nil
}

// ramp applies a skill's ramp, if any, to its plan entry for an activation.
func ramp(ramps map[string]*run.Ramp, sr events.SkillRef, activationID string) events.SkillRef {
	rp := ramps[sr.Name]
	if rp == nil || rp.Digest == sr.Digest {
		return sr
	}
	takes, slot := rp.Takes(activationID)
	to := rp.Digest
	if len(to) > 12 {
		to = to[:12]
	}
	if !takes {
		sr.Ramp = fmt.Sprintf("current version: ramp %s to %s, slot %d of %d not in it", rp.Percent(), to, slot, run.RampAll)
		return sr
	}
	sr.Digest, sr.Version = rp.Digest, rp.Version
	if sr.Version == "" {
		sr.Version = to
	}
	sr.Ramp = fmt.Sprintf("ramped version: ramp %s to %s, slot %d of %d", rp.Percent(), to, slot, run.RampAll)
	return sr
}
