package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/repair"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/telemetry"
)

// ParkRequest is what a worker sends the repair service (on
// Subjects.RepairParked) to park an execution that failed with a repairable fault.
// The service checks it against itself and the catalog: the repair id must be the
// fingerprint of the version and fault, the job that of the execution; whether the
// repair is automatic comes from the catalog and the names taken from the trigger
// from the job's inputs, never from the request.
type ParkRequest struct {
	Parked    Parked           `json:"parked"`
	Diagnosis repair.Diagnosis `json:"diagnosis"`
}

// Park queues on b a worker's request to park p on the repair that d describes. Its
// message id is one per parking (an execution parked again after a repaired run
// is another), so a redelivered worker job asks once.
func Park(b *bus.Batch, bs *bus.Bus, source string, meta bus.Meta, req ParkRequest) {
	prev := 0
	if jr := req.Parked.Job.Repair; jr != nil {
		prev = jr.Attempts
	}
	id := fmt.Sprintf("%s.park.%s.%d", req.Parked.ExecutionID, req.Diagnosis.ID, prev)
	b.PublishEvent(bs.Subjects.RepairParked(req.Diagnosis.Skill), bus.Event{ID: id, Source: source, Type: events.TypeRepairRequested, Meta: meta, Data: req})
}

// ErrBadParkRequest: a park request that does not hold together.
var ErrBadParkRequest = errors.New("repair service: bad park request")

// checkPark checks a park request that came on subject.
func (s *Service) checkPark(subject string, r *ParkRequest) error {
	d, p := &r.Diagnosis, &r.Parked
	switch {
	case d.Skill == "" || subject != s.cfg.Bus.Subjects.RepairParked(d.Skill):
		return fmt.Errorf("%w: skill %q on subject %s", ErrBadParkRequest, d.Skill, subject)
	case d.ID != repair.Fingerprint(d.Digest, &d.Fault):
		return fmt.Errorf("%w: repair id %s is not the fingerprint of version %s and its fault", ErrBadParkRequest, d.ID, d.Digest)
	case p.RepairID != d.ID:
		return fmt.Errorf("%w: execution parked on %s, the diagnosis is of %s", ErrBadParkRequest, p.RepairID, d.ID)
	case p.ExecutionID == "" || p.Job.ExecutionID != p.ExecutionID:
		return fmt.Errorf("%w: execution %q, job of %q", ErrBadParkRequest, p.ExecutionID, p.Job.ExecutionID)
	case p.Job.Skill.Name != d.Skill || p.Job.Skill.Digest != d.Digest:
		return fmt.Errorf("%w: the job runs %s@%s, the diagnosis is of %s@%s", ErrBadParkRequest, p.Job.Skill.Name, p.Job.Skill.Digest, d.Skill, d.Digest)
	}
	return events.CheckToken("execution id", p.ExecutionID)
}

// park parks an execution on its repair: the parked key first, the record second
// (see the package doc). The request that creates the record publishes the repair
// job; one that finds the repair ended releases the execution at once. A request
// that does not hold together is refused (the reason, for its termination).
func (s *Service) park(ctx context.Context, msg jetstream.Msg, data []byte) (refused string, err error) {
	var req ParkRequest
	if err := json.Unmarshal(data, &req); err != nil {
		s.cfg.Log.Error("repair service: unreadable park request terminated", "subject", msg.Subject(), "err", err)
		return "unreadable park request", nil
	}
	if err := s.checkPark(msg.Subject(), &req); err != nil {
		s.cfg.Log.Error("repair service: park request refused", "subject", msg.Subject(), "err", err)
		return err.Error(), nil
	}
	d, p := req.Diagnosis, req.Parked
	// Names of the fault that a sender chose: in the trigger's data, or in an
	// event a wait of the run matched (the service's own finding, not the
	// request's).
	d.FromTrigger = nil
	senders(&p.Job, func(b []byte) {
		for _, n := range repair.FromData(b, &d.Fault) {
			if !slices.Contains(d.FromTrigger, n) {
				d.FromTrigger = append(d.FromTrigger, n)
			}
		}
	}, func(string) {})
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	if _, err := s.kv.Put(ctx, ParkedKey(d.ID, p.ExecutionID), b); err != nil {
		return "", err
	}
	auto := false
	if sk, err := s.cfg.Catalog.LookupVersion(ctx, d.Skill, d.Digest); err == nil {
		auto = sk.Repair == skill.RepairAuto
	}
	now := time.Now().UTC()
	rec, _, err := Create(ctx, s.kv, &Record{
		ID: d.ID, Skill: d.Skill, Status: StatusRequested, Diagnosis: d, BudgetKey: repair.BudgetKey(d.Skill, &d.Fault),
		Auto: auto, Created: now, Updated: now, First: p.ExecutionID,
	})
	if err != nil {
		return "", err
	}
	if rec.Status == StatusRequested && rec.First == p.ExecutionID {
		m := bus.Meta{CorrelationID: p.Meta[events.ExtCorrelationID], ExecutionID: p.ExecutionID, CausationID: msg.Headers().Get("Nats-Msg-Id"),
			TraceParent: p.Meta[events.ExtTraceParent], TraceState: p.Meta[events.ExtTraceState]}
		subject := s.cfg.Bus.Subjects.Repair(d.Skill)
		_, span := telemetry.StartPublishMeta(ctx, telemetry.Message{Destination: subject, Template: s.cfg.Bus.Subjects.RepairTemplate(), ID: d.ID + ".repair"},
			&m.TraceParent, &m.TraceState, telemetry.AttrSkillName.String(d.Skill), telemetry.AttrExecutionID.String(p.ExecutionID))
		batch := s.cfg.Bus.Batch()
		batch.PublishEvent(subject, bus.Event{ID: d.ID + ".repair", Source: s.cfg.Source, Type: events.TypeRepairRequested, Meta: m, Data: d})
		err := batch.Wait(ctx)
		telemetry.End(span, err)
		if err != nil {
			return "", err
		}
	}
	if Final(rec.Status) {
		// The repair ended before this execution was parked: release it now.
		return "", Release(ctx, s.cfg.Bus, s.kv, s.cfg.Source, rec, p)
	}
	return "", nil
}
