package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
)

// ErrNoDecision means an activation has no routing decision (yet): its trigger was
// not routed, or not yet.
var ErrNoDecision = errors.New("no routing decision")

// Decision reads an activation's routing decision and when it was made: from its
// route.decided event where the events level persists one, otherwise from the jobs
// of its plan, which carry it (see events.Job.Route).
func (b *Bus) Decision(ctx context.Context, activationID string) (events.RouteDecided, time.Time, error) {
	evs, err := b.JS.Stream(ctx, b.StreamEvents())
	if err != nil {
		return events.RouteDecided{}, time.Time{}, fmt.Errorf("bus: stream %s: %w", b.StreamEvents(), err)
	}
	if m, err := evs.GetLastMsgForSubject(ctx, b.Subjects.Event(activationID, events.TypeRouteDecided)); err == nil {
		var d events.RouteDecided
		e, err := DecodeFast(MsgOf(m.Subject, m.Header, m.Data))
		if err == nil {
			err = json.Unmarshal(e.Data, &d)
		}
		if err != nil {
			return d, m.Time, fmt.Errorf("bus: the decision of activation %s: %w", activationID, err)
		}
		return d, m.Time, nil
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.RouteDecided{}, time.Time{}, fmt.Errorf("bus: the decision of activation %s: %w", activationID, err)
	}
	jobs, err := b.JS.Stream(ctx, b.StreamJobs())
	if err != nil {
		return events.RouteDecided{}, time.Time{}, fmt.Errorf("bus: stream %s: %w", b.StreamJobs(), err)
	}
	m, err := jobs.GetLastMsgForSubject(ctx, b.Subjects.PlanJobs(activationID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.RouteDecided{}, time.Time{}, ErrNoDecision
	}
	if err != nil {
		return events.RouteDecided{}, time.Time{}, fmt.Errorf("bus: the jobs of activation %s: %w", activationID, err)
	}
	d, ok, err := DecisionOfJob(MsgOf(m.Subject, m.Header, m.Data))
	if err != nil {
		return d, m.Time, fmt.Errorf("bus: the job of activation %s: %w", activationID, err)
	}
	if !ok {
		return d, m.Time, ErrNoDecision
	}
	return d, m.Time, nil
}

// DecisionOfJob reads the routing decision a job message carries; ok is false for a
// job that is not one of a plan's. Routers write it in the job's data
// (events.Job.Route); earlier ones wrote it in the Skillbus-Route header, which is
// read for jobs without it in their data.
func DecisionOfJob(m Msg) (events.RouteDecided, bool, error) {
	e, err := DecodeFast(m)
	if err != nil {
		return events.RouteDecided{}, false, err
	}
	var j events.Job
	if err := events.DecodeJob(e.Data, &j); err != nil {
		return events.RouteDecided{}, false, err
	}
	if j.Route == nil {
		h := m.Headers().Get(events.HeaderRoute)
		if h == "" {
			return events.RouteDecided{}, false, nil
		}
		j.Route = new(events.JobRoute)
		if err := json.Unmarshal([]byte(h), j.Route); err != nil {
			return events.RouteDecided{}, false, fmt.Errorf("header %s: %w", events.HeaderRoute, err)
		}
	}
	d, ok := j.Decision()
	return d, ok, nil
}
