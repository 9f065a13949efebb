package worker

import (
	"context"
	"errors"
	"time"

	"github.com/skillbus/skillbus/pkg/failure"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// The worker has two halves. The JetStream half (worker.go, claim.go, outcome.go)
// takes a delivery, decides whether this worker may run the execution, and settles
// it: publishes what it caused and acks or naks. The executor half (this file,
// kinds.go, store.go) runs the execution — steps, checkpoints, confirmations,
// sub-skills — and says what it came to as a Decision value. It publishes nothing
// that decides the execution's fate; only progress and checkpoints.

// Decision is what running an execution came to.
type Decision interface{ decision() }

// Complete: the skill returned its outputs.
type Complete struct{ Outputs map[string]any }

// Retry: a retryable failure with retries left; the broker redelivers the job after
// Delay.
type Retry struct {
	Delay time.Duration
	Err   error
}

// Fail: the skill failed for good — fatal, repairable, or out of retries — at Step
// (empty when not in a step). The plan's next skill runs, or the job is
// dead-lettered.
type Fail struct {
	Step string
	Err  error
}

// Repair (repair.go): a repairable fault; the execution is parked on its repair.

// Pause: the execution waits for a person's confirmation; no worker holds it.
type Pause struct{ *workflow.PausedError }

func (Complete) decision() {}
func (Retry) decision()    {}
func (Fail) decision()     {}
func (Pause) decision()    {}

// execute runs the execution of a claimed job and returns its decision. It records
// the execution log on j.
func (w *Worker) execute(ctx context.Context, j *job, inputs map[string]any, answers map[string]workflow.Answer, tools *tool.Set) Decision {
	if err := tool.CheckPrerequisites(j.skill, tool.Host{Tools: tools, Exec: w.cfg.Exec}); err != nil {
		return Fail{Err: err} // fatal: the plan falls back
	}
	j.obs = observer{w: w, j: j}
	obs := &j.obs
	rctx := ctx // carries the parent for the skill tool (runContext)
	var outputs map[string]any
	var log *workflow.Log
	var err error
	switch {
	// Tool calls act under the skill's permissions (network, environment); the
	// engine puts a workflow's in place itself.
	case j.skill.Workflow == nil && j.skill.Kind == skill.KindInstruction && w.cfg.Instruct != nil:
		outputs, err = w.runInstruction(tool.WithPermissions(rctx, tool.SkillPermissions(j.skill)), j, inputs, tools)
	case j.skill.Workflow == nil && j.skill.Kind == skill.KindScript:
		outputs, err = w.runScript(tool.WithPermissions(rctx, tool.SkillPermissions(j.skill)), j, inputs, obs)
	default:
		outputs, log, err = w.cfg.Engine.ExecuteLog(rctx, workflow.Run{
			ExecutionID: j.data.ExecutionID,
			Skill:       j.skill,
			Inputs:      inputs,
			OwnInputs:   true, // decoded for this run (process)
			TriggerRef: workflow.TriggerRef{
				ID: j.data.Trigger.ID, Source: j.data.Trigger.Source, Type: j.data.Trigger.Type, Subject: j.data.Trigger.Subject,
			},
			Attempt:       j.attempt,
			Observer:      obs,
			Confirmations: answers,
			// A sleep's wake-up is a message in EVENTS; it must fire before EVENTS
			// would expire it.
			MaxSleep:    w.cfg.Bus.Config().EventsMaxAge - time.Minute,
			Checkpoints: j.checkpoints(w),
			Cache:       w.cache,
			Tools:       tools,
		})
	}
	j.log = log
	return w.decide(j, outputs, err)
}

// decide classifies the end of a run.
func (w *Worker) decide(j *job, outputs map[string]any, err error) Decision {
	if err == nil {
		return Complete{Outputs: outputs}
	}
	var paused *workflow.PausedError
	if errors.As(err, &paused) {
		return Pause{paused}
	}
	var step string
	var se *workflow.StepError
	if errors.As(err, &se) {
		step = se.Step
	}
	if failure.ClassOf(err) == failure.Retryable && j.attempt <= uint64(j.skill.Retries()) {
		return Retry{Delay: w.cfg.Backoff.Delay(j.attempt), Err: err}
	}
	if r, ok := w.repairable(j, step, err); ok {
		return r
	}
	return Fail{Step: step, Err: err}
}
