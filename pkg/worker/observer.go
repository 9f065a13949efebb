package worker

import (
	"context"
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
	return o.j.data.ExecutionID + "." + o.j.deliveryID() + ".step." + st.ID + "." + what
}

func (o *observer) StepStarted(st *skill.Step, kind string) {
	if !o.w.emits(o.j, events.TypeStepStarted) {
		return
	}
	o.w.emitID(o.j, o.id(st, "started"), events.TypeStepStarted, events.StepStarted{
		ExecutionID: o.j.data.ExecutionID, StepID: st.ID, StepType: kind, Tool: st.Tool,
	})
}

// StepCompleted and StepSkipped publish nothing: the engine saves every completed,
// continued or skipped step as a checkpoint just before, and the checkpoint is the
// step.completed or step.skipped event (see checkpoints).
func (o *observer) StepCompleted(st *skill.Step, _ any, err error, d time.Duration) {
	outcome := "completed"
	if err != nil {
		outcome = "continued"
	}
	o.w.cfg.Metrics.Step(context.Background(), o.j.data.Skill.Name, stepKind(st), outcome, d)
}

func stepKind(st *skill.Step) string {
	if st.Tool != "" {
		return "tool"
	}
	return "compute"
}

func (o *observer) StepSkipped(*skill.Step, string) {}

func (o *observer) StepFailed(st *skill.Step, err error, d time.Duration) {
	o.w.cfg.Metrics.Step(context.Background(), o.j.data.Skill.Name, stepKind(st), "failed", d)
	o.w.emitID(o.j, o.id(st, "failed"), events.TypeStepFailed, events.StepFailed{
		ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Error: err.Error(),
		Class: string(failure.ClassOf(err)), DurationMS: ms(d),
	})
}

// StepResumed reports a step an earlier delivery finished; its checkpoint was reused.
func (o *observer) StepResumed(st *skill.Step, c workflow.Checkpoint) {
	if c.Status == workflow.StatusSkipped {
		o.w.emitID(o.j, o.id(st, "skipped"), events.TypeStepSkipped, events.StepSkipped{
			ExecutionID: o.j.data.ExecutionID, StepID: st.ID, Reason: c.Reason, SkillRef: c.Skill, Attempt: c.Attempt, Finished: c.Finished,
		})
		return
	}
	o.w.emitID(o.j, o.id(st, "completed"), events.TypeStepCompleted, stepCompleted(o.j.data.ExecutionID, st.ID, c, true))
}

// AutoHealTriggered reports the auto-heal pattern at work: a fixing tool runs because
// an earlier step failed.
func (o *observer) AutoHealTriggered(h workflow.AutoHeal) {
	o.w.emitID(o.j, o.id(&skill.Step{ID: h.HealStep}, "autoheal"), events.TypeAutohealTriggered, events.AutohealTriggered{
		ExecutionID: o.j.data.ExecutionID, StepID: h.Step, FailureType: h.FailureType, Action: h.Action, HealStep: h.HealStep,
	})
}
