package worker

import (
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// observer turns step progress into events, queued on the job's batch: they are
// pipelined while the workflow runs and all acknowledged before the job is acked.
type observer struct {
	w *Worker
	j *job
}

func (o *observer) id(st *skill.Step, what string) string {
	return o.j.data.ExecutionID + "." + o.j.delivery + ".step." + st.ID + "." + what
}

func (o *observer) StepStarted(st *skill.Step, kind string) {
	o.w.emitID(o.j, o.id(st, "started"), events.TypeStepStarted, events.StepStarted{
		ExecutionID: o.j.data.ExecutionID, StepID: st.ID, StepType: kind, Tool: st.Tool,
	})
}

func (o *observer) StepCompleted(st *skill.Step, result any, err error, d time.Duration) {
	ev := events.StepCompleted{ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Success: err == nil, Result: result, DurationMS: ms(d)}
	if err != nil {
		ev.Error = err.Error()
	}
	o.w.emitID(o.j, o.id(st, "completed"), events.TypeStepCompleted, ev)
}

func (o *observer) StepSkipped(st *skill.Step, reason string) {
	o.w.emitID(o.j, o.id(st, "skipped"), events.TypeStepSkipped, events.StepSkipped{
		ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Reason: reason,
	})
}

func (o *observer) StepFailed(st *skill.Step, err error, d time.Duration) {
	o.w.emitID(o.j, o.id(st, "failed"), events.TypeStepFailed, events.StepFailed{
		ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Error: err.Error(),
		Class: string(failure.ClassOf(err)), DurationMS: ms(d),
	})
}

// StepResumed reports a step an earlier delivery finished; its checkpoint was reused.
func (o *observer) StepResumed(st *skill.Step, c workflow.Checkpoint) {
	ev := events.StepCompleted{ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Success: c.Status != workflow.StatusContinued,
		Result: c.Result, Error: c.Error, Resumed: true, Cached: c.Cached, DurationMS: ms(c.Finished.Sub(c.Started))}
	if c.Status == workflow.StatusSkipped {
		o.w.emitID(o.j, o.id(st, "skipped"), events.TypeStepSkipped, events.StepSkipped{ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Reason: c.Reason + " (in an earlier delivery)"})
		return
	}
	o.w.emitID(o.j, o.id(st, "completed"), events.TypeStepCompleted, ev)
}

// AutoHealTriggered reports the seed-004 auto-heal pattern at work.
func (o *observer) AutoHealTriggered(h workflow.AutoHeal) {
	o.w.emitID(o.j, o.id(&skill.Step{ID: h.HealStep}, "autoheal"), events.TypeAutohealTriggered, events.AutohealTriggered{
		ExecutionID: o.j.data.ExecutionID, StepID: h.Step, FailureType: h.FailureType, Action: h.Action, HealStep: h.HealStep,
	})
}
