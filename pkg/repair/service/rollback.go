package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair"
)

// Rollback: an automatic repair whose version fails with the same fault it was
// meant to fix did not fix it, and a patch nobody looked at stays in the skill for
// nothing. The worker that sees it (repair.no_improvement) reports it to the repair
// service, on the subject it parks executions on; the service then restores the
// version the repair patched — the reverse patch, published through the registry as
// any approved repair is (it writes the skill's files back and publishes them),
// recorded as a repair of its own whose patch is by "rollback". A repair a person
// approved is kept: that person chose it.

// NoImprovement queues on b a worker's report that an execution released on the
// version that repair p.RepairID made (p.Digest) failed with the same fault again.
// One report per execution and repair.
func NoImprovement(b *bus.Batch, bs *bus.Bus, source string, meta bus.Meta, p events.RepairProgress) {
	id := p.ExecutionID + ".noimprovement." + p.RepairID
	b.PublishEvent(bs.Subjects.RepairParked(p.Skill), bus.Event{ID: id, Source: source, Type: events.TypeRepairNoImprovement, Meta: meta, Data: p})
}

// RollbackID is the id of the rollback of the automatic repair rec.
func RollbackID(rec *Record) string {
	return repair.Fingerprint("rollback:"+rec.NewDigest, &rec.Diagnosis.Fault)
}

// noImprovement handles a worker's report (see NoImprovement) that came on
// subject; the reason for a report that does not hold together, for its
// termination.
func (s *Service) noImprovement(ctx context.Context, subject string, data []byte) (refused string, err error) {
	var p events.RepairProgress
	if err := json.Unmarshal(data, &p); err != nil || p.RepairID == "" || p.Skill == "" || subject != s.cfg.Bus.Subjects.RepairParked(p.Skill) {
		return "unreadable no-improvement report", nil
	}
	rec, _, err := Load(ctx, s.kv, p.RepairID)
	switch {
	case errors.Is(err, ErrNotFound):
		return "no repair " + p.RepairID, nil
	case err != nil:
		return "", err
	case rec.Skill != p.Skill || rec.Status != StatusApplied || rec.NewDigest == "" || p.Digest != rec.NewDigest:
		return fmt.Sprintf("repair %s of %s is %s (version %.12s); the report is of %s at %.12s", rec.ID, rec.Skill, rec.Status, rec.NewDigest, p.Skill, p.Digest), nil
	case !rec.Auto:
		s.cfg.Log.Info("repair service: an approved repair brought no improvement; it is kept, as a person approved it", "repair", rec.ID, "skill", rec.Skill, "decided_by", rec.Decided)
		return "", nil
	}
	return "", s.rollback(ctx, rec, p.Reason)
}

// rollback restores the version the automatic repair rec patched. Every step is
// idempotent: a report redelivered, or one of another execution, finds the
// rollback's record and finishes what is left.
func (s *Service) rollback(ctx context.Context, rec *Record, reason string) error {
	id := RollbackID(rec)
	rb, _, err := Load(ctx, s.kv, id)
	if errors.Is(err, ErrNotFound) {
		rb, err = s.newRollback(ctx, rec, id, reason)
		if rb == nil || err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if rb.Status == StatusApproved {
		files, err := s.patched(ctx, rb)
		var digest, version string
		if err == nil {
			digest, version, err = s.cfg.Publisher.PublishRepair(ctx, rb.Skill, rb.Diagnosis.Digest, files, rb.ID)
		}
		status, why := StatusApplied, ""
		if err != nil {
			status, why = StatusFailed, "restoring the version before the repair failed: "+err.Error()
		}
		if rb, _, err = update(ctx, s.kv, id, func(r *Record) bool {
			if r.Status != StatusApproved {
				return false
			}
			r.Status, r.NewDigest, r.NewVersion = status, digest, version
			if why != "" {
				r.Reason = why
			}
			return true
		}); err != nil {
			return err
		}
	}
	if rb.Status != StatusApplied {
		s.cfg.Log.Error("repair service: an automatic repair brought no improvement and could not be rolled back", "repair", rec.ID, "skill", rec.Skill, "rollback", id, "reason", rb.Reason)
		return nil
	}
	if _, changed, err := update(ctx, s.kv, rec.ID, func(r *Record) bool {
		if r.RolledBackBy != "" {
			return false
		}
		r.RolledBackBy = id
		return true
	}); err != nil {
		return err
	} else if changed {
		s.cfg.Log.Warn("repair service: an automatic repair brought no improvement; the version before it is restored", "repair", rec.ID, "skill", rec.Skill, "rollback", id, "version", rb.NewVersion, "digest", rb.NewDigest)
	}
	return nil
}

// newRollback records the rollback of rec, approved: the reverse of its patch,
// from the version it made back to the one it patched. Nil when there is nothing
// to restore (the versions' files are gone, or alike).
func (s *Service) newRollback(ctx context.Context, rec *Record, id, reason string) (*Record, error) {
	read := func(digest string) (repair.Files, error) {
		sk, err := s.cfg.Catalog.LookupVersion(ctx, rec.Skill, digest)
		if err != nil {
			return nil, err
		}
		return s.files(ctx, sk)
	}
	made, err := read(rec.NewDigest)
	if err != nil {
		s.cfg.Log.Error("repair service: cannot roll back an automatic repair: the version it made is gone", "repair", rec.ID, "skill", rec.Skill, "err", err)
		return nil, nil
	}
	before, err := read(rec.Diagnosis.Digest)
	if err != nil {
		s.cfg.Log.Error("repair service: cannot roll back an automatic repair: the version it patched is gone", "repair", rec.ID, "skill", rec.Skill, "err", err)
		return nil, nil
	}
	diff := repair.Diff(made, before)
	if diff == "" {
		return nil, nil
	}
	_, st, err := repair.Apply(made, diff)
	if err != nil {
		return nil, fmt.Errorf("repair service: the rollback of %s does not apply: %w", rec.ID, err)
	}
	now := time.Now().UTC()
	rb, _, err := Create(ctx, s.kv, &Record{
		ID: id, Skill: rec.Skill, Status: StatusApproved, BudgetKey: rec.BudgetKey, Auto: true, Decided: "rollback",
		Diagnosis: repair.Diagnosis{ID: id, Skill: rec.Skill, Version: rec.NewVersion, Digest: rec.NewDigest, Fault: rec.Diagnosis.Fault, Error: reason},
		Patch: &repair.Patch{Diff: diff, By: "rollback", Stats: st,
			Summary: fmt.Sprintf("restores the version before automatic repair %s, whose version failed with the same fault", rec.ID)},
		Reason:  "the automatic repair " + rec.ID + " brought no improvement",
		Created: now, Updated: now,
	})
	return rb, err
}
