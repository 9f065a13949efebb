package worker

import (
	"context"
	"fmt"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/run"
)

// endActivation publishes activation.completed when rec, the terminal outcome of
// j's execution (completed, or failed with no fallback left), ends the last of the
// jobs j's activation started at once (events.Job.Together).
//
// Each of those jobs' workers checks after storing its own outcome, so of two that end
// at the same moment at least one finds the other's outcome stored; the event is
// create-only, so if both publish it, it is stored once. The reads go to the stream's
// leader (EVENTS allows no direct gets), which has every acknowledged outcome. A
// worker that dies before publishing it leaves its job to be delivered again, and the
// redelivery, finding its outcome stored, looks again (redrive).
func (w *Worker) endActivation(ctx context.Context, j *job, rec *run.Record) error {
	if len(j.data.Together) < 2 {
		return nil
	}
	data := events.ActivationCompleted{ActivationID: j.data.ActivationID}
	ok := 0
	for _, chain := range j.data.Together {
		var end *run.Record
		for _, id := range chain {
			r := rec
			if id != rec.ExecutionID {
				var err error
				if r, err = run.Load(ctx, w.events, w.cfg.Bus.Subjects, id); err != nil {
					return fmt.Errorf("worker: the outcome of %s, of the same activation: %w", id, err)
				}
			}
			if r == nil {
				return nil // still running, or its fallback not started yet
			}
			if r.Status != run.StatusFallback {
				end = r
				break
			}
		}
		if end == nil {
			return nil // the chain's last outcome is not stored yet
		}
		res := events.ActivationResult{Skill: end.Skill, ExecutionID: end.ExecutionID, Outcome: events.OutcomeFailed, Error: end.Error}
		if end.Status == run.StatusCompleted {
			res.Outcome, res.Error = events.OutcomeCompleted, ""
			ok++
		}
		data.Executions = append(data.Executions, res)
	}
	switch ok {
	case len(data.Executions):
		data.Outcome = events.OutcomeCompleted
	case 0:
		data.Outcome = events.OutcomeFailed
	default:
		data.Outcome = events.OutcomePartial
	}
	meta := j.meta
	meta.ExecutionID, meta.CausationID = "", run.OutcomeID(rec.ExecutionID)
	subj := w.cfg.Bus.Subjects.Event(j.data.ActivationID, events.TypeActivationCompleted)
	m, err := bus.Event{ID: j.data.ActivationID + ".activation.completed", Source: w.cfg.Source,
		Type: events.TypeActivationCompleted, Meta: meta, Data: data}.Msg(subj)
	if err != nil {
		return err
	}
	b := w.cfg.Bus.Batch()
	b.Create(m) // another worker may have published it a moment ago: stored once
	if err := b.Wait(ctx); err != nil {
		return fmt.Errorf("worker: activation.completed of %s: %w", j.data.ActivationID, err)
	}
	return nil
}
